package providertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testEnqueueStart covers provider.InstanceStarter: a start of an instance
// the store knows nothing of is enqueued, once; one of an instance it knows
// in any form writes nothing.
func testEnqueueStart(t *testing.T, factory Factory) {
	start := func(t *testing.T, id, instanceID string) provider.Message {
		t.Helper()
		m, err := provider.NewMessage(id, instanceID, "exec-"+id, "exec-"+id, &history.ExecutionStarted{Name: "wf", Input: []byte("input")})
		require.NoError(t, err)
		m.Actor = history.UserActor("alice")
		return m
	}
	enqueueStart := func(t *testing.T, s provider.InstanceStarter, m provider.Message) bool {
		t.Helper()
		created, err := s.EnqueueStart(t.Context(), &provider.EnqueueStartParams{InstanceID: m.InstanceID, Messages: []provider.Message{m}, Now: base})
		require.NoError(t, err)
		return created
	}

	t.Run("NewInstanceIsStartedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		s := capability[provider.InstanceStarter](t, b.store, "provider.InstanceStarter")
		first := start(t, "start-1", "inst-a")
		require.True(t, enqueueStart(t, s, first), "the start of a new instance was not enqueued")
		require.False(t, enqueueStart(t, s, start(t, "start-2", "inst-a")), "a second start of a queued instance was enqueued")
		require.Equal(t, []provider.Message{queued(first, base)}, b.drain(t, at(1)))
		require.False(t, enqueueStart(t, s, start(t, "start-3", "inst-a")), "a start of an instance whose messages were acked was enqueued")
		require.Empty(t, b.drain(t, at(2)))
	})

	t.Run("InstanceWithQueuedMessagesIsKnown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		s := capability[provider.InstanceStarter](t, b.store, "provider.InstanceStarter")
		sig := signal(t, "m-1", "inst-a")
		b.enqueue(t, base, sig)
		require.False(t, enqueueStart(t, s, start(t, "start-1", "inst-a")), "a start of an instance with a queued message was enqueued")
		require.Equal(t, []provider.Message{queued(sig, base)}, b.drain(t, at(1)))
	})

	t.Run("OtherInstancesMessagesAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		s := capability[provider.InstanceStarter](t, b.store, "provider.InstanceStarter")
		_, err := s.EnqueueStart(t.Context(), &provider.EnqueueStartParams{
			InstanceID: "inst-a", Messages: []provider.Message{start(t, "start-1", "inst-b")}, Now: base,
		})
		require.Error(t, err)
		require.Empty(t, b.drain(t, at(1)))
	})

	t.Run("ConcurrentStartsEnqueueOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		s := capability[provider.InstanceStarter](t, b.store, "provider.InstanceStarter")
		const n = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			errs    []error
		)
		for i := range n {
			wg.Go(func() {
				m := start(t, fmt.Sprintf("start-%d", i), "inst-a")
				ok, err := s.EnqueueStart(context.WithoutCancel(t.Context()), &provider.EnqueueStartParams{InstanceID: "inst-a", Messages: []provider.Message{m}, Now: base})
				mu.Lock()
				defer mu.Unlock()
				if ok {
					created++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		require.Empty(t, errs)
		require.Equal(t, 1, created, "concurrent starts of one new instance")
		require.Len(t, b.drain(t, at(1)), 1)
	})
}
