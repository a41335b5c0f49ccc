package main

import (
	"context"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/jsonarg"
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

// operatorUsage are the usage lines of an operator action's --reason,
// --by and --ticket.
type operatorUsage struct{ reason, by, ticket string }

// operatorArgs parses the one positional argument of an operator action
// and its required --reason and --by and optional --ticket.
func (c *cli) operatorArgs(cmd *command, args []string, u operatorUsage) (pos []string, reason, by, ticket string, err error) {
	fs := c.flags(cmd)
	fs.StringVar(&reason, "reason", "", u.reason)
	fs.StringVar(&by, "by", "", u.by)
	fs.StringVar(&ticket, "ticket", "", u.ticket)
	if pos, err = c.parse(cmd, fs, args, 1, 1); err != nil {
		return nil, "", "", "", err
	}
	switch {
	case reason == "":
		return nil, "", "", "", usagef(cmd, "--reason is required")
	case by == "":
		return nil, "", "", "", usagef(cmd, "--by is required")
	}
	return pos, reason, by, ticket, nil
}

// lastRecorded returns the instance's newest event of kind, as a
// one-event slice (none when there is none).
func (c *cli) lastRecorded(e *chronicle.Engine, id string, kind history.Kind) ([]history.Event, error) {
	events, err := e.History(c.ctx, id)
	if err != nil {
		return nil, err
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == kind {
			return events[i : i+1], nil
		}
	}
	return nil, nil
}

// control runs one of the instance control commands: it takes the action
// as --by with --reason and the optional --ticket and, where the tool
// applies the work itself (the memory store), prints the event recorded.
func (c *cli) control(cmd *command, args []string, verb string, kind history.Kind,
	act func(e *chronicle.Engine, ctx context.Context, id, reason string, opts *chronicle.ControlOptions) error) error {
	pos, reason, by, ticket, err := c.operatorArgs(cmd, args, operatorUsage{
		reason: "why, recorded in the instance's history (required)",
		by:     "the operator, recorded as the event's actor (required)",
		ticket: "a ticket or change reference, recorded with the reason"})
	if err != nil {
		return err
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
		if recorded, err = c.lastRecorded(e, id, kind); err != nil {
			return err
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

// rerunReport is what instance rerun prints with --json.
type rerunReport struct {
	InstanceID     string           `json:"instance_id"`
	Action         string           `json:"action"`
	By             string           `json:"by"`
	Reason         string           `json:"reason"`
	Ticket         string           `json:"ticket,omitempty"`
	FromSeq        int64            `json:"from_seq"`
	ExecutionID    string           `json:"execution_id"`
	Applied        bool             `json:"applied"`
	InstanceStatus chronicle.Status `json:"instance_status,omitempty"`
}

// runInstanceRerun starts a new execution of an instance from a seq of its
// current execution as --by with --reason and the optional --ticket and
// --input (the replaced input of the activity the seq names, as JSON);
// on the memory store it prints the events the rerun recorded.
func runInstanceRerun(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var reason, by, ticket, input string
	var from int64
	fs.Int64Var(&from, "from-seq", 0, "the seq of the current execution to rerun from (required): a turn, a message, or an activity's schedule or result")
	fs.StringVar(&input, "input", "", "the activity's new input as JSON, when --from-seq names an activity")
	fs.StringVar(&reason, "reason", "", "why, recorded in both executions (required)")
	fs.StringVar(&by, "by", "", "the operator, recorded as the events' actor (required)")
	fs.StringVar(&ticket, "ticket", "", "a ticket or change reference, recorded with the reason")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	switch {
	case from == 0:
		return usagef(cmd, "--from-seq is required")
	case reason == "":
		return usagef(cmd, "--reason is required")
	case by == "":
		return usagef(cmd, "--by is required")
	}
	opts := chronicle.RerunOptions{FromSeq: from, Reason: reason, Actor: by, Ticket: ticket}
	if input != "" {
		if opts.ActivityInput, err = jsonarg.Parse(input); err != nil {
			return usagef(cmd, "invalid value for flag --input: %v", err)
		}
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	id := pos[0]
	before, err := e.History(c.ctx, id)
	if err != nil {
		return c.notFound(id, err)
	}
	exec, err := e.Rerun(c.ctx, id, opts)
	if err != nil {
		return c.notFound(id, err)
	}
	applied, err := c.settle()
	if err != nil {
		return err
	}
	rep := rerunReport{InstanceID: id, Action: "rerun", By: by, Reason: reason, Ticket: ticket, FromSeq: from, ExecutionID: exec, Applied: applied}
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
		recorded = events[len(before):]
	}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("rerun instance %s from seq %d by %s as execution %s\n", id, from, by, exec)
	if applied {
		c.printf("instance %s is %s, recorded:\n", id, rep.InstanceStatus)
		return timeline.Write(c.stdout, recorded, timeline.Options{Decode: c.decoder(), Prefix: "  ", NoHeader: true})
	}
	return nil
}

// holdReport is what instance hold and release print with --json.
type holdReport struct {
	InstanceID string `json:"instance_id"`
	Action     string `json:"action"`
	HoldID     string `json:"hold_id"`
	By         string `json:"by"`
	Reason     string `json:"reason"`
	Ticket     string `json:"ticket,omitempty"`
	Applied    bool   `json:"applied"`
}

func runInstanceHold(c *cli, cmd *command, args []string) error { return c.hold(cmd, args, true) }

func runInstanceRelease(c *cli, cmd *command, args []string) error { return c.hold(cmd, args, false) }

// hold places (place) or releases a legal hold as --by with --reason and
// the optional --ticket and, where the tool applies the work itself (the
// memory store), prints the event recorded.
func (c *cli) hold(cmd *command, args []string, place bool) error {
	pos, reason, by, ticket, err := c.operatorArgs(cmd, args, operatorUsage{
		reason: "why, recorded in the instance's history (required)",
		by:     "the operator, recorded as the event's actor (required)",
		ticket: "a case or ticket reference, recorded with the reason"})
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	id := pos[0]
	o := chronicle.HoldOptions{Reason: reason, Actor: by, Ticket: ticket}
	rep := holdReport{InstanceID: id, Action: "held", By: by, Reason: reason, Ticket: ticket}
	kind := history.KindHoldPlaced
	if place {
		h, err := e.Hold(c.ctx, id, o)
		if err != nil {
			return c.notFound(id, err)
		}
		rep.HoldID, rep.Reason, rep.Ticket = h.HoldID, h.Reason, h.Ticket
		if h.Actor != history.UserActor(by) {
			rep.Action = "already held"
		}
	} else {
		h, err := e.GetHold(c.ctx, id)
		if err != nil {
			return err
		}
		if h != nil {
			rep.HoldID = h.HoldID
		}
		if err := e.ReleaseHold(c.ctx, id, o); err != nil {
			return c.notFound(id, err)
		}
		rep.Action, kind = "released", history.KindHoldReleased
	}
	if rep.Applied, err = c.settle(); err != nil {
		return err
	}
	var recorded []history.Event
	if rep.Applied {
		if recorded, err = c.lastRecorded(e, id, kind); err != nil {
			return err
		}
	}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("%s instance %s (hold %s) by %s\n", rep.Action, id, rep.HoldID, by)
	if len(recorded) > 0 {
		c.printf("recorded:\n")
		return timeline.Write(c.stdout, recorded, timeline.Options{Decode: c.decoder(), Prefix: "  ", NoHeader: true})
	}
	return nil
}
