// Package demodata fills a memory store with a small, realistic and fully
// deterministic set of workflow instances, so that Chronicle's command-line
// tool has something to show and its golden tests have stable output.
//
// [Seed] registers four workflows on a fresh engine — an insurance claim
// with a human review task and a payment, a loan application with a
// cooling-off timer, an identity check that fails, and a refund whose
// activity was not deployed — starts eight instances with fixed ids and
// drives them with [chronicle.Engine.RunOnce] and a [round.ManualClock]
// into a mix of states:
//
//	CLM-1001   claim             completed: approved by alice and paid
//	CLM-1002   claim             running: review task open, unassigned
//	CLM-1003   claim             running: review task claimed by bob
//	CLM-1004   claim             terminated by ops as a duplicate
//	LOAN-2001  loan-application  completed after its cooling-off timer
//	LOAN-2002  loan-application  running: waiting on its cooling-off timer
//	KYC-3001   kyc-check         failed: the passport expired (2 attempts)
//	REF-4001   refund            running with a dead letter (unknown activity)
//
// Times come from the manual clock, which starts at [Start]; ids the
// client API draws come from a counter ("id-0001", ...), and the node is
// "demo". Seeding twice gives byte-identical histories, hashes included.
//
// The instances carry search attributes ([SearchAttributes]): claims,
// loans and the refund their amount, claims their policy, and a reviewed
// claim whether it was approved, which the claim workflow sets.
//
// After seeding, the refund's activity is registered, as if the fix had
// been deployed: redriving its dead letter lets the refund complete.
package demodata

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/round"
)

// Start is the clock reading when seeding begins: 2026-11-22 09:00 UTC.
var Start = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// NodeID is the node id of the demo engine; events it writes have the actor
// "worker:demo".
const NodeID = "demo"

// Demo is a seeded store and the engine that seeded it.
type Demo struct {
	// Engine has the demo's workflows and activities registered.
	Engine *chronicle.Engine
	// Store holds the demo data.
	Store provider.FullStore
	// Clock is the engine's clock; it moves only when told.
	Clock *round.ManualClock
}

// Story says what one demo instance shows.
type Story struct {
	InstanceID string
	Summary    string
}

// Stories lists the demo instances in id order with what each shows.
func Stories() []Story {
	return []Story{
		{"CLM-1001", "claim approved by alice and paid"},
		{"CLM-1002", "claim waiting for review: task open, unassigned"},
		{"CLM-1003", "claim in review: task claimed by bob"},
		{"CLM-1004", "claim terminated by ops as a duplicate"},
		{"KYC-3001", "identity check failed after 2 attempts"},
		{"LOAN-2001", "loan paid out after its 24h cooling-off timer"},
		{"LOAN-2002", "loan waiting on its cooling-off timer"},
		{"REF-4001", "refund stuck: its activity was not deployed (dead letter)"},
	}
}

// counter makes the deterministic ids of the client API.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) next() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return fmt.Sprintf("id-%04d", c.n)
}

// SearchAttributes are the search attributes the demo declares: a claim,
// a loan and a refund carry their amount, a claim its policy from its
// start, and a reviewed claim whether it was approved, set by the
// workflow once the review is in.
func SearchAttributes() map[string]query.Type {
	return map[string]query.Type{"amount": query.Float, "policy": query.Keyword, "approved": query.Bool}
}

// SeedOptions adjust [SeedWith].
type SeedOptions struct {
	// SearchAttributes declares attributes besides the demo's own
	// ([SearchAttributes]); a name the demo declares must keep its type.
	SearchAttributes map[string]query.Type
	// Checkpoints, when set, makes the demo engine sign checkpoints; the
	// seeding ends with a checkpoint covering every instance.
	Checkpoints *chronicle.CheckpointOptions
}

// Seed creates the demo engine on store, which must be empty, and fills the
// store with the demo instances. Call [Demo.Close] when done with it.
func Seed(ctx context.Context, store provider.FullStore) (*Demo, error) {
	return SeedWith(ctx, store, SeedOptions{})
}

// SeedWith is [Seed] with options.
func SeedWith(ctx context.Context, store provider.FullStore, opts SeedOptions) (*Demo, error) {
	decls := SearchAttributes()
	for name, t := range opts.SearchAttributes {
		if own, ok := decls[name]; ok && own != t {
			return nil, fmt.Errorf("%w: demodata: the demo declares %s as %v, not %v", chronicle.ErrInvalidArgument, name, own, t)
		}
		decls[name] = t
	}
	if store == nil {
		return nil, fmt.Errorf("%w: demodata: nil store", chronicle.ErrInvalidArgument)
	}
	if recs, err := store.ListInstances(ctx, &provider.ListInstancesParams{Limit: 1}); err != nil || len(recs) > 0 {
		return nil, fmt.Errorf("%w: demodata: the store is not empty (%v)", chronicle.ErrInvalidArgument, err)
	}
	clock := round.NewManualClock(Start)
	ids := &counter{}
	// The demo dead-letters an activity on purpose: keep its warning off
	// the CLI's standard error.
	engine, err := chronicle.New(store, chronicle.Options{NodeID: NodeID, Clock: clock, NewID: ids.next,
		Logger: slog.New(slog.DiscardHandler), SearchAttributes: decls, Checkpoints: opts.Checkpoints})
	if err != nil {
		return nil, err
	}
	d := &Demo{Engine: engine, Store: store, Clock: clock}
	if err := register(engine); err != nil {
		return nil, err
	}
	if err := d.seed(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("demodata: seed: %w", err)
	}
	if err := registerFix(engine); err != nil {
		d.Close()
		return nil, err
	}
	if opts.Checkpoints != nil {
		if _, err := engine.SweepCheckpoint(ctx); err != nil {
			d.Close()
			return nil, fmt.Errorf("demodata: checkpoint: %w", err)
		}
	}
	return d, nil
}

