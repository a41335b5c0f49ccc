package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
)

// scheduleJSON is a schedule in JSON output.
type scheduleJSON struct {
	ID            string                     `json:"id"`
	Cron          string                     `json:"cron,omitempty"`
	Every         string                     `json:"every,omitempty"`
	TimeZone      string                     `json:"time_zone,omitempty"`
	Start         time.Time                  `json:"start,omitzero"`
	End           time.Time                  `json:"end,omitzero"`
	Jitter        string                     `json:"jitter,omitempty"`
	Workflow      string                     `json:"workflow"`
	Overlap       chronicle.OverlapPolicy    `json:"overlap"`
	CatchupWindow string                     `json:"catchup_window"`
	Priority      int                        `json:"priority,omitempty"`
	Concurrency   *chronicle.Concurrency     `json:"concurrency,omitempty"`
	Paused        bool                       `json:"paused"`
	Note          string                     `json:"note,omitempty"`
	Next          []time.Time                `json:"next"`
	Started       int64                      `json:"started"`
	Skipped       int64                      `json:"skipped"`
	Running       string                     `json:"running,omitempty"`
	Buffered      *chronicle.ScheduleFiring  `json:"buffered,omitempty"`
	Recent        []chronicle.ScheduleFiring `json:"recent,omitempty"`
	Changes       []chronicle.ScheduleChange `json:"changes,omitempty"`
}

func toScheduleJSON(d *chronicle.ScheduleDescription, full bool) scheduleJSON {
	out := scheduleJSON{
		ID: d.ID, Cron: d.Spec.Cron, TimeZone: d.Spec.TimeZone, Start: d.Spec.Start, End: d.Spec.End,
		Workflow: d.Workflow, Overlap: d.Overlap, CatchupWindow: d.CatchupWindow.String(), Paused: d.Paused, Note: d.Note,
		Next: d.Next, Started: d.Started, Skipped: d.Skipped, Running: d.Running,
		Priority: d.Priority, Concurrency: d.Concurrency,
	}
	if out.Next == nil {
		out.Next = []time.Time{}
	}
	if d.Spec.Every > 0 {
		out.Every = d.Spec.Every.String()
	}
	if d.Spec.Jitter > 0 {
		out.Jitter = d.Spec.Jitter.String()
	}
	if full {
		out.Buffered, out.Recent, out.Changes = d.Buffered, d.Recent, d.Changes
	}
	return out
}

// specText is a schedule's spec in a few words.
func specText(s chronicle.ScheduleSpec) string {
	text := s.Cron
	if s.Every > 0 {
		text = "every " + s.Every.String()
	}
	if s.TimeZone != "" {
		text += " " + s.TimeZone
	}
	return text
}

func state(d *chronicle.ScheduleDescription) string {
	if d.Paused {
		return "paused"
	}
	return "active"
}

func runSchedulesList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	list, err := e.ListSchedules(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]scheduleJSON, len(list))
		for i, d := range list {
			out[i] = toScheduleJSON(d, false)
		}
		return c.printJSON(out)
	}
	if len(list) == 0 {
		c.printf("no schedules\n")
		return nil
	}
	rows := make([][]string, len(list))
	for i, d := range list {
		next := "-"
		if len(d.Next) > 0 {
			next = when(d.Next[0])
		}
		rows[i] = []string{d.ID, specText(d.Spec), d.Workflow, string(d.Overlap), state(d), next, fmt.Sprint(d.Started), fmt.Sprint(d.Skipped)}
	}
	table(c.stdout, "", []string{"ID", "SPEC", "WORKFLOW", "OVERLAP", "STATE", "NEXT", "STARTED", "SKIPPED"}, rows)
	return nil
}

func runScheduleShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	d, err := e.DescribeSchedule(c.ctx, pos[0])
	if err != nil {
		return err
	}
	return c.showSchedule(d)
}

