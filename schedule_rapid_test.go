package chronicle_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// rapidSeed makes a rapid run print its seed: it picks one when the
// command line did not (-rapid.seed), so a failure can always be rerun.
// It lowers rapid's default of 100 checks to checks, so that the default
// run stays short (-rapid.checks=N on the command line runs N), and
// raises its default of 30 steps to 100.
func rapidSeed(t *testing.T, checks int) {
	t.Helper()
	if f := flag.Lookup("rapid.seed"); f != nil {
		if f.Value.String() == "0" {
			if err := f.Value.Set(strconv.FormatUint(uint64(time.Now().UnixNano()), 10)); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("rapid seed %s (rerun with -rapid.seed=%s)", f.Value.String(), f.Value.String())
	}
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		if err := f.Value.Set(strconv.Itoa(checks)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set("100") })
	}
	// Longer action sequences than rapid's default of 30 pass more
	// nominal times, jumps and crashes in one check.
	if f := flag.Lookup("rapid.steps"); f != nil && f.Value.String() == "30" {
		if err := f.Value.Set("100"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set("30") })
	}
}

// TestRapidScheduleFirings is a rapid property of schedules: one schedule
// (every 10 minutes, a catch-up window rapid draws) on two nodes sharing a
// memory store that fails a share of its operations once armed (before or
// after their effect, or half-way through a peek-lock step), nodes that
// crash and come back with their caches gone, and a clock that moves in
// small steps, jumps forward past several nominal times (every node was
// down) and steps back. After a quiet run to the end, each nominal time up
// to the newest one the schedule handled was started at most once (its
// instance has one execution) and, per the catch-up policy, at least once
// or recorded as missed: started and missed add up to the nominal times,
// no missed time has an instance, and each missed time was past the
// catch-up window when the schedule recorded it. Every firing is
// started from the schedule's own round (a detached start), the path
// allow-all takes. Both round modes.
func TestRapidScheduleFirings(t *testing.T) {
	rapidSeed(t, 30)
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			var stats rapidScheduleStats
			rapid.Check(t, func(rt *rapid.T) { rapidSchedule(rt, mode, &stats) })
			t.Logf("over all checks: %d firings started, %d missed, %d forward jumps, %d steps back, %d node restarts, faults armed %d times (%d injected), %d firings whose start ran again and found the instance started",
				stats.started, stats.missed, stats.jumps, stats.backs, stats.restarts, stats.armed, stats.faults, stats.again)
			// The checks must have exercised what they claim to.
			if stats.started == 0 || stats.missed == 0 || stats.jumps == 0 || stats.backs == 0 || stats.restarts == 0 || stats.faults == 0 {
				t.Errorf("the checks did not exercise every action: %+v", stats)
			}
		})
	}
}

type rapidScheduleStats struct {
	started, missed, jumps, backs, restarts, armed, faults, again int
}

