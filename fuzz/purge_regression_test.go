package fuzz_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// Reproductions of purge and id-reuse bugs that the rapid machines found.

// TestRegressionMongoTombstoneOfAReusedIDPurgedAtTheSameInstant:
// TestRapidWorkflowsMongo with -rapid.seed=1795632276455938587 purged an
// instance (the purge crashed half-way and was finished), started its id
// again, ran the new run to the same last seq (6) and purged it at the
// same clock reading: the stored tombstone's LastHash was the first
// purge's, not the one the second purge returned. The MongoDB provider
// keyed a tombstone by (instance, purged at, last seq), so the second
// purge's insert met the first's document and was taken for a resumed
// purge's. The clock of the machine does not move between the purges;
// neither does it here.
func TestRegressionMongoTombstoneOfAReusedIDPurgedAtTheSameInstant(t *testing.T) {
	store := mongotest.NewStore(t, chmongo.Options{})
	require.Equal(t, provider.ModePeekLock, store.Mode())
	clock := round.NewManualClock(t0)
	lookup := func(name string) (replay.WorkflowFunc, bool) { fn, ok := regWorkflows[name]; return fn, ok }
	runner, err := round.NewRunner(store, round.RunnerOptions{
		Node: "node", Turn: replay.New(replay.Options{Lookup: lookup}).Turn, Clock: nowOnly{clock}, LeaseDuration: leaseDuration,
	})
	require.NoError(t, err)
	t.Cleanup(runner.Forget)
	ctx := context.Background()
	enqueue := func(m provider.Message) {
		t.Helper()
		require.NoError(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: clock.Now()}))
	}
	roundOK := func() {
		t.Helper()
		rep, err := runner.RunOnce(ctx)
		require.NoError(t, err)
		require.NotNil(t, rep)
	}
	b := &regBundle{clock: clock}
	var purged []provider.Tombstone
	for i, exec := range []string{"exec-a", "exec-b"} {
		enqueue(b.start(t, "claim", exec, "waiter", 0))
		roundOK()
		enqueue(b.request(t, "signal-"+exec, "claim", "key-"+exec, &history.EventRaised{Name: "go", IdempotencyKey: "key-" + exec}))
		roundOK()
		events, err := store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "claim", FromSeq: 1})
		require.NoError(t, err)
		require.NotEmpty(t, events)
		require.Equal(t, exec, events[0].ExecutionID, "run %d", i)
		ts, err := store.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "claim", By: "rapid", Now: clock.Now()})
		require.NoError(t, err)
		last := events[len(events)-1]
		require.Equal(t, last.Seq, ts.LastSeq)
		require.Equal(t, last.Hash, ts.LastHash)
		got, err := store.GetTombstone(ctx, "claim")
		require.NoError(t, err)
		require.Equal(t, ts, got, "run %d: the stored tombstone is not the one the purge returned", i)
		runner.ForgetInstance("claim")
		purged = append(purged, *ts)
	}
	require.Equal(t, purged[0].LastSeq, purged[1].LastSeq, "both runs must end at one seq for the reproduction")
	all, err := store.ListTombstones(ctx, "claim")
	require.NoError(t, err)
	require.Equal(t, purged, all)
}

// TestRegressionContinuedExecutionOfAReusedIDIsItsOwn: the workflows
// machine's zombie across a purge found the execution that a run of a
// reused id continued as new into holding the id of the purged run's
// continued execution: the id derived from the instance id and the seq
// only, which both runs share when they continue at the same seq. Every
// message addressed to the purged run's execution (a late timer, a
// notice) would have been taken for the new run's.
func TestRegressionContinuedExecutionOfAReusedIDIsItsOwn(t *testing.T) {
	b := regSetup(t)
	ctx := context.Background()
	run := func(exec string) []history.Event {
		t.Helper()
		b.enqueue(t, b.start(t, "claim", exec, "relay", 0))
		b.round(t, b.n1)
		for _, key := range []string{"first-" + exec, "second-" + exec} {
			b.enqueue(t, b.request(t, "signal-"+key, "claim", key, &history.EventRaised{Name: "go", IdempotencyKey: key}))
			b.round(t, b.n1)
		}
		events := b.history(t, "claim")
		require.Equal(t, provider.StatusCompleted, b.snapshot(t, "claim").Status)
		return events
	}
	continued := func(events []history.Event) (string, int64) {
		t.Helper()
		for _, e := range events {
			if e.Kind == history.KindContinuedAsNew {
				a, err := e.Attributes()
				require.NoError(t, err)
				return a.(*history.ContinuedAsNew).NewExecutionID, e.Seq
			}
		}
		require.FailNow(t, "no execution continued as new")
		return "", 0
	}
	first := run("exec-a")
	_, err := b.store.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "claim", By: "ops", Now: b.clock.Now()})
	require.NoError(t, err)
	b.n1.runner.ForgetInstance("claim")
	second := run("exec-b")
	id1, seq1 := continued(first)
	id2, seq2 := continued(second)
	require.Equal(t, seq1, seq2, "both runs must continue at one seq for the reproduction")
	require.NotEqual(t, id1, id2, "the new run continued into the purged run's execution")
}
