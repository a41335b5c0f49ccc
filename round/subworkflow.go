package round

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Failure types a parent sees in the SubWorkflowFailed of a child that
// never ran for it.
const (
	// FailureSubWorkflowAlreadyStarted: the child's instance id was taken by
	// a running instance, so the child was not started.
	FailureSubWorkflowAlreadyStarted = "SubWorkflowAlreadyStarted"
	// FailureDeadLetterDiscarded: an operator discarded the dead letter of
	// the work item (an activity task, a child's start).
	FailureDeadLetterDiscarded = provider.FailureDeadLetterDiscarded
)

// parentKey names one execution of a parent instance; a purged and reused
// instance id gets new execution ids, so keys never repeat.
func parentKey(instanceID, executionID string) string { return instanceID + "\x00" + executionID }

// DefaultChildID derives the instance id of a child started without an
// explicit one: the parent's instance id, its execution id and the Seq of
// the SubWorkflowScheduled event, joined by "/". The execution id keeps the
// ids of a purged and reused parent id apart. An id over
// [history.MaxIDLength] is replaced by a deterministic UUID of the same
// parts.
func DefaultChildID(parentID, parentExecutionID string, seq int64) string {
	id := parentID + "/" + parentExecutionID + "/" + strconv.FormatInt(seq, 10)
	if len(id) > history.MaxIDLength {
		id = history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child")
	}
	return id
}

// ChildExecutionID derives the execution id of the child a parent schedules
// at seq. It depends on the parent's identity, not on the child's instance
// id, so two parents sharing a child id never share its execution id.
func ChildExecutionID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child-execution")
}

// ChildStartMessageID derives the id of the start message of the child a
// parent schedules at seq.
func ChildStartMessageID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child-start")
}

// RefusedChildStart returns the message that tells a parent its child's
// start m was refused because the child's instance id is taken by a running
// instance (the snapshot's), and true; false when m is not a child's start.
// The round acks the start and enqueues this message instead of
// dead-lettering the start, so the parent's sub-workflow fails at once
// with [FailureSubWorkflowAlreadyStarted], as a Temporal child's does.
func (s *Snapshot) RefusedChildStart(m *provider.Message) (provider.Message, bool, error) {
	n, ok, err := provider.ChildNeverRan(m, history.Failure{
		Message: fmt.Sprintf("sub-workflow instance %s is already running (execution %s); the child was not started",
			m.InstanceID, s.ExecutionID),
		Type:         FailureSubWorkflowAlreadyStarted,
		NonRetryable: true,
	})
	if err != nil {
		return provider.Message{}, false, fmt.Errorf("refusal of child %s: %w", m.InstanceID, err)
	}
	return n, ok, nil
}

