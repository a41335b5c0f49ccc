package chronicle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// Engine runs workflows on a store: register workflows and activities,
// call [Engine.Run] to start its workers, and use the client methods
// ([Engine.Start], [Engine.RaiseEvent], ...) from anywhere. Any number of
// engines (nodes) may share one store. A process that starts and operates
// instances without running their code uses a [Client] instead.
type Engine struct {
	store provider.Store
	opts  Options
	log   *slog.Logger

	mu         sync.RWMutex
	workflows  map[string]replay.WorkflowFunc
	activities map[string]round.ActivityFunc
	// inputs holds the input type of each registered workflow, which
	// Start checks inputs against.
	inputs map[string]reflect.Type
	// clientOnly is set for the engine behind a Client: it starts
	// workflows it has not registered (it cannot register any).
	clientOnly bool

	replayer  *replay.Replayer
	projector *projector.Projector
	runner    *round.Runner
	worker    *round.ActivityWorker
	running   atomic.Bool
	// combine merges concurrent client writes (see enqueue).
	combine combiner
	// cp collects heads for signed checkpoints; nil when they are off.
	cp *checkpointer
	// share is the engine's share of a partitioned store's partitions;
	// nil for a store of one partition.
	share *partitionShare
	// queues are the states of the queues of Run's workers, while it
	// runs: a change of the partition leases wakes their workers.
	queues atomic.Pointer[[]*queueState]
	// payloads decodes user payloads, opening sealed ones, and seals
	// those of instances with a data subject.
	payloads *payloadCodec
	// schedClient starts the firings of schedules whose workflow this
	// engine has not registered (see scheduleClient).
	schedMu     sync.Mutex
	schedClient *Engine
}

