package round

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Failure types a sender sees in the SignalFailed of a signal it sent with
// Context.SignalWorkflow.
const (
	// FailureSignalTargetNotFound: no instance has the receiver's id (it
	// was never started, or was purged).
	FailureSignalTargetNotFound = "SignalTargetNotFound"
	// FailureSignalTargetEnded: the receiver's execution had ended when
	// the signal reached it.
	FailureSignalTargetEnded = "SignalTargetEnded"
)

// SignalKey derives the idempotency key of the signal a workflow sends at
// seq: the receiver records at most one signal per key, so a sender whose
// round is replayed or redone after a crash never sends twice.
func SignalKey(senderID, senderExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(senderID, senderExecutionID), seq, "signal")
}

// SignalMessageID derives the id of the message that carries the signal a
// workflow sends at seq to its receiver.
func SignalMessageID(senderID, senderExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(senderID, senderExecutionID), seq, "signal-send")
}

// SignalResendID derives the id under which a cold peek-lock round sends
// again a signal whose outcome its history does not hold yet. It differs
// from [SignalMessageID] so that the receiver knows to look for the signal
// in its earlier executions before it records it.
func SignalResendID(senderID, senderExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(senderID, senderExecutionID), seq, "signal-resend")
}

// SignalResultID derives the id of the message that tells a sender the
// outcome of the signal it sent at seq (SignalDelivered or SignalFailed):
// one id per signal, so the sender is told at most once while it is
// queued.
func SignalResultID(senderID, senderExecutionID string, seq int64) string {
	return provider.SignalResultID(senderID, senderExecutionID, seq)
}

// signalMessage builds the message that carries the signal of the
// SignalSent at seq to its receiver: an EventRaised naming the sender as
// its source, actor and sender.
func (s *Snapshot) signalMessage(id string, seq int64, a *history.SignalSent) (provider.Message, error) {
	m, err := provider.NewMessage(id, a.InstanceID, "", a.IdempotencyKey, &history.EventRaised{
		Name: a.Name, Payload: a.Payload, IdempotencyKey: a.IdempotencyKey, Sender: s.InstanceID,
		Source: &history.SignalSource{InstanceID: s.InstanceID, ExecutionID: s.ExecutionID, Seq: seq},
	})
	if err != nil {
		return provider.Message{}, fmt.Errorf("signal %q to %s: %w", a.Name, a.InstanceID, err)
	}
	m.Actor = history.WorkflowActor(s.InstanceID)
	return m, nil
}

