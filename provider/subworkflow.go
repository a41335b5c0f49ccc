package provider

import (
	"fmt"

	"github.com/chronicleflow/chronicle/history"
)

// FailureDeadLetterDiscarded is the [history.Failure] type of the result a
// store enqueues when an operator discards the dead letter of a work item
// (an activity task, a child's start): the work fails for good.
const FailureDeadLetterDiscarded = "DeadLetterDiscarded"

// parentKey names one execution of a parent instance; a purged and reused
// instance id gets new execution ids, so keys never repeat.
func parentKey(instanceID, executionID string) string { return instanceID + "\x00" + executionID }

// SubWorkflowResultID derives the id of the message that brings a parent
// the outcome of the child it scheduled at seq: the child's end, or the
// refusal or discard of its start. One id per scheduled child, so the
// parent is told at most once while the message is queued.
func SubWorkflowResultID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "subworkflow-result")
}

// ChildNeverRan returns the SubWorkflowFailed message, failing with f, that
// tells the parent of the child start message m that its child never ran,
// and true; ok is false, with no error, when m is not the start of a child
// (or does not decode).
func ChildNeverRan(m *Message, f history.Failure) (n Message, ok bool, err error) {
	if m.Kind != history.KindExecutionStarted {
		return Message{}, false, nil
	}
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return Message{}, false, nil
	}
	p := a.(*history.ExecutionStarted).Parent
	if p == nil || p.InstanceID == "" || p.ExecutionID == "" || p.ScheduledSeq <= 0 {
		return Message{}, false, nil
	}
	n, err = NewMessage(SubWorkflowResultID(p.InstanceID, p.ExecutionID, p.ScheduledSeq), p.InstanceID, p.ExecutionID,
		history.SeqCorrelation(p.ScheduledSeq), &history.SubWorkflowFailed{Failure: f})
	if err != nil {
		return Message{}, false, fmt.Errorf("tell parent %s of child %s: %w", p.InstanceID, m.InstanceID, err)
	}
	return n, true, nil
}

// DiscardedSubWorkflowResult returns the message a store enqueues when an
// operator discards the dead letter of a message another workflow waits
// on: a child's start message (the child never ran, so its parent's
// sub-workflow fails for good with [FailureDeadLetterDiscarded] instead
// of waiting forever, as [DiscardedActivityResult] does for an activity),
// or a signal a workflow sent (its SignalSent fails the same way; see
// [SignalNeverDelivered]). ok is false, with no error, when the dead
// letter holds neither (or a message that does not decode): discarding it
// tells nobody anything.
func DiscardedSubWorkflowResult(l *DeadLetter, by string) (m Message, ok bool, err error) {
	if l.Message == nil {
		return Message{}, false, nil
	}
	f := history.Failure{
		Message: fmt.Sprintf("start of sub-workflow instance %s: dead letter discarded by %s (%s: %s)",
			l.Message.InstanceID, by, l.Reason, l.Error),
		Type:         FailureDeadLetterDiscarded,
		NonRetryable: true,
	}
	m, ok, err = ChildNeverRan(l.Message, f)
	if err == nil && !ok {
		f.Message = fmt.Sprintf("signal to instance %s: dead letter discarded by %s (%s: %s)", l.Message.InstanceID, by, l.Reason, l.Error)
		m, ok, err = SignalNeverDelivered(l.Message, f)
	}
	if err != nil {
		return Message{}, false, fmt.Errorf("discard dead letter %s: %w", l.ID, err)
	}
	return m, ok, nil
}

// SignalResultID derives the id of the message that tells a workflow the
// outcome of the signal it sent at seq (SignalDelivered or SignalFailed):
// one id per signal, so the sender is told at most once while it is
// queued.
func SignalResultID(senderID, senderExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(senderID, senderExecutionID), seq, "signal-result")
}

// SignalNeverDelivered returns the SignalFailed message, failing with f,
// that tells the workflow that sent the signal m that it was not
// delivered, and true; ok is false, with no error, when m is not a signal
// a workflow sent (or does not decode).
func SignalNeverDelivered(m *Message, f history.Failure) (n Message, ok bool, err error) {
	if m.Kind != history.KindEventRaised {
		return Message{}, false, nil
	}
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return Message{}, false, nil
	}
	src := a.(*history.EventRaised).Source
	if src == nil || src.InstanceID == "" || src.ExecutionID == "" || src.Seq <= 0 {
		return Message{}, false, nil
	}
	n, err = NewMessage(SignalResultID(src.InstanceID, src.ExecutionID, src.Seq), src.InstanceID, src.ExecutionID,
		history.SeqCorrelation(src.Seq), &history.SignalFailed{Failure: f})
	if err != nil {
		return Message{}, false, fmt.Errorf("tell sender %s of its signal to %s: %w", src.InstanceID, m.InstanceID, err)
	}
	return n, true, nil
}
