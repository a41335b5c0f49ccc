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
	r := newCrashRig(t, mode, rng, chronicle.Options{}, func(e *chronicle.Engine) {
		if err := chronicle.RegisterWorkflow(e, "job", job); err != nil {
			t.Fatal(err)
		}
	})
	ctx, nodes, clock, start := context.Background(), r.nodes, r.clock, r.start
	o := every(10*time.Minute, chronicle.OverlapAllowAll, 0)
	o.CatchupWindow = 30 * time.Minute
	if err := nodes[0].CreateSchedule(ctx, "cr", o); err != nil {
		t.Fatal(err)
	}
	r.arm(true)
	idle := 0
	latest := start // the latest the clock read before a step back
	for range 4000 {
		if r.step(ctx) {
			idle = 0
			continue
		}
		if idle++; idle < 4 {
			continue
		}
		idle = 0
		switch x := rng.IntN(40); {
		case x == 0:
			clock.Advance(time.Duration(1+rng.IntN(6)) * time.Hour) // every node was down
		case x == 1:
			latest = later(latest, clock.Now())
			clock.Set(clock.Now().Add(-time.Duration(1+rng.IntN(15)) * time.Minute)) // the clock steps back
		default:
			clock.Advance(time.Duration(1+rng.IntN(300)) * time.Second)
		}
	}
	r.arm(false)
	// Quiesce with the clock back where it was before its last step back
	// (work enqueued then is due from then on).
	clock.Set(later(latest, clock.Now()))
	r.quiesce(ctx)
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
	executions := count(events, history.KindExecutionStarted)
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