// New returns an engine on store. It validates the options and fills in
// their defaults.
func New(store provider.Store, opts Options) (*Engine, error) {
	if store == nil {
		return nil, errNoStore
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	opts.SearchAttributes = maps.Clone(opts.SearchAttributes)
	opts.Retention = maps.Clone(opts.Retention)
	if opts.Keys != nil {
		if opts.SearchAttributes == nil {
			opts.SearchAttributes = map[string]query.Type{}
		}
		if t, ok := opts.SearchAttributes[SubjectAttribute]; ok && t != query.Keyword {
			return nil, invalid("search attribute %s is declared %s; with Options.Keys it holds the data subject, a keyword", SubjectAttribute, t)
		}
		opts.SearchAttributes[SubjectAttribute] = query.Keyword
	}
	e := &Engine{
		store: store, opts: opts, log: opts.Logger,
		workflows: map[string]replay.WorkflowFunc{}, activities: map[string]round.ActivityFunc{}, inputs: map[string]reflect.Type{},
		cp:       newCheckpointer(opts.Checkpoints, store),
		payloads: newPayloadCodec(opts.Codec, opts.Keys),
	}
	e.replayer = replay.New(replay.Options{
		Lookup: e.workflow, Codec: e.payloads, Seal: e.sealFor, MaxPayloadSize: opts.MaxPayloadSize,
		DefaultRetry: opts.DefaultRetry, Logger: opts.Logger, SearchAttributes: opts.SearchAttributes,
		QueuePriorities: maps.Clone(opts.QueuePriorities),
	})
	if n := partitionsOf(store); n > 1 {
		e.share = &partitionShare{partitions: n}
	}
	lookIn := func() []int { return e.share.lookIn(e.opts.Clock.Now(), e.opts.SafetyPoll) }
	var err error
	if e.projector, err = projector.New(); err != nil {
		return nil, err
	}
	e.runner, err = round.NewRunner(store, round.RunnerOptions{
		Node: opts.NodeID, Turn: e.replayer.Turn, Project: e.projector.Project, Clock: opts.Clock, MaxDeliveries: opts.MaxDeliveries,
		LeaseDuration: opts.RoundLease, CacheSize: opts.CacheSize, Logger: opts.Logger, GroupSize: opts.RoundGroup,
		Partitions: lookIn,
	})
	if err != nil {
		return nil, err
	}
	// With EagerActivities an activity's completion runs the round it
	// wakes in its own transaction (off by default: see Options).
	var rounds *round.Runner
	if opts.EagerActivities {
		rounds = e.runner
	}
	e.worker, err = round.NewActivityWorker(store, round.ActivityWorkerOptions{
		Node: opts.NodeID, Resolve: e.activity, Queues: opts.ActivityQueues, Clock: opts.Clock,
		LeaseDuration: opts.ActivityLease, DefaultRetry: opts.DefaultRetry, Jitter: opts.RetryJitter, Logger: opts.Logger,
		Rates: slices.Clone(opts.RateLimits), Rounds: rounds, Eager: opts.EagerActivities,
		Partitions: lookIn,
	})
	if err != nil {
		return nil, err
	}
	if err := e.registerSchedules(); err != nil {
		return nil, err
	}
	if err := e.registerBatches(); err != nil {
		return nil, err
	}
	if err := e.registerRetention(); err != nil {
		return nil, err
	}
	if err := e.registerErasure(); err != nil {
		return nil, err
	}
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() provider.Store { return e.store }

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options {
	o := e.opts
	// The declarations are the engine's own: a caller changing the map
	// it gets does not change what the engine checks.
	o.SearchAttributes = maps.Clone(o.SearchAttributes)
	return o
}

func (e *Engine) workflow(name string) (replay.WorkflowFunc, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	fn, ok := e.workflows[name]
	return fn, ok
}

func (e *Engine) activity(name string) (round.ActivityFunc, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	fn, ok := e.activities[name]
	return fn, ok
}

// RegisterWorkflow registers a workflow function under name. Its input and
// result are encoded with the engine's codec; [Engine.Start] refuses an
// input that is not an In. [Workflow.Register] is the typed form.
func RegisterWorkflow[In, Out any](e *Engine, name string, fn func(ctx *Context, in In) (Out, error)) error {
	if err := validateID("workflow name", name); err != nil {
		return err
	}
	if fn == nil {
		return invalid("workflow %s has a nil function", name)
	}
	codec, maxSize := e.payloads, e.opts.MaxPayloadSize
	wrapped := func(ctx *Context, input []byte) ([]byte, error) {
		var in In
		if err := codec.Decode(input, &in); err != nil {
			return nil, &replay.InputError{Workflow: name, Err: err}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, boundError(err, maxSize)
		}
		b, err := codec.Encode(out)
		if err != nil {
			return nil, fmt.Errorf("encode output of workflow %s: %w", name, err)
		}
		if len(b) > maxSize {
			// The execution fails, as a command with a payload over the
			// limit does: the output would enter history.
			return nil, fmt.Errorf("%w: output of workflow %s is %d bytes, limit %d", ErrPayloadTooLarge, name, len(b), maxSize)
		}
		return e.sealFor(ctx.Subject(), ctx.InstanceID(), b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.workflows[name]; ok {
		return fmt.Errorf("%w: workflow %s", ErrAlreadyRegistered, name)
	}
	e.workflows[name] = wrapped
	e.inputs[name] = reflect.TypeFor[In]()
	return nil
}

// RegisterActivity registers an activity function under name. It receives
// a context.Context that is cancelled when its lease is lost, its instance
// ends or the engine stops; [Heartbeat] keeps the lease of long activities.
func RegisterActivity[In, Out any](e *Engine, name string, fn func(ctx context.Context, in In) (Out, error)) error {
	if err := validateID("activity name", name); err != nil {
		return err
	}
	if fn == nil {
		return invalid("activity %s has a nil function", name)
	}
	codec, maxSize := e.payloads, e.opts.MaxPayloadSize
	wrapped := func(ctx context.Context, lease *provider.ActivityLease, hb *round.Heartbeat) (_ []byte, err error) {
		defer func() {
			// The panic's text is recorded as the attempt's failure: keep
			// it storable and within the limit.
			if p := recover(); p != nil {
				err = boundError(&activityPanic{value: p}, maxSize)
			}
		}()
		var in In
		if err := codec.Decode(lease.Task.Input, &in); err != nil {
			return nil, NonRetryable(fmt.Errorf("decode input of activity %s: %w", name, err))
		}
		ctx = context.WithValue(ctx, activityKey{}, &activityState{lease: lease, hb: hb, every: e.opts.ActivityHeartbeat, clock: e.opts.Clock})
		out, err := fn(ctx, in)
		if err != nil {
			return nil, boundError(err, maxSize)
		}
		b, err := codec.Encode(out)
		if err != nil {
			return nil, NonRetryable(fmt.Errorf("encode result of activity %s: %w", name, err))
		}
		if len(b) > maxSize {
			return nil, NonRetryable(fmt.Errorf("%w: result of activity %s is %d bytes, limit %d", ErrPayloadTooLarge, name, len(b), maxSize))
		}
		if subject, ok := SealedSubject(lease.Task.Input); ok {
			// The result is sealed for the subject its input was.
			if b, err = e.payloads.seal(ctx, subject, lease.Task.InstanceID, b); err != nil {
				return nil, NonRetryable(err)
			}
		}
		return b, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.activities[name]; ok {
		return fmt.Errorf("%w: activity %s", ErrAlreadyRegistered, name)
	}
	e.activities[name] = wrapped
	return nil
}

// Run starts the engine's orchestration and activity workers and blocks
// until ctx ends. It then stops taking work and returns nil within
// ShutdownTimeout: it waits for rounds and activities in flight, cancels
// the contexts of those still running when the last quarter of
// ShutdownTimeout (at most its last 5s) begins, and when the time is up
// returns without them. An activity that ignores its context is
// abandoned: its goroutine runs on until the function returns, what it
// returns is not recorded (the worker's store calls are cancelled), and
// its claim runs out at the attempt's timeout, after which a worker of any
// node retries it. Run releases its cached executors before it returns.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrEngineRunning
	}
	defer e.running.Store(false)
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	pools := []struct {
		q       provider.Queue
		workers int
		step    stepFunc
	}{
		{provider.QueueOrchestration, e.opts.OrchestrationWorkers, e.roundStep},
		{provider.QueueActivity, e.opts.ActivityWorkers, func(ctx context.Context) (bool, bool, error) {
			worked, err := e.runActivity(ctx)
			return worked, worked, err
		}},
	}
	var states []*queueState
	defer e.queues.Store(nil)
	for _, p := range pools {
		qs := &queueState{q: p.q, wake: make(chan struct{}, 1), share: e.share}
		states = append(states, qs)
		if n, ok := e.store.(provider.Notifier); ok {
			qs.leases = make(chan struct{}, 1)
			// The first hint is asked for before any worker looks for
			// work: what is enqueued after a worker's look is hinted.
			hint := n.WorkHint(p.q)
			wg.Add(1)
			go func() {
				defer wg.Done()
				qs.watchHints(ctx, n, hint)
			}()
		}
		for i := 0; i < p.workers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.loop(ctx, work, qs, p.step)
			}()
		}
	}
	e.queues.Store(&states)
	if l, ok := e.store.(provider.PartitionLeaser); ok && e.share != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runPartitionLeases(ctx, l)
		}()
	}
	cpDone := make(chan struct{})
	if e.cp != nil {
		go func() {
			defer close(cpDone)
			e.runCheckpoints(ctx)
		}()
	} else {
		close(cpDone)
	}
	if err := e.startRetention(ctx); err != nil {
		e.log.WarnContext(ctx, "retention not started; it starts with the next engine", slog.Any("error", err))
	}
	e.log.InfoContext(ctx, "engine started", slog.String("node", e.opts.NodeID),
		slog.Int("orchestration_workers", e.opts.OrchestrationWorkers), slog.Int("activity_workers", e.opts.ActivityWorkers))
	<-ctx.Done()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	stopBy := time.Now().Add(e.opts.ShutdownTimeout)
	e.drainWork(done, cancelWork)
	<-cpDone
	e.finalCheckpoint(ctx, stopBy)
	e.runner.Forget()
	e.log.Info("engine stopped", slog.String("node", e.opts.NodeID))
	return nil
}

