package chronicle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// racingStore runs a hook (another node's round, say) right before the
// next ListMessages, between the reads of a client lookup.
type racingStore struct {
	provider.TxStore
	hook atomic.Pointer[func()]
}

func (s *racingStore) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	if f := s.hook.Swap(nil); f != nil {
		(*f)()
	}
	return s.TxStore.ListMessages(ctx, p)
}

// testVisibleAfterStart checks that an instance is found by every read
// from the moment Start returns, also when its first round runs between
// the reads of a lookup.
func testVisibleAfterStart(t *testing.T, inner provider.TxStore) {
	t.Helper()
	store := &racingStore{TxStore: inner}
	b := setupOn(t, store)
	other := setupOn(t, inner) // another node on the same store
	for _, e := range []*chronicle.Engine{b.engine, other.engine} {
		register(t, e, "echo", func(_ *chronicle.Context, in string) (string, error) { return in, nil })
	}
	round := func() {
		worked, err := other.engine.RunOnce(context.Background())
		require.NoError(t, err)
		require.True(t, worked)
	}

	_, err := b.engine.Start(b.ctx, "echo", "hi", &chronicle.StartOptions{InstanceID: "a", BusinessKey: "CLM-1", Version: "v2"})
	require.NoError(t, err)
	inst, err := b.engine.Describe(b.ctx, "a")
	require.NoError(t, err, "an instance whose start is queued is found")
	require.Equal(t, chronicle.StatusPending, inst.Status)
	require.Equal(t, "echo", inst.Workflow)
	require.Equal(t, "v2", inst.Version)
	require.Equal(t, "CLM-1", inst.BusinessKey)
	require.Equal(t, t0, inst.CreatedAt.UTC())
	require.Error(t, inst.Result(nil), "a pending instance has no result")

	// The first round runs after Describe read no record and before it
	// lists the queue.
	f := round
	store.hook.Store(&f)
	inst, err = b.engine.Describe(b.ctx, "a")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, inst.Status)

	b.start(t, "echo", "b", "there")
	store.hook.Store(&f)
	inst, err = b.engine.Wait(b.ctx, "b")
	require.NoError(t, err, "Wait right after Start finds the instance")
	var out string
	require.NoError(t, inst.Result(&out))
	require.Equal(t, "there", out)

	_, err = b.engine.Describe(b.ctx, "never-started")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
}

func TestVisibleAfterStart(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		testVisibleAfterStart(t, memory.New(memory.Options{}))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testVisibleAfterStart(t, newPostgresStore(t))
	})
}

// testPanicInFirstTurnIsVisible checks that an instance whose first turn
// panicked, so that its start was dead-lettered and nothing stored, is
// described and listed with its incident, and runs once redriven.
func testPanicInFirstTurnIsVisible(t *testing.T, store provider.Store) {
	t.Helper()
	b := setupOn(t, store)
	register(t, b.engine, "boom", func(ctx *chronicle.Context, _ string) (string, error) {
		var stages []string
		return stages[len(stages)], nil // a bug in workflow code
	})
	_, err := b.engine.Start(b.ctx, "boom", "", &chronicle.StartOptions{InstanceID: "claim-7", BusinessKey: "CLM-7"})
	require.NoError(t, err)
	for i := 0; i < 6; i++ {
		b.advance(t, time.Minute)
	}
	letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "claim-7"})
	require.NoError(t, err)
	require.Len(t, letters, 1)

	inst, err := b.engine.Describe(b.ctx, "claim-7")
	require.NoError(t, err, "a dead-lettered start leaves the instance visible")
	require.Equal(t, chronicle.StatusPending, inst.Status)
	require.Equal(t, "boom", inst.Workflow)
	require.Equal(t, "CLM-7", inst.BusinessKey)
	require.Contains(t, inst.Incident, "panic")
	require.Contains(t, inst.LastError, "index out of range")

	list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1, "the incident is listed")
	require.Equal(t, "claim-7", list[0].ID)
	require.Contains(t, list[0].Incident, "panic")
	list, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Status: chronicle.StatusRunning})
	require.NoError(t, err)
	require.Empty(t, list)

	// Deploy a fixed workflow and redrive: the instance runs.
	b.engine = b.newEngine(t)
	register(t, b.engine, "boom", func(ctx *chronicle.Context, _ string) (string, error) { return "fixed", nil })
	require.NoError(t, b.engine.RedriveDeadLetter(b.ctx, letters[0].ID, "ops"))
	b.drain(t)
	require.Equal(t, "fixed", result[string](t, b, "claim-7"))
	require.Empty(t, b.describe(t, "claim-7").Incident)
	list, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, chronicle.StatusCompleted, list[0].Status)
}

func TestPanicInFirstTurnIsVisible(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		testPanicInFirstTurnIsVisible(t, memory.New(memory.Options{}))
	})
	t.Run("MemoryPeekLock", func(t *testing.T) {
		t.Parallel()
		testPanicInFirstTurnIsVisible(t, memory.New(memory.Options{Mode: provider.ModePeekLock}))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testPanicInFirstTurnIsVisible(t, newPostgresStore(t))
	})
}
