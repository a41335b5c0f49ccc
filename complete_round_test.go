package chronicle_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

// writeCounts counts a store's writing transactions: round transactions
// that dequeued an instance or completed a task, and activity completions
// of their own.
type writeCounts struct{ rounds, completions, claims atomic.Int64 }

// roundTx is what the runner asks of a transaction on memory and
// PostgreSQL.
type roundTx interface {
	provider.ClaimingTx
	provider.FlowSteps
}

// countingTx notes whether its transaction wrote.
type countingTx struct {
	roundTx
	wrote *bool
}

func (c countingTx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	b, err := c.roundTx.DequeueInstance(ctx, p)
	if b != nil {
		*c.wrote = true
	}
	return b, err
}

func (c countingTx) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	*c.wrote = true
	return c.roundTx.CompleteActivity(ctx, p)
}

func (c countingTx) Flush(ctx context.Context) error {
	if f, ok := c.roundTx.(provider.TxFlusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

func (w *writeCounts) runRound(ctx context.Context, s provider.TxStore, fn func(context.Context, provider.Tx) error) error {
	wrote := false
	err := s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		wrote = false
		return fn(ctx, countingTx{tx.(roundTx), &wrote})
	})
	if err == nil && wrote {
		w.rounds.Add(1)
	}
	return err
}

type countingMemory struct {
	*memory.Store
	w *writeCounts
}

func (s countingMemory) RunRound(ctx context.Context, fn func(context.Context, provider.Tx) error) error {
	return s.w.runRound(ctx, s.Store, fn)
}

func (s countingMemory) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	l, err := s.Store.ClaimActivity(ctx, p)
	if l != nil {
		s.w.claims.Add(1)
	}
	return l, err
}

func (s countingMemory) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	s.w.completions.Add(1)
	return s.Store.CompleteActivity(ctx, p)
}

type countingPostgres struct {
	*postgres.Store
	w *writeCounts
}

func (s countingPostgres) RunRound(ctx context.Context, fn func(context.Context, provider.Tx) error) error {
	return s.w.runRound(ctx, s.Store, fn)
}

func (s countingPostgres) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	l, err := s.Store.ClaimActivity(ctx, p)
	if l != nil {
		s.w.claims.Add(1)
	}
	return l, err
}

func (s countingPostgres) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	s.w.completions.Add(1)
	return s.Store.CompleteActivity(ctx, p)
}

// TestW1CompletesActivitiesWithTheirRounds: a workflow of three
// sequential activities takes four writing transactions besides its
// claims (the start's round, then each activity's completion with the
// round its result wakes) where it took seven (four rounds, three
// completions), and one claim where it took three (the second and third
// activities are handed to the worker claimed); every round and attempt
// is reported to the observer as before.
func TestW1CompletesActivitiesWithTheirRounds(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T, w *writeCounts) provider.Store{
		"memory": func(_ *testing.T, w *writeCounts) provider.Store {
			return countingMemory{memory.New(memory.Options{}), w}
		},
		"postgres": func(t *testing.T, w *writeCounts) provider.Store { return countingPostgres{newPostgresStore(t), w} },
	}
	for name, newStore := range stores {
		for _, eager := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/eager=%v", name, eager), func(t *testing.T) {
				t.Parallel()
				testW1Transactions(t, newStore, eager)
			})
		}
	}
}

func testW1Transactions(t *testing.T, newStore func(t *testing.T, w *writeCounts) provider.Store, eager bool) {
	t.Helper()
	var w writeCounts
	obs := &recorder{}
	b := setupOn(t, newStore(t, &w), chronicle.Options{Observer: obs, RoundGroup: 1, EagerActivities: eager})
	activity(t, b.engine, "step", func(_ context.Context, in int) (int, error) { return in + 1, nil })
	register(t, b.engine, "w1", func(ctx *chronicle.Context, in int) (int, error) {
		for range 3 {
			var err error
			if in, err = chronicle.CallActivity[int](ctx, "step", in, nil); err != nil {
				return 0, err
			}
		}
		return in, nil
	})
	const n = 4
	ids := []string{"w-1", "w-2", "w-3", "w-4"}
	for _, id := range ids {
		b.start(t, "w1", id, 10)
	}
	b.drain(t)
	for _, id := range ids {
		require.Equal(t, 13, result[int](t, b, id))
	}
	if eager {
		require.Zero(t, w.completions.Load(), "no activity completed in a transaction of its own")
		require.Equal(t, int64(4*n), w.rounds.Load()+w.completions.Load(), "writing transactions besides claims")
	} else {
		// Off by default: each completion commits alone and an
		// orchestration worker runs the round it wakes.
		require.Equal(t, int64(3*n), w.completions.Load(), "completions in transactions of their own")
		require.Equal(t, int64(7*n), w.rounds.Load()+w.completions.Load(), "writing transactions besides claims")
	}
	require.Len(t, obs.rounds, 4*n, "every round is reported, those run with a completion too")
	for _, s := range obs.rounds {
		require.NoError(t, s.Err)
		require.Equal(t, 1, s.Processed)
	}
	require.Len(t, obs.activities, 3*n)
	if eager {
		require.Equal(t, int64(n), w.claims.Load(), "claims: the first activity of each workflow")
	} else {
		require.Equal(t, int64(3*n), w.claims.Load(), "claims: one per activity")
	}
	for _, a := range obs.activities {
		require.Equal(t, "completed", a.Outcome)
		require.Equal(t, 1, a.Attempt)
	}
}