// drainWork waits for the workers to be done within ShutdownTimeout:
// for its first part as they are, for the rest with their work's context
// cancelled; then it gives up on them.
func (e *Engine) drainWork(done <-chan struct{}, cancelWork context.CancelFunc) {
	grace := min(e.opts.ShutdownTimeout/4, 5*time.Second)
	wait := time.NewTimer(e.opts.ShutdownTimeout - grace)
	defer wait.Stop()
	select {
	case <-done:
		return
	case <-wait.C:
	}
	e.log.Warn("shutdown timeout near: cancelling work in flight", slog.Duration("grace", grace))
	cancelWork()
	wait.Reset(grace)
	select {
	case <-done:
	case <-wait.C:
		e.log.Warn("shutdown timeout: abandoning work that ignores its cancellation; "+
			"the claims of its activities run out at their timeouts and other workers retry them",
			slog.Duration("shutdown_timeout", e.opts.ShutdownTimeout))
	}
}

// Close releases the executors the engine keeps cached between rounds (and
// their goroutines). Run does it when it returns; call Close after driving
// the engine with RunOnce. The engine can still be used afterwards.
func (e *Engine) Close() { e.runner.Forget() }

// RunOnce runs at most one round and one activity attempt and reports
// whether there was work. Tests drive an engine with it instead of Run.
func (e *Engine) RunOnce(ctx context.Context) (bool, error) {
	r, err := e.round(ctx)
	if err != nil && !r {
		return false, err
	}
	a, aerr := e.runActivity(ctx)
	return r || a, aerr
}

