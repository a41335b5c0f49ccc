package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/providertest"
	"github.com/chronicleflow/chronicle/round"
)

// rig is what both rapid machines stand on: a store, a manual clock, two
// nodes (each a round runner and an activity worker), one planned store
// fault at a time, crashes between the record writes of a peek-lock step,
// zombie activity claims, rounds paused past their lease, purges, and the
// counts both keep. The rounds machine (rounds_rapid_test.go) drives
// scripted turns on it, the workflows machine (workflows_rapid_test.go)
// real workflow code; each fills in rigHooks for what differs.
type rig struct {
	mode    provider.Mode
	backend *wfBackend
	// store is the store itself: clients, zombies and checks use it;
	// nodes use it through providertest.Faulty with injected.
	store provider.FullStore
	// faulty is the store as the nodes see it.
	faulty  provider.Store
	clock   *round.ManualClock
	nodes   []*node
	ids     []string // top-level instances
	zombies []*provider.ActivityLease
	counter int
	ctx     context.Context
	cancel  context.CancelFunc

	faultMu sync.Mutex
	fault   string
	after   bool
	// mid crashes a peek-lock step of the memory store between two of its
	// record writes.
	mid midStep
	// cutOff makes every lease renewal fail: the node of a paused round
	// cannot reach the store, so its lease runs out.
	cutOff bool
	// renewed receives the outcome of every lease renewal of a peek-lock
	// round (see renewWatch).
	renewed chan error

	// groupSize is how many instances a transactional round takes.
	groupSize int

	counts *rigStats
	hooks  rigHooks
	// ledger remembers purges and starts for the checks of
	// purge_rapid_test.go.
	ledger purgeLedger
}

// rigHooks are what the machines do differently.
type rigHooks struct {
	// failed reports a round error the machine expects besides crashes,
	// injected faults and lost races (a poisoned signal, say); nil: none.
	failed func(error) bool
	// attempt runs a zombie's attempt of a task.
	attempt func(*provider.ActivityTask) ([]byte, error)
	// histories returns the ids of the instances with history, sorted, and
	// their histories; queued the messages and activity tasks queued.
	histories func(*rapid.T) ([]string, map[string][]history.Event)
	queued    func(*rapid.T) ([]provider.Message, []provider.QueuedActivity)
	// client, when set, draws the requests clients send while a round is
	// paused.
	client func(*rapid.T) []provider.Message
}

// node is one process: a round runner (with its own cache) and an
// activity worker.
type node struct {
	name   string
	runner *round.Runner
	worker *round.ActivityWorker

	points
}

// rigStats are the counts both machines keep.
type rigStats struct {
	rounds, cold, crashes, faults, zombieRounds, zombieRejected, duplicates, stale int
	activities, retries, zombieTasks, zombieTasksRejected                          int
	completed, failed, parked, refused                                             int
	purged, purgeRefused, deadWorkers, leaseLost, leaseRenewed                     int
	midStep, midPurge, midZombies                                                  int
	// inline counts rounds run in an activity completion's transaction,
	// eager the tasks handed over claimed that ran.
	inline, eager int
	purgeStats
	// groups counts transactions that ran the rounds of several instances;
	// groupFailures those in which one round failed and another committed.
	groups, groupFailures int
}

// add adds the counts of o to s.
func (s *rigStats) add(o *rigStats) {
	s.rounds += o.rounds
	s.cold += o.cold
	s.crashes += o.crashes
	s.faults += o.faults
	s.zombieRounds += o.zombieRounds
	s.zombieRejected += o.zombieRejected
	s.duplicates += o.duplicates
	s.stale += o.stale
	s.activities += o.activities
	s.retries += o.retries
	s.zombieTasks += o.zombieTasks
	s.zombieTasksRejected += o.zombieTasksRejected
	s.completed += o.completed
	s.failed += o.failed
	s.parked += o.parked
	s.refused += o.refused
	s.purged += o.purged
	s.purgeRefused += o.purgeRefused
	s.deadWorkers += o.deadWorkers
	s.leaseLost += o.leaseLost
	s.leaseRenewed += o.leaseRenewed
	s.midStep += o.midStep
	s.midPurge += o.midPurge
	s.midZombies += o.midZombies
	s.purgeStats.add(&o.purgeStats)
	s.groups += o.groups
	s.groupFailures += o.groupFailures
	s.inline += o.inline
	s.eager += o.eager
}

var (
	t0      = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	errKill = errors.New("process killed")
)

const leaseDuration = 30 * time.Second

