package main

import (
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
}

// projectionTargets parses the ID | --all arguments of the projections
// commands and returns the instance ids.
func (c *cli) projectionTargets(cmd *command, args []string) (*chronicle.Engine, []string, error) {
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
		return e, pos, nil
	}
	var ids []string
	after := ""
	for {
		page, err := e.ListInstances(c.ctx, chronicle.InstanceFilter{AfterID: after, Limit: 500})
		if err != nil {
			return nil, nil, err
		}
		for _, in := range page {
			ids = append(ids, in.ID)
		}
		if len(page) < 500 {
			return e, ids, nil
		}
		after = page[len(page)-1].ID
	}
}

func runProjectionsRebuild(c *cli, cmd *command, args []string) error {
	e, ids, err := c.projectionTargets(cmd, args)
	if err != nil {
		return err
	}
	out := []projectionsJSON{}
	for _, id := range ids {
		if err := e.RebuildProjections(c.ctx, id); err != nil {
			return c.notFound(id, err)
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
	e, ids, err := c.projectionTargets(cmd, args)
	if err != nil {
		return err
	}
	out := []projectionsJSON{}
	bad := 0
	for _, id := range ids {
		diffs, err := e.CheckProjections(c.ctx, id)
		if err != nil {
			return c.notFound(id, err)
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
