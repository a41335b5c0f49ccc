package fuzz_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// printSeed makes every rapid run print its seed: it picks one when the
// command line did not, so a failure can always be rerun.
func printSeed(t *testing.T) {
	t.Helper()
	f := flag.Lookup("rapid.seed")
	if f == nil {
		return
	}
	if f.Value.String() == "0" {
		require.NoError(t, f.Value.Set(strconv.FormatUint(uint64(time.Now().UnixNano()), 10)))
	}
	t.Logf("rapid seed %s (rerun with -rapid.seed=%s)", f.Value.String(), f.Value.String())
	// Longer action sequences than rapid's default of 30 reach deeper
	// states (several instances, retries, zombies, crashes in one run).
	if steps := flag.Lookup("rapid.steps"); steps != nil && steps.Value.String() == "30" {
		require.NoError(t, steps.Value.Set("100"))
	}
}

func TestRapidRoundsTransactional(t *testing.T) { testRapidRounds(t, round.ModeTransactional) }

func TestRapidRoundsPeekLock(t *testing.T) { testRapidRounds(t, round.ModePeekLock) }

func testRapidRounds(t *testing.T, mode round.Mode) {
	printSeed(t)
	var total stats
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(rt, mode)
		m.run(rt)
		total.add(&m.stats)
	})
	t.Logf("over all checks: %s", total.String())
	// The checks must have exercised what they claim to.
	require.Positive(t, total.crashes, "no crash injected")
	require.Positive(t, total.faults, "no fault injected")
	require.Positive(t, total.zombieRounds, "no zombie round")
	require.Positive(t, total.duplicates, "no duplicate dropped")
	require.Positive(t, total.completed, "no instance completed")
	require.Positive(t, total.purged, "no instance purged and its id reused")
	if mode == round.ModePeekLock {
		require.Positive(t, total.midStep, "no crash between two record writes of a step")
		require.Positive(t, total.midPurge, "no purge crashed half-way and finished again")
		require.Positive(t, total.midZombies, "no round went on as a zombie between two record writes")
	}
	require.Positive(t, total.refused, "no child start refused because its id was taken")
	require.Positive(t, total.deadWorkers, "no activity worker died holding a claim")
	if mode == round.ModePeekLock {
		require.Positive(t, total.leaseLost, "no paused round lost its lease")
		require.Positive(t, total.leaseRenewed, "no paused round renewed its lease")
	}
}

// stats count what the machine exercised.
type stats struct {
	rounds, crashes, faults, zombieRounds, zombieRejected, duplicates, stale, completed, failed, parked int
	purged, purgeRefused, refused, deadWorkers, leaseLost, leaseRenewed                                 int
	midStep, midPurge, midZombies                                                                       int
}

func (s *stats) add(o *stats) {
	s.rounds += o.rounds
	s.crashes += o.crashes
	s.faults += o.faults
	s.zombieRounds += o.zombieRounds
	s.zombieRejected += o.zombieRejected
	s.duplicates += o.duplicates
	s.stale += o.stale
	s.completed += o.completed
	s.failed += o.failed
	s.parked += o.parked
	s.purged += o.purged
	s.purgeRefused += o.purgeRefused
	s.refused += o.refused
	s.deadWorkers += o.deadWorkers
	s.leaseLost += o.leaseLost
	s.leaseRenewed += o.leaseRenewed
	s.midStep += o.midStep
	s.midPurge += o.midPurge
	s.midZombies += o.midZombies
}

func (s *stats) String() string {
	return fmt.Sprintf("%d rounds, %d crashes, %d injected faults, %d zombie rounds (%d rejected), %d duplicates and %d stale messages dropped; instances: %d completed, %d failed or terminated, %d parked; "+
		"%d purged and their ids reused (%d purges refused, %d crashed half-way), %d child starts refused (id taken), %d workers died holding a claim, %d paused rounds lost their lease and %d renewed it, "+
		"%d crashes and %d zombie rounds between two record writes",
		s.rounds, s.crashes, s.faults, s.zombieRounds, s.zombieRejected, s.duplicates, s.stale, s.completed, s.failed, s.parked,
		s.purged, s.purgeRefused, s.midPurge, s.refused, s.deadWorkers, s.leaseLost, s.leaseRenewed, s.midStep, s.midZombies)
}

var (
	t0      = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	errKill = errors.New("process killed")
)