func (e *Engine) round(ctx context.Context) (bool, error) {
	worked, _, err := e.roundStep(ctx)
	return worked, err
}

// stepFunc is a worker's step: worked reports whether it found work, and
// more whether more may be waiting, which the worker and another idle one
// should look for.
type stepFunc func(ctx context.Context) (worked, more bool, err error)

// roundStep runs a group of rounds. A transactional group that ended
// before it was full ended on a dequeue that found nothing: no worker
// need look again until new work is hinted or comes due (each look would
// be an empty round transaction).
func (e *Engine) roundStep(ctx context.Context) (bool, bool, error) {
	start := time.Now()
	reps, err := e.runner.RunGroup(ctx)
	if len(reps) == 0 {
		return false, false, err
	}
	e.observeRounds(ctx, reps, time.Since(start), err)
	more := err != nil || len(reps) >= e.opts.RoundGroup || e.store.Mode() != provider.ModeTransactional
	return true, more, nil
}

// observeRounds tells the observer and the log about rounds that ran
// together for d.
func (e *Engine) observeRounds(ctx context.Context, reps []*round.Report, d time.Duration, err error) {
	for _, rep := range reps {
		var rerr error
		if rep.Failed {
			rerr = err
		} else {
			e.noteHead(rep.InstanceID, rep.Head, rep.Status)
		}
		if o := e.opts.Observer; o != nil {
			o.Round(RoundStats{InstanceID: rep.InstanceID, ExecutionID: rep.ExecutionID, Duration: d, Appended: rep.Appended,
				Processed: rep.Processed, Duplicates: rep.Duplicates, Stale: rep.Stale, DeadLettered: rep.DeadLettered, Cold: rep.Cold, Status: rep.Status, Err: rerr})
		}
	}
	if err != nil {
		e.log.WarnContext(ctx, "round failed; it will be retried", slog.Int("instances", len(reps)), slog.Any("error", err))
	}
}

func (e *Engine) runActivity(ctx context.Context) (bool, error) {
	start := time.Now()
	rep, err := e.worker.RunOnce(ctx)
	if rep == nil {
		return false, err
	}
	for {
		e.observeActivity(ctx, rep, start)
		// A task the completion's round scheduled, claimed for this
		// worker, is an attempt in flight: it runs now.
		if rep.Next == nil || err != nil {
			return true, err
		}
		start = time.Now()
		rep, err = e.worker.RunLease(ctx, rep.Next)
	}
}

// observeActivity tells the observer and the log about an activity
// attempt that ran since start, and about the rounds that ran with its
// completion.
func (e *Engine) observeActivity(ctx context.Context, rep *round.ActivityReport, start time.Time) {
	if o := e.opts.Observer; o != nil {
		o.Activity(ActivityStats{Name: rep.Name, InstanceID: rep.InstanceID, ExecutionID: rep.ExecutionID, TaskID: rep.TaskID, Attempt: rep.Attempt, Outcome: string(rep.Outcome),
			RetryAt: rep.RetryAt, Duration: time.Since(start), Err: rep.Err})
	}
	if len(rep.Rounds) > 0 {
		// The rounds that ran in the completion's transaction are
		// reported as an orchestration worker's are, after the attempt.
		e.observeRounds(ctx, rep.Rounds, time.Since(start), rep.RoundErr)
	}
	if rep.Err != nil {
		e.log.InfoContext(ctx, "activity attempt failed", slog.String("activity", rep.Name), slog.String("task_id", rep.TaskID), slog.Int("attempt", rep.Attempt),
			slog.String("instance_id", rep.InstanceID), slog.String("execution_id", rep.ExecutionID), slog.String("outcome", string(rep.Outcome)), slog.Any("error", rep.Err))
	}
}

// queueState is what the workers of one queue share: the wake-up of one
// idle worker, and the queue's next visible time, which one store call
// tells them all until a hint says work arrived.
type queueState struct {
	q    provider.Queue
	wake chan struct{}
	// share is the engine's share of a partitioned store's partitions
	// (nil: one partition): hints of work in the partitions of other
	// nodes wake no worker.
	share *partitionShare
	// woke counts the hints that woke a worker, skipped those of work in
	// partitions held by other nodes.
	woke, skipped atomic.Uint64
	// leases tells the hint watcher that the engine's partitions changed
	// (nil without a watcher).
	leases chan struct{}

	mu sync.Mutex
	// hints counts the hints seen; next, read at nextRead (zero: never),
	// holds while nextHints equals it.
	hints     uint64
	nextHints uint64
	nextRead  time.Time
	next      time.Time
	nextOK    bool
}

