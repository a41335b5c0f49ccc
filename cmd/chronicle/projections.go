package main

import (
	"errors"

	"github.com/chronicleflow/chronicle"
)

// projectionsJSON is the JSON output of projections rebuild and check for
// one instance.
type projectionsJSON struct {
	InstanceID string `json:"instance_id"`
	// Seq is the last event folded (rebuild).
	Seq int64 `json:"seq,omitempty"`
	// OK and Differences are the outcome of a check.
	OK          bool     `json:"ok"`
	Differences []string `json:"differences,omitempty"`
	// Skipped says why --all left an instance alone (its start was
	// dead-lettered: it has no history yet).
	Skipped string `json:"skipped,omitempty"`
}

// target is an instance a command works on; skipped, when set, says why
// --all leaves it alone.
type target struct {
	id      string
	skipped string
}

// projectionTargets parses the ID | --all arguments of the projections
// commands and returns the instances.
func (c *cli) projectionTargets(cmd *command, args []string) (*chronicle.Engine, []target, error) {
	fs := c.flags(cmd)
	var all bool
	fs.BoolVar(&all, "all", false, "every instance of the store")
	pos, err := c.parse(cmd, fs, args, 0, 1)
	if err != nil {
		return nil, nil, err
	}
	if (len(pos) == 1) == all {
		return nil, nil, usagef(cmd, "give an instance ID or --all")
	}
	e, err := c.open()
	if err != nil {
		return nil, nil, err
	}
	if !all {
		return e, []target{{id: pos[0]}}, nil
	}
	targets, err := c.allInstances(e)
	return e, targets, err
}

// allInstances lists every instance of the store for the --all commands,
// the way Engine.ListInstances shows them. An instance whose start was
// dead-lettered is listed but has no history yet: it is marked skipped,
// as Engine.VerifyAll and doctor leave it out of their checks.
func (c *cli) allInstances(e *chronicle.Engine) ([]target, error) {
	var out []target
	after := ""
	for {
		page, err := e.ListInstances(c.ctx, chronicle.InstanceFilter{AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, in := range page {
			t := target{id: in.ID}
			if in.Status == chronicle.StatusPending {
				t.skipped = noHistory(in)
			}
			out = append(out, t)
		}
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// noHistory says why a pending instance has no history.
func noHistory(in *chronicle.Instance) string {
	if in.Incident != "" {
		return "no history yet, its start was dead-lettered (redrive its dead letter to run it)"
	}
	return "no history yet, its start is queued"
}

// gone is the skip reason of an instance listed by --all and purged
// before the command reached it.
const gone = "not found any more (purged meanwhile)"

func runProjectionsRebuild(c *cli, cmd *command, args []string) error {
	e, targets, err := c.projectionTargets(cmd, args)
	if err != nil {
		return err
	}
	out := []projectionsJSON{}
	for _, t := range targets {
		id := t.id
		if t.skipped == "" {
			if err := e.RebuildProjections(c.ctx, id); err != nil {
				if len(targets) == 1 || !errors.Is(err, chronicle.ErrInstanceNotFound) {
					return c.notFound(id, err)
				}
				t.skipped = gone
			}
		}
		if t.skipped != "" {
			out = append(out, projectionsJSON{InstanceID: id, OK: true, Skipped: t.skipped})
			if !c.json {
				c.printf("skipped %s: %s\n", id, t.skipped)
			}
			continue
		}
		in, err := e.Describe(c.ctx, id)
		if err != nil {
			return err
		}
		out = append(out, projectionsJSON{InstanceID: id, Seq: in.LastSeq, OK: true})
		if !c.json {
			c.printf("rebuilt the projections of %s from %d events\n", id, in.LastSeq)
		}
	}
	if c.json {
		return c.printJSON(out)
	}
	return nil
}

func runProjectionsCheck(c *cli, cmd *command, args []string) error {
	e, targets, err := c.projectionTargets(cmd, args)
	if err != nil {
		return err
	}
	out := []projectionsJSON{}
	bad := 0
	for _, t := range targets {
		id := t.id
		var diffs []string
		if t.skipped == "" {
			diffs, err = e.CheckProjections(c.ctx, id)
			if err != nil {
				if len(targets) == 1 || !errors.Is(err, chronicle.ErrInstanceNotFound) {
					return c.notFound(id, err)
				}
				t.skipped = gone
			}
		}
		if t.skipped != "" {
			out = append(out, projectionsJSON{InstanceID: id, OK: true, Skipped: t.skipped})
			if !c.json {
				c.printf("skipped %s: %s\n", id, t.skipped)
			}
			continue
		}
		out = append(out, projectionsJSON{InstanceID: id, OK: len(diffs) == 0, Differences: diffs})
		if len(diffs) > 0 {
			bad++
		}
		if c.json {
			continue
		}
		if len(diffs) == 0 {
			c.printf("ok: the projections of %s match its history\n", id)
			continue
		}
		c.printf("DIFFERENT: the projections of %s do not match its history:\n", id)
		for _, d := range diffs {
			c.printf("  %s\n", d)
		}
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	}
	if bad > 0 {
		if !c.json {
			c.printf("run 'chronicle projections rebuild' to replace them\n")
		}
		return errReported
	}
	return nil
}