// checkTimeout bounds the store calls of one check, so that a call that
// blocks (on a lock a paused round holds, say) fails the check instead of
// hanging the test. It is a bound for a hang, not for speed: a check on
// the FerretDB test server, which serializes its writes, took longer than
// 5 minutes while make ci's other jobs used the same server, and failed
// in a listing of the harness's own (rapid could not reproduce it).
const checkTimeout = 15 * time.Minute

// newRig opens an empty store of backend for one check, as the nodes see
// it (faults injected, peek-lock renewals watched); the machine adds the
// nodes with addNode.
func newRig(t *rapid.T, backend *wfBackend, counts *rigStats, hooks rigHooks) *rig {
	r := &rig{mode: backend.mode, backend: backend, clock: round.NewManualClock(t0), renewed: make(chan error, 16), counts: counts, hooks: hooks}
	if r.mode == provider.ModeTransactional {
		r.groupSize = rapid.SampledFrom([]int{1, 2, 2, 4}).Draw(t, "group size")
	}
	r.ctx, r.cancel = context.WithTimeout(context.Background(), checkTimeout)
	r.store = backend.open(t, &r.mid)
	r.faulty = providertest.Faulty(r.store, r.injected)
	if ls, ok := r.faulty.(provider.LeaseStore); ok && r.mode == provider.ModePeekLock {
		r.faulty = renewWatch{ls, r.renewed}
	}
	return r
}

// addNode adds a node whose runner and worker run with ro and wo on the
// faulty store, with the rig's name, clock, lease and crash hook.
func (r *rig) addNode(t *rapid.T, name string, ro round.RunnerOptions, wo round.ActivityWorkerOptions) {
	n := &node{name: name}
	ro.Node, ro.Clock, ro.MaxDeliveries, ro.LeaseDuration, ro.Hooks = name, r.clock, 1000, leaseDuration, round.Hooks{Crash: n.hook}
	ro.GroupSize = r.groupSize
	wo.Node, wo.Clock, wo.LeaseDuration, wo.Jitter = name, r.clock, leaseDuration, func() float64 { return 0.5 }
	var err error
	if n.runner, err = round.NewRunner(r.faulty, ro); err != nil {
		t.Fatal(err)
	}
	// A node's worker may run the round of a completed task's instance in
	// the completion's transaction (where the store can).
	if rapid.Bool().Draw(t, name+" completes with the round") {
		wo.Rounds = n.runner
		wo.Eager = rapid.Bool().Draw(t, name+" takes the next task claimed")
	}
	if n.worker, err = round.NewActivityWorker(r.faulty, wo); err != nil {
		t.Fatal(err)
	}
	r.nodes = append(r.nodes, n)
}

// close releases the executors the nodes cache.
func (r *rig) close() {
	for _, n := range r.nodes {
		n.runner.Forget()
	}
	r.cancel()
}

// renewWatch is a peek-lock store whose lease renewals report their
// outcome, so that the machine knows when the renewal of a paused round
// has run (it runs in a goroutine of the runner when the clock passes a
// third of the lease).
type renewWatch struct {
	provider.LeaseStore
	renewed chan<- error
}

func (w renewWatch) RenewLease(ctx context.Context, p *provider.RenewLeaseParams) error {
	err := w.LeaseStore.RenewLease(ctx, p)
	select {
	case w.renewed <- err:
	default:
	}
	return err
}

// injected is the nodes' fault hook: one planned fault, then none. op is
// a store method's name; "RunRound" is the commit of a round.
func (r *rig) injected(op string) *providertest.Fault {
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	if op == "RenewLease" && r.cutOff {
		return &providertest.Fault{}
	}
	if r.fault == "" || r.fault != op {
		return nil
	}
	r.fault = ""
	r.counts.faults++
	return &providertest.Fault{AfterEffect: r.after}
}

// planFault draws, one time in four, a fault of one of ops for the next
// action.
func (r *rig) planFault(t *rapid.T, ops ...string) {
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	r.fault = ""
	if rapid.IntRange(0, 3).Draw(t, "fault?") == 0 {
		r.fault = rapid.SampledFrom(ops).Draw(t, "fault")
		r.after = rapid.Bool().Draw(t, "after effect")
	}
}

func (r *rig) clearFault() {
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	r.fault = ""
}

func (r *rig) setCutOff(v bool) {
	r.faultMu.Lock()
	defer r.faultMu.Unlock()
	r.cutOff = v
}

func (r *rig) id(prefix string) string {
	r.counter++
	return prefix + "-" + strconv.Itoa(r.counter)
}