// wakeOne wakes one idle worker, or the next to go idle.
func (s *queueState) wakeOne() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// watchHints turns the store's work hints on the queue into wake-ups of
// one idle worker each: waking every idle worker for each hint would send
// them all to the store, where one finds the work and the others only
// look. A worker that finds work wakes the next one (see loop), so a burst
// of work still reaches every worker.
//
// On a partitioned store whose hints name partitions
// ([provider.PartitionNotifier]), a hint wakes a worker only when it
// names a partition the engine holds, or the engine holds none: the work
// of another node's partitions is that node's, and this engine's workers
// find it anyway at their look at every partition once per SafetyPoll.
func (s *queueState) watchHints(stop context.Context, n provider.Notifier, hint <-chan struct{}) {
	pn, _ := n.(provider.PartitionNotifier)
	if s.share == nil {
		pn = nil
	}
	w := partitionWatch{parts: map[int]<-chan struct{}{}}
	for {
		select {
		case <-stop.Done():
			return
		case <-s.leases:
			// The hints of the new partitions are asked for before the
			// wake-up, so work announced in them before is seen by the
			// woken worker and what is announced after is hinted.
			if pn != nil {
				w.watch(pn, s.q, s.share.heldNow())
			}
			s.arrived()
			continue
		case <-hint:
		}
		// The next hint is asked for before the wake-up this one causes,
		// so work enqueued in between is seen by the woken worker.
		hint = n.WorkHint(s.q)
		if pn != nil && !w.mine(pn, s.q, s.share.heldNow()) {
			s.skipped.Add(1)
			continue
		}
		s.woke.Add(1)
		s.arrived()
	}
}

// arrived tells the queue's workers that work may have arrived: the next
// visible time is asked again, and one idle worker looks.
func (s *queueState) arrived() {
	s.mu.Lock()
	s.hints++
	s.mu.Unlock()
	s.wakeOne()
}

// partitionWatch is the hint channels of the partitions an engine held at
// the last hint of a queue.
type partitionWatch struct {
	held  []int
	parts map[int]<-chan struct{}
}

// watch takes the hint channels of the partitions held.
func (w *partitionWatch) watch(pn provider.PartitionNotifier, q provider.Queue, held []int) {
	w.held = held
	clear(w.parts)
	for _, p := range held {
		w.parts[p] = pn.PartitionHint(q, p)
	}
}

// mine reports whether the hint just seen may be of work in the held
// partitions: one of their channels is closed (it is replaced), the
// engine holds none, or held changed and the watcher was not told yet
// (see Engine.leasesChanged; the channels of the new partitions are taken
// now).
func (w *partitionWatch) mine(pn provider.PartitionNotifier, q provider.Queue, held []int) bool {
	if len(held) == 0 {
		w.watch(pn, q, nil)
		return true
	}
	if !slices.Equal(held, w.held) {
		w.watch(pn, q, held)
		return true
	}
	mine := false
	for p, ch := range w.parts {
		select {
		case <-ch:
			mine = true
			w.parts[p] = pn.PartitionHint(q, p)
		default:
		}
	}
	return mine
}

// nextVisible returns the queue's next visible time, asking the store
// only when no hint came since the last answer, that answer is younger
// than maxAge and its time has not come: idle workers share one answer.
func (e *Engine) nextVisible(ctx context.Context, s *queueState, maxAge time.Duration) (time.Time, bool, error) {
	now := e.opts.Clock.Now()
	s.mu.Lock()
	if !s.nextRead.IsZero() && s.nextHints == s.hints && now.Sub(s.nextRead) < maxAge && (!s.nextOK || now.Before(s.next)) {
		next, ok := s.next, s.nextOK
		s.mu.Unlock()
		return next, ok, nil
	}
	hints := s.hints
	s.mu.Unlock()
	next, ok, err := e.store.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: s.q, Queues: e.opts.ActivityQueues, Partitions: e.Partitions()})
	if err != nil {
		return next, ok, err
	}
	s.mu.Lock()
	if s.hints == hints {
		s.next, s.nextOK, s.nextRead, s.nextHints = next, ok, now, hints
	}
	s.mu.Unlock()
	return next, ok, nil
}

