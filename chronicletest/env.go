package chronicletest

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// DefaultStart is the time the clock of an [Env] reads when it is created,
// unless [StartAt] says otherwise: fixed, so that histories are the same on
// every run. Tests change the start with StartAt, never this variable.
var DefaultStart = time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)

// DefaultMaxSteps bounds the steps of one run (see [MaxSteps]).
const DefaultMaxSteps = 100_000

// RetryJitter is the retry jitter the environment gives the engine: the
// top of the range, so that every activity retry waits its policy's
// nominal delay (see [chronicle.Options.RetryJitter]).
const RetryJitter = 1.0

// NodeID is the engine's node id in an environment: history records the
// engine's events as "worker:test".
const NodeID = "test"

// T is the part of testing.TB an environment uses: *testing.T and
// *testing.B satisfy it, and so does the T of another test framework that
// has these methods. Fatal and Fatalf must stop the caller, as
// testing.TB's do.
type T interface {
	Helper()
	Cleanup(func())
	Log(args ...any)
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var _ T = testing.TB(nil)

// Env is a test environment: an engine on a store, a virtual clock and the
// actions scheduled on it. Create it with [New]. Its methods fail the test
// (t.Fatal) when the engine or the store returns an error; they must be
// called from the test's goroutine (activities and mocks run there too),
// except Engine, Now and Elapsed.
type Env struct {
	t      T
	ctx    context.Context
	engine *chronicle.Engine
	clock  *round.ManualClock
	start  time.Time

	maxSteps  int
	deadOK    bool
	actions   []*action
	actionSeq int

	mu    sync.Mutex
	mocks map[string]mockChecker
	order []string
	calls map[string]int
}

// action is something scheduled to run at a virtual time.
type action struct {
	at  time.Time
	seq int
	fn  func()
}

// config collects the options of New.
type config struct {
	start    time.Time
	store    provider.Store
	opts     chronicle.Options
	maxSteps int
	deadOK   bool
	idPrefix string
}

// Option configures [New].
type Option func(*config)

// StartAt sets the time the clock reads when the environment is created.
// Default: [DefaultStart].
func StartAt(t time.Time) Option { return func(c *config) { c.start = t } }

// Store runs the environment on store instead of a new memory store: a
// memory store in peek-lock mode, say, or a PostgreSQL store on a schema
// of its own (see provider/postgres/pgtest). The store should start empty.
// Several environments may share one store to play several nodes, a
// rolling deploy say: give them different [IDPrefix]es, and start each at
// the time the others reached ([StartAt]), since each has its own clock.
func Store(store provider.Store) Option { return func(c *config) { c.store = store } }

// EngineOptions sets the options of the engine. The environment owns the
// clock (opts.Clock must be nil) and fills in, when they are zero: NodeID
// ([NodeID]), NewID (a counter: "id-1", "id-2", ..., see [IDPrefix]), RetryJitter
// ([RetryJitter]) and Logger (the test's log, at Info level). An Observer
// is called after the environment's own. CacheSize -1 replays every round
// from history, which tests that code and history agree at every step.
func EngineOptions(opts chronicle.Options) Option { return func(c *config) { c.opts = opts } }

// IDPrefix sets the prefix of the ids the environment's counter makes.
// Default "id-". Environments that share a store (a rolling deploy
// simulated with two environments, one per version of the code) need
// different prefixes: two signals with one idempotency key are one signal.
func IDPrefix(prefix string) Option { return func(c *config) { c.idPrefix = prefix } }

// MaxSteps bounds how many steps (rounds and activity attempts run, and
// moves of the clock) one run of the environment may take before it fails
// the test: a workflow that never becomes idle, such as one with a
// periodic timer, is run with RunFor or RunUntil instead. Default
// [DefaultMaxSteps].
func MaxSteps(n int) Option { return func(c *config) { c.maxSteps = n } }

// AllowDeadLetters lets the test end with unresolved dead letters in the
// store. By default the environment fails a test that leaves any, since a
// dead letter means a workflow panicked, diverged from its history, or
// called an activity nobody registered.
func AllowDeadLetters() Option { return func(c *config) { c.deadOK = true } }

// New returns an environment for the test t. The engine is closed, the
// mocks' expectations are checked and the store is searched for dead
// letters when the test ends.
func New(t T, opts ...Option) *Env {
	t.Helper()
	c := config{start: DefaultStart, maxSteps: DefaultMaxSteps, idPrefix: "id-"}
	for _, o := range opts {
		o(&c)
	}
	if c.opts.Clock != nil {
		t.Fatal("chronicletest: EngineOptions has a Clock; the environment owns the clock")
	}
	if c.maxSteps <= 0 {
		t.Fatalf("chronicletest: MaxSteps is %d, must be positive", c.maxSteps)
	}
	if c.store == nil {
		c.store = memory.New(memory.Options{})
	}
	env := &Env{
		t: t, start: c.start.UTC().Truncate(time.Microsecond), maxSteps: c.maxSteps, deadOK: c.deadOK,
		mocks: map[string]mockChecker{}, calls: map[string]int{},
	}
	env.clock = round.NewManualClock(env.start)
	ctx, cancel := context.WithCancel(context.Background())
	env.ctx = ctx
	o := c.opts
	o.Clock = env.clock
	if o.NodeID == "" {
		o.NodeID = NodeID
	}
	if o.NewID == nil {
		var n atomic.Int64
		prefix := c.idPrefix
		o.NewID = func() string { return prefix + strconv.FormatInt(n.Add(1), 10) }
	}
	if o.RetryJitter == nil {
		o.RetryJitter = func() float64 { return RetryJitter }
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	o.Observer = &observer{env: env, next: o.Observer}
	engine, err := chronicle.New(c.store, o)
	if err != nil {
		cancel()
		t.Fatalf("chronicletest: new engine: %v", err)
	}
	env.engine = engine
	t.Cleanup(func() {
		defer cancel()
		defer engine.Close()
		env.checkMocks()
		env.checkDeadLetters()
	})
	return env
}

// Engine returns the environment's engine: register workflows, activities
// and projections on it, and use its client API.
func (e *Env) Engine() *chronicle.Engine { return e.engine }

// Context returns the context the environment calls the engine with; it
// ends when the test ends.
func (e *Env) Context() context.Context { return e.ctx }

// Now returns the virtual time.
func (e *Env) Now() time.Time { return e.clock.Now() }

// Elapsed returns the virtual time since the environment was created.
func (e *Env) Elapsed() time.Duration { return e.clock.Now().Sub(e.start) }

// StartTime returns the time the clock read when the environment was
// created.
func (e *Env) StartTime() time.Time { return e.start }

// Start starts a workflow instance and returns its id, as
// [chronicle.Engine.Start] does; the instance runs when the environment
// runs. opts may be nil; an instance without an InstanceID gets the next
// id of the counter.
func (e *Env) Start(workflow string, input any, opts *chronicle.StartOptions) string {
	e.t.Helper()
	id, err := e.engine.Start(e.ctx, workflow, input, opts)
	if err != nil {
		e.t.Fatalf("chronicletest: start %s: %v", workflow, err)
	}
	return id
}

// At schedules fn to run when the virtual clock reads the environment's
// start time plus d: a signal that arrives two hours into a workflow is
// env.At(2*time.Hour, func() { ... }). fn runs on the test's goroutine
// during a run, before the work that is due at the same time; an action
// whose time has passed runs at the start of the next run. Actions due at
// the same time run in the order they were scheduled.
func (e *Env) At(d time.Duration, fn func()) { e.schedule(e.start.Add(d), fn) }

// After schedules fn as At does, d after the current virtual time.
func (e *Env) After(d time.Duration, fn func()) { e.schedule(e.clock.Now().Add(d), fn) }

func (e *Env) schedule(at time.Time, fn func()) {
	e.actionSeq++
	e.actions = append(e.actions, &action{at: at.UTC().Truncate(time.Microsecond), seq: e.actionSeq, fn: fn})
	slices.SortStableFunc(e.actions, func(a, b *action) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
}

// RunUntilIdle runs the environment, skipping time, until nothing is
// queued and no scheduled action is left: every instance has ended or
// waits for something only the test can give (a signal, a task action).
func (e *Env) RunUntilIdle() {
	e.t.Helper()
	e.run(time.Time{}, nil)
}

// RunFor runs the environment, skipping time, for d of virtual time: it
// stops when the clock would pass now+d, and leaves the clock at now+d.
func (e *Env) RunFor(d time.Duration) {
	e.t.Helper()
	e.RunUntil(e.clock.Now().Add(d))
}

// RunUntil runs the environment, skipping time, until the clock would pass
// t (it runs the work due at t), and leaves the clock at t.
func (e *Env) RunUntil(t time.Time) {
	e.t.Helper()
	t = t.UTC().Truncate(time.Microsecond)
	if t.Before(e.clock.Now()) {
		e.t.Fatalf("chronicletest: RunUntil %s is before the virtual time %s", t, e.clock.Now())
	}
	e.run(t, nil)
	if e.clock.Now().Before(t) {
		e.clock.Set(t)
	}
}

// Wait runs the environment, skipping time, until the instance has ended,
// and returns it. It fails the test when the environment becomes idle
// first: the instance waits for something no scheduled action gives.
func (e *Env) Wait(instanceID string) *chronicle.Instance {
	e.t.Helper()
	var inst *chronicle.Instance
	ended := func() bool {
		i, err := e.engine.Describe(e.ctx, instanceID)
		if err != nil {
			e.t.Fatalf("chronicletest: wait for %s: %v", instanceID, err)
		}
		inst = i
		return i.Status.Terminal()
	}
	if !e.run(time.Time{}, ended) {
		e.t.Fatalf("chronicletest: %s is %s and nothing is left to run (at %s, %s in): it waits for something no action gives",
			instanceID, inst.Status, e.clock.Now().Format(time.RFC3339), e.Elapsed())
	}
	return inst
}

// run is the loop of the package doc. With a non-zero limit it stops
// before the clock passes it; with done it stops once done reports true,
// and reports whether it did.
func (e *Env) run(limit time.Time, done func() bool) bool {
	e.t.Helper()
	steps, stuck := 0, 0
	for {
		e.runActions()
		worked := false
		for {
			if done != nil && done() {
				return true
			}
			ok, err := e.engine.RunOnce(e.ctx)
			if err != nil {
				e.t.Fatalf("chronicletest: run: %v", err)
			}
			if !ok {
				break
			}
			worked = true
			if steps++; steps > e.maxSteps {
				e.t.Fatalf("chronicletest: %d steps without becoming idle (virtual time %s); a workflow that never ends needs RunFor or RunUntil",
					e.maxSteps, e.Elapsed())
			}
		}
		if done != nil && done() {
			return true
		}
		next, ok := e.next()
		if !ok {
			return false
		}
		now := e.clock.Now()
		if !limit.IsZero() && next.After(limit) {
			return false
		}
		if next.After(now) {
			e.clock.Set(next)
			stuck = 0
		} else if !worked && !e.actionDue(now) {
			// The store says work is due, but no round or activity took
			// it: it never will, since nothing else runs.
			if stuck++; stuck > 2 {
				e.t.Fatalf("chronicletest: work is due at %s but no round or activity attempt takes it", next)
			}
		}
		if steps++; steps > e.maxSteps {
			e.t.Fatalf("chronicletest: %d steps without becoming idle (virtual time %s); a workflow that never ends needs RunFor or RunUntil",
				e.maxSteps, e.Elapsed())
		}
	}
}

// runActions runs the actions that are due, including those the actions
// schedule for times already past.
func (e *Env) runActions() {
	for len(e.actions) > 0 && !e.actions[0].at.After(e.clock.Now()) {
		a := e.actions[0]
		e.actions = e.actions[1:]
		a.fn()
	}
}

func (e *Env) actionDue(now time.Time) bool {
	return len(e.actions) > 0 && !e.actions[0].at.After(now)
}

// next returns the earliest time at which an action or queued work is
// due.
func (e *Env) next() (time.Time, bool) {
	e.t.Helper()
	var next time.Time
	ok := false
	consider := func(t time.Time) {
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	if len(e.actions) > 0 {
		consider(e.actions[0].at)
	}
	stats, err := e.engine.QueueStats(e.ctx)
	if err != nil {
		e.t.Fatalf("chronicletest: queue stats: %v", err)
	}
	for _, q := range []chronicle.QueueStat{stats.Orchestration, stats.Activity} {
		if q.Queued {
			consider(q.Next)
		}
	}
	return next, ok
}

// checkDeadLetters fails the test when the store holds unresolved dead
// letters, unless AllowDeadLetters was given.
func (e *Env) checkDeadLetters() {
	if e.deadOK {
		return
	}
	letters, err := e.engine.ListDeadLetters(context.Background(), chronicle.DeadLetterFilter{Status: provider.DeadLetterDead})
	if err != nil {
		e.t.Errorf("chronicletest: list dead letters: %v", err)
		return
	}
	for _, l := range letters {
		e.t.Errorf("chronicletest: dead letter %s of %s (%s): %s (pass chronicletest.AllowDeadLetters() if the test expects it)",
			l.ID, l.InstanceID, l.Reason, l.Error)
	}
}

// ActivityAttempts returns how many attempts of the activity name ran,
// mocked or not, failed ones included.
func (e *Env) ActivityAttempts(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[name]
}

// observer counts activity attempts. Failed rounds and dead letters are
// in the test's log already: the engine logs them.
type observer struct {
	env  *Env
	next chronicle.Observer
}

func (o *observer) Round(s chronicle.RoundStats) {
	if o.next != nil {
		o.next.Round(s)
	}
}

func (o *observer) Activity(s chronicle.ActivityStats) {
	o.env.mu.Lock()
	o.env.calls[s.Name]++
	o.env.mu.Unlock()
	if o.next != nil {
		o.next.Activity(s)
	}
}

// testLogger returns a logger that writes Info and above to the test's
// log, without wall-clock times.
func testLogger(t T) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

type testWriter struct{ t T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var (
	_ chronicle.Observer = (*observer)(nil)
	_ io.Writer          = (*testWriter)(nil)
)
