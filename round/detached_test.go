package round_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// TestDetachedStart: a detached SubWorkflowScheduled leaves nothing
// pending and derives a start message without a parent link, with the
// start's options, Once, the starter as its actor, and visible since its
// due time when that is earlier than the round's; the target's snapshot
// drops a start-once to an id that has an execution, whether it runs or
// ended, and accepts it for a new id.
func TestDetachedStart(t *testing.T) {
	t.Parallel()
	events := attrEvents(t, &history.ExecutionStarted{Name: "schedule"}, &history.TurnStarted{})
	snap, err := round.Fold("i", events)
	require.NoError(t, err)

	due := t0.Add(-30 * time.Second)
	for _, c := range []struct {
		due, visible time.Time
	}{{due, due}, {t0.Add(time.Minute), time.Time{}}, {time.Time{}, time.Time{}}} {
		s := snap.Clone()
		payload, err := history.EncodeAttributes(&history.SubWorkflowScheduled{
			Name: "job", InstanceID: "job-1", ExecutionID: "x-1", Detached: true, Due: c.due,
			Priority: 4, Concurrency: &history.Concurrency{Key: "k", Limit: 2}, Tags: map[string]string{"t": "v"},
		})
		require.NoError(t, err)
		e := history.Event{Seq: s.LastSeq + 1, InstanceID: "i", ExecutionID: s.ExecutionID, Kind: history.KindSubWorkflowScheduled, Payload: payload, At: t0}
		history.Seal(s.LastHash, []history.Event{e})
		w := &round.Work{}
		require.NoError(t, s.Apply(&e, w))
		require.Empty(t, s.SubWorkflows, "a detached start is not pending")
		require.False(t, s.Pending())
		require.Len(t, w.Messages, 1)
		m := w.Messages[0]
		require.Equal(t, "job-1", m.InstanceID)
		require.Equal(t, "x-1", m.ExecutionID)
		require.Equal(t, "workflow:i", m.Actor)
		require.Equal(t, 4, m.Priority)
		require.True(t, m.VisibleAt.Equal(c.visible), "due %s: visible at %s, want %s", c.due, m.VisibleAt, c.visible)
		a, err := history.DecodeAttributes(m.Kind, m.Payload)
		require.NoError(t, err)
		start := a.(*history.ExecutionStarted)
		require.True(t, start.Once)
		require.Nil(t, start.Parent)
		require.Equal(t, &history.Concurrency{Key: "k", Limit: 2}, start.Concurrency)
		require.Equal(t, "v", start.Tags["t"])

		// The target: new, running under another execution, ended.
		v, _, _ := round.NewSnapshot("job-1").Classify(&m)
		require.Equal(t, round.Accept, v)
		running, err := round.Fold("job-1", retarget(attrEvents(t, &history.ExecutionStarted{Name: "job"}), "job-1"))
		require.NoError(t, err)
		v, _, _ = running.Classify(&m)
		require.Equal(t, round.Stale, v, "running under another execution")
		ended, err := round.Fold("job-1", retarget(attrEvents(t, &history.ExecutionStarted{Name: "job"}, &history.ExecutionCompleted{}), "job-1"))
		require.NoError(t, err)
		v, _, _ = ended.Classify(&m)
		require.Equal(t, round.Stale, v, "ended")
		// A start without Once to the ended id starts its next execution.
		plain := m
		plain.Payload, err = history.EncodeAttributes(&history.ExecutionStarted{Name: "job"})
		require.NoError(t, err)
		v, _, _ = ended.Classify(&plain)
		require.Equal(t, round.Accept, v)
	}
}

// retarget moves events built for instance "i" to id.
func retarget(events []history.Event, id string) []history.Event {
	for i := range events {
		events[i].InstanceID = id
	}
	history.Seal(nil, events)
	return events
}