// loop is one worker: it runs steps while there may be more work and
// otherwise sleeps until a wake-up, the next visible time or the safety
// poll. A step that found work and may have left some wakes another idle
// worker, which looks for more. stop ends the loop; work is the context
// of the work in flight.
func (e *Engine) loop(stop, work context.Context, qs *queueState, step stepFunc) {
	q := qs.q
	failures := 0
	for stop.Err() == nil {
		_, more, err := step(work)
		if err != nil {
			// The store failed: back off so a database outage does not
			// spin the worker.
			failures++
			e.log.Error("worker cannot reach the store", slog.String("queue", string(q)), slog.Any("error", err))
			e.sleep(stop, nil, min(50*time.Millisecond<<min(failures, 7), e.opts.SafetyPoll))
			continue
		}
		failures = 0
		if more {
			qs.wakeOne()
			continue
		}
		// No work, or the step's own look for more found none: sleep
		// until work is hinted or comes due.
		wait := e.opts.SafetyPoll
		next, ok, err := e.nextVisible(work, qs, wait)
		if err == nil && ok {
			// Work that is visible but was not dequeued is held by another
			// worker: look again soon, or when its release hints.
			wait = min(wait, max(next.Sub(e.opts.Clock.Now()), busyRetry))
		}
		e.sleep(stop, qs.wake, wait)
	}
}

// busyRetry is how soon an idle worker looks again when work is visible but
// held by another worker.
const busyRetry = 50 * time.Millisecond

// sleep waits for d on the engine's clock, a wake-up or the end of ctx.
func (e *Engine) sleep(ctx context.Context, hint <-chan struct{}, d time.Duration) {
	wake := make(chan struct{})
	var stopTimer func() bool
	if tc, ok := e.opts.Clock.(round.TimerClock); ok {
		stopTimer = tc.AfterFunc(d, func() { close(wake) })
	} else {
		stopTimer = time.AfterFunc(d, func() { close(wake) }).Stop
	}
	defer stopTimer()
	select {
	case <-ctx.Done():
	case <-hint:
	case <-wake:
	}
}

// activityKey keys the activity state in an activity's context.
type activityKey struct{}

type activityState struct {
	lease *provider.ActivityLease
	hb    *round.Heartbeat
	every time.Duration
	clock Clock

	mu   sync.Mutex
	last time.Time
}

// ActivityInfo describes the running activity.
type ActivityInfo struct {
	Name string
	// TaskID identifies the activity task: one per scheduled call, shared
	// by its attempts.
	TaskID       string
	InstanceID   string
	ExecutionID  string
	ScheduledSeq int64
	Attempt      int
	Queue        string
}

// ActivityInfoFrom returns the description of the activity running with
// ctx; ok is false outside activities.
func ActivityInfoFrom(ctx context.Context) (ActivityInfo, bool) {
	s, ok := ctx.Value(activityKey{}).(*activityState)
	if !ok {
		return ActivityInfo{}, false
	}
	t := &s.lease.Task
	return ActivityInfo{Name: t.Name, TaskID: t.ID, InstanceID: t.InstanceID, ExecutionID: t.ExecutionID,
		ScheduledSeq: t.ScheduledSeq, Attempt: t.Attempt, Queue: t.Queue}, true
}

// ErrNotInActivity is returned by Heartbeat outside an activity.
var ErrNotInActivity = errors.New("chronicle: not in an activity")

// Heartbeat tells the store that the activity running with ctx is alive and
// extends its lease. Calls closer together than Options.ActivityHeartbeat
// return at once. When the lease was lost — the activity task was taken over, or its
// instance ended — it returns an error wrapping provider.ErrLeaseLost and ctx
// is cancelled; the activity should stop.
func Heartbeat(ctx context.Context) error {
	s, ok := ctx.Value(activityKey{}).(*activityState)
	if !ok {
		return ErrNotInActivity
	}
	s.mu.Lock()
	now := s.clock.Now()
	if !s.last.IsZero() && now.Sub(s.last) < s.every {
		s.mu.Unlock()
		return nil
	}
	s.last = now
	s.mu.Unlock()
	return s.hb.Beat(ctx)
}

// activityPanic is the error of an activity attempt that panicked; its
// type name for retry policies is "panic".
type activityPanic struct{ value any }

func (e *activityPanic) Error() string     { return fmt.Sprintf("activity panicked: %v", e.value) }
func (e *activityPanic) ErrorType() string { return "panic" }
