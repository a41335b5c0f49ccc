package round

import (
	"fmt"
	"strconv"

	"github.com/chronicleflow/chronicle/history"
)

// Failure types a parent sees in the SubWorkflowFailed of a child that
// never ran for it.
const (
	// FailureSubWorkflowAlreadyStarted: the child's instance id was taken by
	// a running instance, so the child was not started.
	FailureSubWorkflowAlreadyStarted = "SubWorkflowAlreadyStarted"
	// FailureDeadLetterDiscarded: an operator discarded the dead letter of
	// the work item (an activity task, a child's start).
	FailureDeadLetterDiscarded = "DeadLetterDiscarded"
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

// SubWorkflowResultID derives the id of the message that brings a parent
// the outcome of the child it scheduled at seq: the child's end, or the
// refusal or discard of its start. One id per scheduled child, so the
// parent is told at most once while the message is queued.
func SubWorkflowResultID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "subworkflow-result")
}

// childStartParent returns the parent of a start message, or nil when m is
// not the start of a child (or does not decode).
func childStartParent(m *Message) *history.ParentRef {
	if m.Kind != history.KindExecutionStarted {
		return nil
	}
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return nil
	}
	p := a.(*history.ExecutionStarted).Parent
	if p == nil || p.InstanceID == "" || p.ExecutionID == "" || p.ScheduledSeq <= 0 {
		return nil
	}
	return p
}

// childFailure builds the SubWorkflowFailed message that tells parent p its
// child was never run.
func childFailure(p *history.ParentRef, f history.Failure) (Message, error) {
	return NewMessage(SubWorkflowResultID(p.InstanceID, p.ExecutionID, p.ScheduledSeq), p.InstanceID, p.ExecutionID,
		history.SeqCorrelation(p.ScheduledSeq), &history.SubWorkflowFailed{Failure: f})
}

// RefusedChildStart returns the message that tells a parent its child's
// start m was refused because the child's instance id is taken by a running
// instance (the snapshot's), and true; false when m is not a child's start.
// The round acks the start and enqueues this message instead of
// dead-lettering the start, so the parent's sub-workflow fails at once
// with [FailureSubWorkflowAlreadyStarted], as a Temporal child's does.
func (s *Snapshot) RefusedChildStart(m *Message) (Message, bool, error) {
	p := childStartParent(m)
	if p == nil {
		return Message{}, false, nil
	}
	n, err := childFailure(p, history.Failure{
		Message: fmt.Sprintf("sub-workflow instance %s is already running (execution %s); the child was not started",
			m.InstanceID, s.ExecutionID),
		Type:         FailureSubWorkflowAlreadyStarted,
		NonRetryable: true,
	})
	if err != nil {
		return Message{}, false, fmt.Errorf("refusal of child %s: %w", m.InstanceID, err)
	}
	return n, true, nil
}

// DiscardedSubWorkflowResult returns the message a store enqueues when an
// operator discards the dead letter of a child's start message: the child
// never ran, so its parent's sub-workflow fails for good with
// [FailureDeadLetterDiscarded] instead of waiting forever, as
// [DiscardedActivityResult] does for an activity. ok is false, with no
// error, when the dead letter holds no child's start (or a message that
// does not decode): discarding it tells nobody anything.
func DiscardedSubWorkflowResult(l *DeadLetter, by string) (m Message, ok bool, err error) {
	if l.Message == nil {
		return Message{}, false, nil
	}
	p := childStartParent(l.Message)
	if p == nil {
		return Message{}, false, nil
	}
	m, err = childFailure(p, history.Failure{
		Message: fmt.Sprintf("start of sub-workflow instance %s: dead letter discarded by %s (%s: %s)",
			l.Message.InstanceID, by, l.Reason, l.Error),
		Type:         FailureDeadLetterDiscarded,
		NonRetryable: true,
	})
	if err != nil {
		return Message{}, false, fmt.Errorf("discard dead letter %s: %w", l.ID, err)
	}
	return m, true, nil
}
