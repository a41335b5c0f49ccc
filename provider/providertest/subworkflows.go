package providertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// testDiscardChildStart: discarding the dead letter of a child's start
// message fails the parent's sub-workflow, in the same step, so the parent
// does not wait forever for a child that never ran; discarding any other
// start tells nobody anything.
func testDiscardChildStart(t *testing.T, factory Factory) {
	childStart := func(t *testing.T, id, childID string, parent *history.ParentRef) provider.Message {
		t.Helper()
		exec := round.ChildExecutionID(parent.InstanceID, parent.ExecutionID, parent.ScheduledSeq)
		m, err := provider.NewMessage(id, childID, exec, exec, &history.ExecutionStarted{Name: "review", Parent: parent})
		require.NoError(t, err)
		return m
	}

	t.Run("DiscardedChildStartFailsTheParent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		parent := &history.ParentRef{InstanceID: "parent-1", ExecutionID: execID, ScheduledSeq: 5}
		start := childStart(t, round.ChildStartMessageID("parent-1", execID, 5), "child-1", parent)
		b.enqueue(t, base, start)
		dead := b.deadLetter(t, at(time.Second), "child-1", []string{start.ID}, provider.ReasonUnknownWorkflow, `no workflow named "review"`)
		require.Len(t, dead, 1)
		require.Empty(t, b.drain(t, at(time.Hour)), "dead-lettering the start told someone")

		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		require.Equal(t, provider.DeadLetterDiscarded, b.getLetter(t, dead[0].ID).Status)
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "parent-1"})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the parent was not told")
		m := msgs[0]
		require.Equal(t, provider.SubWorkflowResultID("parent-1", execID, 5), m.ID)
		require.Equal(t, history.KindSubWorkflowFailed, m.Kind)
		require.Equal(t, execID, m.ExecutionID)
		require.Equal(t, history.SeqCorrelation(5), m.CorrelationID)
		a, err := history.DecodeAttributes(m.Kind, m.Payload)
		require.NoError(t, err)
		f := a.(*history.SubWorkflowFailed).Failure
		require.Equal(t, round.FailureDeadLetterDiscarded, f.Type)
		require.True(t, f.NonRetryable)
		require.Contains(t, f.Message, "child-1")
		require.Contains(t, f.Message, "discarded by user:ops")
		require.Equal(t, []string{m.ID}, messageIDs(b.drain(t, at(time.Hour))), "the start was queued again")
	})

	t.Run("DiscardedStartWithoutParentTellsNobody", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m, err := provider.NewMessage("start-1", "inst-a", "exec-a", "exec-a", &history.ExecutionStarted{Name: "review"})
		require.NoError(t, err)
		b.enqueue(t, base, m)
		dead := b.deadLetter(t, at(time.Second), "inst-a", []string{m.ID}, provider.ReasonUnknownWorkflow, `no workflow named "review"`)
		require.Len(t, dead, 1)
		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		require.Empty(t, b.drain(t, at(time.Hour)))
	})
}

// testDiscardSignal: discarding the dead letter of a signal another
// workflow sent fails that workflow's SignalSent, in the same step, so the
// sender does not wait forever for an outcome; a client's signal tells
// nobody anything.
func testDiscardSignal(t *testing.T, factory Factory) {
	t.Run("DiscardedSignalFailsTheSender", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		key := round.SignalKey("sender-1", execID, 4)
		sig, err := provider.NewMessage(round.SignalMessageID("sender-1", execID, 4), "inst-b", "", key, &history.EventRaised{
			Name: "go", IdempotencyKey: key, Sender: "sender-1",
			Source: &history.SignalSource{InstanceID: "sender-1", ExecutionID: execID, Seq: 4},
		})
		require.NoError(t, err)
		sig.Actor = history.WorkflowActor("sender-1")
		b.enqueue(t, base, sig)
		dead := b.deadLetter(t, at(time.Second), "inst-b", []string{sig.ID}, provider.ReasonPanic, "workflow panicked")
		require.Len(t, dead, 1)
		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "sender-1"})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the sender was not told")
		m := msgs[0]
		require.Equal(t, provider.SignalResultID("sender-1", execID, 4), m.ID)
		require.Equal(t, history.KindSignalFailed, m.Kind)
		require.Equal(t, execID, m.ExecutionID)
		require.Equal(t, history.SeqCorrelation(4), m.CorrelationID)
		a, err := history.DecodeAttributes(m.Kind, m.Payload)
		require.NoError(t, err)
		f := a.(*history.SignalFailed).Failure
		require.Equal(t, round.FailureDeadLetterDiscarded, f.Type)
		require.Contains(t, f.Message, "inst-b")
		require.Contains(t, f.Message, "discarded by user:ops")
	})

	t.Run("DiscardedClientSignalTellsNobody", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m, err := provider.NewMessage("signal-1", "inst-a", "", "k-1", &history.EventRaised{Name: "go", IdempotencyKey: "k-1"})
		require.NoError(t, err)
		b.enqueue(t, base, m)
		dead := b.deadLetter(t, at(time.Second), "inst-a", []string{m.ID}, provider.ReasonNotStarted, "instance inst-a has not been started")
		require.Len(t, dead, 1)
		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		require.Empty(t, b.drain(t, at(time.Hour)))
	})
}