func (r *rig) enqueue(t *rapid.T, msgs ...provider.Message) {
	if err := r.store.EnqueueMessages(r.ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: r.clock.Now()}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// instance draws one of the instances the machine started; it skips the
// action when there is none yet.
func (r *rig) instance(t *rapid.T) string {
	if len(r.ids) == 0 {
		t.Skip("no instance")
	}
	return rapid.SampledFrom(r.ids).Draw(t, "instance")
}

// started enqueues msg, the start of a new top-level instance id, and
// sometimes a copy of it under another message id (a client that retried),
// and records the instance.
func (r *rig) started(t *rapid.T, id string, msg provider.Message) {
	r.enqueue(t, msg)
	if rapid.Bool().Draw(t, "duplicate start") {
		dup := msg
		dup.ID = r.id("dup-start")
		r.enqueue(t, dup)
	}
	r.ids = append(r.ids, id)
}

func (r *rig) load(t *rapid.T, id string) []history.Event {
	events, err := r.store.LoadHistory(r.ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// allowedRoundError: a round may crash, fail by an injected fault, lose
// to another node, or fail as the machine expects.
func (r *rig) allowedRoundError(err error) bool {
	return err == nil || round.IsCrash(err) || errors.Is(err, providertest.ErrInjected) ||
		errors.Is(err, provider.ErrConflict) || errors.Is(err, provider.ErrLeaseLost) || r.expectedFailure(err)
}

func (r *rig) expectedFailure(err error) bool {
	return err != nil && r.hooks.failed != nil && r.hooks.failed(err)
}

func (r *rig) count(rep *round.Report) {
	if rep != nil {
		r.counts.rounds++
		r.counts.duplicates += rep.Duplicates
		r.counts.stale += rep.Stale
		if rep.Cold {
			r.counts.cold++
		}
	}
}

func (r *rig) countActivity(t *rapid.T, rep *round.ActivityReport) {
	if rep == nil {
		return
	}
	r.counts.activities++
	switch rep.Outcome {
	case round.OutcomeRetry:
		r.counts.retries++
	case round.OutcomeDeadLettered:
		t.Fatalf("activity %s dead-lettered", rep.TaskID)
	}
}

// round runs one round on a node that may crash at any crash point, with
// a store fault or, in peek-lock mode, a crash between two record writes
// of a step planned.
func (r *rig) round(t *rapid.T) {
	n := rapid.SampledFrom(r.nodes).Draw(t, "node")
	points := append([]round.CrashPoint{"", "", ""}, round.CrashPoints()...)
	n.mu.Lock()
	n.crashAt = rapid.SampledFrom(points).Draw(t, "crash at")
	n.mu.Unlock()
	if r.mode == provider.ModeTransactional {
		r.planFault(t, "RunRound", "RunRound", "AppendHistory", "SaveProjections", "EnqueueMessages", "EnqueueActivities", "CancelActivities",
			"DeadLetterMessages", "AckMessages", "DequeueInstance", "AbandonMessages", "LoadHistory", "GetSnapshot")
	} else {
		r.planFault(t, "AppendHistory", "SaveProjections", "EnqueueMessages", "EnqueueActivities", "PinMessages",
			"AckLease", "LeaseInstance", "DeadLetterLeased", "CancelActivities", "AbandonLease", "LoadHistory", "GetSnapshot")
		r.mid.plan(t, midStepRoundOps)
	}
	reps, err := n.runner.RunGroup(r.ctx)
	r.clearFault()
	r.mid.clear()
	n.mu.Lock()
	n.crashAt = ""
	n.mu.Unlock()
	failed := 0
	for _, rep := range reps {
		r.count(rep)
		if rep.Failed {
			failed++
		}
	}
	if len(reps) > 1 && !round.IsCrash(err) {
		r.counts.groups++
		if failed > 0 && failed < len(reps) {
			r.counts.groupFailures++
		}
	}
	if errors.Is(err, errMidStep) {
		r.counts.midStep++
	}
	if round.IsCrash(err) || errors.Is(err, errMidStep) {
		r.counts.crashes++
		n.runner.Forget() // the process restarts with an empty cache
	}
	if !r.allowedRoundError(err) {
		t.Fatalf("round on %s: %v", n.name, err)
	}
}

// restartNode restarts a process without a crash in a round: its cache is
// gone.
func (r *rig) restartNode(t *rapid.T) {
	rapid.SampledFrom(r.nodes).Draw(t, "node").runner.Forget()
}

// activity runs one activity task on a node, with a store fault or a
// crash between two record writes planned.
func (r *rig) activity(t *rapid.T) {
	n := rapid.SampledFrom(r.nodes).Draw(t, "node")
	if r.mode == provider.ModeTransactional {
		// A completion that runs its instance's round may crash there or
		// meet a fault of the round's steps.
		points := append([]round.CrashPoint{"", "", "", round.AfterCompletion}, round.CrashPoints()...)
		n.mu.Lock()
		n.crashAt = rapid.SampledFrom(points).Draw(t, "crash at")
		n.mu.Unlock()
		r.planFault(t, "ClaimActivity", "CompleteActivity", "RetryActivity", "HeartbeatActivity", "RunRound", "DequeueInstance", "AppendHistory", "AckMessages")
	} else {
		r.planFault(t, "ClaimActivity", "CompleteActivity", "RetryActivity", "HeartbeatActivity")
	}
	if r.mode == provider.ModePeekLock {
		r.mid.plan(t, midStepActivityOps)
	}
	rep, err := n.worker.RunOnce(r.ctx)
	r.clearFault()
	r.mid.clear()
	n.mu.Lock()
	n.crashAt = ""
	n.mu.Unlock()
	if errors.Is(err, errMidStep) {
		r.counts.midStep++
	}
	r.countInline(t, n, rep)
	if round.IsCrash(err) {
		r.counts.crashes++
		n.runner.Forget() // the process restarts with an empty cache
		return
	}
	if err != nil && !errors.Is(err, providertest.ErrInjected) {
		t.Fatalf("activity on %s: %v", n.name, err)
	}
	r.countActivity(t, rep)
	// A task handed over claimed runs now, or its worker dies holding it.
	for rep != nil && rep.Next != nil {
		if !rapid.Bool().Draw(t, "run the task handed over") {
			r.counts.deadWorkers++
			return
		}
		r.counts.eager++
		r.planFault(t, "CompleteActivity", "RetryActivity", "HeartbeatActivity", "RunRound", "DequeueInstance", "AppendHistory", "AckMessages")
		rep, err = n.worker.RunLease(r.ctx, rep.Next)
		r.clearFault()
		r.countInline(t, n, rep)
		if err != nil && !errors.Is(err, providertest.ErrInjected) {
			t.Fatalf("activity handed over on %s: %v", n.name, err)
		}
		r.countActivity(t, rep)
	}
}

// countInline counts the rounds an activity worker ran with its
// completion, and checks that they failed only as a round may.
func (r *rig) countInline(t *rapid.T, n *node, rep *round.ActivityReport) {
	if rep == nil {
		return
	}
	for _, rr := range rep.Rounds {
		r.count(rr)
		r.counts.inline++
	}
	if !round.IsCrash(rep.RoundErr) && !r.allowedRoundError(rep.RoundErr) {
		t.Fatalf("round with a completion on %s: %v", n.name, rep.RoundErr)
	}
}

func (r *rig) advance(t *rapid.T) {
	r.advanceBy(rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, leaseDuration + time.Second, 2 * time.Minute}).Draw(t, "advance"))
}

// advanceBy moves the clock by whole seconds only, so every time the
// machine makes (timers, deadlines, leases) stays exact in stores that
// keep microseconds, as PostgreSQL does.
func (r *rig) advanceBy(d time.Duration) {
	if d%time.Second != 0 {
		panic(fmt.Sprintf("advance by %v: not whole seconds", d))
	}
	r.clock.Advance(d)
}

// duplicate delivers an event already in history again under a new message
// id, as a redelivering queue would.
func (r *rig) duplicate(t *rapid.T) {
	ids, histories := r.hooks.histories(t)
	if len(ids) == 0 {
		t.Skip("no history")
	}
	id := rapid.SampledFrom(ids).Draw(t, "instance")
	var candidates []history.Event
	for _, e := range histories[id] {
		for _, k := range provider.MessageKinds() {
			if e.Kind == k {
				candidates = append(candidates, e)
			}
		}
	}
	if len(candidates) == 0 {
		t.Skip("no completion")
	}
	e := rapid.SampledFrom(candidates).Draw(t, "event")
	msg := provider.Message{ID: r.id("dup"), InstanceID: id, ExecutionID: e.ExecutionID, Kind: e.Kind, CorrelationID: e.CorrelationID, Payload: e.Payload}
	r.enqueue(t, msg)
}

// zombieClaim claims an activity task for a worker that then stalls.
func (r *rig) zombieClaim(t *rapid.T) {
	l := claimFor(r.ctx, t, r.store, r.clock, "zombie")
	r.counts.zombieTasks++
	r.zombies = append(r.zombies, l)
}

// zombieComplete lets a stalled worker finish its attempt late, settling
// it as a worker would: accepted only while its lease token is still the
// task's.
func (r *rig) zombieComplete(t *rapid.T) {
	if len(r.zombies) == 0 {
		t.Skip("no zombie")
	}
	i := rapid.IntRange(0, len(r.zombies)-1).Draw(t, "zombie")
	l := r.zombies[i]
	r.zombies = append(r.zombies[:i], r.zombies[i+1:]...)
	result, runErr := r.hooks.attempt(&l.Task)
	now := r.clock.Now()
	var err error
	if runErr != nil {
		f := round.FailureOf(runErr)
		policy := round.WithRetryDefaults(l.Task.Retry, round.DefaultRetryPolicy)
		if retry, delay := round.RetryDelay(policy, l.Task.Attempt, &f, 0.5); retry {
			err = r.store.RetryActivity(r.ctx, &provider.RetryActivityParams{TaskID: l.Task.ID, Token: l.Token, VisibleAt: now.Add(delay), Error: f.Message})
		} else {
			err = r.completeZombie(t, l, nil, &f, now)
		}
	} else {
		err = r.completeZombie(t, l, result, nil, now)
	}
	if err != nil && !errors.Is(err, provider.ErrLeaseLost) {
		t.Fatalf("zombie completion: %v", err)
	}
	if err != nil {
		r.counts.zombieTasksRejected++
	}
}

func (r *rig) completeZombie(t *rapid.T, l *provider.ActivityLease, result []byte, f *history.Failure, now time.Time) error {
	msg, err := provider.ActivityOutcome(&l.Task, result, f)
	if err != nil {
		t.Fatal(err)
	}
	return r.store.CompleteActivity(r.ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: msg, Now: now})
}

