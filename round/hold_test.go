package round_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// holdEvents is the history of an ended instance followed by more.
func holdEvents(t *testing.T, more ...history.Attributes) []history.Event {
	t.Helper()
	attrs := append([]history.Attributes{&history.ExecutionStarted{Name: "w"}, &history.TurnStarted{}, &history.ExecutionCompleted{}}, more...)
	events := make([]history.Event, len(attrs))
	for i, a := range attrs {
		payload, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		e := history.Event{Seq: int64(i + 1), InstanceID: "i", ExecutionID: "exec-1", Kind: a.EventKind(), Payload: payload, At: t0}
		switch a := a.(type) {
		case *history.ExecutionStarted, *history.ExecutionCompleted:
			e.CorrelationID = "exec-1"
		case *history.HoldPlaced:
			e.CorrelationID = "hold:" + a.HoldID
		case *history.HoldReleased:
			e.CorrelationID = "release:" + a.HoldID
		}
		events[i] = e
	}
	history.Seal(nil, events)
	return events
}

// TestHoldRecordsFollowTheEnd: a legal hold's records are accepted after
// the end of the execution, where a signal is stale, once per hold; they
// change nothing of the execution's state, and no instance that has not
// started takes one.
func TestHoldRecordsFollowTheEnd(t *testing.T) {
	t.Parallel()
	ended, err := round.Fold("i", holdEvents(t))
	require.NoError(t, err)
	placed, err := provider.NewMessage("hold:h-1@i", "i", "", "hold:h-1", &history.HoldPlaced{HoldID: "h-1", Reason: "r"})
	require.NoError(t, err)
	signal, err := provider.NewMessage("s-1", "i", "", "s-1", &history.EventRaised{Name: "go"})
	require.NoError(t, err)
	verdict, _, _ := ended.Classify(&signal)
	require.Equal(t, round.Stale, verdict, "a signal to an ended instance is stale")
	verdict, _, _ = ended.Classify(&placed)
	require.Equal(t, round.Accept, verdict, "a hold's record follows the end")

	held, err := round.Fold("i", holdEvents(t, &history.HoldPlaced{HoldID: "h-1"}))
	require.NoError(t, err, "a hold's record may follow the end in history")
	require.Equal(t, provider.StatusCompleted, held.Status)
	require.True(t, held.Ended)
	verdict, _, _ = held.Classify(&placed)
	require.Equal(t, round.Duplicate, verdict, "recorded once per hold")
	released, err := provider.NewMessage("release:h-1@i", "i", "", "release:h-1", &history.HoldReleased{HoldID: "h-1"})
	require.NoError(t, err)
	verdict, _, _ = held.Classify(&released)
	require.Equal(t, round.Accept, verdict)

	verdict, reason, _ := round.NewSnapshot("i").Classify(&placed)
	require.Equal(t, round.Reject, verdict)
	require.Equal(t, provider.ReasonNotStarted, reason)

	_, err = round.Fold("i", holdEvents(t, &history.HoldPlaced{HoldID: "h-1"}, &history.HoldPlaced{HoldID: "h-1"}))
	require.Error(t, err, "a second record of one hold breaks the log")
	_, err = round.PlanRerun(holdEvents(t, &history.HoldPlaced{HoldID: "h-1"}), 4, nil)
	require.ErrorIs(t, err, round.ErrCannotRerun, "a hold's record is no point to rerun from")
}
