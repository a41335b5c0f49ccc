package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/provider"
)

// deadLetterJSON is a dead letter in JSON output.
type deadLetterJSON struct {
	ID         string                    `json:"id"`
	InstanceID string                    `json:"instance_id"`
	Status     provider.DeadLetterStatus `json:"status"`
	Reason     provider.Reason           `json:"reason"`
	Error      string                    `json:"error"`
	Node       string                    `json:"node"`
	At         time.Time                 `json:"at"`
	Attempts   int                       `json:"attempts"`
	ResolvedBy string                    `json:"resolved_by,omitempty"`
	ResolvedAt time.Time                 `json:"resolved_at,omitzero"`
	Message    *messageJSON              `json:"message,omitempty"`
	Activity   *activityJSON             `json:"activity,omitempty"`
}

// messageJSON is a dead-lettered orchestration message.
type messageJSON struct {
	ID            string       `json:"id"`
	ExecutionID   string       `json:"execution_id,omitempty"`
	Kind          history.Kind `json:"kind"`
	CorrelationID string       `json:"correlation_id,omitempty"`
	Actor         string       `json:"actor,omitempty"`
	Detail        string       `json:"detail,omitempty"`
	EnqueuedAt    time.Time    `json:"enqueued_at"`
}

// activityJSON is a dead-lettered activity task.
type activityJSON struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Queue        string    `json:"queue,omitempty"`
	ExecutionID  string    `json:"execution_id"`
	ScheduledSeq int64     `json:"scheduled_seq"`
	Attempt      int       `json:"attempt"`
	Input        any       `json:"input,omitempty"`
	EnqueuedAt   time.Time `json:"enqueued_at"`
}

func (c *cli) toDeadLetterJSON(dl *chronicle.DeadLetter) deadLetterJSON {
	out := deadLetterJSON{
		ID: dl.ID, InstanceID: dl.InstanceID, Status: dl.Status, Reason: dl.Reason, Error: dl.Error, Node: dl.Node,
		At: dl.At.UTC(), Attempts: dl.Attempts, ResolvedBy: dl.ResolvedBy, ResolvedAt: dl.ResolvedAt.UTC(),
	}
	if m := dl.Message; m != nil {
		out.Message = &messageJSON{ID: m.ID, ExecutionID: m.ExecutionID, Kind: m.Kind, CorrelationID: m.CorrelationID,
			Actor: m.Actor, Detail: c.messageDetail(m), EnqueuedAt: m.EnqueuedAt.UTC()}
	}
	if a := dl.Activity; a != nil {
		out.Activity = &activityJSON{ID: a.ID, Name: a.Name, Queue: a.Queue, ExecutionID: a.ExecutionID,
			ScheduledSeq: a.ScheduledSeq, Attempt: a.Attempt, Input: c.payload(a.Input), EnqueuedAt: a.EnqueuedAt.UTC()}
	}
	return out
}

// messageDetail describes what a message's attributes hold, as a timeline
// would show its event.
func (c *cli) messageDetail(m *provider.Message) string {
	return timeline.Detail(&history.Event{InstanceID: m.InstanceID, ExecutionID: m.ExecutionID, Kind: m.Kind,
		CorrelationID: m.CorrelationID, Actor: m.Actor, Payload: m.Payload}, c.decoder())
}

// item names a dead letter's work item in a few words.
func item(dl *chronicle.DeadLetter) string {
	switch {
	case dl.Activity != nil:
		return "activity " + dl.Activity.Name
	case dl.Message != nil:
		return "message " + string(dl.Message.Kind)
	}
	return "-"
}

// deadLetterTable writes dead letters as a table; withInstance adds the
// instance column.
func (c *cli) deadLetterTable(prefix string, letters []chronicle.DeadLetter, withInstance bool) {
	header := []string{"ID", "STATUS", "REASON", "ITEM", "ATTEMPTS", "AT", "ERROR"}
	if withInstance {
		header = []string{"ID", "INSTANCE", "STATUS", "REASON", "ITEM", "ATTEMPTS", "AT", "ERROR"}
	}
	rows := make([][]string, len(letters))
	for i := range letters {
		dl := &letters[i]
		row := []string{dl.ID, string(dl.Status), string(dl.Reason), item(dl), fmt.Sprint(dl.Attempts), when(dl.At), timeline.Shorten(dl.Error, 60)}
		if withInstance {
			row = append(row[:1:1], append([]string{dl.InstanceID}, row[1:]...)...)
		}
		rows[i] = row
	}
	table(c.stdout, prefix, header, rows)
}

var deadLetterStatuses = []string{string(provider.DeadLetterDead), string(provider.DeadLetterRedriven), string(provider.DeadLetterDiscarded)}

