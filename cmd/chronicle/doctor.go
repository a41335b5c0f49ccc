package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
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
	// Checkpoints is set with --key: what the signed checkpoints say.
	Checkpoints *doctorCheckpoints `json:"checkpoints,omitempty"`
}

// doctorCheckpoints is the verification of the signed checkpoints.
type doctorCheckpoints struct {
	Checkpoints int   `json:"checkpoints"`
	Latest      int64 `json:"latest"`
	// Forged is set when a covered history was rewritten or deleted, or
	// the chain of checkpoints is broken: the history cannot be trusted.
	Forged   bool     `json:"forged"`
	Problems []string `json:"problems"`
	// Published counts the published notes checked (--published).
	Published int `json:"published,omitempty"`
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
// fail to fold or differ from history; with --key, what the signed
// checkpoints say of the history. It exits 1 when it finds any.
func runDoctor(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var keyFiles listFlag
	var published string
	fs.Var(&keyFiles, "key", "keyring `FILE` of public keys (\"KEYID BASE64-KEY\" lines; repeatable): also verify the history against signed checkpoints")
	fs.StringVar(&published, "published", "", "with --key, also check the checkpoints against the published notes in `DIR`")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if published != "" && len(keyFiles) == 0 {
		return usagef(cmd, "--published needs --key")
	}
	var keys *chronicle.Keyring
	if len(keyFiles) > 0 {
		var err error
		if keys, err = chronicle.ReadKeyring(keyFiles...); err != nil {
			return err
		}
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
	if keys != nil {
		cp, err := doctorVerifyCheckpoints(c, e, keys)
		if err != nil {
			return err
		}
		if published != "" {
			pv, err := c.verifyPublished(e, keys, published, "")
			if err != nil {
				return err
			}
			cp.Published = len(pv.Notes)
			for _, n := range pv.Notes {
				if !n.OK {
					cp.Problems = append(cp.Problems, fmt.Sprintf("published checkpoint %d: %s", n.Size, n.Reason))
				}
			}
			cp.Forged = len(cp.Problems) > 0
		}
		out.Checkpoints = cp
		out.OK = out.OK && !cp.Forged
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

// doctorVerifyCheckpoints verifies the store against its signed
// checkpoints and says what it found, one line a problem.
func doctorVerifyCheckpoints(c *cli, e *chronicle.Engine, keys *chronicle.Keyring) (*doctorCheckpoints, error) {
	rep, err := e.VerifyCheckpoints(c.ctx, keys)
	if err != nil {
		return nil, err
	}
	out := &doctorCheckpoints{Checkpoints: rep.Checkpoints, Latest: rep.Latest, Problems: []string{}}
	for _, g := range rep.Gaps {
		out.Problems = append(out.Problems, fmt.Sprintf("checkpoint chain broken at %d: %s", g.Number, g.Reason))
	}
	for _, r := range rep.Instances {
		var m *chronicle.CheckpointMismatchError
		var broken *history.ChainError
		switch {
		case errors.As(r.Err, &m) && m.Deleted:
			out.Problems = append(out.Problems, fmt.Sprintf("%s: deleted without a signed purge; checkpoint %d covers it up to seq %d", r.InstanceID, m.Checkpoint, m.Seq))
		case errors.As(r.Err, &m):
			out.Problems = append(out.Problems, fmt.Sprintf("%s: history rewritten after checkpoint %d: it differs at covered seq %d (matches up to seq %d)", r.InstanceID, m.Checkpoint, m.Seq, m.GoodSeq))
		case errors.As(r.Err, &broken):
			out.Problems = append(out.Problems, fmt.Sprintf("%s: hash chain broken at seq %d: %s", r.InstanceID, broken.Seq, broken.Reason))
		case r.Err != nil:
			out.Problems = append(out.Problems, fmt.Sprintf("%s: %v", r.InstanceID, r.Err))
		}
	}
	out.Forged = len(out.Problems) > 0
	return out, nil
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
	if cp := out.Checkpoints; cp != nil {
		if !cp.Forged {
			c.printf("signed checkpoints: %d (latest %d), every covered history verified\n", cp.Checkpoints, cp.Latest)
			if cp.Published > 0 {
				c.printf("published checkpoints: %d, each held by the store\n", cp.Published)
			}
		} else {
			c.printf("signed checkpoints: %d (latest %d); the history contradicts them: %d problems\n", cp.Checkpoints, cp.Latest, len(cp.Problems))
			for _, p := range cp.Problems {
				c.printf("  %s\n", p)
			}
		}
	}
	if out.OK {
		c.printf("ok: %d instances checked, nothing needs an operator\n", out.Instances)
		return
	}
	if out.Checkpoints != nil && out.Checkpoints.Forged {
		// Rebuilding projections from a forged history would erase the
		// only trace of what it said before.
		c.printf("%d instances checked; the stored history was changed after it was signed: do not rebuild projections, they may be the only trace of the original; compare with exports and archives ('chronicle history verify --all --key', docs/audit.md)\n", out.Instances)
		return
	}
	c.printf("%d instances checked; see 'chronicle dlq', 'chronicle instance show' and 'chronicle projections rebuild'\n", out.Instances)
}
