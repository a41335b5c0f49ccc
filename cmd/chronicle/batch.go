package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/chronicleflow/chronicle"
)

// batchJSON is a batch in JSON output.
type batchJSON struct {
	ID       string                   `json:"id"`
	Action   chronicle.BatchAction    `json:"action"`
	Workflow string                   `json:"workflow,omitempty"`
	Where    string                   `json:"where,omitempty"`
	Reason   string                   `json:"reason"`
	Ticket   string                   `json:"ticket,omitempty"`
	Actor    string                   `json:"actor"`
	Signal   string                   `json:"signal,omitempty"`
	Rate     float64                  `json:"rate,omitempty"`
	State    chronicle.BatchState     `json:"state"`
	Error    string                   `json:"error,omitempty"`
	Matched  int64                    `json:"matched"`
	Done     int64                    `json:"done"`
	Skipped  int64                    `json:"skipped"`
	Failed   int64                    `json:"failed"`
	Cursor   string                   `json:"cursor,omitempty"`
	Failures []chronicle.BatchFailure `json:"failures,omitempty"`
	Changes  []chronicle.BatchChange  `json:"changes,omitempty"`
}

func toBatchJSON(d *chronicle.BatchDescription, full bool) batchJSON {
	out := batchJSON{
		ID: d.ID, Action: d.Action, Workflow: d.Workflow, Where: d.Where, Reason: d.Reason, Ticket: d.Ticket,
		Actor: d.Actor, Signal: d.Signal, Rate: d.Rate, State: d.State, Error: d.Error,
		Matched: d.Matched, Done: d.Done, Skipped: d.Skipped, Failed: d.Failed, Cursor: d.Cursor,
	}
	if full {
		out.Failures, out.Changes = d.Failures, d.Changes
	}
	return out
}

func runBatchesList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	list, err := e.ListBatches(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]batchJSON, len(list))
		for i, d := range list {
			out[i] = toBatchJSON(d, false)
		}
		return c.printJSON(out)
	}
	if len(list) == 0 {
		c.printf("no batches\n")
		return nil
	}
	rows := make([][]string, len(list))
	for i, d := range list {
		rows[i] = []string{d.ID, string(d.Action), string(d.State), fmt.Sprint(d.Matched), fmt.Sprint(d.Done),
			fmt.Sprint(d.Skipped), fmt.Sprint(d.Failed), d.Actor, d.Reason}
	}
	table(c.stdout, "", []string{"ID", "ACTION", "STATE", "MATCHED", "DONE", "SKIPPED", "FAILED", "BY", "REASON"}, rows)
	return nil
}

func runBatchShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	d, err := e.DescribeBatch(c.ctx, pos[0])
	if err != nil {
		return err
	}
	return c.showBatch(d)
}

func (c *cli) showBatch(d *chronicle.BatchDescription) error {
	if c.json {
		return c.printJSON(toBatchJSON(d, true))
	}
	rate := ""
	if d.Rate > 0 {
		rate = strconv.FormatFloat(d.Rate, 'g', -1, 64) + "/s"
	}
	fields(c.stdout, [][2]string{
		{"Batch", d.ID},
		{"Action", string(d.Action)},
		{"Signal", d.Signal},
		{"Workflow", d.Workflow},
		{"Where", d.Where},
		{"Reason", d.Reason},
		{"Ticket", d.Ticket},
		{"By", d.Actor},
		{"Rate", rate},
		{"State", string(d.State)},
		{"Error", d.Error},
		{"Matched", fmt.Sprint(d.Matched)},
		{"Done", fmt.Sprint(d.Done)},
		{"Skipped", fmt.Sprint(d.Skipped)},
		{"Failed", fmt.Sprint(d.Failed)},
		{"Cursor", d.Cursor},
	})
	if len(d.Failures) > 0 {
		c.printf("\nfailures:\n")
		rows := make([][]string, len(d.Failures))
		for i, f := range d.Failures {
			rows[i] = []string{f.InstanceID, f.Error}
		}
		table(c.stdout, "  ", []string{"INSTANCE", "ERROR"}, rows)
	}
	if len(d.Changes) > 0 {
		c.printf("\nchanges:\n")
		rows := make([][]string, len(d.Changes))
		for i, ch := range d.Changes {
			rows[i] = []string{when(ch.At), ch.Kind, ch.Actor, ch.Note}
		}
		table(c.stdout, "  ", []string{"AT", "CHANGE", "BY", "NOTE"}, rows)
	}
	return nil
}

