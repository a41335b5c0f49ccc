package chronicle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/leakcheck"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// bundle is one test's engine on a fresh store, driven step by step with a
// manual clock.
type bundle struct {
	store  provider.Store
	mem    *memory.Store // the store, when it is a memory store
	clock  *round.ManualClock
	engine *chronicle.Engine
	ctx    context.Context
	opts   chronicle.Options
	// progress is closed and replaced after each round and activity
	// attempt an engine of the bundle reports (see waitUntil).
	progress *progress
}

// progress is a channel closed at every report of an engine's observer:
// what a waiter selects on besides the store's hints, since a round run
// with an activity's completion that enqueues nothing closes no hint.
type progress struct {
	inner chronicle.Observer

	mu sync.Mutex
	ch chan struct{}
}

// C returns the channel the next report closes.
func (p *progress) C() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch
}

func (p *progress) tick() {
	p.mu.Lock()
	close(p.ch)
	p.ch = make(chan struct{})
	p.mu.Unlock()
}

// Round implements chronicle.Observer.
func (p *progress) Round(s chronicle.RoundStats) {
	if p.inner != nil {
		p.inner.Round(s)
	}
	p.tick()
}

// Activity implements chronicle.Observer.
func (p *progress) Activity(s chronicle.ActivityStats) {
	if p.inner != nil {
		p.inner.Activity(s)
	}
	p.tick()
}

// setup returns a bundle on a fresh memory store.
func setup(t *testing.T, opts ...chronicle.Options) *bundle {
	t.Helper()
	mem := memory.New(memory.Options{})
	b := setupOn(t, mem, opts...)
	b.mem = mem
	return b
}

// setupOn returns a bundle on store.
func setupOn(t *testing.T, store provider.Store, opts ...chronicle.Options) *bundle {
	t.Helper()
	var o chronicle.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	b := &bundle{store: store, clock: round.NewManualClock(t0), ctx: context.Background()}
	if o.NodeID == "" {
		o.NodeID = "test"
	}
	o.Clock = b.clock
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = 3
	}
	b.progress = &progress{inner: o.Observer, ch: make(chan struct{})}
	o.Observer = b.progress
	b.opts = o
	b.engine = b.newEngine(t)
	return b
}

// newEngine returns another engine (a restarted node) on the same store.
func (b *bundle) newEngine(t *testing.T) *chronicle.Engine {
	t.Helper()
	e, err := chronicle.New(b.store, b.opts)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

// drain runs rounds and activities until nothing is visible.
func (b *bundle) drain(t *testing.T) {
	t.Helper()
	drain(t, b.engine)
}

func drain(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		worked, err := e.RunOnce(context.Background())
		require.NoError(t, err)
		if !worked {
			return
		}
	}
	t.Fatal("work left after 2000 steps")
}

// advance moves the clock and drains.
func (b *bundle) advance(t *testing.T, d time.Duration) {
	t.Helper()
	b.clock.Advance(d)
	b.drain(t)
}

func (b *bundle) start(t *testing.T, workflow, id string, input any) {
	t.Helper()
	_, err := b.engine.Start(b.ctx, workflow, input, &chronicle.StartOptions{InstanceID: id})
	require.NoError(t, err)
}

func (b *bundle) describe(t *testing.T, id string) *chronicle.Instance {
	t.Helper()
	inst, err := b.engine.Describe(b.ctx, id)
	require.NoError(t, err)
	return inst
}

func (b *bundle) history(t *testing.T, id string) []history.Event {
	t.Helper()
	events, err := b.engine.History(b.ctx, id)
	require.NoError(t, err)
	require.NoError(t, history.Verify(events))
	_, err = round.Fold(id, events)
	require.NoError(t, err)
	return events
}

func kinds(events []history.Event) []history.Kind {
	out := make([]history.Kind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func count(events []history.Event, k history.Kind) int {
	n := 0
	for _, e := range events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// result decodes a completed instance's result.
func result[T any](t *testing.T, b *bundle, id string) T {
	t.Helper()
	inst := b.describe(t, id)
	require.Equal(t, chronicle.StatusCompleted, inst.Status, "instance %s: %+v", id, inst.Failure)
	var out T
	require.NoError(t, inst.Result(&out))
	return out
}

func register[In, Out any](t *testing.T, e *chronicle.Engine, name string, fn func(*chronicle.Context, In) (Out, error)) {
	t.Helper()
	require.NoError(t, chronicle.RegisterWorkflow(e, name, fn))
}

func activity[In, Out any](t *testing.T, e *chronicle.Engine, name string, fn func(context.Context, In) (Out, error)) {
	t.Helper()
	require.NoError(t, chronicle.RegisterActivity(e, name, fn))
}