func rapidSchedule(rt *rapid.T, mode provider.Mode, stats *rapidScheduleStats) {
	const every = 10 * time.Minute
	seed := rapid.Uint64().Draw(rt, "faultSeed")
	r := newCrashRig(rt, mode, rand.New(rand.NewPCG(seed, seed)), chronicle.Options{}, func(e *chronicle.Engine) {
		if err := chronicle.RegisterWorkflow(e, "job", job); err != nil {
			rt.Fatal(err)
		}
	})
	ctx, clock, start := context.Background(), r.clock, r.start
	window := rapid.SampledFrom([]time.Duration{5 * time.Minute, 30 * time.Minute, 2 * time.Hour}).Draw(rt, "catchupWindow")
	o := chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Every: every, Start: start}, Workflow: "job",
		Input:   jobInput{Run: rapid.SampledFrom([]time.Duration{0, 25 * time.Minute}).Draw(rt, "jobRuns")},
		Overlap: chronicle.OverlapAllowAll, CatchupWindow: window,
	}
	if err := r.nodes[0].CreateSchedule(ctx, "rs", o); err != nil {
		rt.Fatal(err)
	}
	latest := start // the latest the clock read before a step back
	armed := false
	rt.Repeat(map[string]func(*rapid.T){
		"run": func(rt *rapid.T) {
			i := rapid.IntRange(0, 1).Draw(rt, "node")
			for range rapid.IntRange(1, 8).Draw(rt, "rounds") {
				if _, err := r.nodes[i].RunOnce(ctx); err != nil && !armed {
					rt.Fatalf("node %d without faults: %v", i, err)
				}
			}
		},
		"restart": func(rt *rapid.T) {
			i := rapid.IntRange(0, 1).Draw(rt, "node")
			r.nodes[i].Close()
			r.nodes[i] = r.node(string(rune('a' + i)))
			stats.restarts++
		},
		"tick": func(rt *rapid.T) {
			clock.Advance(time.Duration(rapid.IntRange(1, 900).Draw(rt, "seconds")) * time.Second)
		},
		"jump": func(rt *rapid.T) {
			// Every node was down: the clock passes several nominal times.
			clock.Advance(time.Duration(rapid.IntRange(15, 3*60).Draw(rt, "minutes")) * time.Minute)
			stats.jumps++
		},
		"back": func(rt *rapid.T) {
			latest = later(latest, clock.Now())
			clock.Set(clock.Now().Add(-time.Duration(rapid.IntRange(1, 30).Draw(rt, "minutes")) * time.Minute))
			stats.backs++
		},
		"faults": func(rt *rapid.T) {
			armed = !armed
			if armed {
				stats.armed++
			}
			r.arm(armed)
		},
	})
	r.arm(false)
	clock.Set(later(latest, clock.Now()))
	r.quiesce(ctx)
	// The quiet run's last step moved the clock a second past its last
	// look for work.
	now := clock.Now().Add(-time.Second)
	e := r.nodes[0]

	d, err := e.DescribeSchedule(ctx, "rs")
	if err != nil {
		rt.Fatal(err)
	}
	if len(d.Next) == 0 || !d.Next[0].After(now) {
		rt.Fatalf("at %s the next firing is %v: a due firing was not handled", now.Sub(start), d.Next)
	}
	last := d.Next[0].Add(-every) // the newest nominal time handled
	nominals := int(last.Sub(start) / every)

	// Started: the instances of the schedule, each one nominal time with
	// one execution.
	list, err := e.ListInstances(ctx, chronicle.InstanceFilter{Workflow: "job", Limit: 10000})
	if err != nil {
		rt.Fatal(err)
	}
	started := map[time.Time]bool{}
	for _, inst := range list {
		nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(inst.ID, "rs@"))
		if err != nil || nominal.Sub(start)%every != 0 || !nominal.After(start) || nominal.After(last) {
			rt.Fatalf("instance %s is not a nominal time of the schedule up to %s", inst.ID, last.Sub(start))
		}
		events, err := e.History(ctx, inst.ID)
		if err != nil {
			rt.Fatal(err)
		}
		if n := count(events, history.KindExecutionStarted); n != 1 {
			rt.Fatalf("the firing of %s started %d executions", nominal.Sub(start), n)
		}
		// Under allow-all the schedule's round starts each firing itself.
		if by := events[0].Actor; by != history.WorkflowActor(chronicle.SchedulePrefix+"rs") {
			rt.Fatalf("the firing of %s was started by %s, not from the schedule's round", nominal.Sub(start), by)
		}
		started[nominal] = true
	}

	// Missed: the firings the schedule recorded as missed, as far as its
	// statuses kept them (the last 20 of each turn), and its count.
	events, err := e.History(ctx, chronicle.SchedulePrefix+"rs")
	if err != nil {
		rt.Fatal(err)
	}
	missed, again := map[time.Time]bool{}, map[time.Time]bool{}
	for _, ev := range events {
		if ev.Kind != history.KindCustomStatusSet {
			continue
		}
		a, err := ev.Attributes()
		if err != nil {
			rt.Fatal(err)
		}
		var st struct{ Recent []chronicle.ScheduleFiring }
		if err := e.Decode(a.(*history.CustomStatusSet).Status, &st); err != nil {
			rt.Fatal(err)
		}
		for _, f := range st.Recent {
			if f.Outcome == "already-started" {
				again[f.Nominal] = true
			}
			if f.Outcome != "missed" {
				continue
			}
			missed[f.Nominal] = true
			if started[f.Nominal] {
				rt.Fatalf("the firing of %s was recorded as missed and started", f.Nominal.Sub(start))
			}
			if late := f.At.Sub(f.Nominal); late <= window {
				rt.Fatalf("the firing of %s was recorded as missed %s after it, within the catch-up window of %s", f.Nominal.Sub(start), late, window)
			}
		}
	}
	if d.Started < 0 || d.Skipped < int64(len(missed)) {
		rt.Fatalf("the schedule counts %d missed firings; its statuses name %d", d.Skipped, len(missed))
	}
	if got := len(started) + int(d.Skipped); got != nominals {
		rt.Fatalf("%d nominal times up to %s; %d started and %d missed: a firing was lost or counted twice", nominals, last.Sub(start), len(started), d.Skipped)
	}
	stats.faults += r.faults
	stats.again += len(again)
	stats.started += len(started)
	stats.missed += int(d.Skipped)
}