// pausedRound stalls a round on one node at a crash point (or, in
// peek-lock mode, between two record writes of a step) while its lease
// runs out, clients send requests and another node works, then lets it go
// on as a zombie.
func (r *rig) pausedRound(t *rapid.T) {
	a := rapid.SampledFrom(r.nodes).Draw(t, "paused node")
	var b *node
	for _, n := range r.nodes {
		if n != a {
			b = n
		}
	}
	pz := &pause{
		at:      rapid.SampledFrom([]round.CrashPoint{round.AfterLoad, round.AfterAppend, round.AfterProject, round.AfterEnqueue, round.BeforeAck}).Draw(t, "pause at"),
		paused:  make(chan struct{}),
		resumed: make(chan struct{}),
	}
	if r.mode != provider.ModePeekLock || !r.mid.pauseRound(t, pz, midStepPauseOps) {
		a.mu.Lock()
		a.pause = pz
		a.mu.Unlock()
	}
	done, resume := r.roundInBackground(a, pz)
	var res roundResult
	select {
	case <-pz.paused:
		r.counts.zombieRounds++
		// Let the round go on and end also when the check fails, so that
		// it never writes into the store of a later check.
		defer resume()
		err := r.whilePaused(t, b)
		res = resume()
		if err != nil {
			t.Fatal(err)
		}
	case res = <-done:
		a.mu.Lock()
		a.pause = nil
		a.mu.Unlock()
		r.mid.unpause()
	}
	if pz.op != "" {
		select {
		case <-pz.paused:
			r.counts.midZombies++
		default:
		}
	}
	r.zombieEnded(t, a, res)
}

