package providertest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testHistory covers AppendHistory and LoadHistory: exact round trips,
// tails, and the conditions under which an append conflicts.
func testHistory(t *testing.T, factory Factory) {
	t.Run("AppendAndLoadRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		first := chain("inst-a", nil, startEvent(t, execID), markerEvent(t, "a"), markerEvent(t, "b"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", first))
		second := chain("inst-a", first, raisedEvent(t, "k1"), markerEvent(t, "c"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", second))
		all := slices.Concat(first, second)

		require.Equal(t, all, b.load(t, "inst-a", 1))
		require.Equal(t, all, b.load(t, "inst-a", 0), "FromSeq 0 loads from the start")
		require.Equal(t, all[2:], b.load(t, "inst-a", 3))
		require.Equal(t, all[4:], b.load(t, "inst-a", 5))
		require.Empty(t, b.load(t, "inst-a", 6))
		require.NoError(t, history.Verify(b.load(t, "inst-a", 1)))
	})

	t.Run("LogsAndKeysArePerInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		a := chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "k1"), markerEvent(t, "a"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", a))
		// The same execution id and idempotency keys in another instance.
		bEvents := chain("inst-b", nil, startEvent(t, execID), raisedEvent(t, "k1"))
		require.NoError(t, b.appendEvents(ctx, "inst-b", bEvents))

		require.Equal(t, a, b.load(t, "inst-a", 1))
		require.Equal(t, bEvents, b.load(t, "inst-b", 1))
		require.Empty(t, b.load(t, "inst-c", 1), "an unknown instance has an empty history")
	})

	t.Run("GapIsConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		gap := chainAt("inst-a", 2, nil, startEvent(t, execID))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", gap), provider.ErrConflict)
		require.Empty(t, b.load(t, "inst-a", 1))

		log := chain("inst-a", nil, startEvent(t, execID), markerEvent(t, "a"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))
		gap = chainAt("inst-a", 4, log[1].Hash, markerEvent(t, "b"), markerEvent(t, "c"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", gap), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1))
	})

	t.Run("RetriedAppendIsNoop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		log := chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "k1"), markerEvent(t, "a"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log), "re-appending the same sealed events")
		require.NoError(t, b.appendEvents(ctx, "inst-a", log[1:]), "re-appending the same sealed tail")
		require.Equal(t, log, b.load(t, "inst-a", 1))

		next := chain("inst-a", log, markerEvent(t, "b"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", next))
		require.Equal(t, slices.Concat(log, next), b.load(t, "inst-a", 1))
	})

	t.Run("DifferentEventAtOccupiedSeqIsConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		log := chain("inst-a", nil, startEvent(t, execID), markerEvent(t, "a"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))

		other := chain("inst-a", log[:1], markerEvent(t, "other"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", other), provider.ErrConflict)
		longer := chain("inst-a", log[:1], markerEvent(t, "other"), markerEvent(t, "more"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", longer), provider.ErrConflict)
		restart := chain("inst-a", nil, startEvent(t, "exec-other"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", restart), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1), "a conflicting append wrote something")
	})

	t.Run("UsedIdempotencyKeyIsConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		log := chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "k1"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))

		dup := chain("inst-a", log, raisedEvent(t, "k1"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", dup), provider.ErrConflict)
		// One key twice in one append: nothing of it is written.
		twice := chain("inst-a", log, markerEvent(t, "a"), raisedEvent(t, "k2"), raisedEvent(t, "k2"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", twice), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1), "a conflicting append wrote something")

		// Two kinds of one class exclude each other: a timer fires or is
		// cancelled, not both.
		fired := chain("inst-a", log, event(t, "", "7", &history.TimerFired{FireAt: at(7 * time.Second)}))
		require.NoError(t, b.appendEvents(ctx, "inst-a", fired))
		log = slices.Concat(log, fired)
		cancelled := chain("inst-a", log, event(t, "", "7", &history.TimerCancelled{}))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", cancelled), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1))
	})

	t.Run("KeysDifferByClassAndExecution", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		// The same correlation id in other classes, in kinds without a key,
		// and in a later execution, is not a duplicate.
		events := []history.Event{
			startEvent(t, execID),
			raisedEvent(t, "k1"),
			event(t, "", "k1", &history.TaskAssigned{TaskID: "task-1", Assignee: "bob"}),
			event(t, "", "k1", &history.MarkerRecorded{Marker: history.MarkerVersion, Name: "patch", Version: 2}),
			event(t, "", "k1", &history.MarkerRecorded{Marker: history.MarkerVersion, Name: "patch", Version: 3}),
			event(t, "", execID, &history.ContinuedAsNew{NewExecutionID: "exec-2"}),
			startEvent(t, "exec-2"),
			event(t, "exec-2", "k1", &history.EventRaised{Name: "approved", IdempotencyKey: "k1"}),
		}
		log := chain("inst-a", nil, events...)
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))
		require.Equal(t, log, b.load(t, "inst-a", 1))

		// But the key is used in exec-2 now.
		dup := chain("inst-a", log, event(t, "exec-2", "k1", &history.EventRaised{Name: "again", IdempotencyKey: "k1"}))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", dup), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1))
	})
}
