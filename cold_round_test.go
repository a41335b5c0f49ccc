package chronicle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// loadSpy is a memory store that records the lowest seq each instance's
// history was read from, in rounds of either mode.
type loadSpy struct {
	*memory.Store
	mu   sync.Mutex
	from map[string]int64
}

func newLoadSpy(mode provider.Mode) *loadSpy {
	return &loadSpy{Store: memory.New(memory.Options{Mode: mode}), from: map[string]int64{}}
}

func (s *loadSpy) note(p *provider.LoadHistoryParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.from[p.InstanceID]; !ok || p.FromSeq < f {
		s.from[p.InstanceID] = p.FromSeq
	}
}

func (s *loadSpy) lowest(id string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[id]
}

func (s *loadSpy) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.from)
}

func (s *loadSpy) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	s.note(p)
	return s.Store.LoadHistory(ctx, p)
}

func (s *loadSpy) RunRound(ctx context.Context, fn func(context.Context, provider.Tx) error) error {
	return s.Store.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error { return fn(ctx, spyTx{tx, s}) })
}

type spyTx struct {
	provider.Tx
	s *loadSpy
}

func (t spyTx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	t.s.note(p)
	return t.Tx.LoadHistory(ctx, p)
}

// TestColdRoundReadsOnlyTheCurrentExecution checks that a node without the
// instance cached starts from the stored snapshot: after continue-as-new,
// its rounds read the current execution, not every execution.
func TestColdRoundReadsOnlyTheCurrentExecution(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			spy := newLoadSpy(mode)
			b := setupOn(t, spy)
			counter := func(ctx *chronicle.Context, n int) (int, error) {
				if _, err := chronicle.WaitEvent[int](ctx, "tick", nil); err != nil {
					return 0, err
				}
				if n < 3 {
					return 0, ctx.ContinueAsNew(n + 1)
				}
				return n, nil
			}
			register(t, b.engine, "counter", counter)
			b.start(t, "counter", "i", 0)
			b.drain(t)
			for i := 0; i < 3; i++ {
				require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "tick", i, nil))
				b.drain(t)
			}
			inst := b.describe(t, "i")
			require.Equal(t, chronicle.StatusRunning, inst.Status)
			snap, _, err := spy.GetSnapshot(b.ctx, "i")
			require.NoError(t, err)
			decoded, err := round.UnmarshalSnapshot(snap)
			require.NoError(t, err)
			current := decoded.ExecutionStartSeq
			require.Greater(t, current, int64(1), "the instance continued as new")

			restarted := b.newEngine(t)
			register(t, restarted, "counter", counter)
			spy.reset()
			require.NoError(t, restarted.RaiseEvent(b.ctx, "i", "tick", 3, nil))
			drain(t, restarted)
			require.Equal(t, 3, result[int](t, b, "i"))
			require.GreaterOrEqual(t, spy.lowest("i"), current, "a cold round read history of ended executions")
			require.NoError(t, restarted.Verify(b.ctx, "i"))
		})
	}
}

// TestTamperedHistoryIsNotRun checks the chain at load: a history rewritten
// with recomputed hashes no longer ends where the stored snapshot says, and
// one edited in place breaks its chain; either way the round is
// dead-lettered as corrupt-history instead of running on it.
func TestTamperedHistoryIsNotRun(t *testing.T) {
	t.Parallel()
	for name, rehash := range map[string]bool{"InPlace": false, "Rehashed": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := memory.New(memory.Options{})
			b := setupOn(t, mem)
			waiter := func(ctx *chronicle.Context, in string) (string, error) {
				s, err := chronicle.WaitEvent[string](ctx, "go", nil)
				return in + s, err
			}
			register(t, b.engine, "waiter", waiter)
			b.start(t, "waiter", "w", "a")
			b.drain(t)
			events := b.history(t, "w")
			require.True(t, mem.TamperEvent("w", 1, func(e *history.Event) {
				e.Actor = "user:mallory"
				if rehash {
					e.Hash = history.ComputeHash(e)
				}
			}))
			if rehash {
				prev := []byte(nil)
				for seq := int64(1); seq <= int64(len(events)); seq++ {
					require.True(t, mem.TamperEvent("w", seq, func(e *history.Event) {
						if prev != nil {
							e.PrevHash = prev
						}
						e.Hash = history.ComputeHash(e)
						prev = e.Hash
					}))
				}
				tampered, err := mem.LoadHistory(b.ctx, &provider.LoadHistoryParams{InstanceID: "w", FromSeq: 1})
				require.NoError(t, err)
				require.NoError(t, history.Verify(tampered), "a rewrite with recomputed hashes passes plain verification")
			}

			restarted := b.newEngine(t) // a cold node
			register(t, restarted, "waiter", waiter)
			require.NoError(t, restarted.RaiseEvent(b.ctx, "w", "go", "b", nil))
			drain(t, restarted)
			letters, err := restarted.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "w"})
			require.NoError(t, err)
			require.Len(t, letters, 1)
			require.Equal(t, provider.ReasonCorruptHistory, letters[0].Reason)
			after, err := mem.LoadHistory(b.ctx, &provider.LoadHistoryParams{InstanceID: "w", FromSeq: 1})
			require.NoError(t, err)
			require.Len(t, after, len(events), "nothing was appended to the tampered history")
		})
	}
}