// lostSends derives, on a cold round whose mode repairs open work,
// the start of each child (and the resend of each signal of an execution
// that continued as new; see [SignalResendID]) that an earlier round scheduled in an execution
// that has ended since, when that round may have died between its append
// and its enqueue. [Snapshot.OpenWork] derives the starts of the current
// execution's pending children, but an execution that ends forgets its
// children (a parent may start a child and return in one turn), and a
// continue-as-new leaves them in the execution before the current one.
//
// A round that died before its enqueue did not ack its messages either:
// they come again, pinned to the execution they were judged against, in
// this round's batch. So the starts derived are those of the
// SubWorkflowScheduled events written by a round (the events with the
// time of that round) that also wrote the event of one of the batch's
// messages. Once a round has queued them and acked those messages, no
// later round derives them again: a child that ran, ended and was purged
// is never started twice by an ended parent woken by a stale message.
// A child whose result history holds, or whose result (or refusal) is in
// the batch, ran or was answered already, and is left alone. Each start
// keeps its id ([ChildStartMessageID]) and execution id, so a child that
// got it already judges it a duplicate. A detached start (a schedule's
// firing) is derived the same way, in the current execution too: it is
// never pending, so OpenWork does not derive it.
func (rs *roundState) lostSends(ctx context.Context) (*Work, error) {
	snap := rs.snap
	type key struct {
		exec string
		kind history.Kind
		corr string
	}
	redelivered := map[key]bool{}
	inBatch := map[string]bool{}
	from := snap.ExecutionStartSeq
	for i := range rs.msgs {
		m := rs.msgs[i]
		inBatch[m.ID] = true
		if m.ExecutionID == "" || m.Validate() != nil {
			// Never delivered before the round pinned it.
			continue
		}
		if m.ExecutionID != snap.ExecutionID {
			if !slices.Contains(snap.Executions, m.ExecutionID) {
				continue
			}
			from = 1
		}
		normalize(&m, snap)
		redelivered[key{m.ExecutionID, m.Kind, m.CorrelationID}] = true
	}
	if len(redelivered) == 0 {
		return nil, nil
	}
	events, err := rs.since(ctx, from)
	if err != nil {
		return nil, err
	}
	// The round's own events are queued with its work.
	stored := events[:len(events)-len(rs.appended)]
	rounds := map[int64]bool{}
	settled := map[string]bool{}
	for i := range stored {
		e := &stored[i]
		if redelivered[key{e.ExecutionID, e.Kind, e.CorrelationID}] {
			rounds[e.At.UnixMicro()] = true
		}
		switch e.Kind {
		case history.KindSubWorkflowCompleted, history.KindSubWorkflowFailed, history.KindSignalDelivered, history.KindSignalFailed:
			settled[parentKey(e.ExecutionID, e.CorrelationID)] = true
		}
	}
	w := &Work{}
	for i := range stored {
		e := &stored[i]
		if e.Kind == history.KindSignalSent && rounds[e.At.UnixMicro()] && e.ExecutionID != snap.ExecutionID &&
			!settled[parentKey(e.ExecutionID, history.SeqCorrelation(e.Seq))] && !inBatch[SignalResultID(rs.id, e.ExecutionID, e.Seq)] {
			// A signal an execution sent as it continued as new: the
			// next execution's snapshot does not keep it (see
			// Snapshot.Signals), so it is sent again like a child's start.
			a, err := e.Attributes()
			if err != nil {
				return nil, fmt.Errorf("load history of %s: seq %d: %w", rs.id, e.Seq, err)
			}
			m, err := (&Snapshot{InstanceID: rs.id, ExecutionID: e.ExecutionID}).signalMessage(SignalResendID(rs.id, e.ExecutionID, e.Seq), e.Seq, a.(*history.SignalSent))
			if err != nil {
				return nil, err
			}
			w.Messages = append(w.Messages, m)
			continue
		}
		if e.Kind != history.KindSubWorkflowScheduled || !rounds[e.At.UnixMicro()] ||
			settled[parentKey(e.ExecutionID, history.SeqCorrelation(e.Seq))] ||
			inBatch[provider.SubWorkflowResultID(rs.id, e.ExecutionID, e.Seq)] {
			continue
		}
		a, err := e.Attributes()
		if err != nil {
			return nil, fmt.Errorf("load history of %s: seq %d: %w", rs.id, e.Seq, err)
		}
		sw := a.(*history.SubWorkflowScheduled)
		sender := &Snapshot{InstanceID: rs.id, ExecutionID: e.ExecutionID}
		var m provider.Message
		switch {
		case sw.Detached:
			// Never pending, so OpenWork does not derive it, even in the
			// current execution; its target drops it if it came before.
			m, err = sender.detachedStart(e, sw)
		case e.ExecutionID == snap.ExecutionID && !snap.Ended:
			continue // OpenWork's
		default:
			m, err = sender.childStart(e.Seq, sw)
		}
		if err != nil {
			return nil, err
		}
		w.Messages = append(w.Messages, m)
	}
	return w, nil
}