// roundResult is what a round run in the background returned.
type roundResult struct {
	rep *round.Report
	err error
}

// roundInBackground runs a round of node a that pz may pause; it returns
// the channel of its result and resume, which lets a paused round go on
// and returns its result (once; later calls return the same).
func (r *rig) roundInBackground(a *node, pz *pause) (<-chan roundResult, func() roundResult) {
	done := make(chan roundResult, 1)
	go func() {
		rep, err := a.runner.RunOnce(r.ctx)
		done <- roundResult{rep, err}
	}()
	return done, sync.OnceValue(func() roundResult { close(pz.resumed); return <-done })
}

// zombieEnded counts what a paused round of node a did once let go, and
// fails on an error no zombie may meet.
func (r *rig) zombieEnded(t *rapid.T, a *node, res roundResult) {
	r.setCutOff(false)
	r.count(res.rep)
	if !r.allowedRoundError(res.err) {
		t.Fatalf("zombie round on %s: %v", a.name, res.err)
	}
	if res.err != nil {
		r.counts.zombieRejected++
	}
}

// whilePaused is what happens while a round is paused: clients go on
// sending, its lease runs out, and node b runs rounds and activities. It
// returns what went wrong, for the caller to fail once the paused round
// is let go.
func (r *rig) whilePaused(t *rapid.T, b *node) error {
	if r.hooks.client != nil {
		if msgs := r.hooks.client(t); len(msgs) > 0 {
			if err := r.meanwhile(func(ctx context.Context) error {
				return r.store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: r.clock.Now()})
			}); err != nil {
				return fmt.Errorf("enqueue while paused: %w", err)
			}
		}
	}
	if err := r.leaseRunsOut(t); err != nil {
		return err
	}
	for i := rapid.IntRange(1, 4).Draw(t, "rounds while paused"); i > 0; i-- {
		var rep *round.Report
		err := r.meanwhile(func(ctx context.Context) (err error) {
			rep, err = b.runner.RunOnce(ctx)
			if r.allowedRoundError(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("round on %s while paused: %w", b.name, err)
		}
		r.count(rep)
		var arep *round.ActivityReport
		if err := r.meanwhile(func(ctx context.Context) (err error) {
			arep, err = b.worker.RunOnce(ctx)
			return err
		}); err != nil {
			return fmt.Errorf("activity on %s while paused: %w", b.name, err)
		}
		if arep != nil && arep.Outcome == round.OutcomeDeadLettered {
			return fmt.Errorf("activity %s dead-lettered", arep.TaskID)
		}
		r.countActivity(t, arep)
	}
	return nil
}

// leaseRunsOut moves the clock past the lease of the paused round. A
// peek-lock round renews its lease as the clock passes a third of it: the
// renewal succeeds (the round keeps the instance), or the paused round's
// node is cut off from the store and its lease runs out mid-round, so the
// other node takes the instance over and the paused round, let go, finds
// its lease lost. The renewal runs in a goroutine of the runner: it waits
// for its outcome, so that the other node acts on a settled lease.
func (r *rig) leaseRunsOut(t *rapid.T) error {
	if r.mode != provider.ModePeekLock {
		r.advanceBy(leaseDuration + time.Second)
		return nil
	}
	for len(r.renewed) > 0 {
		<-r.renewed
	}
	cutOff := rapid.IntRange(0, 2).Draw(t, "cut off") > 0
	r.setCutOff(cutOff)
	r.advanceBy(leaseDuration + time.Second)
	select {
	case err := <-r.renewed:
		switch {
		case cutOff && errors.Is(err, providertest.ErrInjected):
			r.counts.leaseLost++
		case !cutOff && err == nil:
			r.counts.leaseRenewed++
		default:
			return fmt.Errorf("renewal of the paused round's lease (cut off %v): %v", cutOff, err)
		}
	case <-time.After(time.Minute):
		return errors.New("the paused round did not renew its lease")
	}
	return nil
}

// errWaited: a call made while a round was paused waited for the paused
// round's transaction.
var errWaited = errors.New("the call waits for the paused round's transaction")

// meanwhile runs op, calls of the store while a round is paused. None may
// wait for the paused round (the postgres provider documents that enqueues
// never wait for a round; see TestRegressionPostgresEnqueueWaitsForRound):
// when the backend sees op wait for a lock, only the paused round can hold
// it, so op is cancelled and errWaited returned, instead of a hang.
func (r *rig) meanwhile(op func(ctx context.Context) error) error {
	if r.backend.waiting == nil {
		return op(r.ctx)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	stop, watched := make(chan struct{}), make(chan bool, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				watched <- false
				return
			case <-tick.C:
				if r.backend.waiting(ctx) {
					cancel()
					watched <- true
					return
				}
			}
		}
	}()
	err := op(ctx)
	close(stop)
	if <-watched {
		return errors.Join(errWaited, err)
	}
	return err
}