// signalResends returns the messages that send again every signal of the
// current execution whose outcome history does not hold (see
// [SignalResendID]); events must hold the current execution.
func (s *Snapshot) signalResends(events []history.Event) ([]provider.Message, error) {
	var out []provider.Message
	for i := range events {
		e := &events[i]
		if _, open := s.Signals[e.Seq]; !open || e.ExecutionID != s.ExecutionID || e.Kind != history.KindSignalSent {
			continue
		}
		a, err := e.Attributes()
		if err != nil {
			return nil, err
		}
		m, err := s.signalMessage(SignalResendID(s.InstanceID, s.ExecutionID, e.Seq), e.Seq, a.(*history.SignalSent))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// signalOutcome builds the message that tells the sender named by src the
// outcome of its signal.
func signalOutcome(src *history.SignalSource, attrs history.Attributes) (provider.Message, error) {
	m, err := provider.NewMessage(SignalResultID(src.InstanceID, src.ExecutionID, src.Seq), src.InstanceID, src.ExecutionID,
		history.SeqCorrelation(src.Seq), attrs)
	if err != nil {
		return provider.Message{}, fmt.Errorf("tell sender %s of its signal at seq %d: %w", src.InstanceID, src.Seq, err)
	}
	return m, nil
}

// tellSignal adds to the round's work the message that tells the sender
// named by src the outcome of its signal. Only a signal's message derives
// it, never its EventRaised: a continue-as-new records the signals the
// old execution had not consumed again, and their senders were told.
func (rs *roundState) tellSignal(src *history.SignalSource, attrs history.Attributes) error {
	n, err := signalOutcome(src, attrs)
	if err != nil {
		return err
	}
	rs.work.Messages = append(rs.work.Messages, n)
	return nil
}

// signalSource returns the source of m when m is a signal another workflow
// sent, or nil. Only such messages carry a workflow actor: a client's
// actor is a user's.
func signalSource(m *provider.Message) *history.SignalSource {
	if m.Kind != history.KindEventRaised || !strings.HasPrefix(m.Actor, history.ActorWorkflowPrefix) {
		return nil
	}
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return nil
	}
	src := a.(*history.EventRaised).Source
	if src == nil || src.InstanceID == "" || src.ExecutionID == "" || src.Seq <= 0 {
		return nil
	}
	return src
}

// classifySignal judges a signal another workflow sent (its source is src)
// where the outcome matters to the sender, and reports whether it handled
// m: a signal to an instance that does not exist or whose execution has
// ended is acked and its sender told it failed; a duplicate is acked and
// its sender told again that it was delivered (the first notice may have
// been lost in a crash between a peek-lock round's append and its
// enqueue), unless it is a fresh resend. A redelivery pinned to an earlier execution, or a resend (see
// [SignalResendID]) to an instance with earlier executions, is looked up
// in history first. Anything else goes to [Snapshot.Classify]; once
// accepted, the round tells the sender it was delivered.
func (r *Runner) classifySignal(ctx context.Context, rs *roundState, m *provider.Message, src *history.SignalSource) (bool, error) {
	snap, rep := rs.snap, rs.rep
	tell := func(attrs history.Attributes) (bool, error) {
		if err := rs.tellSignal(src, attrs); err != nil {
			return false, err
		}
		rs.acks = append(rs.acks, m.ID)
		return true, nil
	}
	ended := func(exec string) (bool, error) {
		rep.Stale++
		return tell(&history.SignalFailed{Failure: history.Failure{
			Message:      fmt.Sprintf("instance %s: execution %s has ended; the signal %s was not delivered", snap.InstanceID, exec, m.CorrelationID),
			Type:         FailureSignalTargetEnded,
			NonRetryable: true,
		}})
	}
	key, _ := seenKey(m.Kind, m.CorrelationID)
	pinnedEarlier := m.ExecutionID != "" && m.ExecutionID != snap.ExecutionID
	resend := m.ID == SignalResendID(src.InstanceID, src.ExecutionID, src.Seq)
	duplicate := func(exec string) (bool, error) {
		rep.Duplicates++
		if resend && m.ExecutionID == "" {
			// A fresh copy of a signal another message recorded: that
			// message's round queued the notice before its ack, or will
			// when it is delivered again. Answering the copy would wake an
			// ended sender, whose cold round would send it again.
			rs.acks = append(rs.acks, m.ID)
			return true, nil
		}
		return tell(&history.SignalDelivered{ExecutionID: exec})
	}
	switch {
	case !snap.Started():
		rep.Refused++
		return tell(&history.SignalFailed{Failure: history.Failure{
			Message:      fmt.Sprintf("instance %s not found; the signal %s was not delivered", snap.InstanceID, m.CorrelationID),
			Type:         FailureSignalTargetNotFound,
			NonRetryable: true,
		}})
	case !pinnedEarlier && snap.Seen[key]:
		return duplicate(snap.ExecutionID)
	case pinnedEarlier || (resend && len(snap.Executions) > 1):
		events, err := rs.since(ctx, 1)
		if err != nil {
			return false, err
		}
		for i := range events {
			e := &events[i]
			if e.Kind == history.KindEventRaised && e.CorrelationID == m.CorrelationID && (!pinnedEarlier || e.ExecutionID == m.ExecutionID) {
				return duplicate(e.ExecutionID)
			}
		}
		if pinnedEarlier {
			return ended(m.ExecutionID)
		}
	}
	if snap.Ended {
		return ended(snap.ExecutionID)
	}
	return false, nil
}

// dropNeedlessResends removes from work the resends of signals whose
// outcome (or resend) is in the round's batch, and of those the round
// sent itself (their first message is in its work already). An outcome
// in the batch means the receiver handled the signal; a resend in the
// batch, that the instance sent it to itself. Without this, an ended
// execution (whose outcomes are stale and never recorded) would resend
// on every cold round that such a message wakes, for ever.
func (rs *roundState) dropNeedlessResends(w *Work) {
	needless := map[string]bool{}
	for i := range rs.appended {
		if e := &rs.appended[i]; e.Kind == history.KindSignalSent {
			needless[SignalResendID(rs.id, e.ExecutionID, e.Seq)] = true
		}
	}
	for i := range rs.msgs {
		m := &rs.msgs[i]
		switch {
		case m.Kind.Class() == history.ClassSignal && m.InstanceID == rs.id:
			seq, err := history.ParseSeqCorrelation(m.CorrelationID)
			if err == nil && m.ExecutionID != "" {
				needless[SignalResendID(rs.id, m.ExecutionID, seq)] = true
			}
		case m.Kind == history.KindEventRaised:
			needless[m.ID] = true
		}
	}
	if len(needless) > 0 {
		w.Messages = slices.DeleteFunc(w.Messages, func(m provider.Message) bool { return needless[m.ID] })
	}
}
