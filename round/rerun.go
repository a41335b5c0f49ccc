package round

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// ErrCannotRerun is wrapped by the errors of [PlanRerun]: the execution
// cannot be rerun from the seq asked for.
var ErrCannotRerun = errors.New("cannot rerun")

// RerunPlan is where a rerun of an execution starts, as [PlanRerun]
// worked it out.
type RerunPlan struct {
	// Start is the execution's ExecutionStarted.
	Start *history.ExecutionStarted
	// Keep are the events the new execution copies: those after the start
	// and before the cut, without suspensions and resumptions.
	Keep []history.Event
	// ActivitySeq is the seq of the ActivityScheduled of the activity the
	// rerun runs again, when FromSeq named an activity; else 0.
	ActivitySeq int64
}

// PlanRerun checks that the execution whose events are given (from its
// ExecutionStarted on, in seq order) can be rerun from fromSeq, and
// returns what the new execution keeps. fromSeq may name:
//
//   - a TurnStarted: the turn runs again (what it and everything after it
//     recorded is left behind);
//   - a message the execution recorded between turns (an activity, timer
//     or child result, a signal, a task action, a termination): the
//     execution goes on as if it had not arrived;
//   - an activity's ActivityScheduled, ActivityCompleted or ActivityFailed:
//     the activity runs again; replace, when set, is its new input.
//
// It refuses, wrapping [ErrCannotRerun]: a seq outside the execution, its
// start, a command inside a turn, a record after its end; an execution
// started as a sub-workflow (rerun its parent); a kept part holding a human
// task (task ids are unique per store); a kept part with a sub-workflow or
// a signal to another instance still waiting for its outcome; an input to
// replace when fromSeq names no activity.
func PlanRerun(events []history.Event, fromSeq int64, replace []byte) (*RerunPlan, error) {
	refuse := func(format string, args ...any) (*RerunPlan, error) {
		return nil, fmt.Errorf("%w: %s", ErrCannotRerun, fmt.Sprintf(format, args...))
	}
	if len(events) == 0 || events[0].Kind != history.KindExecutionStarted {
		return refuse("the execution's history does not open with ExecutionStarted")
	}
	a, err := events[0].Attributes()
	if err != nil {
		return nil, err
	}
	start := a.(*history.ExecutionStarted)
	first, last := events[0].Seq, events[len(events)-1].Seq
	switch {
	case start.Parent != nil:
		return refuse("execution %s is a sub-workflow of %s: rerun the parent", events[0].ExecutionID, start.Parent.InstanceID)
	case fromSeq <= first:
		return refuse("seq %d is not after the start of execution %s (seq %d); the first seq to rerun from is %d", fromSeq, events[0].ExecutionID, first, first+1)
	case fromSeq > last:
		return refuse("seq %d is past the end of history (seq %d)", fromSeq, last)
	}
	i := int(fromSeq - first)
	if events[i].Seq != fromSeq {
		return refuse("history of execution %s is not contiguous at seq %d", events[0].ExecutionID, fromSeq)
	}
	e := &events[i]
	cut, activity := i, int64(0)
	switch {
	case e.Kind == history.KindActivityScheduled:
		activity, cut = e.Seq, -1
		corr := history.SeqCorrelation(e.Seq)
		for j := i + 1; j < len(events); j++ {
			k := events[j].Kind
			if (k == history.KindActivityCompleted || k == history.KindActivityFailed) && events[j].CorrelationID == corr {
				cut = j
				break
			}
			if k.Terminal() {
				if isCommandKind(k) {
					return refuse("activity #%d has no result and the execution ended in a turn: rerun from that turn", e.Seq)
				}
				cut = j
				break
			}
		}
		if cut < 0 {
			cut = len(events) // still running: keep everything
		}
	case e.Kind == history.KindActivityCompleted || e.Kind == history.KindActivityFailed:
		if activity, err = history.ParseSeqCorrelation(e.CorrelationID); err != nil {
			return nil, err
		}
	case e.Kind == history.KindExecutionRerun:
		return refuse("seq %d records a rerun after the end of the execution", fromSeq)
	case e.Kind.IsRecord():
		return refuse("seq %d records a legal hold, which workflow code never sees: rerun from a turn or a message", fromSeq)
	case isCommandKind(e.Kind):
		turn := i
		for turn > 0 && events[turn].Kind != history.KindTurnStarted {
			turn--
		}
		return refuse("seq %d (%s) is a command of the turn at seq %d: rerun from that turn, or from a message", fromSeq, e.Kind, events[turn].Seq)
	}
	if len(replace) > 0 && activity == 0 {
		return refuse("an activity input needs a seq of an activity (its schedule or its result); seq %d is %s", fromSeq, e.Kind)
	}
	plan := &RerunPlan{Start: start, ActivitySeq: activity}
	open := map[int64]history.Kind{}
	for j := 1; j < cut; j++ {
		k := events[j].Kind
		switch {
		case k == history.KindExecutionSuspended || k == history.KindExecutionResumed || k.IsRecord():
			continue
		case k == history.KindTaskCreated || k.Class() == history.ClassTask || k == history.KindTaskCancelled || k == history.KindTaskEscalated:
			return refuse("the events before seq %d hold a human task (seq %d): task ids are unique, so they cannot be copied", fromSeq, events[j].Seq)
		case k == history.KindSubWorkflowScheduled || k == history.KindSignalSent:
			open[events[j].Seq] = k
		case k.Class() == history.ClassSubWorkflow || k.Class() == history.ClassSignal:
			if seq, err := history.ParseSeqCorrelation(events[j].CorrelationID); err == nil {
				delete(open, seq)
			}
		}
		plan.Keep = append(plan.Keep, events[j])
	}
	for seq, k := range open {
		return refuse("the events before seq %d hold a %s (seq %d) still waiting for its outcome", fromSeq, k, seq)
	}
	return plan, nil
}