// purge purges an instance the machine started, which a round may cross
// half-way in peek-lock mode; it returns the instance's id and whether the
// purge went through, having checked that nothing of the instance is left
// and that its tombstone names its last event. A purge of an instance
// that has not ended is refused.
func (r *rig) purge(t *rapid.T) (id string, purged bool) {
	id = r.instance(t)
	return id, r.purgeID(t, id)
}

// purgeID is purge of the instance id.
func (r *rig) purgeID(t *rapid.T, id string) (purged bool) {
	events := r.load(t, id)
	nextRun := r.queuesNextRun(t, id, events)
	ts, crashed, err := r.mid.purge(r.ctx, t, r.store, &provider.PurgeInstanceParams{InstanceID: id, By: "rapid", Now: r.clock.Now()},
		r.mode == provider.ModePeekLock, r.round)
	if crashed {
		r.counts.midPurge++
	}
	if !checkPurge(t, r.mode, id, events, nextRun, ts, err) {
		r.counts.purgeRefused++
		return false
	}
	r.ledger.purged(t, r, id, events, ts)
	if got, err := r.store.GetTombstone(r.ctx, id); err != nil || got.LastSeq != ts.LastSeq || string(got.LastHash) != string(ts.LastHash) {
		t.Fatalf("%s: stored tombstone %+v (%v), purge returned %+v", id, got, err, ts)
	}
	if n := len(r.load(t, id)); n > 0 {
		t.Fatalf("%s: %d events left after the purge", id, n)
	}
	if _, _, err := r.store.GetSnapshot(r.ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s: snapshot after the purge: %v", id, err)
	}
	if _, err := r.store.GetInstance(r.ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s: instance record after the purge: %v", id, err)
	}
	msgs, err := r.store.ListMessages(r.ctx, &provider.ListMessagesParams{InstanceID: id, Limit: 100000})
	if err != nil || len(msgs) > 0 {
		t.Fatalf("%s: %d messages after the purge (%v)", id, len(msgs), err)
	}
	tasks, err := r.store.ListQueuedActivities(r.ctx, &provider.ListQueuedActivitiesParams{InstanceID: id})
	if err != nil || len(tasks) > 0 {
		t.Fatalf("%s: %d activity tasks after the purge (%v)", id, len(tasks), err)
	}
	r.counts.purged++
	return true
}