func runDLQList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var f chronicle.DeadLetterFilter
	var status string
	fs.StringVar(&f.InstanceID, "instance", "", "only dead letters of this instance")
	fs.StringVar(&status, "status", "", "only dead letters in this status: "+strings.Join(deadLetterStatuses, ", "))
	fs.StringVar(&f.AfterID, "after", "", "page: only dead letters with ids after this one")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many dead letters")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if err := choice("status", status, deadLetterStatuses...); err != nil {
		return usagef(cmd, "%v", err)
	}
	if f.Limit < 1 {
		return usagef(cmd, "invalid value %d for flag --limit: must be at least 1", f.Limit)
	}
	f.Status = provider.DeadLetterStatus(status)
	e, err := c.open()
	if err != nil {
		return err
	}
	letters, err := e.ListDeadLetters(c.ctx, f)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]deadLetterJSON, len(letters))
		for i := range letters {
			out[i] = c.toDeadLetterJSON(&letters[i])
		}
		return c.printJSON(out)
	}
	if len(letters) == 0 {
		c.printf("no dead letters match\n")
		return nil
	}
	c.deadLetterTable("", letters, true)
	if len(letters) == f.Limit {
		c.printf("more may follow: --after %s\n", letters[len(letters)-1].ID)
	}
	return nil
}

func runDLQShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	dl, err := e.GetDeadLetter(c.ctx, pos[0])
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(c.toDeadLetterJSON(dl))
	}
	resolved := ""
	if dl.ResolvedBy != "" {
		resolved = dl.ResolvedBy + " at " + when(dl.ResolvedAt)
	}
	pairs := [][2]string{
		{"Dead letter", dl.ID},
		{"Instance", dl.InstanceID},
		{"Status", string(dl.Status)},
		{"Resolved by", resolved},
		{"Reason", string(dl.Reason)},
		{"Error", dl.Error},
		{"Node", dl.Node},
		{"At", when(dl.At)},
		{"Attempts", fmt.Sprint(dl.Attempts)},
	}
	if a := dl.Activity; a != nil {
		queue := a.Queue
		if queue == "" {
			queue = "default"
		}
		pairs = append(pairs,
			[2]string{"Item", "activity task " + a.ID},
			[2]string{"Activity", fmt.Sprintf("%s, scheduled at seq %d of execution %s, attempt %d, queue %s", a.Name, a.ScheduledSeq, a.ExecutionID, a.Attempt, queue)},
			[2]string{"Input", c.payloadText(a.Input)},
			[2]string{"Enqueued", when(a.EnqueuedAt)},
		)
	}
	if m := dl.Message; m != nil {
		pairs = append(pairs,
			[2]string{"Item", "message " + m.ID},
			[2]string{"Kind", string(m.Kind)},
			[2]string{"Execution", m.ExecutionID},
			[2]string{"Correlation", m.CorrelationID},
			[2]string{"Actor", m.Actor},
			[2]string{"Detail", c.messageDetail(m)},
			[2]string{"Enqueued", when(m.EnqueuedAt)},
		)
	}
	fields(c.stdout, pairs)
	return nil
}

// resolveReport is the JSON output of dlq redrive and discard.
type resolveReport struct {
	ID             string                    `json:"id"`
	Action         string                    `json:"action"`
	By             string                    `json:"by"`
	Status         provider.DeadLetterStatus `json:"status"`
	InstanceID     string                    `json:"instance_id"`
	Applied        bool                      `json:"applied"`
	InstanceStatus chronicle.Status          `json:"instance_status,omitempty"`
	Incident       string                    `json:"incident,omitempty"`
}

func runDLQRedrive(c *cli, cmd *command, args []string) error {
	return c.resolve(cmd, args, "redriven", func(e *chronicle.Engine, id, by string) error {
		return e.RedriveDeadLetter(c.ctx, id, by)
	})
}

func runDLQDiscard(c *cli, cmd *command, args []string) error {
	return c.resolve(cmd, args, "discarded", func(e *chronicle.Engine, id, by string) error {
		return e.DiscardDeadLetter(c.ctx, id, by)
	})
}

func (c *cli) resolve(cmd *command, args []string, verb string, act func(e *chronicle.Engine, id, by string) error) error {
	fs := c.flags(cmd)
	var by string
	fs.StringVar(&by, "by", "", "the operator, recorded on the dead letter (required)")
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
	id := pos[0]
	if err := act(e, id, by); err != nil {
		return err
	}
	applied, err := c.settle()
	if err != nil {
		return err
	}
	dl, err := e.GetDeadLetter(c.ctx, id)
	if err != nil {
		return err
	}
	rep := resolveReport{ID: id, Action: verb, By: by, Status: dl.Status, InstanceID: dl.InstanceID, Applied: applied}
	if in, err := e.Describe(c.ctx, dl.InstanceID); err == nil && applied {
		rep.InstanceStatus, rep.Incident = in.Status, in.Incident
	}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("%s dead letter %s of %s by %s\n", verb, id, dl.InstanceID, by)
	if applied {
		incident := "no incident"
		if rep.Incident != "" {
			incident = "incident: " + rep.Incident
		}
		c.printf("instance %s is %s, %s\n", rep.InstanceID, rep.InstanceStatus, incident)
	}
	return nil
}