func (c *cli) showSchedule(d *chronicle.ScheduleDescription) error {
	if c.json {
		return c.printJSON(toScheduleJSON(d, true))
	}
	next := make([]string, len(d.Next))
	for i, t := range d.Next {
		next[i] = when(t)
	}
	bounds := ""
	if !d.Spec.Start.IsZero() || !d.Spec.End.IsZero() {
		bounds = whenSet(d.Spec.Start) + " to " + whenSet(d.Spec.End)
	}
	jitter := ""
	if d.Spec.Jitter > 0 {
		jitter = d.Spec.Jitter.String()
	}
	priority, concurrency := "", ""
	if d.Priority != 0 {
		priority = fmt.Sprint(d.Priority)
	}
	if cc := d.Concurrency; cc != nil {
		concurrency = fmt.Sprintf("%s (at most %d running)", cc.Key, cc.Limit)
	}
	buffered := ""
	if d.Buffered != nil {
		buffered = d.Buffered.InstanceID
	}
	fields(c.stdout, [][2]string{
		{"Schedule", d.ID},
		{"Spec", specText(d.Spec)},
		{"Between", bounds},
		{"Jitter", jitter},
		{"Workflow", d.Workflow},
		{"Overlap", string(d.Overlap)},
		{"Catch-up", d.CatchupWindow.String()},
		{"Priority", priority},
		{"Concurrency", concurrency},
		{"State", state(d)},
		{"Note", d.Note},
		{"Next", strings.Join(next, ", ")},
		{"Started", fmt.Sprint(d.Started)},
		{"Skipped", fmt.Sprint(d.Skipped)},
		{"Running", d.Running},
		{"Buffered", buffered},
	})
	if len(d.Recent) > 0 {
		c.printf("\nrecent firings:\n")
		rows := make([][]string, len(d.Recent))
		for i, f := range d.Recent {
			rows[i] = []string{when(f.Nominal), f.InstanceID, f.Outcome, f.Actor, when(f.At)}
		}
		table(c.stdout, "  ", []string{"NOMINAL", "INSTANCE", "OUTCOME", "BY", "AT"}, rows)
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

func runScheduleCreate(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var (
		o                      chronicle.ScheduleOptions
		overlap, input, by     string
		concKey                string
		concLimit              int
		start, end             timeFlag
		every, jitter, catchup time.Duration
	)
	fs.StringVar(&o.Workflow, "workflow", "", "the workflow each firing starts (required)")
	fs.StringVar(&o.Spec.Cron, "cron", "", "a five-field cron expression or a descriptor (@daily)")
	fs.DurationVar(&every, "every", 0, "an interval instead of --cron")
	fs.StringVar(&o.Spec.TimeZone, "zone", "", "the IANA time zone of the cron expression (default UTC)")
	fs.Var(&start, "start", "no firing before this time")
	fs.Var(&end, "end", "no firing after this time")
	fs.DurationVar(&jitter, "jitter", 0, "delay each firing by up to this much")
	fs.StringVar(&overlap, "overlap", "", "what a firing does while the previous runs: skip (default), buffer-one, allow-all, cancel-previous, terminate-previous")
	fs.DurationVar(&catchup, "catchup", 0, "how late a missed firing may still start (default 1h)")
	fs.StringVar(&input, "input", "", "the workflow's input as JSON")
	fs.IntVar(&o.Priority, "priority", 0, "the priority of the instances it starts (higher first)")
	fs.StringVar(&concKey, "concurrency-key", "", "a concurrency key the instances it starts hold while they run")
	fs.IntVar(&concLimit, "concurrency-limit", 1, "with --concurrency-key: how many of the key's instances run at once")
	fs.BoolVar(&o.Paused, "paused", false, "create it paused")
	fs.StringVar(&o.Note, "note", "", "why, recorded with the change")
	fs.StringVar(&by, "by", "", "the operator, recorded with the change (required)")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	if by == "" || o.Workflow == "" {
		return usagef(cmd, "--by and --workflow are required")
	}
	if input != "" {
		if err := json.Unmarshal([]byte(input), &o.Input); err != nil {
			return usagef(cmd, "invalid value for flag --input: %v", err)
		}
	}
	o.Spec.Every, o.Spec.Jitter, o.Spec.Start, o.Spec.End = every, jitter, start.t, end.t
	o.Overlap, o.CatchupWindow, o.Actor = chronicle.OverlapPolicy(overlap), catchup, by
	if concKey != "" {
		o.Concurrency = &chronicle.Concurrency{Key: concKey, Limit: concLimit}
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	if err := e.CreateSchedule(c.ctx, pos[0], o); err != nil {
		return err
	}
	return c.scheduleChanged(e, pos[0], "created", by)
}

// scheduleChanged reports a change: the schedule as it is now on the
// memory store, where the change has been applied.
func (c *cli) scheduleChanged(e *chronicle.Engine, id, verb, by string) error {
	applied, err := c.settle()
	if err != nil {
		return err
	}
	if !applied {
		if c.json {
			return c.printJSON(map[string]any{"id": id, "action": verb, "by": by, "applied": false})
		}
		c.printf("%s schedule %s by %s; the deployment's workers apply it\n", verb, id, by)
		return nil
	}
	if verb == "deleted" {
		if c.json {
			return c.printJSON(map[string]any{"id": id, "action": verb, "by": by, "applied": true})
		}
		c.printf("deleted schedule %s by %s\n", id, by)
		return nil
	}
	d, err := e.DescribeSchedule(c.ctx, id)
	if err != nil {
		return err
	}
	if !c.json {
		c.printf("%s schedule %s by %s\n\n", verb, id, by)
	}
	return c.showSchedule(d)
}

// scheduleAction parses the flags every change takes (ID, --by, --note)
// and those extra adds, and applies act.
func (c *cli) scheduleAction(cmd *command, args []string, verb string, withNote bool, extra func(fs *flag.FlagSet),
	act func(e *chronicle.Engine, id, note, by string) error) error {
	fs := c.flags(cmd)
	var note, by string
	if withNote {
		fs.StringVar(&note, "note", "", "why, recorded with the change")
	}
	fs.StringVar(&by, "by", "", "the operator, recorded with the change (required)")
	if extra != nil {
		extra(fs)
	}
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
	return c.scheduleChanged(e, pos[0], verb, by)
}

func runSchedulePause(c *cli, cmd *command, args []string) error {
	return c.scheduleAction(cmd, args, "paused", true, nil, func(e *chronicle.Engine, id, note, by string) error {
		return e.PauseSchedule(c.ctx, id, note, by)
	})
}

func runScheduleResume(c *cli, cmd *command, args []string) error {
	return c.scheduleAction(cmd, args, "resumed", true, nil, func(e *chronicle.Engine, id, note, by string) error {
		return e.ResumeSchedule(c.ctx, id, note, by)
	})
}

func runScheduleTrigger(c *cli, cmd *command, args []string) error {
	return c.scheduleAction(cmd, args, "triggered", false, nil, func(e *chronicle.Engine, id, _, by string) error {
		return e.TriggerSchedule(c.ctx, id, by)
	})
}

func runScheduleBackfill(c *cli, cmd *command, args []string) error {
	var from, to timeFlag
	return c.scheduleAction(cmd, args, "backfilled", false, func(fs *flag.FlagSet) {
		fs.Var(&from, "from", "the first nominal time (required)")
		fs.Var(&to, "to", "the last nominal time (required)")
	}, func(e *chronicle.Engine, id, _, by string) error {
		if from.t.IsZero() || to.t.IsZero() {
			return usagef(cmd, "--from and --to are required")
		}
		return e.BackfillSchedule(c.ctx, id, from.t, to.t, by)
	})
}

func runScheduleDelete(c *cli, cmd *command, args []string) error {
	return c.scheduleAction(cmd, args, "deleted", true, nil, func(e *chronicle.Engine, id, note, by string) error {
		return e.DeleteSchedule(c.ctx, id, note, by)
	})
}
