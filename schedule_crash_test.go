package chronicle_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// TestScheduleNeverDoublesUnderCrashes runs one schedule on two nodes
// sharing a store that fails a share of its operations (before or after
// their effect, or half-way through a peek-lock step), restarts nodes at
// random (their caches and leases gone) and moves the clock in steps,
// jumps far forward and back. Every nominal time of the schedule must be
// started exactly once or recorded as missed; no instance may have two
// executions.
func TestScheduleNeverDoublesUnderCrashes(t *testing.T) {
	seeds := uint64(4)
	if n, err := strconv.ParseUint(os.Getenv("CHRONICLE_SCHEDULE_SEEDS"), 10, 32); err == nil && n > 0 {
		seeds = n // a longer run: CHRONICLE_SCHEDULE_SEEDS=200
	}
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mode, seed), func(t *testing.T) {
				t.Parallel()
				crashSchedule(t, mode, seed)
			})
		}
	}
}

func crashSchedule(t *testing.T, mode provider.Mode, seed uint64) {
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	var (
		mu     sync.Mutex
		faulty bool
		faults int
	)
	store := memory.New(memory.Options{Mode: mode, Fault: func(op memory.Op) *memory.Fault {
		mu.Lock()
		defer mu.Unlock()
		if !faulty || rng.IntN(100) >= 12 {
			return nil
		}
		faults++
		return &memory.Fault{AfterEffect: rng.IntN(2) == 0, AfterWrites: rng.IntN(3)}
	}})
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clock := round.NewManualClock(start)
	ctx := context.Background()
	ids := 0
	newNode := func(name string) *chronicle.Engine {
		ids++
		prefix := fmt.Sprintf("%s-%d-", name, ids)
		n := 0
		e, err := chronicle.New(store, chronicle.Options{
			NodeID: name, Clock: clock, Logger: slog.New(slog.DiscardHandler), MaxDeliveries: 1 << 20,
			ActivityLease: time.Minute, RoundLease: time.Minute, RetryJitter: func() float64 { return 1 },
			NewID: func() string { n++; return fmt.Sprintf("%s%d", prefix, n) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := chronicle.RegisterWorkflow(e, "job", job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		return e
	}
	nodes := []*chronicle.Engine{newNode("a"), newNode("b")}
	o := every(10*time.Minute, chronicle.OverlapAllowAll, 0)
	o.CatchupWindow = 30 * time.Minute
	if err := nodes[0].CreateSchedule(ctx, "cr", o); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	faulty = true
	mu.Unlock()
	idle := 0
	latest := start // the latest the clock read before a step back
	for step := 0; step < 4000; step++ {
		i := rng.IntN(len(nodes))
		if rng.IntN(50) == 0 {
			// The node crashes and comes back: its cache is gone.
			nodes[i].Close()
			nodes[i] = newNode(string(rune('a' + i)))
		}
		worked, _ := nodes[i].RunOnce(ctx)
		if worked {
			idle = 0
			continue
		}
		if idle++; idle < 4 {
			continue
		}
		idle = 0
		switch r := rng.IntN(40); {
		case r == 0:
			clock.Advance(time.Duration(1+rng.IntN(6)) * time.Hour) // every node was down
		case r == 1:
			latest = later(latest, clock.Now())
			clock.Set(clock.Now().Add(-time.Duration(1+rng.IntN(15)) * time.Minute)) // the clock steps back
		default:
			clock.Advance(time.Duration(1+rng.IntN(300)) * time.Second)
		}
	}
	mu.Lock()
	faulty = false
	t.Logf("%d faults injected, clock at %s", faults, clock.Now().Sub(start))
	mu.Unlock()
	// Quiesce: the clock back where it was before its last step back
	// (work enqueued then is due from then on), run both nodes until
	// neither finds work for four minutes of clock.
	clock.Set(later(latest, clock.Now()))
	for quiet := 0; quiet < 240; {
		w0, err0 := nodes[0].RunOnce(ctx)
		w1, err1 := nodes[1].RunOnce(ctx)
		if err0 != nil || err1 != nil {
			t.Fatalf("after the faults: %v, %v", err0, err1)
		}
		if w0 || w1 {
			quiet = 0
			continue
		}
		quiet++
		clock.Advance(time.Second)
	}
	d, err := nodes[0].DescribeSchedule(ctx, "cr")
	if err != nil {
		t.Fatal(err)
	}
	got := jobs(t, nodes[0]) // fails on an instance with two executions
	last := start
	for id := range got {
		nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, "cr@"))
		if err != nil || nominal.Sub(start)%(10*time.Minute) != 0 || !nominal.After(start) {
			t.Errorf("instance %s is not a nominal time of the schedule", id)
		}
		if nominal.After(last) {
			last = nominal
		}
	}
	// Every nominal time up to the newest started is started or missed.
	nominal := int64(last.Sub(start) / (10 * time.Minute))
	missed := d.Skipped
	if int64(len(got))+missed < nominal {
		t.Errorf("%d nominal times up to %s; %d started and %d missed: a firing was lost", nominal, last, len(got), missed)
	}
	if len(got) < 10 {
		t.Errorf("only %d firings started", len(got))
	}
	events, err := nodes[0].History(ctx, chronicle.SchedulePrefix+"cr")
	if err != nil {
		t.Fatal(err)
	}
	executions := 0
	for _, ev := range events {
		if ev.Kind == history.KindExecutionStarted {
			executions++
		}
	}
	if executions < 2 {
		t.Errorf("the schedule never continued as new: %d executions", executions)
	}
	t.Logf("%d firings started, %d missed, up to %s, %d executions of the schedule", len(got), missed, last.Sub(start), executions)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
