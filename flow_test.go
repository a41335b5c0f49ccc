package chronicle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// registerGate registers "gate", a workflow that runs until its "go"
// signal.
func registerGate(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	register(t, e, "gate", func(ctx *chronicle.Context, in string) (string, error) {
		var s string
		err := ctx.WaitEvent("go", nil).Get(&s)
		return in + s, err
	})
}

// A concurrency limit of one per customer: each customer's instances run
// one at a time, in the order they were started, while another customer's
// run beside them; a terminate reaches an instance that waits.
func TestConcurrencyLimitPerKey(t *testing.T) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			b := setupOn(t, memory.New(memory.Options{Mode: mode}))
			registerGate(t, b.engine)
			start := func(id, customer string) {
				_, err := b.engine.Start(b.ctx, "gate", id, &chronicle.StartOptions{
					InstanceID: id, Concurrency: &chronicle.Concurrency{Key: customer, Limit: 1},
				})
				require.NoError(t, err)
			}
			start("a-1", "acme")
			start("a-2", "acme")
			start("b-1", "bolt")
			start("a-3", "acme")
			b.drain(t)
			status := func() map[string]chronicle.Status {
				out := map[string]chronicle.Status{}
				for _, id := range []string{"a-1", "a-2", "a-3", "b-1"} {
					out[id] = b.describe(t, id).Status
				}
				return out
			}
			require.Equal(t, map[string]chronicle.Status{
				"a-1": chronicle.StatusRunning, "a-2": chronicle.StatusPending, "a-3": chronicle.StatusPending, "b-1": chronicle.StatusRunning,
			}, status())
			w := b.describe(t, "a-3").Waiting
			require.NotNil(t, w)
			require.Equal(t, "acme", w.Key)
			require.Equal(t, []string{"a-1"}, w.Holders)
			require.Equal(t, 2, w.Position, "a-3 waits behind a-2")
			sets, err := b.engine.ListConcurrency(b.ctx, chronicle.SlotFilter{OnlyWaiting: true})
			require.NoError(t, err)
			require.Len(t, sets, 1)
			require.Equal(t, "acme", sets[0].Key)

			// a-3 is terminated while it waits; a-1 ends and a-2 takes
			// its slot.
			require.NoError(t, b.engine.Terminate(b.ctx, "a-3", "duplicate order", nil))
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "a-1", "go", "!", nil))
			b.drain(t)
			require.Equal(t, map[string]chronicle.Status{
				"a-1": chronicle.StatusCompleted, "a-2": chronicle.StatusRunning, "a-3": chronicle.StatusTerminated, "b-1": chronicle.StatusRunning,
			}, status())
			require.Nil(t, b.describe(t, "a-2").Waiting)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "a-2", "go", "!", nil))
			b.drain(t)
			require.Equal(t, "a-2!", result[string](t, b, "a-2"))
			set, err := b.engine.Concurrency(b.ctx, "acme")
			require.NoError(t, err)
			require.Empty(t, set.Holders)
			require.Empty(t, set.Waiters)
			// The slot is held from start to end, recorded in the start.
			events := b.history(t, "a-2")
			a, err := events[0].Attributes()
			require.NoError(t, err)
			require.Equal(t, &history.Concurrency{Key: "acme", Limit: 1}, a.(*history.ExecutionStarted).Concurrency)
		})
	}
}

// Starts of new instances whose key is full wait from their enqueue on a
// store that applies waits there (the memory store's transactional mode):
// they are queued behind the key's waiters and parked before any round
// runs, so no round runs for them until a slot is free (no parking round,
// which appends nothing), and they start in the order they were started.
// In peek-lock mode their first rounds park them, with the same outcome.
func TestConcurrencyWaitFromEnqueue(t *testing.T) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			testWaitFromEnqueue(t, memory.New(memory.Options{Mode: mode}), mode == provider.ModeTransactional)
		})
	}
}

// testWaitFromEnqueue runs TestConcurrencyWaitFromEnqueue on store, which
// applies waits at enqueue when atEnqueue is set.
func testWaitFromEnqueue(t *testing.T, store provider.Store, atEnqueue bool) {
	obs := &recorder{}
	b := setupOn(t, store, chronicle.Options{Observer: obs})
	registerGate(t, b.engine)
	reqs := make([]chronicle.StartRequest, 4)
	for i := range reqs {
		reqs[i] = chronicle.StartRequest{Workflow: "gate", Input: fmt.Sprint(i), Options: &chronicle.StartOptions{
			Concurrency: &chronicle.Concurrency{Key: "acme", Limit: 1},
		}}
	}
	ids, err := b.engine.StartMany(b.ctx, reqs)
	require.NoError(t, err)
	if atEnqueue {
		set, err := b.engine.Concurrency(b.ctx, "acme")
		require.NoError(t, err, "the starts wait before any round ran")
		require.Equal(t, 1, set.Limit)
		require.Empty(t, set.Holders)
		var waiting []string
		for _, w := range set.Waiters {
			waiting = append(waiting, w.ID)
		}
		require.Equal(t, ids, waiting, "in the order they were started")
		require.Equal(t, 3, b.describe(t, ids[2]).Waiting.Position)
	}
	b.drain(t)
	status := func(want ...chronicle.Status) {
		t.Helper()
		for i, id := range ids {
			require.Equal(t, want[i], b.describe(t, id).Status, "instance %d", i)
		}
	}
	status(chronicle.StatusRunning, chronicle.StatusPending, chronicle.StatusPending, chronicle.StatusPending)
	require.Equal(t, 2, b.describe(t, ids[2]).Waiting.Position)

	require.NoError(t, b.engine.Terminate(b.ctx, ids[2], "duplicate order", nil))
	b.drain(t)
	status(chronicle.StatusRunning, chronicle.StatusPending, chronicle.StatusTerminated, chronicle.StatusPending)
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, b.engine.RaiseEvent(b.ctx, ids[i], "go", "!", nil))
		b.drain(t)
		require.Equal(t, fmt.Sprint(i)+"!", result[string](t, b, ids[i]))
	}
	set, err := b.engine.Concurrency(b.ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, set.Holders)
	require.Empty(t, set.Waiters)

	parking := 0
	for _, r := range obs.rounds {
		require.NoError(t, r.Err)
		if r.Appended == 0 {
			parking++
		}
	}
	if atEnqueue {
		require.Zero(t, parking, "no round parked a start")
	} else {
		require.Equal(t, 3, parking, "each waiting start's first round parked it")
	}
}

