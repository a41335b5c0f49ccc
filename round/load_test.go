package round_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// readCountingStore counts the snapshot and history reads of the rounds
// run on a transactional memory store.
type readCountingStore struct {
	*memory.Store
	snapshots, loads atomic.Int64
}

func (s *readCountingStore) RunRound(ctx context.Context, fn func(context.Context, provider.Tx) error) error {
	return s.Store.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		return fn(ctx, &readCountingTx{Tx: tx, s: s})
	})
}

type readCountingTx struct {
	provider.Tx
	s *readCountingStore
}

func (t *readCountingTx) GetSnapshot(ctx context.Context, id string) ([]byte, int64, error) {
	t.s.snapshots.Add(1)
	return t.Tx.GetSnapshot(ctx, id)
}

func (t *readCountingTx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	t.s.loads.Add(1)
	return t.Tx.LoadHistory(ctx, p)
}

// TestNewInstanceReadsNoHistory: the first round of an instance whose
// dequeue found no stored event (Head.Seq 0) reads neither a snapshot nor
// history; a later round without the cached state reads both.
func TestNewInstanceReadsNoHistory(t *testing.T) {
	t.Parallel()
	s := &readCountingStore{Store: memory.New(memory.Options{Mode: provider.ModeTransactional})}
	clock := round.NewManualClock(t0)
	runner, err := round.NewRunner(s, round.RunnerOptions{Node: "n1", Turn: scripted.Turn, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	m, err := scripted.StartMessage("new", scripted.Script{Steps: []scripted.Step{{Kind: scripted.Signal, Name: "go"}}})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: clock.Now()}))

	rep, err := runner.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, "new", rep.InstanceID)
	require.Zero(t, s.snapshots.Load(), "snapshot reads of a new instance's first round")
	require.Zero(t, s.loads.Load(), "history reads of a new instance's first round")
	events, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "new", FromSeq: 1})
	require.NoError(t, err)
	require.NotEmpty(t, events)
	require.Equal(t, history.KindExecutionStarted, events[0].Kind)

	// Without the cached state the next round reads the stored ones.
	runner.Forget()
	sig, err := scripted.SignalMessage("new", "go", "k1")
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{sig}, Now: clock.Now()}))
	_, err = runner.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.snapshots.Load())
	require.Equal(t, int64(1), s.loads.Load())
	_, err = runner.RunOnce(ctx)
	require.NoError(t, err)
	st, err := s.GetInstance(ctx, "new")
	require.NoError(t, err)
	require.Equal(t, provider.StatusCompleted, st.Status)
}
