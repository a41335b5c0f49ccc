package chronicle

import (
	"context"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// RerunOptions configure [Engine.Rerun].
type RerunOptions struct {
	// FromSeq is the seq of the current execution to rerun from
	// (required): the new execution keeps the events before it. It may
	// name a TurnStarted (the turn runs again), a message recorded between
	// turns (a result, a signal, a termination: the execution goes on as if
	// it had not arrived) or an activity's ActivityScheduled,
	// ActivityCompleted or ActivityFailed (the activity runs again).
	FromSeq int64
	// ActivityInput, when not nil, replaces the input of the activity
	// FromSeq names: its schedule is copied with this input, encoded with
	// the engine's codec, and the activity runs with it.
	ActivityInput any
	// Reason says why (required); it is recorded in both executions.
	Reason string
	// Actor is the user who reruns, recorded as "user:<Actor>"; empty
	// records "system".
	Actor string
	// Ticket is an optional ticket or change reference, held to the
	// limits of [ControlOptions.Ticket].
	Ticket string
}

// Rerun starts a new execution of an instance from a point of its current
// execution, and returns the new execution's id. The current execution
// ends (as terminated, if it was still running) and records an
// ExecutionRerun event; the new execution's ExecutionStarted carries the
// lineage (history.ExecutionStarted.RerunOf), followed by copies of the
// current execution's events before opts.FromSeq, which the workflow code
// replays before it goes on. History is never rewritten: the new events
// are appended after the old ones, in the same hash chain.
//
// It is a control request like [Engine.Terminate]: the instance's next
// round carries it out, exactly once. A request it can no longer carry out
// (another execution started in between) is dead-lettered with the
// reason. Rerun refuses, writing nothing, an unknown instance
// (ErrInstanceNotFound) and, with ErrInvalidArgument, an instance whose
// start is still queued, a missing reason, a bad ticket or actor, and a
// seq it cannot rerun from: outside the current
// execution, its start, a command inside a turn, the record of an earlier
// rerun; an instance started as a sub-workflow; a kept part holding a
// human task or a sub-workflow or signal still waiting for its outcome;
// an ActivityInput when FromSeq names no activity. See docs/operations.md,
// "Rerun from a step".
func (e *Engine) Rerun(ctx context.Context, instanceID string, opts RerunOptions) (string, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return "", err
	}
	if opts.Reason == "" {
		return "", invalid("a rerun needs a reason")
	}
	if err := checkControl(opts.Reason, &ControlOptions{Ticket: opts.Ticket}); err != nil {
		return "", err
	}
	actor, err := e.actor(opts.Actor)
	if err != nil {
		return "", err
	}
	if opts.FromSeq <= 0 {
		return "", invalid("a rerun needs the seq to rerun from (FromSeq), got %d", opts.FromSeq)
	}
	var input []byte
	if opts.ActivityInput != nil {
		if input, err = e.encode("activity input", opts.ActivityInput); err != nil {
			return "", err
		}
		if input, err = e.sealForInstance(ctx, instanceID, input); err != nil {
			return "", err
		}
	}
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: 1})
	if err != nil {
		return "", fmt.Errorf("history of %s: %w", instanceID, err)
	}
	if len(events) == 0 {
		if _, pending, err := e.lookup(ctx, instanceID); err == nil && pending {
			return "", invalid("instance %s has not run its first round yet: it has no history to rerun from", instanceID)
		}
		return "", fmt.Errorf("%w: %s", ErrInstanceNotFound, instanceID)
	}
	start := len(events) - 1
	for start > 0 && events[start].Kind != history.KindExecutionStarted {
		start--
	}
	current := events[start:]
	if opts.FromSeq < current[0].Seq {
		exec := ""
		if i := int(opts.FromSeq - events[0].Seq); i >= 0 && i < len(events) {
			exec = events[i].ExecutionID
		}
		return "", invalid("seq %d is in execution %s, not in the current execution %s (seqs %d to %d): only the current execution can be rerun",
			opts.FromSeq, exec, current[0].ExecutionID, current[0].Seq, current[len(current)-1].Seq)
	}
	plan, err := round.PlanRerun(current, opts.FromSeq, input)
	if errors.Is(err, round.ErrCannotRerun) {
		return "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err != nil {
		return "", fmt.Errorf("rerun %s: %w", instanceID, err)
	}
	id := e.opts.NewID()
	req := &history.ExecutionRerun{
		FromSeq: opts.FromSeq, NewExecutionID: round.RerunExecutionID(instanceID, id),
		Reason: opts.Reason, Ticket: opts.Ticket, ActivityInput: input,
	}
	if input != nil {
		req.ActivitySeq = plan.ActivitySeq
	}
	m, err := provider.NewMessage(id, instanceID, current[0].ExecutionID, id, req)
	if err != nil {
		return "", err
	}
	m.Actor = actor
	if err := e.enqueue(ctx, m); err != nil {
		return "", err
	}
	return req.NewExecutionID, nil
}
