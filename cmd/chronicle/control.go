package main

import (
	"context"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

// controlReport is what instance terminate, suspend and resume print with
// --json.
type controlReport struct {
	InstanceID     string           `json:"instance_id"`
	Action         string           `json:"action"`
	By             string           `json:"by"`
	Reason         string           `json:"reason"`
	Ticket         string           `json:"ticket,omitempty"`
	Applied        bool             `json:"applied"`
	InstanceStatus chronicle.Status `json:"instance_status,omitempty"`
}

func runInstanceTerminate(c *cli, cmd *command, args []string) error {
	return c.control(cmd, args, "terminated", history.KindExecutionTerminated, (*chronicle.Engine).Terminate)
}

func runInstanceSuspend(c *cli, cmd *command, args []string) error {
	return c.control(cmd, args, "suspended", history.KindExecutionSuspended, (*chronicle.Engine).Suspend)
}

func runInstanceResume(c *cli, cmd *command, args []string) error {
	return c.control(cmd, args, "resumed", history.KindExecutionResumed, (*chronicle.Engine).Resume)
}

// control runs one of the instance control commands: it takes the action
// as --by with --reason and the optional --ticket and, where the tool
// applies the work itself (the memory store), prints the event recorded.
func (c *cli) control(cmd *command, args []string, verb string, kind history.Kind,
	act func(e *chronicle.Engine, ctx context.Context, id, reason string, opts *chronicle.ControlOptions) error) error {
	fs := c.flags(cmd)
	var reason, by, ticket string
	fs.StringVar(&reason, "reason", "", "why, recorded in the instance's history (required)")
	fs.StringVar(&by, "by", "", "the operator, recorded as the event's actor (required)")
	fs.StringVar(&ticket, "ticket", "", "a ticket or change reference, recorded with the reason")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	switch {
	case reason == "":
		return usagef(cmd, "--reason is required")
	case by == "":
		return usagef(cmd, "--by is required")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	id := pos[0]
	if err := act(e, c.ctx, id, reason, &chronicle.ControlOptions{Actor: by, Ticket: ticket}); err != nil {
		return c.notFound(id, err)
	}
	applied, err := c.settle()
	if err != nil {
		return err
	}
	rep := controlReport{InstanceID: id, Action: verb, By: by, Reason: reason, Ticket: ticket, Applied: applied}
	var recorded []history.Event
	if applied {
		in, err := e.Describe(c.ctx, id)
		if err != nil {
			return err
		}
		rep.InstanceStatus = in.Status
		events, err := e.History(c.ctx, id)
		if err != nil {
			return err
		}
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].Kind == kind {
				recorded = events[i : i+1]
				break
			}
		}
	}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("%s instance %s by %s\n", verb, id, by)
	if applied {
		c.printf("instance %s is %s, recorded:\n", id, rep.InstanceStatus)
		return timeline.Write(c.stdout, recorded, timeline.Options{Decode: c.decoder(), Prefix: "  ", NoHeader: true})
	}
	return nil
}
