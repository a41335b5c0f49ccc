package providertest

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testWorkHint covers the wake-up hints of stores that implement
// [provider.Notifier]. Hints may be lost across processes, but a store that
// offers them must give them for work enqueued through itself.
func testWorkHint(t *testing.T, factory Factory) {
	notifier := func(t *testing.T, b *bundle) provider.Notifier {
		t.Helper()
		n, ok := b.store.(provider.Notifier)
		require.True(t, ok, "the store no longer implements provider.Notifier")
		return n
	}

	t.Run("EnqueuedMessageWakes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		hint := notifier(t, b).WorkHint(provider.QueueOrchestration)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		waitClosed(t, hint, "the orchestration hint after EnqueueMessages")
	})

	t.Run("EnqueuedTaskWakes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		hint := notifier(t, b).WorkHint(provider.QueueActivity)
		b.enqueueTasks(t, base, activity("inst-a", execID, 2, ""))
		waitClosed(t, hint, "the activity hint after EnqueueActivities")
	})

	t.Run("CompletedTaskWakesOrchestration", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueueTasks(t, base, activity("inst-a", execID, 2, ""))
		l := b.claim(t, base)
		require.NotNil(t, l)
		hint := notifier(t, b).WorkHint(provider.QueueOrchestration)
		b.complete(t, l, at(time.Second))
		waitClosed(t, hint, "the orchestration hint after CompleteActivity")
	})
}