const leaseDuration = 30 * time.Second

type node struct {
	name   string
	runner *round.Runner
	worker *round.ActivityWorker

	points
}

type machine struct {
	mode    round.Mode
	store   *memory.Store
	clock   *round.ManualClock
	nodes   []*node
	ids     []string
	prev    map[string][]history.Event
	zombies []*round.ActivityLease
	counter int
	ctx     context.Context

	faultMu sync.Mutex
	fault   memory.Op
	after   bool
	// mid crashes a peek-lock step between two of its record writes.
	mid midStep
	// cutOff makes every lease renewal fail (see wfMachine.cutOff);
	// renewed receives the outcome of every renewal.
	cutOff  bool
	renewed chan error

	stats stats
}

func newMachine(t *rapid.T, mode round.Mode) *machine {
	m := &machine{mode: mode, clock: round.NewManualClock(t0), prev: map[string][]history.Event{}, ctx: context.Background(), renewed: make(chan error, 16)}
	m.store = memory.New(memory.Options{Mode: mode, Fault: m.injected, BetweenWrites: m.mid.between})
	var store round.Store = m.store
	if mode == round.ModePeekLock {
		store = wfRenewWatch{m.store, m.renewed}
	}
	for _, name := range []string{"n1", "n2"} {
		n := &node{name: name}
		var err error
		n.runner, err = round.NewRunner(store, round.RunnerOptions{
			Node: name, Turn: scripted.Turn, Clock: m.clock, MaxDeliveries: 1000,
			LeaseDuration: leaseDuration, Hooks: round.Hooks{Crash: n.hook},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.worker, err = round.NewActivityWorker(m.store, round.ActivityWorkerOptions{
			Node: name, Resolve: scripted.Resolve, Clock: m.clock, LeaseDuration: leaseDuration,
			Jitter: func() float64 { return 0.5 },
		})
		if err != nil {
			t.Fatal(err)
		}
		m.nodes = append(m.nodes, n)
	}
	return m
}

// injected is the store's fault hook: one planned fault, then none.
func (m *machine) injected(op memory.Op) *memory.Fault {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	if op == memory.OpRenewLease && m.cutOff {
		return &memory.Fault{}
	}
	if f := m.mid.fault(op); f != nil {
		return f
	}
	if m.fault == "" || m.fault != op {
		return nil
	}
	m.fault = ""
	m.stats.faults++
	return &memory.Fault{AfterEffect: m.after}
}

func (m *machine) planFault(t *rapid.T, ops ...memory.Op) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	m.fault = ""
	if rapid.IntRange(0, 3).Draw(t, "fault?") == 0 {
		m.fault = rapid.SampledFrom(ops).Draw(t, "fault")
		m.after = rapid.Bool().Draw(t, "after effect")
	}
}

func (m *machine) clearFault() {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	m.fault = ""
}

func (m *machine) id(prefix string) string {
	m.counter++
	return prefix + "-" + strconv.Itoa(m.counter)
}

func (m *machine) enqueue(t *rapid.T, msgs ...round.Message) {
	if err := m.store.EnqueueMessages(m.ctx, &round.EnqueueMessagesParams{Messages: msgs, Now: m.clock.Now()}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func drawSteps(t *rapid.T, label string, child bool) []scripted.Step {
	n := rapid.IntRange(1, 4).Draw(t, label+" steps")
	steps := make([]scripted.Step, n)
	kinds := []string{scripted.Activity, scripted.Activity, scripted.FanOut, scripted.Timer, scripted.Signal, scripted.Child}
	if child {
		kinds = []string{scripted.Activity, scripted.Timer}
	}
	for i := range steps {
		k := rapid.SampledFrom(kinds).Draw(t, label+" kind")
		s := scripted.Step{Kind: k}
		switch k {
		case scripted.Activity, scripted.FanOut:
			s.Name = rapid.SampledFrom([]string{"a", "a", "flaky", "fail"}).Draw(t, label+" activity")
			s.Count = rapid.IntRange(2, 3).Draw(t, label+" count")
		case scripted.Timer:
			s.Delay = time.Duration(rapid.IntRange(1, 120).Draw(t, label+" delay")) * time.Second
		case scripted.Signal:
			s.Name = rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, label+" signal")
		case scripted.Child:
			s.Child = drawSteps(t, label+" child", true)
			if rapid.Bool().Draw(t, label+" shared child") {
				s = drawSharedChild(t, label)
			}
		}
		steps[i] = s
	}
	return steps
}

// sharedChildIDs are the explicit child ids scripts draw from: two
// parents often name the same child while it runs, and the later start is
// refused (the parent's script then fails).
var sharedChildIDs = []string{"shared-child-1", "shared-child-2"}

// drawSharedChild draws a child step with an explicit id from
// sharedChildIDs; the child first sleeps a while, so that another parent's
// start often finds it running.
func drawSharedChild(t *rapid.T, label string) scripted.Step {
	delay := time.Duration(rapid.IntRange(30, 240).Draw(t, label+" shared child delay")) * time.Second
	return scripted.Step{
		Kind: scripted.Child, ChildID: rapid.SampledFrom(sharedChildIDs).Draw(t, label+" child id"),
		Child: append([]scripted.Step{{Kind: scripted.Timer, Delay: delay}}, drawSteps(t, label+" child", true)...),
	}
}

func (m *machine) run(t *rapid.T) {
	t.Repeat(map[string]func(*rapid.T){
		"":          m.check,
		"start":     m.start,
		"signal":    m.signal,
		"round":     m.round,
		"round2":    m.round,
		"activity":  m.activity,
		"advance":   m.advance,
		"duplicate": m.duplicate,
		"control":   m.control,
		"zombie":    m.zombieClaim,
		"zombieEnd": m.zombieComplete,
		"paused":    m.pausedRound,
		"quiesce":   m.quiesce,
		"purge":     m.purgeAndReuse,
		"dead":      m.deadWorker,
	})
	m.finish(t)
}

func (m *machine) start(t *rapid.T) {
	if len(m.ids) >= 5 {
		t.Skip("enough instances")
	}
	id := m.id("claim")
	steps := drawSteps(t, "script", false)
	if rapid.Bool().Draw(t, "shared child first") {
		steps = append([]scripted.Step{drawSharedChild(t, "script")}, steps...)
	}
	msg, err := scripted.StartMessage(id, scripted.Script{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	m.enqueue(t, msg)
	if rapid.Bool().Draw(t, "duplicate start") {
		dup := msg
		dup.ID = m.id("dup-start")
		m.enqueue(t, dup)
	}
	m.ids = append(m.ids, id)
}

func (m *machine) signal(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	name := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "name")
	key := rapid.SampledFrom([]string{"k1", "k2", "k3", "k4"}).Draw(t, "key")
	msg, err := round.NewMessage(m.id("signal"), id, "", key, &history.EventRaised{Name: name, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	// A delay reorders deliveries.
	msg.VisibleAt = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "delay")) * time.Second)
	m.enqueue(t, msg)
}

// control suspends, resumes or terminates an instance.
func (m *machine) control(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	var attrs history.Attributes
	switch rapid.IntRange(0, 4).Draw(t, "control") {
	case 0:
		attrs = &history.ExecutionTerminated{Reason: "operator"}
	case 1, 2:
		attrs = &history.ExecutionSuspended{Reason: "review"}
	default:
		attrs = &history.ExecutionResumed{}
	}
	msg, err := round.NewMessage(m.id("control"), id, "", "", attrs)
	if err != nil {
		t.Fatal(err)
	}
	msg.Actor = history.UserActor("ops")
	m.enqueue(t, msg)
}

func allowedRoundError(err error) bool {
	return err == nil || round.IsCrash(err) || errors.Is(err, memory.ErrInjected) ||
		errors.Is(err, round.ErrConflict) || errors.Is(err, round.ErrLeaseLost)
}

func (m *machine) round(t *rapid.T) {
	n := rapid.SampledFrom(m.nodes).Draw(t, "node")
	points := append([]round.CrashPoint{"", "", ""}, round.CrashPoints()...)
	n.mu.Lock()
	n.crashAt = rapid.SampledFrom(points).Draw(t, "crash at")
	n.mu.Unlock()
	if m.mode == round.ModeTransactional {
		m.planFault(t, memory.OpCommit, memory.OpAppendHistory, memory.OpAckMessages, memory.OpDequeueInstance, memory.OpAbandonMessages, memory.OpGetSnapshot)
	} else {
		m.planFault(t, memory.OpAppendHistory, memory.OpSaveProjections, memory.OpEnqueueMessages, memory.OpEnqueueActivities,
			memory.OpAckLease, memory.OpLeaseInstance, memory.OpDeadLetterLeased, memory.OpCancelActivities, memory.OpAbandonLease, memory.OpGetSnapshot)
		m.mid.plan(t, midStepRoundOps)
	}
	rep, err := n.runner.RunOnce(m.ctx)
	m.clearFault()
	m.mid.clear()
	n.mu.Lock()
	n.crashAt = ""
	n.mu.Unlock()
	m.count(rep)
	if errors.Is(err, errMidStep) {
		m.stats.midStep++
	}
	if round.IsCrash(err) || errors.Is(err, errMidStep) {
		m.stats.crashes++
		n.runner.Forget() // the process restarts with an empty cache
	}
	if !allowedRoundError(err) {
		t.Fatalf("round on %s: %v", n.name, err)
	}
}

func (m *machine) activity(t *rapid.T) {
	n := rapid.SampledFrom(m.nodes).Draw(t, "node")
	m.planFault(t, memory.OpClaimActivity, memory.OpCompleteActivity, memory.OpRetryActivity, memory.OpHeartbeatActivity)
	if m.mode == round.ModePeekLock {
		m.mid.plan(t, midStepActivityOps)
	}
	_, err := n.worker.RunOnce(m.ctx)
	m.clearFault()
	m.mid.clear()
	if errors.Is(err, errMidStep) {
		m.stats.midStep++
	}
	if err != nil && !errors.Is(err, memory.ErrInjected) {
		t.Fatalf("activity on %s: %v", n.name, err)
	}
}

func (m *machine) advance(t *rapid.T) {
	m.clock.Advance(rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, leaseDuration + time.Second, 2 * time.Minute}).Draw(t, "advance"))
}

