package round_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// signalEvents is the history of an instance that sends a signal to rcv
// at seq 3.
func signalEvents(t *testing.T, more ...history.Attributes) []history.Event {
	t.Helper()
	attrs := append([]history.Attributes{
		&history.ExecutionStarted{Name: "w"},
		&history.TurnStarted{},
		&history.SignalSent{InstanceID: "rcv", Name: "go", IdempotencyKey: round.SignalKey("snd", "exec-1", 3)},
	}, more...)
	events := make([]history.Event, len(attrs))
	for i, a := range attrs {
		payload, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		e := history.Event{Seq: int64(i + 1), InstanceID: "snd", ExecutionID: "exec-1", Kind: a.EventKind(), Payload: payload, At: t0}
		switch a.EventKind() {
		case history.KindExecutionStarted, history.KindExecutionCompleted:
			e.CorrelationID = "exec-1"
		case history.KindSignalDelivered, history.KindSignalFailed:
			e.CorrelationID = "3"
		}
		events[i] = e
	}
	return events
}

// TestSnapshotSignalsSent: a signal sent is pending until its outcome, is
// stored with the snapshot (a cold round resends from it), and outlives
// the end of its execution, whose late outcome is stale.
func TestSnapshotSignalsSent(t *testing.T) {
	t.Parallel()
	snap, err := round.Fold("snd", signalEvents(t))
	require.NoError(t, err)
	require.Equal(t, map[int64]string{3: "rcv"}, snap.Signals)
	require.True(t, snap.Pending())

	data, err := round.MarshalSnapshot(snap)
	require.NoError(t, err)
	back, err := round.UnmarshalSnapshot(data)
	require.NoError(t, err)
	require.Equal(t, snap.Signals, back.Signals, "stored snapshots keep the signals sent")

	outcome, err := provider.NewMessage(provider.SignalResultID("snd", "exec-1", 3), "snd", "exec-1", "3", &history.SignalDelivered{ExecutionID: "r-1"})
	require.NoError(t, err)
	verdict, _, _ := snap.Classify(&outcome)
	require.Equal(t, round.Accept, verdict)

	delivered, err := round.Fold("snd", signalEvents(t, &history.SignalDelivered{ExecutionID: "r-1"}))
	require.NoError(t, err)
	require.Empty(t, delivered.Signals)
	verdict, _, _ = delivered.Classify(&outcome)
	require.Equal(t, round.Stale, verdict, "a second outcome is stale")

	ended, err := round.Fold("snd", signalEvents(t, &history.TurnStarted{}, &history.ExecutionCompleted{}))
	require.NoError(t, err)
	require.Equal(t, map[int64]string{3: "rcv"}, ended.Signals, "an ended execution keeps its signals without an outcome")
	require.False(t, ended.Pending())
	verdict, _, _ = ended.Classify(&outcome)
	require.Equal(t, round.Stale, verdict)

	gone := round.NewSnapshot("snd")
	verdict, _, _ = gone.Classify(&outcome)
	require.Equal(t, round.Stale, verdict, "the outcome for a purged sender is stale, not an orphan")

	_, err = round.Fold("snd", signalEvents(t, &history.SignalDelivered{}, &history.SignalFailed{}))
	require.Error(t, err, "a second outcome in history breaks the log")
}

// TestOpenWorkResendsSignals: a cold peek-lock round's repair sends a
// signal without an outcome again, under the resend id, also after the
// execution ended.
func TestOpenWorkResendsSignals(t *testing.T) {
	t.Parallel()
	for _, events := range [][]history.Event{signalEvents(t), signalEvents(t, &history.TurnStarted{}, &history.ExecutionCompleted{})} {
		snap, err := round.Fold("snd", events)
		require.NoError(t, err)
		w, err := snap.OpenWork(events)
		require.NoError(t, err)
		require.Len(t, w.Messages, 1)
		m := w.Messages[0]
		require.Equal(t, round.SignalResendID("snd", "exec-1", 3), m.ID)
		require.Equal(t, "rcv", m.InstanceID)
		require.Equal(t, history.WorkflowActor("snd"), m.Actor)
		require.Equal(t, round.SignalKey("snd", "exec-1", 3), m.CorrelationID)
		a, err := history.DecodeAttributes(m.Kind, m.Payload)
		require.NoError(t, err)
		require.Equal(t, &history.SignalSource{InstanceID: "snd", ExecutionID: "exec-1", Seq: 3}, a.(*history.EventRaised).Source)
	}
}
