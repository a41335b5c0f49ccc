package chronicle_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// crashRig is what the crash tests of the built-in workflows (schedules,
// batches) share: two nodes on a memory store that, once armed, fails 12 %
// of its operations (before or after their effect, or half-way through a
// peek-lock step), a manual clock, nodes that restart with their caches
// and leases gone, and a quiet run to the end.
type crashRig struct {
	t     rigT
	rng   *rand.Rand
	store *memory.Store
	clock *round.ManualClock
	start time.Time
	nodes []*chronicle.Engine
	opts  chronicle.Options
	setup func(*chronicle.Engine)
	ids   int

	mu     sync.Mutex
	faulty bool
	faults int
}

// rigT is what the rig needs of a test: a *testing.T, or a *rapid.T
// (one check of a property).
type rigT interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// newCrashRig returns a rig with nodes "a" and "b", built with opts (the
// rig sets the node id, clock, ids and leases) and then setup.
func newCrashRig(t rigT, mode provider.Mode, rng *rand.Rand, opts chronicle.Options, setup func(*chronicle.Engine)) *crashRig {
	return newCrashRigBetween(t, mode, rng, opts, setup, nil)
}

// newCrashRigBetween is newCrashRig with a hook the memory store runs
// between two record writes of a peek-lock step (memory.Options.BetweenWrites),
// given the rig.
func newCrashRigBetween(t rigT, mode provider.Mode, rng *rand.Rand, opts chronicle.Options, setup func(*chronicle.Engine), between func(r *crashRig, op memory.Op, done int)) *crashRig {
	r := &crashRig{t: t, rng: rng, opts: opts, setup: setup, start: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	var hook func(memory.Op, int)
	if between != nil {
		hook = func(op memory.Op, done int) { between(r, op, done) }
	}
	r.clock = round.NewManualClock(r.start)
	r.store = memory.New(memory.Options{Mode: mode, Fault: func(memory.Op) *memory.Fault {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.faulty || r.rng.IntN(100) >= 12 {
			return nil
		}
		r.faults++
		return &memory.Fault{AfterEffect: r.rng.IntN(2) == 0, AfterWrites: r.rng.IntN(3)}
	}, BetweenWrites: hook})
	r.nodes = []*chronicle.Engine{r.node("a"), r.node("b")}
	return r
}

func (r *crashRig) node(name string) *chronicle.Engine {
	r.ids++
	prefix := fmt.Sprintf("%s-%d-", name, r.ids)
	n := 0
	o := r.opts
	o.NodeID, o.Clock, o.Logger, o.MaxDeliveries = name, r.clock, slog.New(slog.DiscardHandler), 1<<20
	o.ActivityLease, o.RoundLease, o.RetryJitter = time.Minute, time.Minute, func() float64 { return 1 }
	o.NewID = func() string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	e, err := chronicle.New(r.store, o)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.setup != nil {
		r.setup(e)
	}
	r.t.Cleanup(e.Close)
	return e
}

// intN draws from the rig's random source, which the store's fault hook
// also draws from, on whatever goroutine calls the store (a round's lease
// renewal, say).
func (r *crashRig) intN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// arm turns the faults on or off; turning them off logs how many there
// were.
func (r *crashRig) arm(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faulty = on
	if !on {
		r.t.Logf("%d faults injected, clock at %s", r.faults, r.clock.Now().Sub(r.start))
	}
}

// step runs one round on a node drawn at random, which first crashes and
// comes back (its cache gone) one time in 50.
func (r *crashRig) step(ctx context.Context) (worked bool) {
	i := r.intN(len(r.nodes))
	if r.intN(50) == 0 {
		r.nodes[i].Close()
		r.nodes[i] = r.node(string(rune('a' + i)))
	}
	worked, _ = r.nodes[i].RunOnce(ctx)
	return worked
}

// quiesce runs both nodes until neither finds work for four minutes of
// clock.
func (r *crashRig) quiesce(ctx context.Context) {
	for quiet := 0; quiet < 240; {
		w0, err0 := r.nodes[0].RunOnce(ctx)
		w1, err1 := r.nodes[1].RunOnce(ctx)
		if err0 != nil || err1 != nil {
			r.t.Fatalf("after the faults: %v, %v", err0, err1)
		}
		if w0 || w1 {
			quiet = 0
			continue
		}
		quiet++
		r.clock.Advance(time.Second)
	}
}
