package chronicle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// TestBatchUnderCrashes runs two batches on two nodes sharing a store
// that fails a share of its operations (before or after their effect, or
// half-way through a peek-lock step) and restarts nodes at random (their
// caches and leases gone): a signal batch over region uk and a terminate
// batch over region de, both paced so that they take many pages and
// continue as new. Every selected instance must be acted on exactly once
// in effect (one recorded signal, one termination) and no other instance
// at all.
func TestBatchUnderCrashes(t *testing.T) {
	seeds := uint64(3)
	if n, err := strconv.ParseUint(os.Getenv("CHRONICLE_BATCH_SEEDS"), 10, 32); err == nil && n > 0 {
		seeds = n // a longer run: CHRONICLE_BATCH_SEEDS=100
	}
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mode, seed), func(t *testing.T) {
				t.Parallel()
				crashBatch(t, mode, seed)
			})
		}
	}
}

func crashBatch(t *testing.T, mode provider.Mode, seed uint64) {
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed+100))
	r := newCrashRig(t, mode, rng, chronicle.Options{SearchAttributes: batchDecls}, func(e *chronicle.Engine) { registerWaiter(t, e) })
	ctx, nodes := context.Background(), r.nodes
	regions := map[string]int{"uk": 25, "de": 15, "fr": 10}
	for region, n := range regions {
		for i := 1; i <= n; i++ {
			if _, err := nodes[0].Start(ctx, "waiter", waiterIn{}, &chronicle.StartOptions{
				InstanceID: fmt.Sprintf("%s-%02d", region, i), SearchAttributes: map[string]any{"region": region}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The instances run their first rounds: a batch selects instances
	// from their projections, which a queued start does not have yet.
	for quiet := 0; quiet < 3; {
		if worked, err := nodes[0].RunOnce(ctx); err != nil {
			t.Fatal(err)
		} else if worked {
			quiet = 0
		} else {
			quiet++
		}
	}
	for _, o := range []chronicle.BatchOptions{
		{ID: "sig", Action: chronicle.BatchSignal, Signal: "go", Where: "region = 'uk'", Reason: "release", Actor: "alice", Rate: 2},
		{ID: "term", Action: chronicle.BatchTerminate, Workflow: "waiter", Where: "region = 'de'", Reason: "shut down", Actor: "bob", Rate: 1},
	} {
		if _, err := nodes[0].StartBatch(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r.arm(true)
	idle := 0
	for range 3000 {
		if r.step(ctx) {
			idle = 0
			continue
		}
		if idle++; idle >= 4 {
			idle = 0
			r.clock.Advance(time.Duration(1+rng.IntN(2000)) * time.Millisecond)
		}
	}
	r.arm(false)
	r.quiesce(ctx)
	e := nodes[0]
	for _, c := range []struct {
		id, region string
		n          int64
	}{{"sig", "uk", 25}, {"term", "de", 15}} {
		d, err := e.DescribeBatch(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != chronicle.BatchCompleted || d.Matched != c.n || d.Done+d.Skipped != c.n || d.Failed != 0 || d.Done == 0 {
			t.Errorf("batch %s: %s matched %d done %d skipped %d failed %d %v", c.id, d.State, d.Matched, d.Done, d.Skipped, d.Failed, d.Failures)
		}
		events, err := e.History(ctx, chronicle.BatchInstanceID(c.id))
		if err != nil {
			t.Fatal(err)
		}
		if n := count(events, history.KindExecutionStarted); n < 2 {
			t.Errorf("batch %s never continued as new (%d executions)", c.id, n)
		}
	}
	for region, n := range regions {
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("%s-%02d", region, i)
			events, err := e.History(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			signals, terms := 0, count(events, history.KindExecutionTerminated)
			for _, ev := range events {
				if ev.Kind == history.KindEventRaised {
					if a, err := ev.Attributes(); err == nil && strings.HasPrefix(a.(*history.EventRaised).Sender, "batch:") {
						signals++
					}
				}
			}
			inst, err := e.Describe(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][3]any{
				"uk": {1, 0, chronicle.StatusCompleted},
				"de": {0, 1, chronicle.StatusTerminated},
				"fr": {0, 0, chronicle.StatusRunning},
			}[region]
			if signals != want[0] || terms != want[1] || inst.Status != want[2] {
				t.Errorf("%s: %d batch signals, %d terminations, %s; want %v", id, signals, terms, inst.Status, want)
			}
		}
	}
}
