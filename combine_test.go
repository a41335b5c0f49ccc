package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// gatedStore holds its first EnqueueMessages until released, counts the
// calls, and refuses any write holding a message for instance "bad".
type gatedStore struct {
	*memory.Store
	entered, release chan struct{}
	calls            atomic.Int32
}

var errBad = errors.New("refused: a message for instance bad")

func (s *gatedStore) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	if s.calls.Add(1) == 1 {
		close(s.entered)
		<-s.release
	}
	for _, m := range p.Messages {
		if m.InstanceID == "bad" {
			return errBad
		}
	}
	return s.Store.EnqueueMessages(ctx, p)
}

// TestConcurrentClientCallsShareOneWrite: calls made while a write is in
// flight wait and go to the store together, in one write; a call whose
// message the store refuses fails alone.
func TestConcurrentClientCallsShareOneWrite(t *testing.T) {
	t.Parallel()
	store := &gatedStore{Store: memory.New(memory.Options{}), entered: make(chan struct{}), release: make(chan struct{})}
	b := setupOn(t, store)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ int) (int, error) { return 0, nil })
	first := make(chan error, 1)
	go func() {
		_, err := b.engine.Start(b.ctx, "wf", 0, &chronicle.StartOptions{InstanceID: "first"})
		first <- err
	}()
	<-store.entered
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for i := 0; i <= n; i++ {
		id := fmt.Sprintf("i%d", i)
		if i == n {
			id = "bad"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.engine.Start(b.ctx, "wf", 0, &chronicle.StartOptions{InstanceID: id})
		}()
	}
	for chronicle.PendingWrites(b.engine) < n+1 {
		runtime.Gosched() // the calls are queueing behind the gate
	}
	close(store.release)
	wg.Wait()
	require.NoError(t, <-first)
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i], "start %d", i)
	}
	require.ErrorIs(t, errs[n], errBad, "the refused call fails alone")
	// The gated write, one combined write (refused), then each call again.
	require.Equal(t, int32(1+1+n+1), store.calls.Load())
	for i := 0; i < n; i++ {
		inst, err := b.engine.Describe(b.ctx, fmt.Sprintf("i%d", i))
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusPending, inst.Status)
	}
}

func TestStartManyStartsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) { return n + 1, nil })
	reqs := make([]chronicle.StartRequest, 5)
	for i := range reqs {
		reqs[i] = chronicle.StartRequest{Workflow: "wf", Input: i}
	}
	reqs[4].Options = &chronicle.StartOptions{InstanceID: "named"}
	ids, err := b.engine.StartMany(b.ctx, reqs)
	require.NoError(t, err)
	require.Len(t, ids, 5)
	require.Equal(t, "named", ids[4])
	b.drain(t)
	for i, id := range ids {
		require.Equal(t, i+1, result[int](t, b, id))
	}

	// One bad request, and nothing starts.
	bad := []chronicle.StartRequest{{Workflow: "wf", Input: 0, Options: &chronicle.StartOptions{InstanceID: "x1"}}, {Workflow: "nope"}}
	_, err = b.engine.StartMany(b.ctx, bad)
	require.ErrorIs(t, err, chronicle.ErrUnknownWorkflow)
	require.ErrorContains(t, err, "start 1")
	_, err = b.engine.Describe(b.ctx, "x1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)

	// A taken id, or one named twice.
	_, err = b.engine.StartMany(b.ctx, []chronicle.StartRequest{{Workflow: "wf", Input: 0, Options: &chronicle.StartOptions{InstanceID: "x2"}}, {Workflow: "wf", Input: 0, Options: &chronicle.StartOptions{InstanceID: "named"}}})
	require.ErrorIs(t, err, chronicle.ErrInstanceExists)
	_, err = b.engine.StartMany(b.ctx, []chronicle.StartRequest{{Workflow: "wf", Input: 0, Options: &chronicle.StartOptions{InstanceID: "x3"}}, {Workflow: "wf", Input: 0, Options: &chronicle.StartOptions{InstanceID: "x3"}}})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	for _, id := range []string{"x2", "x3"} {
		_, err = b.engine.Describe(b.ctx, id)
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	}
}
