package main

import (
	"strconv"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

// doctorJSON is the JSON output of doctor.
type doctorJSON struct {
	OK            bool                `json:"ok"`
	Instances     int                 `json:"instances"`
	Incidents     []doctorIncident    `json:"incidents"`
	DeadLetters   []doctorDeadLetter  `json:"dead_letters"`
	FailingRounds []doctorFailure     `json:"failing_rounds"`
	Projections   []doctorProjections `json:"projections"`
}

type doctorIncident struct {
	InstanceID string           `json:"instance_id"`
	Workflow   string           `json:"workflow"`
	Status     chronicle.Status `json:"status"`
	Incident   string           `json:"incident"`
}

type doctorDeadLetter struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id"`
	Item       string `json:"item"`
	Reason     string `json:"reason"`
	Attempts   int    `json:"attempts"`
}

type doctorFailure struct {
	InstanceID string `json:"instance_id"`
	MessageID  string `json:"message_id"`
	Attempts   int    `json:"attempts"`
	LastError  string `json:"last_error"`
}

type doctorProjections struct {
	InstanceID  string   `json:"instance_id"`
	Error       string   `json:"error,omitempty"`
	Differences []string `json:"differences,omitempty"`
}

// runDoctor reports what needs an operator: instances with incidents,
// dead letters waiting, rounds failing and retried, and projections that
// fail to fold or differ from history. It exits 1 when it finds any.
func runDoctor(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	rep, err := e.CheckHealth(c.ctx)
	if err != nil {
		return err
	}
	out := doctorJSON{OK: rep.OK(), Instances: rep.Instances, Incidents: []doctorIncident{}, DeadLetters: []doctorDeadLetter{},
		FailingRounds: []doctorFailure{}, Projections: []doctorProjections{}}
	for _, in := range rep.Incidents {
		out.Incidents = append(out.Incidents, doctorIncident{InstanceID: in.ID, Workflow: in.Workflow, Status: in.Status, Incident: in.Incident})
	}
	for i := range rep.DeadLetters {
		dl := &rep.DeadLetters[i]
		out.DeadLetters = append(out.DeadLetters, doctorDeadLetter{ID: dl.ID, InstanceID: dl.InstanceID, Item: item(dl), Reason: string(dl.Reason), Attempts: dl.Attempts})
	}
	for _, f := range rep.FailingRounds {
		out.FailingRounds = append(out.FailingRounds, doctorFailure(f))
	}
	for _, p := range rep.Projections {
		d := doctorProjections{InstanceID: p.InstanceID, Differences: p.Differences}
		if p.Err != nil {
			d.Error = p.Err.Error()
		}
		out.Projections = append(out.Projections, d)
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		c.printDoctor(&out)
	}
	if !out.OK {
		return errReported
	}
	return nil
}

func (c *cli) printDoctor(out *doctorJSON) {
	section := func(title string, n int) {
		if n == 0 {
			c.printf("%s: none\n", title)
			return
		}
		c.printf("%s: %d\n", title, n)
	}
	section("instances with incidents", len(out.Incidents))
	if len(out.Incidents) > 0 {
		rows := make([][]string, len(out.Incidents))
		for i, in := range out.Incidents {
			rows[i] = []string{in.InstanceID, in.Workflow, string(in.Status), timeline.Shorten(in.Incident, 70)}
		}
		table(c.stdout, "  ", []string{"INSTANCE", "WORKFLOW", "STATUS", "INCIDENT"}, rows)
	}
	section("dead letters waiting", len(out.DeadLetters))
	if len(out.DeadLetters) > 0 {
		rows := make([][]string, len(out.DeadLetters))
		for i, dl := range out.DeadLetters {
			rows[i] = []string{dl.ID, dl.InstanceID, dl.Item, dl.Reason, strconv.Itoa(dl.Attempts)}
		}
		table(c.stdout, "  ", []string{"ID", "INSTANCE", "ITEM", "REASON", "ATTEMPTS"}, rows)
	}
	section("instances whose rounds fail and are retried", len(out.FailingRounds))
	if len(out.FailingRounds) > 0 {
		rows := make([][]string, len(out.FailingRounds))
		for i, f := range out.FailingRounds {
			rows[i] = []string{f.InstanceID, strconv.Itoa(f.Attempts), timeline.Shorten(f.LastError, 70)}
		}
		table(c.stdout, "  ", []string{"INSTANCE", "FAILED DELIVERIES", "LAST ERROR"}, rows)
	}
	section("instances whose projections fail to fold or differ", len(out.Projections))
	for _, p := range out.Projections {
		if p.Error != "" {
			c.printf("  %s: does not fold: %s\n", p.InstanceID, p.Error)
		}
		for _, d := range p.Differences {
			c.printf("  %s: %s\n", p.InstanceID, d)
		}
	}
	if out.OK {
		c.printf("ok: %d instances checked, nothing needs an operator\n", out.Instances)
		return
	}
	c.printf("%d instances checked; see 'chronicle dlq', 'chronicle instance show' and 'chronicle projections rebuild'\n", out.Instances)
}