func runBatchStart(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var (
		o              chronicle.BatchOptions
		action, input  string
		actionsSummary string
	)
	for i, a := range chronicle.BatchActions {
		if i > 0 {
			actionsSummary += ", "
		}
		actionsSummary += string(a)
	}
	fs.StringVar(&o.ID, "id", "", "the batch's id (default a new id)")
	fs.StringVar(&action, "action", "", "what to do to each selected instance: "+actionsSummary+" (required)")
	fs.StringVar(&o.Workflow, "workflow", "", "select only instances of this workflow")
	fs.StringVar(&o.Where, "where", "", "select instances with a query (see docs/search.md); empty selects all")
	fs.StringVar(&o.Reason, "reason", "", "why, recorded in each instance the batch touches (required)")
	fs.StringVar(&o.Ticket, "ticket", "", "a ticket or change reference, recorded with the reason")
	fs.StringVar(&o.Actor, "by", "", "the operator, recorded in each instance the batch touches (required)")
	fs.StringVar(&o.Signal, "signal", "", "the signal a signal batch raises")
	fs.StringVar(&input, "payload", "", "the signal's payload as JSON")
	fs.Float64Var(&o.Rate, "rate", 0, "at most this many instances a second (default no limit)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if o.Actor == "" || o.Reason == "" || action == "" {
		return usagef(cmd, "--action, --reason and --by are required")
	}
	o.Action = chronicle.BatchAction(action)
	if input != "" {
		if err := json.Unmarshal([]byte(input), &o.Payload); err != nil {
			return usagef(cmd, "invalid value for flag --payload: %v", err)
		}
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	id, err := e.StartBatch(c.ctx, o)
	if err != nil {
		return err
	}
	return c.batchChanged(e, id, "started", o.Actor)
}

// batchChanged reports a change: the batch as it is now on the memory
// store, where the change has been applied.
func (c *cli) batchChanged(e *chronicle.Engine, id, verb, by string) error {
	applied, err := c.settle()
	if err != nil {
		return err
	}
	if !applied {
		if c.json {
			return c.printJSON(map[string]any{"id": id, "action": verb, "by": by, "applied": false})
		}
		c.printf("%s batch %s by %s; the deployment's workers run it ('chronicle batch show %s' shows its progress)\n", verb, id, by, id)
		return nil
	}
	d, err := e.DescribeBatch(c.ctx, id)
	if err != nil {
		return err
	}
	if !c.json {
		c.printf("%s batch %s by %s\n\n", verb, id, by)
	}
	return c.showBatch(d)
}

// batchAction parses ID, --by and --note and applies act.
func (c *cli) batchAction(cmd *command, args []string, verb string,
	act func(e *chronicle.Engine, id, note, by string) error) error {
	fs := c.flags(cmd)
	var note, by string
	fs.StringVar(&note, "note", "", "why, recorded with the change")
	fs.StringVar(&by, "by", "", "the operator, recorded with the change (required)")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	if by == "" {
		return usagef(cmd, "--by is required")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	if err := act(e, pos[0], note, by); err != nil {
		return err
	}
	return c.batchChanged(e, pos[0], verb, by)
}

func runBatchPause(c *cli, cmd *command, args []string) error {
	return c.batchAction(cmd, args, "paused", func(e *chronicle.Engine, id, note, by string) error {
		return e.PauseBatch(c.ctx, id, note, by)
	})
}

func runBatchResume(c *cli, cmd *command, args []string) error {
	return c.batchAction(cmd, args, "resumed", func(e *chronicle.Engine, id, note, by string) error {
		return e.ResumeBatch(c.ctx, id, note, by)
	})
}

func runBatchCancel(c *cli, cmd *command, args []string) error {
	return c.batchAction(cmd, args, "cancelled", func(e *chronicle.Engine, id, note, by string) error {
		return e.CancelBatch(c.ctx, id, note, by)
	})
}