// Close releases the engine's cached executors.
func (d *Demo) Close() { d.Engine.Close() }

// Drain runs rounds and activity attempts until none is visible at the
// clock's current reading.
func (d *Demo) Drain(ctx context.Context) error {
	for range 10000 {
		worked, err := d.Engine.RunOnce(ctx)
		if err != nil {
			return err
		}
		if !worked {
			return nil
		}
	}
	return fmt.Errorf("demodata: work left after 10000 steps")
}

// tick is how often Run moves the demo clock on.
const tick = 20 * time.Millisecond

// Run runs the demo engine's workers until ctx ends, with the demo clock
// going on from where seeding left it at the pace of the wall clock: a
// dead letter redriven or a task completed meanwhile is worked at once,
// and retries and leases come due as they would. It returns when the
// engine has stopped. Use it instead of [Demo.Drain] where the demo data
// is served to people (chronicle ui).
func (d *Demo) Run(ctx context.Context) error {
	base, wall := d.Clock.Now(), time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	done := make(chan error, 1)
	go func() { done <- d.Engine.Run(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-ticker.C:
			d.Clock.Set(base.Add(time.Since(wall)))
		}
	}
}

// at sets the clock to Start+offset and drains what became due.
func (d *Demo) at(ctx context.Context, offset time.Duration) error {
	d.Clock.Set(Start.Add(offset))
	return d.Drain(ctx)
}

func (d *Demo) seed(ctx context.Context) error {
	e := d.Engine
	clerk := chronicle.StartOptions{Actor: "clerk.ines", Version: "1"}
	start := func(offset time.Duration, workflow, id string, input any, parts map[string]string, attrs map[string]any) error {
		o := clerk
		o.InstanceID, o.BusinessKey, o.BusinessParts, o.SearchAttributes = id, id, parts, attrs
		d.Clock.Set(Start.Add(offset))
		if _, err := e.Start(ctx, workflow, input, &o); err != nil {
			return err
		}
		return d.Drain(ctx)
	}
	claim := func(offset time.Duration, number, policy, holder string, amount int, damage string) error {
		return start(offset, ClaimWorkflow, number,
			Claim{Number: number, Policy: policy, Policyholder: holder, Amount: amount, Damage: damage},
			map[string]string{"policy": policy, "line": "home"}, map[string]any{"amount": float64(amount), "policy": policy})
	}
	steps := []func() error{
		func() error { return claim(0, "CLM-1001", "POL-7731", "Grace Hopper", 1280, "water damage, kitchen") },
		func() error {
			return claim(5*time.Minute, "CLM-1002", "POL-8812", "Alan Turing", 4300, "storm damage, roof")
		},
		func() error {
			return claim(10*time.Minute, "CLM-1003", "POL-2290", "Edsger Dijkstra", 760, "broken window")
		},
		func() error {
			return claim(15*time.Minute, "CLM-1004", "POL-8812", "Alan Turing", 4300, "storm damage, roof")
		},
		func() error {
			return start(20*time.Minute, LoanWorkflow, "LOAN-2001",
				LoanApplication{Number: "LOAN-2001", Applicant: "Ada Lovelace", Amount: 240000}, map[string]string{"branch": "london"}, map[string]any{"amount": 240000.0})
		},
		func() error {
			return start(25*time.Minute, KYCWorkflow, "KYC-3001",
				Person{Customer: "C-5521", Name: "Charles Babbage", Passport: "P1234567"}, map[string]string{"customer": "C-5521"}, nil)
		},
		// The identity check is retried once, a minute later.
		func() error { return d.at(ctx, 27*time.Minute) },
		func() error {
			return start(30*time.Minute, RefundWorkflow, "REF-4001",
				RefundRequest{Order: "ORD-99817", Amount: 89}, map[string]string{"order": "ORD-99817"}, map[string]any{"amount": 89.0})
		},
		// alice approves CLM-1001 without claiming it first: she holds one
		// of its roles and it is unassigned.
		func() error {
			d.Clock.Set(Start.Add(time.Hour))
			err := e.CompleteTask(ctx, ReviewTaskID("CLM-1001"), Review{Approved: true, Amount: 1150, Note: "estimate confirmed by photos"},
				chronicle.User{ID: "alice", Roles: []string{"adjuster"}})
			if err != nil {
				return err
			}
			return d.Drain(ctx)
		},
		func() error {
			d.Clock.Set(Start.Add(time.Hour + 15*time.Minute))
			if err := e.ClaimTask(ctx, ReviewTaskID("CLM-1003"), chronicle.User{ID: "bob", Roles: []string{"adjuster"}}); err != nil {
				return err
			}
			return d.Drain(ctx)
		},
		func() error {
			d.Clock.Set(Start.Add(time.Hour + 30*time.Minute))
			if err := e.Terminate(ctx, "CLM-1004", "duplicate of CLM-1002", &chronicle.ControlOptions{Actor: "ops"}); err != nil {
				return err
			}
			return d.Drain(ctx)
		},
		func() error {
			return start(2*time.Hour, LoanWorkflow, "LOAN-2002",
				LoanApplication{Number: "LOAN-2002", Applicant: "Kathleen Booth", Amount: 180000}, map[string]string{"branch": "leeds"}, map[string]any{"amount": 180000.0})
		},
		// The next morning: LOAN-2001's cooling-off timer fires.
		func() error { return d.at(ctx, 20*time.Minute+CoolingOff) },
		func() error { return d.at(ctx, time.Hour+CoolingOff) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