// duplicate delivers an event already in history again under a new message
// id, as a redelivering queue would.
func (m *machine) duplicate(t *rapid.T) {
	ids := m.store.InstanceIDs()
	if len(ids) == 0 {
		t.Skip("no history")
	}
	id := rapid.SampledFrom(ids).Draw(t, "instance")
	var candidates []history.Event
	for _, e := range m.load(t, id) {
		for _, k := range round.MessageKinds() {
			if e.Kind == k {
				candidates = append(candidates, e)
			}
		}
	}
	if len(candidates) == 0 {
		t.Skip("no completion")
	}
	e := rapid.SampledFrom(candidates).Draw(t, "event")
	msg := round.Message{ID: m.id("dup"), InstanceID: id, ExecutionID: e.ExecutionID, Kind: e.Kind, CorrelationID: e.CorrelationID, Payload: e.Payload}
	m.enqueue(t, msg)
}

// zombieClaim claims an activity task for a worker that then stalls.
func (m *machine) zombieClaim(t *rapid.T) {
	l := claimFor(m.ctx, t, m.store, m.clock, "zombie")
	m.zombies = append(m.zombies, l)
}

// zombieComplete lets a stalled worker finish late: accepted only while its
// lease token is still the task's.
func (m *machine) zombieComplete(t *rapid.T) {
	if len(m.zombies) == 0 {
		t.Skip("no zombie")
	}
	i := rapid.IntRange(0, len(m.zombies)-1).Draw(t, "zombie")
	l := m.zombies[i]
	m.zombies = append(m.zombies[:i], m.zombies[i+1:]...)
	msg, err := round.ActivityOutcome(&l.Task, []byte("late"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.store.CompleteActivity(m.ctx, &round.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: msg, Now: m.clock.Now()})
	if err != nil && !errors.Is(err, round.ErrLeaseLost) {
		t.Fatalf("zombie completion: %v", err)
	}
	if err != nil {
		m.stats.zombieRejected++
	}
}

// pausedRound stalls a round on one node at a crash point while its lease
// runs out and another node works, then lets it go on as a zombie.
func (m *machine) pausedRound(t *rapid.T) {
	a := rapid.SampledFrom(m.nodes).Draw(t, "paused node")
	var b *node
	for _, n := range m.nodes {
		if n != a {
			b = n
		}
	}
	pz := &pause{
		at:      rapid.SampledFrom([]round.CrashPoint{round.AfterLoad, round.AfterAppend, round.AfterProject, round.AfterEnqueue, round.BeforeAck}).Draw(t, "pause at"),
		paused:  make(chan struct{}),
		resumed: make(chan struct{}),
	}
	if m.mode != round.ModePeekLock || !m.mid.pauseRound(t, pz, midStepPauseOps) {
		a.mu.Lock()
		a.pause = pz
		a.mu.Unlock()
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.runner.RunOnce(m.ctx)
		done <- err
	}()
	var errA error
	select {
	case <-pz.paused:
		m.stats.zombieRounds++
		if err := m.leaseRunsOut(t); err != nil {
			close(pz.resumed)
			<-done
			t.Fatal(err)
		}
		for i := rapid.IntRange(1, 4).Draw(t, "rounds while paused"); i > 0; i-- {
			if _, err := b.runner.RunOnce(m.ctx); !allowedRoundError(err) {
				close(pz.resumed)
				<-done
				t.Fatalf("round on %s while %s paused: %v", b.name, a.name, err)
			}
			if _, err := b.worker.RunOnce(m.ctx); err != nil {
				close(pz.resumed)
				<-done
				t.Fatalf("activity on %s: %v", b.name, err)
			}
		}
		close(pz.resumed)
		errA = <-done
		m.faultMu.Lock()
		m.cutOff = false
		m.faultMu.Unlock()
	case errA = <-done:
		a.mu.Lock()
		a.pause = nil
		a.mu.Unlock()
		m.mid.unpause()
	}
	if pz.op != "" {
		select {
		case <-pz.paused:
			m.stats.midZombies++
		default:
		}
	}
	if !allowedRoundError(errA) {
		t.Fatalf("zombie round on %s: %v", a.name, errA)
	}
	if errA != nil {
		m.stats.zombieRejected++
	}
}

// leaseRunsOut moves the clock past the lease of a paused round; in
// peek-lock mode its renewal succeeds or, cut off, fails, and the lease runs
// out mid-round (see wfMachine.leaseRunsOut).
func (m *machine) leaseRunsOut(t *rapid.T) error {
	if m.mode != round.ModePeekLock {
		m.clock.Advance(leaseDuration + time.Second)
		return nil
	}
	for len(m.renewed) > 0 {
		<-m.renewed
	}
	cutOff := rapid.IntRange(0, 2).Draw(t, "cut off") > 0
	m.faultMu.Lock()
	m.cutOff = cutOff
	m.faultMu.Unlock()
	m.clock.Advance(leaseDuration + time.Second)
	select {
	case err := <-m.renewed:
		switch {
		case cutOff && errors.Is(err, memory.ErrInjected):
			m.stats.leaseLost++
		case !cutOff && err == nil:
			m.stats.leaseRenewed++
		default:
			return fmt.Errorf("renewal of the paused round's lease (cut off %v): %v", cutOff, err)
		}
	case <-time.After(time.Minute):
		return errors.New("the paused round did not renew its lease")
	}
	return nil
}

// purgeAndReuse purges an instance and starts a new run of it under the
// same id while nodes may still cache the purged one; a purge of an
// instance that has not ended is refused.
func (m *machine) purgeAndReuse(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	events := m.load(t, id)
	ts, crashed, err := m.mid.purge(m.ctx, t, m.store, &round.PurgeInstanceParams{InstanceID: id, By: "rapid", Now: m.clock.Now()},
		m.mode == round.ModePeekLock, m.round)
	if crashed {
		m.stats.midPurge++
	}
	if !checkPurge(t, m.mode, id, events, ts, err) {
		m.stats.purgeRefused++
		return
	}
	if n := len(m.load(t, id)); n > 0 {
		t.Fatalf("%s: %d events left after the purge", id, n)
	}
	for _, q := range m.store.QueuedMessages() {
		if q.InstanceID == id {
			t.Fatalf("%s: message %s left after the purge", id, q.ID)
		}
	}
	for _, q := range m.store.QueuedActivities() {
		if q.Task.InstanceID == id {
			t.Fatalf("%s: activity task %s left after the purge", id, q.Task.ID)
		}
	}
	delete(m.prev, id)
	m.stats.purged++
	msg, err := scripted.StartRunMessage(id, m.id("run"), scripted.Script{Steps: drawSteps(t, "reused script", false)})
	if err != nil {
		t.Fatal(err)
	}
	m.enqueue(t, msg)
}

// deadWorker claims an activity task for a worker that dies at once; the
// clock passes the end of its claim and, maybe, a worker takes it over.
func (m *machine) deadWorker(t *rapid.T) {
	claimFor(m.ctx, t, m.store, m.clock, "dead")
	m.stats.deadWorkers++
	m.clock.Advance(leaseDuration + time.Second)
	if rapid.Bool().Draw(t, "take over") {
		n := rapid.SampledFrom(m.nodes).Draw(t, "node")
		if _, err := n.worker.RunOnce(m.ctx); err != nil {
			t.Fatalf("activity on %s: %v", n.name, err)
		}
	}
}

// drain runs every node until nothing is visible.
func (m *machine) drain(t *rapid.T) {
	for i := 0; i < 500; i++ {
		busy := false
		for _, n := range m.nodes {
			rep, err := n.runner.RunOnce(m.ctx)
			if err != nil && !errors.Is(err, round.ErrConflict) {
				t.Fatalf("drain round on %s: %v", n.name, err)
			}
			m.count(rep)
			arep, err := n.worker.RunOnce(m.ctx)
			if err != nil {
				t.Fatalf("drain activity on %s: %v", n.name, err)
			}
			busy = busy || rep != nil || arep != nil || err != nil
		}
		if !busy {
			return
		}
	}
	t.Fatalf("work left after draining")
}

// quiesce lets leases run out and drains, then checks that every open
// schedule has exactly one live work item.
func (m *machine) quiesce(t *rapid.T) {
	m.clock.Advance(leaseDuration + time.Second)
	m.drain(t)
	tasks := map[string]int{}
	for _, qt := range m.store.QueuedActivities() {
		tasks[qt.Task.ID]++
	}
	msgs := map[string]int{}
	// results counts the queued results of activities and children by
	// instance, execution and schedule: a result held back (its
	// instance's last round failed and its messages wait out the retry
	// delay) is the live work item of an activity or child that ended.
	results := map[string]int{}
	for _, qm := range m.store.QueuedMessages() {
		msgs[qm.ID]++
		switch qm.Kind {
		case history.KindActivityCompleted, history.KindActivityFailed, history.KindSubWorkflowCompleted, history.KindSubWorkflowFailed:
			results[qm.InstanceID+"/"+qm.ExecutionID+"/"+qm.CorrelationID]++
		}
	}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		for seq := range snap.Activities {
			if n := tasks[round.ActivityTaskID(id, snap.ExecutionID, seq)] + results[id+"/"+snap.ExecutionID+"/"+history.SeqCorrelation(seq)]; n != 1 {
				t.Fatalf("%s: activity scheduled at seq %d has %d live tasks and results", id, seq, n)
			}
		}
		for seq := range snap.Timers {
			if n := msgs[round.TimerMessageID(id, snap.ExecutionID, seq)]; n != 1 {
				t.Fatalf("%s: timer created at seq %d has %d live messages", id, seq, n)
			}
		}
		for seq, child := range snap.SubWorkflows {
			if results[id+"/"+snap.ExecutionID+"/"+history.SeqCorrelation(seq)] == 1 {
				continue // the child ended or was refused; its parent has the result queued
			}
			cs, err := round.Fold(child, m.load(t, child))
			if err != nil {
				t.Fatal(err)
			}
			// Running for this parent: another parent's child may run
			// under a shared id.
			if !cs.Started() || cs.Ended || cs.Parent == nil || cs.Parent.InstanceID != id ||
				cs.Parent.ExecutionID != snap.ExecutionID || cs.Parent.ScheduledSeq != seq {
				t.Fatalf("%s: child %s scheduled at seq %d is not running for it (parent %+v)", id, child, seq, cs.Parent)
			}
		}
		if err := scripted.CheckReplay(id, events); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func (m *machine) count(rep *round.Report) {
	if rep != nil {
		m.stats.rounds++
		m.stats.duplicates += rep.Duplicates
		m.stats.stale += rep.Stale
	}
}

func (m *machine) load(t *rapid.T, id string) []history.Event {
	events, err := m.store.LoadHistory(m.ctx, &round.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// check asserts the invariants that hold after every step.
func (m *machine) check(t *rapid.T) {
	histories := map[string][]history.Event{}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		histories[id] = events
		// Contiguous, hash-chained and append-only.
		if err := history.Verify(events); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		prev := m.prev[id]
		if len(events) < len(prev) || (len(prev) > 0 && string(events[len(prev)-1].Hash) != string(prev[len(prev)-1].Hash)) {
			t.Fatalf("%s: history was rewritten", id)
		}
		m.prev[id] = events
		// At most one completion per correlation and one end per
		// execution, every completion after its schedule: the strict fold
		// refuses anything else.
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		m.checkProjections(t, id, events, snap)
	}
	// Work items never exist without the event that schedules them.
	for _, qt := range m.store.QueuedActivities() {
		events := histories[qt.Task.InstanceID]
		if qt.Task.ScheduledSeq > int64(len(events)) || events[qt.Task.ScheduledSeq-1].Kind != history.KindActivityScheduled {
			t.Fatalf("task %s has no schedule event", qt.Task.ID)
		}
	}
	for _, qm := range m.store.QueuedMessages() {
		if qm.Kind != history.KindTimerFired {
			continue
		}
		seq, _ := history.ParseSeqCorrelation(qm.CorrelationID)
		events := histories[qm.InstanceID]
		if seq > int64(len(events)) || events[seq-1].Kind != history.KindTimerCreated {
			t.Fatalf("timer message %s has no TimerCreated", qm.ID)
		}
	}
	letters, err := m.store.ListDeadLetters(m.ctx, &round.ListDeadLettersParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) > 0 {
		t.Fatalf("dead letter: %s %s", letters[0].Reason, letters[0].Error)
	}
}

// checkProjections: stored projections are the fold of history up to the
// Seq they record; in transactional mode that is always the last event.
func (m *machine) checkProjections(t *rapid.T, id string, events []history.Event, snap *round.Snapshot) {
	data, seq, err := m.store.GetSnapshot(m.ctx, id)
	if errors.Is(err, round.ErrNotFound) && m.mode == round.ModePeekLock {
		return // a round crashed between append and projection
	}
	if err != nil {
		t.Fatalf("%s: snapshot: %v", id, err)
	}
	if m.mode == round.ModeTransactional && seq != snap.LastSeq {
		t.Fatalf("%s: snapshot at seq %d, history at %d", id, seq, snap.LastSeq)
	}
	want, err := round.Fold(id, events[:seq])
	if err != nil {
		t.Fatal(err)
	}
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
	rec, err := m.store.GetInstance(m.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot is written last, one record at a time in peek-lock
	// mode: the instance record may be ahead of it, never behind.
	if rec.LastSeq < seq || rec.LastSeq > int64(len(events)) {
		t.Fatalf("%s: instance record at seq %d, snapshot at %d, history at %d", id, rec.LastSeq, seq, len(events))
	}
	if rec.LastSeq != seq {
		if want, err = round.Fold(id, events[:rec.LastSeq]); err != nil {
			t.Fatal(err)
		}
	}
	if !want.Record().Equal(rec) {
		t.Fatalf("%s: stored instance differs from the fold of history:\nwant %+v\ngot  %+v", id, want.Record(), rec)
	}
}

// finish stops injecting failures, lets every timer fire and every lease
// run out, and checks the end state: every instance terminal or parked on
// an external wait, nothing queued, histories replayable.
func (m *machine) finish(t *rapid.T) {
	m.clearFault()
	for i := 0; i < 40; i++ {
		m.clock.Advance(2 * time.Minute)
		m.drain(t)
		if len(m.store.QueuedMessages()) == 0 && len(m.store.QueuedActivities()) == 0 {
			break
		}
	}
	m.check(t)
	if q := m.store.QueuedMessages(); len(q) > 0 {
		t.Fatalf("%d messages left, first %s %s for %s", len(q), q[0].Kind, q[0].ID, q[0].InstanceID)
	}
	if q := m.store.QueuedActivities(); len(q) > 0 {
		t.Fatalf("%d tasks left", len(q))
	}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Status.Terminal() && (snap.Pending() || len(snap.Tasks) > 0) {
			t.Fatalf("%s is %s and still waits on its own work", id, snap.Status)
		}
		for i := range events {
			if events[i].Kind != history.KindSubWorkflowFailed {
				continue
			}
			a, err := events[i].Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if a.(*history.SubWorkflowFailed).Failure.Type == round.FailureSubWorkflowAlreadyStarted {
				m.stats.refused++
			}
		}
		switch snap.Status {
		case round.StatusCompleted:
			m.stats.completed++
		case round.StatusFailed, round.StatusTerminated:
			m.stats.failed++
		default:
			m.stats.parked++
		}
		if err := scripted.CheckReplay(id, events); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}