// queuesNextRun reports whether a message queued for id starts a run
// after its history's last execution (a restart of the ended instance),
// which a purge must keep.
func (r *rig) queuesNextRun(t *rapid.T, id string, events []history.Event) bool {
	if len(events) == 0 {
		return false
	}
	msgs, err := r.store.ListMessages(r.ctx, &provider.ListMessagesParams{InstanceID: id, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	exec := events[len(events)-1].ExecutionID
	for i := range msgs {
		if provider.StartsNextRun(&msgs[i], exec) {
			return true
		}
	}
	return false
}

// deadWorker claims an activity task for a worker that dies at once: its
// claim is never settled, and the clock passes its end, so another worker
// takes the task over (running it again, or counting the lost claim as a
// timed-out attempt: the checks allow both).
func (r *rig) deadWorker(t *rapid.T) {
	claimFor(r.ctx, t, r.store, r.clock, "dead")
	r.counts.deadWorkers++
	r.advanceBy(leaseDuration + time.Second)
	if rapid.Bool().Draw(t, "take over") {
		n := rapid.SampledFrom(r.nodes).Draw(t, "node")
		rep, err := n.worker.RunOnce(r.ctx)
		if err != nil {
			t.Fatalf("activity on %s: %v", n.name, err)
		}
		r.countInline(t, n, rep)
		r.countActivity(t, rep)
		// A task it was handed over claimed is left to run out.
	}
}

// drain runs every node until nothing is visible; it reports whether a
// round failed as the machine expects (its messages then wait out a retry
// delay).
func (r *rig) drain(t *rapid.T) (failed bool) {
	for i := 0; i < 1000; i++ {
		busy := false
		for _, n := range r.nodes {
			rep, err := n.runner.RunOnce(r.ctx)
			if err != nil && !errors.Is(err, provider.ErrConflict) && !r.expectedFailure(err) {
				t.Fatalf("drain round on %s: %v", n.name, err)
			}
			failed = failed || r.expectedFailure(err)
			r.count(rep)
			arep, err := n.worker.RunOnce(r.ctx)
			if err != nil {
				t.Fatalf("drain activity on %s: %v", n.name, err)
			}
			r.countInline(t, n, arep)
			failed = failed || (arep != nil && r.expectedFailure(arep.RoundErr))
			r.countActivity(t, arep)
			for next := arep; next != nil && next.Next != nil; {
				next, err = n.worker.RunLease(r.ctx, next.Next)
				if err != nil {
					t.Fatalf("drain activity handed over on %s: %v", n.name, err)
				}
				r.countInline(t, n, next)
				failed = failed || r.expectedFailure(next.RoundErr)
				r.countActivity(t, next)
			}
			busy = busy || rep != nil || arep != nil || err != nil
		}
		if !busy {
			return failed
		}
	}
	t.Fatalf("work left after draining")
	return failed
}

// checkAppendOnly: an instance's history is contiguous, hash-chained and
// extends what the last check saw.
func checkAppendOnly(t *rapid.T, id string, events, prev []history.Event) {
	if err := history.Verify(events); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if len(events) < len(prev) || (len(prev) > 0 && string(events[len(prev)-1].Hash) != string(prev[len(prev)-1].Hash)) {
		t.Fatalf("%s: history was rewritten", id)
	}
}

// checkScheduled: work items never exist without the event that schedules
// them.
func checkScheduled(t *rapid.T, histories map[string][]history.Event, msgs []provider.Message, tasks []provider.QueuedActivity) {
	for _, qt := range tasks {
		events := histories[qt.Task.InstanceID]
		if qt.Task.ScheduledSeq > int64(len(events)) || events[qt.Task.ScheduledSeq-1].Kind != history.KindActivityScheduled {
			t.Fatalf("task %s has no schedule event", qt.Task.ID)
		}
	}
	for _, qm := range msgs {
		if qm.Kind != history.KindTimerFired {
			continue
		}
		seq, _ := history.ParseSeqCorrelation(qm.CorrelationID)
		events := histories[qm.InstanceID]
		if seq > int64(len(events)) || events[seq-1].Kind != history.KindTimerCreated {
			t.Fatalf("timer message %s has no TimerCreated", qm.ID)
		}
	}
}

// checkLiveWork checks, once nothing is left to run, that every open
// schedule of every instance has exactly one live work item: a queued
// task or result for an activity, a queued message for a timer, a running
// child or its queued result for a sub-workflow. dump shows a history in
// a failure.
func checkLiveWork(t *rapid.T, ids []string, histories map[string][]history.Event, msgs []provider.Message, tasks []provider.QueuedActivity, dump func([]history.Event) string) {
	queuedTasks := map[string]int{}
	for _, qt := range tasks {
		queuedTasks[qt.Task.ID]++
	}
	queuedMsgs := map[string]int{}
	// results counts the queued results of activities and children by
	// instance, execution and schedule: a result held back (its
	// instance's last round failed and its messages wait out the retry
	// delay) is the live work item of an activity whose task is done, or
	// of a child that ended.
	results := map[string]int{}
	for _, qm := range msgs {
		queuedMsgs[qm.ID]++
		switch qm.Kind {
		case history.KindActivityCompleted, history.KindActivityFailed, history.KindSubWorkflowCompleted, history.KindSubWorkflowFailed:
			results[qm.InstanceID+"/"+qm.ExecutionID+"/"+qm.CorrelationID]++
		}
	}
	for _, id := range ids {
		events := histories[id]
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		for seq := range snap.Activities {
			n := queuedTasks[provider.ActivityTaskID(id, snap.ExecutionID, seq)] + results[id+"/"+snap.ExecutionID+"/"+history.SeqCorrelation(seq)]
			if n != 1 {
				t.Fatalf("%s: activity scheduled at seq %d has %d live tasks and results\n%s", id, seq, n, dump(events))
			}
		}
		for seq := range snap.Timers {
			if n := queuedMsgs[round.TimerMessageID(id, snap.ExecutionID, seq)]; n != 1 {
				t.Fatalf("%s: timer created at seq %d has %d live messages\n%s", id, seq, n, dump(events))
			}
		}
		for seq, child := range snap.SubWorkflows {
			if results[id+"/"+snap.ExecutionID+"/"+history.SeqCorrelation(seq)] == 1 {
				continue // the child ended or was refused; its parent has the result queued
			}
			cs, err := round.Fold(child, histories[child])
			if err != nil {
				t.Fatal(err)
			}
			// Running for this parent: with a shared child id, another
			// parent's child may run under the id.
			if !cs.Started() || cs.Ended || cs.Parent == nil || cs.Parent.InstanceID != id ||
				cs.Parent.ExecutionID != snap.ExecutionID || cs.Parent.ScheduledSeq != seq {
				t.Fatalf("%s: child %s scheduled at seq %d is not running for it (parent %+v, ended %v)\n%s", id, child, seq, cs.Parent, cs.Ended, dump(events))
			}
		}
	}
}

// checkStoredSnapshot: the stored snapshot data is the fold want.
func checkStoredSnapshot(t *rapid.T, id string, want *round.Snapshot, data []byte) {
	stored, err := round.UnmarshalSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	wantData, err := round.MarshalSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	gotData, err := round.MarshalSnapshot(stored)
	if err != nil {
		t.Fatal(err)
	}
	if string(wantData) != string(gotData) {
		t.Fatalf("%s: stored snapshot differs from the fold of history:\nwant %+v\ngot  %+v", id, want, stored)
	}
}
