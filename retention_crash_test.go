package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// TestRetentionUnderCrashes runs the retention workflow on two nodes
// sharing a store that fails a share of its operations and restarts
// nodes at random, while operators release some holds. In the end every
// ended instance without a hold is purged exactly as retention purges
// (a tombstone by "system:retention" that its archive matches), and
// every held instance is whole: a crash loses nothing and purges nothing
// held.
func TestRetentionUnderCrashes(t *testing.T) {
	seeds := uint64(3)
	if n, err := strconv.ParseUint(os.Getenv("CHRONICLE_RETENTION_SEEDS"), 10, 32); err == nil && n > 0 {
		seeds = n // a longer run: CHRONICLE_RETENTION_SEEDS=100
	}
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mode, seed), func(t *testing.T) {
				t.Parallel()
				crashRetention(t, mode, seed)
			})
		}
	}
}

func crashRetention(t *testing.T, mode provider.Mode, seed uint64) {
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed+200))
	var (
		mu       sync.Mutex
		archived = map[string][]history.Event{}
	)
	archive := func(_ context.Context, id string, events []chronicle.Event) error {
		mu.Lock()
		defer mu.Unlock()
		archived[id] = events
		return nil
	}
	opts := chronicle.Options{
		Retention:      map[string]chronicle.RetentionPolicy{"echo": {After: time.Hour, Archive: archive}},
		RetentionEvery: 10 * time.Minute,
	}
	r := newCrashRig(t, mode, rng, opts, func(e *chronicle.Engine) {
		if err := chronicle.RegisterWorkflow(e, "echo", echo); err != nil {
			t.Fatal(err)
		}
	})
	ctx, e := context.Background(), r.nodes[0]
	const n = 30
	idOf := func(i int) string { return fmt.Sprintf("r-%02d", i) }
	for i := range n {
		if _, err := e.Start(ctx, "echo", "x", &chronicle.StartOptions{InstanceID: idOf(i)}); err != nil {
			t.Fatal(err)
		}
	}
	r.quiesce(ctx)
	for i := range n {
		if err := e.RaiseEvent(ctx, idOf(i), "go", "!", nil); err != nil {
			t.Fatal(err)
		}
	}
	r.quiesce(ctx)
	held, released := map[string]bool{}, map[string]bool{}
	for i := 0; i < n; i += 3 {
		if _, err := e.Hold(ctx, idOf(i), chronicle.HoldOptions{Reason: "litigation", Actor: "counsel"}); err != nil {
			t.Fatal(err)
		}
		held[idOf(i)] = true
	}
	if err := chronicle.StartRetention(e, ctx); err != nil {
		t.Fatal(err)
	}
	r.arm(true)
	for step, idle := 0, 0; step < 3000; step++ {
		if step%500 == 250 {
			// An operator releases a hold, trying again while the store
			// fails.
			id := idOf(3 * (step / 500))
			for {
				err := r.nodes[r.intN(2)].ReleaseHold(ctx, id, chronicle.HoldOptions{Reason: "settled", Actor: "counsel"})
				if err == nil || errors.Is(err, chronicle.ErrNotHeld) {
					break
				}
			}
			delete(held, id)
			released[id] = true
		}
		if r.step(ctx) {
			idle = 0
			continue
		}
		if idle++; idle >= 4 {
			idle = 0
			r.clock.Advance(time.Duration(1+rng.IntN(120)) * time.Second)
		}
	}
	r.arm(false)
	r.quiesce(ctx)
	// Past the end of every policy, and one more run of the retention
	// workflow after the last release.
	r.clock.Advance(time.Hour)
	r.quiesce(ctx)
	r.clock.Advance(15 * time.Minute)
	r.quiesce(ctx)

	e = r.nodes[0]
	for i := range n {
		id := idOf(i)
		if held[id] {
			inst, err := e.Describe(ctx, id)
			if err != nil {
				t.Errorf("held %s: %v", id, err)
				continue
			}
			if inst.Hold == nil || inst.Status != chronicle.StatusCompleted {
				t.Errorf("held %s: hold %v, status %s", id, inst.Hold, inst.Status)
			}
			if err := e.Verify(ctx, id); err != nil {
				t.Errorf("held %s: %v", id, err)
			}
			if ts, err := e.ListTombstones(ctx, id); err != nil || len(ts) != 0 {
				t.Errorf("held %s has tombstones %v (%v)", id, ts, err)
			}
			continue
		}
		ts, err := e.ListTombstones(ctx, id)
		if err != nil || len(ts) != 1 {
			t.Errorf("%s (released %v): tombstones %v (%v)", id, released[id], ts, err)
			continue
		}
		if ts[0].PurgedBy != history.ActorRetention {
			t.Errorf("%s purged by %s", id, ts[0].PurgedBy)
		}
		mu.Lock()
		events := archived[id]
		mu.Unlock()
		if err := chronicle.VerifyArchive(events, &ts[0]); err != nil {
			t.Errorf("%s: archive: %v", id, err)
		}
		if released[id] && count(events, history.KindHoldReleased) != 1 {
			t.Errorf("%s: the archive holds %d HoldReleased events, want 1", id, count(events, history.KindHoldReleased))
		}
	}
	if len(released) == 0 {
		t.Error("no hold was released")
	}
}
