package chronicle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestConcurrencyLimitUnderCrashes starts instances over three
// concurrency keys on two nodes whose store fails 12 % of its operations
// and whose nodes restart at random; in peek-lock mode a round is also
// paused half-way through its writes while the clock passes its lease and
// the other node runs (a zombie). After every step no key has more
// holders than its limit, nor more running instances; at the end every
// instance has run exactly once and no slot is held.
func TestConcurrencyLimitUnderCrashes(t *testing.T) {
	seeds := uint64(3)
	if n, err := strconv.ParseUint(os.Getenv("CHRONICLE_FLOW_SEEDS"), 10, 32); err == nil && n > 0 {
		seeds = n // a longer run: CHRONICLE_FLOW_SEEDS=100
	}
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mode, seed), func(t *testing.T) {
				t.Parallel()
				crashFlow(t, mode, seed)
			})
		}
	}
}

var flowLimits = map[string]int{"k1": 1, "k2": 2, "k3": 1}

func crashFlow(t *testing.T, mode provider.Mode, seed uint64) {
	t.Logf("seed %d (CHRONICLE_FLOW_SEEDS=%d runs seeds 1 to %d)", seed, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed+200))
	setup := func(e *chronicle.Engine) {
		if err := chronicle.RegisterWorkflow(e, "held", func(ctx *chronicle.Context, in string) (string, error) {
			var s string
			if err := ctx.CallActivity("step", in, nil).Get(&s); err != nil {
				return "", err
			}
			err := ctx.WaitEvent("go", nil).Get(&s)
			return in + s, err
		}); err != nil {
			t.Fatal(err)
		}
		if err := chronicle.RegisterActivity(e, "step", func(_ context.Context, in string) (string, error) { return in, nil }); err != nil {
			t.Fatal(err)
		}
	}
	var check func(when string)
	paused, pauses := false, 0
	// In peek-lock mode a round is paused now and then between two of its
	// writes while its lease runs out and the other node works: a zombie.
	zombie := func(r *crashRig, _ memory.Op, _ int) {
		if mode != provider.ModePeekLock || paused || r.nodes == nil || r.intN(40) != 0 {
			return
		}
		paused, pauses = true, pauses+1
		defer func() { paused = false }()
		r.clock.Advance(2 * time.Minute)
		for range 3 {
			_, _ = r.nodes[1].RunOnce(context.Background())
		}
		check("during a zombie's pause")
	}
	r := newCrashRigBetween(t, mode, rng, chronicle.Options{}, setup, zombie)
	ctx := context.Background()
	check = func(when string) {
		r.mu.Lock()
		was := r.faulty
		r.faulty = false
		r.mu.Unlock()
		defer func() { r.mu.Lock(); r.faulty = was; r.mu.Unlock() }()
		for key, limit := range flowLimits {
			set, err := r.store.GetSlots(ctx, key)
			if err != nil {
				continue
			}
			if len(set.Holders) > limit {
				t.Fatalf("%s: key %s has %d holders, limit %d: %+v", when, key, len(set.Holders), limit, set.Holders)
			}
		}
		running := map[string]int{}
		recs, err := r.store.ListInstances(ctx, &provider.ListInstancesParams{Status: provider.StatusRunning, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			running[rec.BusinessKey]++
		}
		for key, n := range running {
			if n > flowLimits[key] {
				t.Fatalf("%s: %d instances of key %s run at once, limit %d", when, n, key, flowLimits[key])
			}
		}
	}
	// Half the instances are named (their first rounds wait for their
	// slots), half have generated ids, started together (they wait from
	// their enqueue on a store that applies waits there).
	var (
		ids       []string
		generated []chronicle.StartRequest
	)
	for i := range 12 {
		key := fmt.Sprintf("k%d", 1+i%3)
		if i%2 == 1 {
			generated = append(generated, chronicle.StartRequest{Workflow: "held", Input: fmt.Sprintf("g-%02d", i), Options: &chronicle.StartOptions{
				BusinessKey: key, Concurrency: &chronicle.Concurrency{Key: key, Limit: flowLimits[key]},
			}})
			continue
		}
		id := fmt.Sprintf("i-%02d", i)
		ids = append(ids, id)
		if _, err := r.nodes[0].Start(ctx, "held", id, &chronicle.StartOptions{
			InstanceID: id, BusinessKey: key, Concurrency: &chronicle.Concurrency{Key: key, Limit: flowLimits[key]},
		}); err != nil {
			t.Fatal(err)
		}
	}
	more, err := r.nodes[0].StartMany(ctx, generated)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, more...)
	r.arm(true)
	for range 400 {
		switch r.intN(10) {
		case 0:
			// Let a running instance finish (a signal to a waiting one
			// is recorded when it runs).
			_ = r.nodes[0].RaiseEvent(ctx, ids[r.intN(len(ids))], "go", "!", nil)
		case 1:
			r.clock.Advance(time.Duration(r.intN(90)) * time.Second)
		default:
			r.step(ctx)
		}
		check("after a step")
	}
	r.arm(false)
	t.Logf("%d zombie pauses", pauses)
	for range 20 {
		for _, id := range ids {
			_ = r.nodes[0].RaiseEvent(ctx, id, "go", "!", nil)
		}
		r.quiesce(ctx)
		check("at the end")
		done := 0
		for _, id := range ids {
			inst, err := r.nodes[0].Describe(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status == chronicle.StatusCompleted {
				done++
			}
		}
		if done == len(ids) {
			break
		}
	}
	for _, id := range ids {
		inst, err := r.nodes[0].Describe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != chronicle.StatusCompleted {
			t.Fatalf("%s ended %s (waiting: %+v)", id, inst.Status, inst.Waiting)
		}
		events, err := r.nodes[0].History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(events, "ExecutionStarted"); n != 1 {
			t.Fatalf("%s started %d times", id, n)
		}
	}
	for key := range flowLimits {
		set, err := r.store.GetSlots(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Holders)+len(set.Waiters) > 0 {
			t.Fatalf("key %s still has holders %v and waiters %v", key, set.Holders, set.Waiters)
		}
	}
}
