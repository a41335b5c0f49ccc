package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// TestRapidWorkflowsTransactional and TestRapidWorkflowsPeekLock drive real
// workflow code (the "program" interpreter of workflows_program_test.go)
// through the deterministic executor and the round runner on the memory
// provider, with two nodes that each have their own executor cache, crash
// injection at every crash point, store faults, duplicate and delayed
// deliveries, zombie activity workers and rounds paused past their lease.
// After every step they check the invariants of DESIGN.md §9; at quiescence
// and at the end they replay every history with fresh code and check the
// outputs of completed programs against the programs.
func TestRapidWorkflowsTransactional(t *testing.T) { testRapidWorkflows(t, round.ModeTransactional) }

func TestRapidWorkflowsPeekLock(t *testing.T) { testRapidWorkflows(t, round.ModePeekLock) }

func testRapidWorkflows(t *testing.T, mode round.Mode) {
	printSeed(t)
	before := wfExecutorGoroutines()
	var total wfStats
	rapid.Check(t, func(rt *rapid.T) {
		m := newWfMachine(rt, mode)
		defer m.close()
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
	require.Positive(t, total.continued, "no execution continued as new")
	require.Positive(t, total.restarted, "no instance restarted")
	require.Positive(t, total.children, "no child completed")
	require.Positive(t, total.cold, "no round replayed a whole history")
	require.Positive(t, total.turns, "no turn replayed by the checker")
	require.Empty(t, wfLeaks(before, 5*time.Second), "workflow goroutines left running")
}

// wfStats count what the machine exercised.
type wfStats struct {
	rounds, cold, crashes, faults, zombieRounds, zombieRejected, duplicates, stale int
	activities, retries, zombieTasks, zombieTasksRejected                          int
	completed, failed, terminated, parked, continued, restarted, children          int
	timeouts, signalled, racesTimer, racesSignal, carried, turns                   int
}

func (s *wfStats) add(o *wfStats) {
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
	s.terminated += o.terminated
	s.parked += o.parked
	s.continued += o.continued
	s.restarted += o.restarted
	s.children += o.children
	s.timeouts += o.timeouts
	s.signalled += o.signalled
	s.racesTimer += o.racesTimer
	s.racesSignal += o.racesSignal
	s.carried += o.carried
	s.turns += o.turns
}

func (s *wfStats) String() string {
	return fmt.Sprintf("%d rounds (%d cold), %d crashes, %d injected faults, %d zombie rounds (%d rejected), %d duplicates and %d stale messages dropped; "+
		"%d activity attempts (%d retried), %d zombie activity claims (%d late settlements rejected); "+
		"instances: %d completed (%d children), %d terminated, %d failed, %d parked, %d continued as new, %d restarted; "+
		"waits: %d signalled, %d timed out; races: %d won by the signal, %d by the timer; %d signals carried over to a new execution; %d turns replayed by the checker",
		s.rounds, s.cold, s.crashes, s.faults, s.zombieRounds, s.zombieRejected, s.duplicates, s.stale,
		s.activities, s.retries, s.zombieTasks, s.zombieTasksRejected,
		s.completed, s.children, s.terminated, s.failed, s.parked, s.continued, s.restarted,
		s.signalled, s.timeouts, s.racesSignal, s.racesTimer, s.carried, s.turns)
}

// wfNode is one process: a round runner with its own replayer (and so its
// own executor cache) and an activity worker.
type wfNode struct {
	name   string
	runner *round.Runner
	worker *round.ActivityWorker

	mu      sync.Mutex
	crashAt round.CrashPoint
	pause   *pause
}

func (n *wfNode) hook(_ context.Context, p round.CrashPoint, _ string) error {
	n.mu.Lock()
	crash := n.crashAt == p
	if crash {
		n.crashAt = ""
	}
	pz := n.pause
	if pz != nil && pz.at == p {
		n.pause = nil
	} else {
		pz = nil
	}
	n.mu.Unlock()
	if pz != nil {
		close(pz.paused)
		<-pz.resumed
	}
	if crash {
		return errKill
	}
	return nil
}

type wfMachine struct {
	mode    round.Mode
	store   *memory.Store
	clock   *round.ManualClock
	nodes   []*wfNode
	ids     []string // top-level instances
	prev    map[string]wfSeen
	zombies []*round.ActivityLease
	counter int
	effects atomic.Int64
	checker *wfReplayChecker
	ctx     context.Context
	// known holds, by instance, the tags of messages that the known
	// redelivery bug turned into two events.

	faultMu sync.Mutex
	fault   memory.Op
	after   bool

	stats wfStats
}

func newWfMachine(t *rapid.T, mode round.Mode) *wfMachine {
	m := &wfMachine{mode: mode, clock: round.NewManualClock(t0), prev: map[string]wfSeen{}, ctx: context.Background(), checker: newWfReplayChecker()}
	m.store = memory.New(memory.Options{Mode: mode, Fault: m.injected})
	// A small cache evicts executors between rounds; none replays every
	// round from history.
	cacheSize := rapid.SampledFrom([]int{0, 1, 2, -1}).Draw(t, "cache size")
	// A small batch limit splits an instance's messages over rounds.
	batchLimit := rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "batch limit")
	for _, name := range []string{"n1", "n2"} {
		n := &wfNode{name: name}
		env := &wfEnv{sideEffect: counterSideEffects(&m.effects)}
		var err error
		n.runner, err = round.NewRunner(m.store, round.RunnerOptions{
			Node: name, Turn: newWfReplayer(env).Turn, Clock: m.clock, MaxDeliveries: 1000,
			LeaseDuration: leaseDuration, CacheSize: cacheSize, BatchLimit: batchLimit, Hooks: round.Hooks{Crash: n.hook},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.worker, err = round.NewActivityWorker(m.store, round.ActivityWorkerOptions{
			Node: name, Resolve: wfResolve, Clock: m.clock, LeaseDuration: leaseDuration,
			Jitter: func() float64 { return 0.5 },
		})
		if err != nil {
			t.Fatal(err)
		}
		m.nodes = append(m.nodes, n)
	}
	return m
}

// close releases the executors the nodes cache.
func (m *wfMachine) close() {
	for _, n := range m.nodes {
		n.runner.Forget()
	}
}

// injected is the store's fault hook: one planned fault, then none.
func (m *wfMachine) injected(op memory.Op) *memory.Fault {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	if m.fault == "" || m.fault != op {
		return nil
	}
	m.fault = ""
	m.stats.faults++
	return &memory.Fault{AfterEffect: m.after}
}

func (m *wfMachine) planFault(t *rapid.T, ops ...memory.Op) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	m.fault = ""
	if rapid.IntRange(0, 3).Draw(t, "fault?") == 0 {
		m.fault = rapid.SampledFrom(ops).Draw(t, "fault")
		m.after = rapid.Bool().Draw(t, "after effect")
	}
}

func (m *wfMachine) clearFault() {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	m.fault = ""
}

func (m *wfMachine) id(prefix string) string {
	m.counter++
	return prefix + "-" + strconv.Itoa(m.counter)
}

func (m *wfMachine) enqueue(t *rapid.T, msgs ...round.Message) {
	if err := m.store.EnqueueMessages(m.ctx, &round.EnqueueMessagesParams{Messages: msgs, Now: m.clock.Now()}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func (m *wfMachine) run(t *rapid.T) {
	t.Repeat(map[string]func(*rapid.T){
		"":          m.check,
		"start":     m.start,
		"signal":    m.signal,
		"signal2":   m.signal,
		"signal3":   m.signal,
		"round":     m.round,
		"round2":    m.round,
		"round3":    m.round,
		"activity":  m.activity,
		"activity2": m.activity,
		"advance":   m.advance,
		"duplicate": m.duplicate,
		"control":   m.control,
		"restart":   m.restartNode,
		"zombie":    m.zombieClaim,
		"zombie2":   m.zombieClaim,
		"zombieEnd": m.zombieComplete,
		"paused":    m.pausedRound,
		"quiesce":   m.quiesce,
	})
	m.finish(t)
}

// startMessage builds the message that starts a new execution of a
// program.
func (m *wfMachine) startMessage(t *rapid.T, id string, steps []wfStep) round.Message {
	input, err := history.Encode(&wfProgram{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	exec := m.id("exec")
	msg, err := round.NewMessage(history.DeterministicID(id, 0, "start:"+exec), id, exec, exec, &history.ExecutionStarted{Name: wfName, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (m *wfMachine) start(t *rapid.T) {
	if len(m.ids) >= 4 {
		t.Skip("enough instances")
	}
	id := m.id("program")
	msg := m.startMessage(t, id, drawWfSteps(t, "program", false))
	m.enqueue(t, msg)
	if rapid.Bool().Draw(t, "duplicate start") {
		dup := msg
		dup.ID = m.id("dup-start")
		m.enqueue(t, dup)
	}
	m.ids = append(m.ids, id)
}

func (m *wfMachine) signal(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	name := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "name")
	// Keys come from a small set per name, so duplicates happen and every
	// name can still be raised a few times per execution.
	key := name + "." + rapid.SampledFrom([]string{"k1", "k2", "k3"}).Draw(t, "key")
	msgID := m.id("signal")
	// The payload names the message, so the checks can tell a signal
	// delivered twice from two signals with one key.
	payload, err := history.Encode(key + "#" + msgID)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := round.NewMessage(msgID, id, "", key, &history.EventRaised{Name: name, Payload: payload, IdempotencyKey: key, Sender: "rapid"})
	if err != nil {
		t.Fatal(err)
	}
	// A delay reorders deliveries.
	msg.VisibleAt = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "delay")) * time.Second)
	m.enqueue(t, msg)
}

// control suspends, resumes, terminates or restarts an instance.
func (m *wfMachine) control(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	// The reason names the message, so the checks can tell a request
	// applied twice.
	msgID := m.id("control")
	var attrs history.Attributes
	restart := false
	switch rapid.IntRange(0, 8).Draw(t, "control") {
	case 0:
		attrs = &history.ExecutionTerminated{Reason: "operator " + msgID}
	case 1:
		// Terminate and start a new run, as Start with
		// ReuseTerminateAndRestart does.
		attrs, restart = &history.ExecutionTerminated{Reason: "restart " + msgID}, true
	case 2, 3, 4:
		attrs = &history.ExecutionSuspended{Reason: "review " + msgID}
	default:
		attrs = &history.ExecutionResumed{Reason: msgID}
	}
	msg, err := round.NewMessage(msgID, id, "", "", attrs)
	if err != nil {
		t.Fatal(err)
	}
	msg.Actor = history.UserActor("ops")
	msgs := []round.Message{msg}
	if restart {
		msgs = append(msgs, m.startMessage(t, id, drawWfSteps(t, "restarted program", false)))
	}
	m.enqueue(t, msgs...)
}

func (m *wfMachine) round(t *rapid.T) {
	n := rapid.SampledFrom(m.nodes).Draw(t, "node")
	points := append([]round.CrashPoint{"", "", ""}, round.CrashPoints()...)
	n.mu.Lock()
	n.crashAt = rapid.SampledFrom(points).Draw(t, "crash at")
	n.mu.Unlock()
	if m.mode == round.ModeTransactional {
		m.planFault(t, memory.OpCommit, memory.OpAppendHistory, memory.OpAckMessages, memory.OpDequeueInstance, memory.OpAbandonMessages, memory.OpLoadHistory)
	} else {
		m.planFault(t, memory.OpAppendHistory, memory.OpSaveProjections, memory.OpEnqueueMessages, memory.OpEnqueueActivities,
			memory.OpAckLease, memory.OpLeaseInstance, memory.OpDeadLetterLeased, memory.OpCancelActivities, memory.OpAbandonLease, memory.OpLoadHistory)
	}
	rep, err := n.runner.RunOnce(m.ctx)
	m.clearFault()
	n.mu.Lock()
	n.crashAt = ""
	n.mu.Unlock()
	m.count(rep)
	if round.IsCrash(err) {
		m.stats.crashes++
		n.runner.Forget() // the process restarts with an empty cache
	}
	if !allowedRoundError(err) {
		t.Fatalf("round on %s: %v", n.name, err)
	}
}

// restartNode restarts a process without a crash in a round: its executor
// cache is gone.
func (m *wfMachine) restartNode(t *rapid.T) {
	rapid.SampledFrom(m.nodes).Draw(t, "node").runner.Forget()
}

func (m *wfMachine) activity(t *rapid.T) {
	n := rapid.SampledFrom(m.nodes).Draw(t, "node")
	m.planFault(t, memory.OpClaimActivity, memory.OpCompleteActivity, memory.OpRetryActivity, memory.OpHeartbeatActivity)
	rep, err := n.worker.RunOnce(m.ctx)
	m.clearFault()
	if err != nil && !errors.Is(err, memory.ErrInjected) {
		t.Fatalf("activity on %s: %v", n.name, err)
	}
	m.countActivity(t, rep)
}

func (m *wfMachine) countActivity(t *rapid.T, rep *round.ActivityReport) {
	if rep == nil {
		return
	}
	m.stats.activities++
	switch rep.Outcome {
	case round.OutcomeRetry:
		m.stats.retries++
	case round.OutcomeDeadLettered:
		t.Fatalf("activity %s dead-lettered", rep.TaskID)
	}
}

func (m *wfMachine) advance(t *rapid.T) {
	m.clock.Advance(rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, leaseDuration + time.Second, 2 * time.Minute}).Draw(t, "advance"))
}

// duplicate delivers an event already in history again under a new message
// id, as a redelivering queue would.
func (m *wfMachine) duplicate(t *rapid.T) {
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
func (m *wfMachine) zombieClaim(t *rapid.T) {
	now := m.clock.Now()
	l, err := m.store.ClaimActivity(m.ctx, &round.ClaimActivityParams{Owner: "zombie", Now: now, LockedUntil: now.Add(leaseDuration)})
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		t.Skip("no task")
	}
	m.stats.zombieTasks++
	m.zombies = append(m.zombies, l)
}

// zombieComplete lets a stalled worker finish its attempt late, settling
// it as a worker would: accepted only while its lease token is still the
// task's.
func (m *wfMachine) zombieComplete(t *rapid.T) {
	if len(m.zombies) == 0 {
		t.Skip("no zombie")
	}
	i := rapid.IntRange(0, len(m.zombies)-1).Draw(t, "zombie")
	l := m.zombies[i]
	m.zombies = append(m.zombies[:i], m.zombies[i+1:]...)
	result, runErr := wfAttempt(&l.Task)
	now := m.clock.Now()
	var err error
	if runErr != nil {
		f := round.FailureOf(runErr)
		policy := round.WithRetryDefaults(l.Task.Retry, round.DefaultRetryPolicy)
		if retry, delay := round.RetryDelay(policy, l.Task.Attempt, &f, 0.5); retry {
			err = m.store.RetryActivity(m.ctx, &round.RetryActivityParams{TaskID: l.Task.ID, Token: l.Token, VisibleAt: now.Add(delay), Error: f.Message})
		} else {
			err = m.completeZombie(t, l, nil, &f, now)
		}
	} else {
		err = m.completeZombie(t, l, result, nil, now)
	}
	if err != nil && !errors.Is(err, round.ErrLeaseLost) {
		t.Fatalf("zombie completion: %v", err)
	}
	if err != nil {
		m.stats.zombieTasksRejected++
	}
}

func (m *wfMachine) completeZombie(t *rapid.T, l *round.ActivityLease, result []byte, f *history.Failure, now time.Time) error {
	msg, err := round.ActivityOutcome(&l.Task, result, f)
	if err != nil {
		t.Fatal(err)
	}
	return m.store.CompleteActivity(m.ctx, &round.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: msg, Now: now})
}

// pausedRound stalls a round on one node at a crash point while its lease
// runs out and another node works, then lets it go on as a zombie.
func (m *wfMachine) pausedRound(t *rapid.T) {
	a := rapid.SampledFrom(m.nodes).Draw(t, "paused node")
	var b *wfNode
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
	a.mu.Lock()
	a.pause = pz
	a.mu.Unlock()
	type result struct {
		rep *round.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := a.runner.RunOnce(m.ctx)
		done <- result{rep, err}
	}()
	var res result
	select {
	case <-pz.paused:
		m.stats.zombieRounds++
		// Clients go on sending while the round stalls.
		if len(m.ids) > 0 {
			switch rapid.IntRange(0, 3).Draw(t, "client while paused") {
			case 1:
				m.signal(t)
			case 2:
				m.control(t)
			}
		}
		m.clock.Advance(leaseDuration + time.Second)
		for i := rapid.IntRange(1, 4).Draw(t, "rounds while paused"); i > 0; i-- {
			rep, err := b.runner.RunOnce(m.ctx)
			if !allowedRoundError(err) {
				close(pz.resumed)
				<-done
				t.Fatalf("round on %s while %s paused: %v", b.name, a.name, err)
			}
			m.count(rep)
			arep, err := b.worker.RunOnce(m.ctx)
			if err != nil {
				close(pz.resumed)
				<-done
				t.Fatalf("activity on %s: %v", b.name, err)
			}
			m.countActivity(t, arep)
		}
		close(pz.resumed)
		res = <-done
	case res = <-done:
		a.mu.Lock()
		a.pause = nil
		a.mu.Unlock()
	}
	m.count(res.rep)
	if !allowedRoundError(res.err) {
		t.Fatalf("zombie round on %s: %v", a.name, res.err)
	}
	if res.err != nil {
		m.stats.zombieRejected++
	}
}

// drain runs every node until nothing is visible.
func (m *wfMachine) drain(t *rapid.T) {
	for i := 0; i < 1000; i++ {
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
			m.countActivity(t, arep)
			busy = busy || rep != nil || arep != nil || err != nil
		}
		if !busy {
			return
		}
	}
	t.Fatalf("work left after draining")
}

// quiesce lets leases run out and drains, then checks that every open
// schedule has exactly one live work item and that fresh code replays
// every history.
func (m *wfMachine) quiesce(t *rapid.T) {
	m.clock.Advance(leaseDuration + time.Second)
	m.drain(t)
	tasks := map[string]int{}
	for _, qt := range m.store.QueuedTasks() {
		tasks[qt.Task.ID]++
	}
	msgs := map[string]int{}
	for _, qm := range m.store.QueuedMessages() {
		msgs[qm.ID]++
	}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		for seq := range snap.Activities {
			if n := tasks[round.ActivityTaskID(id, snap.ExecutionID, seq)]; n != 1 {
				t.Fatalf("%s: activity scheduled at seq %d has %d live tasks", id, seq, n)
			}
		}
		for seq := range snap.Timers {
			if n := msgs[round.TimerMessageID(id, snap.ExecutionID, seq)]; n != 1 {
				t.Fatalf("%s: timer created at seq %d has %d live messages", id, seq, n)
			}
		}
		for seq, child := range snap.SubWorkflows {
			cs, err := round.Fold(child, m.load(t, child))
			if err != nil {
				t.Fatal(err)
			}
			if !cs.Started() || cs.Ended || cs.Parent == nil || cs.Parent.ScheduledSeq != seq {
				t.Fatalf("%s: child %s scheduled at seq %d is not running", id, child, seq)
			}
		}
		m.replayCheck(t, id, events)
	}
	// Conversely, a task lives only while its activity is pending: the end
	// of an execution cancels its tasks.
	for _, qt := range m.store.QueuedTasks() {
		events := m.load(t, qt.Task.InstanceID)
		snap, err := round.Fold(qt.Task.InstanceID, events)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Activities[qt.Task.ScheduledSeq]; !ok || snap.ExecutionID != qt.Task.ExecutionID {
			t.Fatalf("task %s of %s (execution %s, seq %d, attempt %d, owner %q) is queued but not pending\n%s",
				qt.Task.ID, qt.Task.InstanceID, qt.Task.ExecutionID, qt.Task.ScheduledSeq, qt.Task.Attempt, qt.Owner, wfDump(events))
		}
	}
}

