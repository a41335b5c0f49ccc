package providertest

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// Factory returns a fresh, empty store for one test; it registers its own
// clean-up with t.Cleanup. It is called once per case, from the case's own
// goroutine, possibly for many cases at once.
type Factory func(t *testing.T) provider.Store

// Exercise runs the whole conformance suite against stores made by factory.
// Stores are either transactional (Mode is [provider.ModeTransactional] and
// they implement [provider.TxStore]) or peek-lock ([provider.ModePeekLock],
// implementing [provider.LeaseStore]); the suite runs the cases of the store's
// mode and every shared one. Cases are parallel subtests, each with its own
// store.
func Exercise(t *testing.T, factory Factory) {
	t.Helper()
	require.NotNil(t, factory, "providertest: nil factory")
	probe := setup(t, factory)

	t.Run("Queue", func(t *testing.T) { t.Parallel(); testQueue(t, factory) })
	t.Run("History", func(t *testing.T) { t.Parallel(); testHistory(t, factory) })
	t.Run("Projections", func(t *testing.T) { t.Parallel(); testProjections(t, factory) })
	t.Run("Activities", func(t *testing.T) { t.Parallel(); testActivities(t, factory) })
	t.Run("DeadLetters", func(t *testing.T) { t.Parallel(); testDeadLetters(t, factory) })
	t.Run("AbandonMessages", func(t *testing.T) { t.Parallel(); testAbandonMessages(t, factory) })
	t.Run("Locking", func(t *testing.T) { t.Parallel(); testLocking(t, factory) })
	t.Run("NotFound", func(t *testing.T) { t.Parallel(); testNotFound(t, factory) })
	t.Run("Queries", func(t *testing.T) { t.Parallel(); testQueries(t, factory) })
	t.Run("Purge", func(t *testing.T) { t.Parallel(); testPurge(t, factory) })
	t.Run("Holds", func(t *testing.T) { t.Parallel(); testHolds(t, factory) })
	t.Run("Search", func(t *testing.T) { t.Parallel(); testSearch(t, factory) })
	t.Run("ListQueuedActivities", func(t *testing.T) { t.Parallel(); testListQueuedActivities(t, factory) })
	t.Run("DiscardActivity", func(t *testing.T) { t.Parallel(); testDiscardActivity(t, factory) })
	t.Run("DiscardChildStart", func(t *testing.T) { t.Parallel(); testDiscardChildStart(t, factory) })
	t.Run("DiscardSignal", func(t *testing.T) { t.Parallel(); testDiscardSignal(t, factory) })
	t.Run("ActivityExpiry", func(t *testing.T) { t.Parallel(); testActivityExpiry(t, factory) })
	t.Run("Checkpoints", func(t *testing.T) { t.Parallel(); testCheckpoints(t, factory) })
	t.Run("EnqueueStart", func(t *testing.T) { t.Parallel(); testEnqueueStart(t, factory) })
	t.Run("ConcurrentActivities", func(t *testing.T) { t.Parallel(); testConcurrentActivities(t, factory) })
	t.Run("Priority", func(t *testing.T) { t.Parallel(); testPriority(t, factory) })
	t.Run("ActivityLimits", func(t *testing.T) { t.Parallel(); testActivityLimits(t, factory) })
	t.Run("Slots", func(t *testing.T) { t.Parallel(); testSlots(t, factory) })
	switch probe.store.Mode() {
	case provider.ModeTransactional:
		t.Run("Transactional", func(t *testing.T) { t.Parallel(); testTransactional(t, factory) })
		t.Run("AbandonInRound", func(t *testing.T) { t.Parallel(); testAbandonInRound(t, factory) })
		t.Run("TxFlusher", func(t *testing.T) { t.Parallel(); testTxFlusher(t, factory) })
		t.Run("ActivityTx", func(t *testing.T) { t.Parallel(); testActivityTx(t, factory) })
	case provider.ModePeekLock:
		t.Run("PeekLock", func(t *testing.T) { t.Parallel(); testPeekLock(t, factory) })
	}
	if p, ok := probe.store.(provider.Partitioned); ok && p.Partitions() > 1 {
		t.Run("Partitions", func(t *testing.T) { t.Parallel(); testPartitions(t, factory) })
	}
	if _, ok := probe.store.(provider.Notifier); ok {
		t.Run("WorkHint", func(t *testing.T) { t.Parallel(); testWorkHint(t, factory) })
	}
}