func TestConcurrencyRefusesBadOptions(t *testing.T) {
	b := setup(t)
	registerGate(t, b.engine)
	for _, c := range []*chronicle.Concurrency{{Key: "k", Limit: 0}, {Key: "", Limit: 2}, {Key: "bad\x00key", Limit: 1}} {
		_, err := b.engine.Start(b.ctx, "gate", "x", &chronicle.StartOptions{Concurrency: c})
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "%+v", c)
	}
	_, err := b.engine.Start(b.ctx, "gate", "x", &chronicle.StartOptions{Priority: provider.MaxPriority + 1})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = chronicle.New(memory.New(memory.Options{}), chronicle.Options{RateLimits: []chronicle.RateLimit{{Key: "r", Activity: "a"}}})
	require.Error(t, err, "a rate limit without tokens")
}

// Activities with a concurrency key run at most Limit at once across
// instances; a rate limit spends its tokens per window.
func TestActivityConcurrencyAndRate(t *testing.T) {
	b := setup(t, chronicle.Options{RateLimits: []chronicle.RateLimit{{Key: "mail", Activity: "mail", Tokens: 2, Interval: 60e9}}})
	register(t, b.engine, "charge", func(ctx *chronicle.Context, n int) (int, error) {
		var out int
		err := ctx.CallActivity("psp", n, &chronicle.ActivityOptions{Concurrency: &chronicle.Concurrency{Key: "psp", Limit: 1}}).Get(&out)
		return out, err
	})
	register(t, b.engine, "notify", func(ctx *chronicle.Context, n int) (int, error) {
		var out int
		err := ctx.CallActivity("mail", n, nil).Get(&out)
		return out, err
	})
	activity(t, b.engine, "psp", func(ctx context.Context, n int) (int, error) { return n * 2, nil })
	activity(t, b.engine, "mail", func(ctx context.Context, n int) (int, error) { return n, nil })
	for i := range 3 {
		b.start(t, "notify", fmt.Sprintf("n-%d", i), i)
	}
	b.drain(t)
	done := 0
	for i := range 3 {
		if b.describe(t, fmt.Sprintf("n-%d", i)).Status == chronicle.StatusCompleted {
			done++
		}
	}
	require.Equal(t, 2, done, "two mails a minute")
	b.advance(t, 60e9)
	require.Equal(t, 2, result[int](t, b, "n-2"))

	for i := range 3 {
		b.start(t, "charge", fmt.Sprintf("c-%d", i), i)
	}
	b.drain(t)
	for i := range 3 {
		require.Equal(t, i*2, result[int](t, b, fmt.Sprintf("c-%d", i)))
	}
	n, err := b.engine.RunningActivities(b.ctx, "psp")
	require.NoError(t, err)
	require.Zero(t, n)
}

// Higher priority starts first; its activities inherit it and go ahead
// of older work of lower priority; equal priority keeps arrival order.
func TestPriorityOrdersStartsAndActivities(t *testing.T) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			b := setupOn(t, memory.New(memory.Options{Mode: mode}), chronicle.Options{RoundGroup: 1})
			var ran []string
			register(t, b.engine, "job", func(ctx *chronicle.Context, in string) (string, error) {
				var out string
				err := ctx.CallActivity("work", in, nil).Get(&out)
				return out, err
			})
			activity(t, b.engine, "work", func(ctx context.Context, in string) (string, error) {
				ran = append(ran, in)
				return in, nil
			})
			for _, s := range []struct {
				id       string
				priority int
			}{{"low-1", 0}, {"low-2", 0}, {"urgent", 5}, {"back", -1}, {"low-3", 0}} {
				_, err := b.engine.Start(b.ctx, "job", s.id, &chronicle.StartOptions{InstanceID: s.id, Priority: s.priority})
				require.NoError(t, err)
			}
			b.drain(t)
			require.Equal(t, []string{"urgent", "low-1", "low-2", "low-3", "back"}, ran)
		})
	}
}