// isCommandKind reports whether workflow code writes events of kind k
// during a turn: every kind but a start, a turn's start, a rerun record and
// what messages bring.
func isCommandKind(k history.Kind) bool {
	switch k {
	case history.KindExecutionStarted, history.KindTurnStarted, history.KindExecutionRerun:
		return false
	}
	return !slices.Contains(provider.MessageKinds(), k)
}

// RerunExecutionID derives the id of the execution a rerun request starts
// from the request's message id: a redelivered request finds it among the
// instance's executions and is a duplicate.
func RerunExecutionID(instanceID, messageID string) string {
	return history.DeterministicID(instanceID+"\x00"+messageID, 0, "rerun")
}

// Copy returns the events of the plan as events of execution executionID
// from seq on: new seqs, correlations that name a seq remapped to the
// copies' seqs, the replaced input in the rerun activity's schedule, and
// no seal. Times and actors stay those of the originals: the code replays
// against the times it saw.
func (p *RerunPlan) Copy(executionID string, seq int64, replace []byte) ([]history.Event, error) {
	remap := make(map[int64]int64, len(p.Keep))
	out := make([]history.Event, 0, len(p.Keep))
	for _, e := range p.Keep {
		c := e
		c.Seq, c.ExecutionID, c.Hash, c.PrevHash = seq, executionID, nil, nil
		remap[e.Seq] = seq
		switch e.Kind.Class() {
		case history.ClassActivity, history.ClassTimer, history.ClassSubWorkflow, history.ClassSignal:
			old, err := history.ParseSeqCorrelation(e.CorrelationID)
			if err != nil {
				return nil, fmt.Errorf("copy seq %d: %w", e.Seq, err)
			}
			n, ok := remap[old]
			if !ok {
				return nil, fmt.Errorf("copy seq %d: %w: it answers seq %d, which is not kept", e.Seq, ErrCannotRerun, old)
			}
			c.CorrelationID = history.SeqCorrelation(n)
		}
		if len(replace) > 0 && e.Seq == p.ActivitySeq {
			a, err := e.Attributes()
			if err != nil {
				return nil, err
			}
			s := *a.(*history.ActivityScheduled)
			s.Input = replace
			if c.Payload, err = history.EncodeAttributes(&s); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
		seq++
	}
	return out, nil
}

// rerun processes a rerun request: it ends the current execution if it
// runs, records the request in it, and starts the new execution with the
// copies of the kept events, deriving the work its open schedules need. A
// request whose execution has already started is a duplicate; one for
// another execution than the current, or that cannot be planned any more,
// is dead-lettered with the reason.
func (r *Runner) rerun(ctx context.Context, rs *roundState, m *provider.Message) error {
	snap := rs.snap
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		rs.letters = append(rs.letters, r.letter(m, provider.ReasonUndecodable, err.Error(), rs.now))
		return nil
	}
	req := a.(*history.ExecutionRerun)
	reject := func(reason provider.Reason, why string) error {
		rs.letters = append(rs.letters, r.letter(m, reason, why, rs.now))
		r.log.WarnContext(ctx, "rerun refused", slog.String("instance_id", rs.id), slog.String("message", m.ID), slog.String("why", why))
		return nil
	}
	switch {
	case req.NewExecutionID == "" || req.NewExecutionID != RerunExecutionID(rs.id, m.ID):
		return reject(provider.ReasonUndecodable, "the rerun's new execution id does not derive from its message id")
	case slices.Contains(snap.Executions, req.NewExecutionID):
		rs.rep.Duplicates++
		rs.acks = append(rs.acks, m.ID)
		return nil
	case !snap.Started():
		return reject(provider.ReasonNotStarted, fmt.Sprintf("instance %s has not been started", rs.id))
	case m.ExecutionID != snap.ExecutionID:
		return reject(provider.ReasonRejected, fmt.Sprintf("the rerun is from execution %s, the current execution is %s", m.ExecutionID, snap.ExecutionID))
	}
	events, err := rs.since(ctx, snap.ExecutionStartSeq)
	if err != nil {
		return err
	}
	plan, err := PlanRerun(events, req.FromSeq, req.ActivityInput)
	if errors.Is(err, ErrCannotRerun) {
		return reject(provider.ReasonRejected, err.Error())
	}
	if err != nil {
		return err
	}
	if plan.ActivitySeq != req.ActivitySeq && len(req.ActivityInput) > 0 {
		return reject(provider.ReasonRejected, fmt.Sprintf("the rerun replaces the input of activity #%d, seq %d names activity #%d", req.ActivitySeq, req.FromSeq, plan.ActivitySeq))
	}
	old := snap.ExecutionID
	ahead := int64(2) // the record and the new start
	if !snap.Ended {
		ahead++ // the termination
	}
	copies, err := plan.Copy(req.NewExecutionID, snap.LastSeq+1+ahead, req.ActivityInput)
	if errors.Is(err, ErrCannotRerun) {
		return reject(provider.ReasonRejected, err.Error())
	}
	if err != nil {
		return err
	}
	add := func(e history.Event, w *Work) error {
		e.Seq, e.InstanceID = snap.LastSeq+1, rs.id
		r.seal(snap, &e)
		if err := snap.Apply(&e, w); err != nil {
			return fmt.Errorf("rerun of %s: %w", rs.id, err)
		}
		rs.appended = append(rs.appended, e)
		return nil
	}
	event := func(exec, corr string, attrs history.Attributes) (history.Event, error) {
		payload, err := history.EncodeAttributes(attrs)
		return history.Event{ExecutionID: exec, Kind: attrs.EventKind(), CorrelationID: corr, At: rs.now, Actor: m.Actor, Payload: payload}, err
	}
	if !snap.Ended {
		e, err := event(old, old, &history.ExecutionTerminated{Reason: fmt.Sprintf("rerun from seq %d as execution %s: %s", req.FromSeq, req.NewExecutionID, req.Reason), Ticket: req.Ticket})
		if err != nil {
			return err
		}
		if err := add(e, rs.work); err != nil {
			return err
		}
	}
	record := *req
	record.ActivitySeq = 0
	if len(req.ActivityInput) > 0 {
		record.ActivitySeq = plan.ActivitySeq
	}
	e, err := event(old, m.CorrelationID, &record)
	if err != nil {
		return err
	}
	if err := add(e, rs.work); err != nil {
		return err
	}
	start := *plan.Start
	start.ContinuedFrom = ""
	start.RerunOf = &history.RerunRef{ExecutionID: old, FromSeq: req.FromSeq, Reason: req.Reason, Ticket: req.Ticket, ActivitySeq: record.ActivitySeq}
	if e, err = event(req.NewExecutionID, req.NewExecutionID, &start); err != nil {
		return err
	}
	if err := add(e, rs.work); err != nil {
		return err
	}
	from := len(rs.appended) - 1
	for _, c := range copies {
		if err := add(c, nil); err != nil {
			return err
		}
	}
	// The kept part's open activities and timers are scheduled again; the
	// old execution's activities are cancelled.
	open, err := snap.OpenWork(rs.appended[from:])
	if err != nil {
		return err
	}
	rs.work.merge(open)
	rs.acks = append(rs.acks, m.ID)
	rs.rep.Processed++
	r.log.InfoContext(ctx, "execution rerun", slog.String("instance_id", rs.id), slog.String("execution_id", old),
		slog.String("new_execution_id", req.NewExecutionID), slog.Int64("from_seq", req.FromSeq), slog.String("actor", m.Actor))
	return nil
}
