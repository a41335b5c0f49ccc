package main

import (
	"github.com/chronicleflow/chronicle"
)

// replayJSON is the replay of one history in JSON output.
type replayJSON struct {
	Origin     string `json:"origin"`
	InstanceID string `json:"instance_id"`
	Workflow   string `json:"workflow,omitempty"`
	OK         bool   `json:"ok"`
	Events     int    `json:"events"`
	Executions int    `json:"executions"`
	// Divergence is where code and history part.
	Divergence *divergenceJSON `json:"divergence,omitempty"`
	// Error is any other failure: an unknown workflow, a file that does
	// not read.
	Error string `json:"error,omitempty"`
	// Skipped says why an instance had no history to replay.
	Skipped string `json:"skipped,omitempty"`
}

type divergenceJSON struct {
	Seq     int64  `json:"seq"`
	History string `json:"history"`
	Code    string `json:"code"`
}

// runReplay replays exported histories, or every instance of the store,
// against the workflows this binary registers: the demo's, on the memory
// store. A program with workflows of its own runs the same replay with
// Engine.ReplayHistories and prints it with ReplaySummary.WriteText
// (docs/testing.md).
func runReplay(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var all bool
	fs.BoolVar(&all, "all", false, "replay every instance of the store")
	paths, err := c.parse(cmd, fs, args, 0, -1)
	if err != nil {
		return err
	}
	if all == (len(paths) > 0) {
		return usagef(cmd, "give exported files or folders, or --all")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	src := chronicle.HistoryFiles(paths...)
	if all {
		src = chronicle.StoreHistories(e)
	}
	sum, err := e.ReplayHistories(c.ctx, src)
	if err != nil {
		return err
	}
	if c.json {
		rows := make([]replayJSON, len(sum.Results))
		for i := range sum.Results {
			r := &sum.Results[i]
			row := replayJSON{Origin: r.Origin, InstanceID: r.InstanceID, Workflow: r.Workflow, OK: r.Problem() == nil,
				Events: r.Events, Executions: r.Executions, Skipped: r.Skipped}
			switch {
			case r.Divergence != nil:
				row.Divergence = &divergenceJSON{Seq: r.Divergence.Seq, History: r.Divergence.History, Code: r.Divergence.Code}
			case r.Err != nil:
				row.Error = r.Err.Error()
			}
			rows[i] = row
		}
		if err := c.printJSON(rows); err != nil {
			return err
		}
	} else if err := sum.WriteText(c.stdout); err != nil {
		return err
	}
	if !sum.OK() {
		return errReported
	}
	return nil
}