func (m *wfMachine) replayCheck(t *rapid.T, id string, events []history.Event) {
	before := m.checker.turns
	if err := m.checker.check(id, events); err != nil {
		t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
	}
	m.stats.turns += m.checker.turns - before
}

func (m *wfMachine) count(rep *round.Report) {
	if rep != nil {
		m.stats.rounds++
		m.stats.duplicates += rep.Duplicates
		m.stats.stale += rep.Stale
		if rep.Cold {
			m.stats.cold++
		}
	}
}

func (m *wfMachine) load(t *rapid.T, id string) []history.Event {
	events, err := m.store.LoadHistory(m.ctx, &round.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// wfSeen is an instance's history at the last check and its fold.
type wfSeen struct {
	events []history.Event
	snap   *round.Snapshot
}

// check asserts the invariants that hold after every step.
func (m *wfMachine) check(t *rapid.T) {
	histories := map[string][]history.Event{}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		histories[id] = events
		// Contiguous, hash-chained and append-only.
		if err := history.Verify(events); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		prev := m.prev[id]
		if len(events) < len(prev.events) || (len(prev.events) > 0 && string(events[len(prev.events)-1].Hash) != string(prev.events[len(prev.events)-1].Hash)) {
			t.Fatalf("%s: history was rewritten", id)
		}
		// At most one completion per correlation and one end per
		// execution, every completion after its schedule: the strict fold
		// refuses anything else. The chain proves the history before the
		// last check unchanged, so only the new events are folded.
		snap := round.NewSnapshot(id)
		if prev.snap != nil {
			snap = prev.snap.Clone()
		}
		for i := len(prev.events); i < len(events); i++ {
			if err := snap.Apply(&events[i], nil); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		m.prev[id] = wfSeen{events: events, snap: snap}
		m.checkProjections(t, id, events, snap)
		if err := wfOnceEach(events); err != nil {
			t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
		}
	}
	// Work items never exist without the event that schedules them.
	for _, qt := range m.store.QueuedTasks() {
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

// wfOnceEach checks that each message the machine sent became at most one
// event: the messages carry unique tags (signal payloads, control
// reasons). The copies of unconsumed signals that continue-as-new carries
// into the next execution, before its first turn, are not deliveries.
// With tolerate, a second event that the known redelivery bug explains is
// returned among the known tags instead of failing: it is in another
// execution than the first (a message for the current execution was
// delivered again after a new execution started).
func wfOnceEach(events []history.Event) error {
	seen := map[string]int{}
	carrying := false
	for i := range events {
		e := &events[i]
		a, err := e.Attributes()
		if err != nil {
			return err
		}
		var tag string
		switch a := a.(type) {
		case *history.ExecutionStarted:
			carrying = a.ContinuedFrom != ""
		case *history.TurnStarted:
			carrying = false
		case *history.EventRaised:
			if carrying {
				continue
			}
			if err := history.Decode(a.Payload, &tag); err != nil {
				return fmt.Errorf("seq %d: signal payload: %w", e.Seq, err)
			}
		case *history.ExecutionTerminated:
			tag = a.Reason
		case *history.ExecutionSuspended:
			tag = a.Reason
		case *history.ExecutionResumed:
			tag = a.Reason
		}
		if tag == "" {
			continue
		}
		first, ok := seen[tag]
		if !ok {
			seen[tag] = i
			continue
		}
		return fmt.Errorf("the message tagged %q became two events: seq %d and seq %d (%s)", tag, events[first].Seq, e.Seq, e.Kind)
	}
	return nil
}

// checkProjections: stored projections are the fold of history up to the
// Seq they record; in transactional mode that is always the last event.
func (m *wfMachine) checkProjections(t *rapid.T, id string, events []history.Event, snap *round.Snapshot) {
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
	want := snap
	if seq != snap.LastSeq {
		if want, err = round.Fold(id, events[:seq]); err != nil {
			t.Fatal(err)
		}
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
	if !want.Record().Equal(rec) {
		t.Fatalf("%s: stored instance differs from the fold of history:\nwant %+v\ngot  %+v", id, want.Record(), rec)
	}
}

// finish stops injecting failures, lets every timer fire and every lease
// run out, and checks the end state: nothing queued, every instance
// terminal or parked on an external wait, every history replayed by fresh
// code, and every completed program's output what its program predicts.
func (m *wfMachine) finish(t *rapid.T) {
	m.clearFault()
	for i := 0; i < 40; i++ {
		m.clock.Advance(2 * time.Minute)
		m.drain(t)
		if len(m.store.QueuedMessages()) == 0 && len(m.store.QueuedTasks()) == 0 {
			break
		}
	}
	m.check(t)
	if q := m.store.QueuedMessages(); len(q) > 0 {
		t.Fatalf("%d messages left, first %s %s for %s", len(q), q[0].Kind, q[0].ID, q[0].InstanceID)
	}
	if q := m.store.QueuedTasks(); len(q) > 0 {
		t.Fatalf("%d tasks left", len(q))
	}
	for _, id := range m.store.InstanceIDs() {
		events := m.load(t, id)
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Status.Terminal() && (snap.Pending() || len(snap.Tasks) > 0) {
			t.Fatalf("%s is %s and still waits on its own work\n%s", id, snap.Status, wfDump(events))
		}
		m.replayCheck(t, id, events)
		child := snap.Parent != nil
		switch snap.Status {
		case round.StatusCompleted:
			m.stats.completed++
			if child {
				m.stats.children++
			}
			if err := wfCheckOutput(events, snap.Output); err != nil {
				t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
			}
			m.checkCustomStatus(t, id, events, snap)
		case round.StatusTerminated:
			m.stats.terminated++
		case round.StatusFailed:
			// Programs catch every failure they can meet.
			t.Fatalf("%s failed: %+v\n%s", id, snap.Failure, wfDump(events))
		default:
			m.stats.parked++
		}
		m.countHistory(events)
	}
}

// checkCustomStatus: the instance shows the status its program set last.
func (m *wfMachine) checkCustomStatus(t *rapid.T, id string, events []history.Event, snap *round.Snapshot) {
	var last []byte
	for i := range events {
		if events[i].Kind != history.KindCustomStatusSet {
			continue
		}
		a, err := events[i].Attributes()
		if err != nil {
			t.Fatal(err)
		}
		last = a.(*history.CustomStatusSet).Status
	}
	rec, err := m.store.GetInstance(m.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.CustomStatus) != string(last) || string(snap.CustomStatus) != string(last) {
		t.Fatalf("%s: custom status %q, last set %q", id, rec.CustomStatus, last)
	}
}

// countHistory counts what an instance's history went through.
func (m *wfMachine) countHistory(events []history.Event) {
	waits := map[int64]string{} // timer seq of a wait with a timeout → "wait"
	continued := false          // in a new execution, before its first turn
	for i := range events {
		e := &events[i]
		a, err := e.Attributes()
		if err != nil {
			continue
		}
		switch a := a.(type) {
		case *history.ContinuedAsNew:
			m.stats.continued++
		case *history.ExecutionStarted:
			if a.ContinuedFrom == "" && i > 0 {
				m.stats.restarted++
			}
			continued = a.ContinuedFrom != ""
		case *history.TurnStarted:
			continued = false
		case *history.EventRaised:
			if continued {
				m.stats.carried++
			}
		case *history.TimerCreated:
			if strings.HasPrefix(a.Name, "wait ") {
				waits[e.Seq] = a.Name
			}
		case *history.TimerFired:
			if seq, _ := history.ParseSeqCorrelation(e.CorrelationID); waits[seq] != "" {
				m.stats.timeouts++
			}
		}
	}
	var snap *round.Snapshot
	if s, err := round.Fold(events[0].InstanceID, events); err == nil && s.Status == round.StatusCompleted {
		snap = s
	}
	if snap == nil {
		return
	}
	var outs []string
	if history.Decode(snap.Output, &outs) != nil {
		return
	}
	for _, o := range outs {
		if inner, ok := strings.CutPrefix(o, "W=["); ok {
			for _, w := range strings.Split(strings.TrimSuffix(inner, "]"), ",") {
				if !strings.HasSuffix(w, "=timeout") {
					m.stats.signalled++
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(o, "w:") && !strings.HasSuffix(o, "=timeout"):
			m.stats.signalled++
		case strings.HasPrefix(o, "r:") && strings.HasSuffix(o, "=timer"):
			m.stats.racesTimer++
		case strings.HasPrefix(o, "r:"):
			m.stats.racesSignal++
		}
	}
}

// wfDump describes a history for failure messages.
func wfDump(events []history.Event) string {
	var b strings.Builder
	for i := range events {
		e := &events[i]
		a, _ := e.Attributes()
		fmt.Fprintf(&b, "  %3d %-8.8s %-22s %-12s %s %+v\n", e.Seq, e.ExecutionID, e.Kind, e.CorrelationID, e.At.Format("15:04:05"), a)
	}
	return b.String()
}

// wfExecutorGoroutines returns the stacks of running executor goroutines
// by goroutine id.
func wfExecutorGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "chronicle/replay.") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

// wfLeaks returns the stacks of executor goroutines that were not running
// before and still run after waiting up to wait for them to end, or "".
func wfLeaks(before map[string]string, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		var leaks []string
		for id, g := range wfExecutorGoroutines() {
			if _, ok := before[id]; !ok {
				leaks = append(leaks, g)
			}
		}
		if len(leaks) == 0 || time.Now().After(deadline) {
			return strings.Join(leaks, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
