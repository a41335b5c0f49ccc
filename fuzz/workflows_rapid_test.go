package fuzz_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// TestRapidWorkflowsTransactional and TestRapidWorkflowsPeekLock drive real
// workflow code (the "program" interpreter of workflows_program_test.go)
// through the deterministic executor, the round runner and the projector
// (task records and events, and a custom projection) on the memory
// provider, with two nodes that each have their own executor cache, crash
// injection at every crash point, store faults, duplicate and delayed
// deliveries, zombie activity workers and workers that die holding a claim,
// rounds paused past their lease (peek-lock ones renewing it, or cut off
// and taken over), ended instances purged and their ids reused while nodes
// still cache them, children whose explicit ids two parents share, a
// custom projection whose fold panics for a while on poisoned signals, and
// users acting on human tasks, racing each other. After every step they
// check the invariants of docs/architecture.md, projections included; at
// quiescence and at the end they replay every history with fresh code and
// check the outputs of completed programs against the programs.
// TestRapidWorkflowsPostgres (workflows_store_test.go) runs the same
// machine on PostgreSQL.
func TestRapidWorkflowsTransactional(t *testing.T) {
	testRapidWorkflows(t, wfMemory(provider.ModeTransactional))
}

func TestRapidWorkflowsPeekLock(t *testing.T) { testRapidWorkflows(t, wfMemory(provider.ModePeekLock)) }

func testRapidWorkflows(t *testing.T, backend *wfBackend) {
	printSeed(t)
	before := wfExecutorGoroutines()
	var (
		total  wfStats
		checks int
	)
	rapid.Check(t, func(rt *rapid.T) {
		checks++
		m := newWfMachine(rt, backend)
		defer m.close()
		m.run(rt)
		total.add(&m.stats)
	})
	t.Logf("over all checks on %s: %s", backend.name, total.String())
	t.Logf("outages on %s: %s", backend.name, total.outageStats.String())
	t.Logf("purges, redrives and zombies across purges on %s: %s", backend.name, total.purgeStats.String())
	require.Empty(t, wfLeaks(before, 5*time.Second), "workflow goroutines left running")
	if checks < wfCoverageChecks || backend.partial {
		// Rare actions need more checks than a short run (the race
		// detector's) makes to show up surely.
		t.Logf("%d checks on %s: too few, or a backend that cannot exercise every action, to require that every kind of action happened", checks, backend.name)
		return
	}
	// The checks must have exercised what they claim to.
	require.Positive(t, total.outages, "no outage")
	require.Positive(t, total.late, "no signal or task action that arrived before a timer was due applied ahead of it after an outage")
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
	require.Positive(t, total.tasksCompleted, "no task completed")
	require.Positive(t, total.taskTimeouts, "no task timed out")
	require.Positive(t, total.taskMoves, "no task claimed, assigned, released or reassigned")
	require.Positive(t, total.escalations, "no task escalated")
	require.Positive(t, total.rejected, "no task action rejected by a round")
	require.Positive(t, total.projections, "no projection checked")
	require.Positive(t, total.purged, "no instance purged and its id reused")
	require.Positive(t, total.purgeRefused, "no purge of a running instance refused")
	if backend.shares() {
		require.Positive(t, total.refused, "no child start refused because its id was taken")
	}
	require.Positive(t, total.panics, "no projection fold panicked")
	require.Positive(t, total.deadWorkers, "no activity worker died holding a claim")
	if backend.mode == provider.ModeTransactional {
		require.Positive(t, total.groups, "no transaction ran the rounds of several instances")
		require.Positive(t, total.groupFailures, "no round failed inside a group whose other rounds committed")
		require.Positive(t, total.inline, "no round ran with an activity's completion")
		// Tasks handed over claimed are rare in these machines (0 to a
		// few per hundred checks: a completion's round must schedule a
		// due task of the worker's queue); they are counted in the log,
		// and the round package's tests drive that path step by step.
	}
	require.Positive(t, total.restartPurges, "no purge of a restarted instance")
	require.Positive(t, total.orphans, "no signal to an id never started")
	require.Positive(t, total.redrives, "no dead letter redriven")
	if backend.mode == provider.ModePeekLock {
		require.Positive(t, total.interruptedPurges, "no crashed purge finished after its id was started again")
		require.Positive(t, total.zombiePurges, "no purge while a round of the instance was paused")
		require.Positive(t, total.redrivesRefused, "no redrive of a half-written dead letter")
		require.Positive(t, total.midStep, "no crash between two record writes of a step")
		require.Positive(t, total.midPurge, "no purge crashed half-way and finished again")
		require.Positive(t, total.midZombies, "no round went on as a zombie between two record writes")
		require.Positive(t, total.leaseLost, "no paused round lost its lease")
		require.Positive(t, total.leaseRenewed, "no paused round renewed its lease")
	}
}

// wfCoverageChecks is how many checks a run needs before it must have
// exercised every kind of action it counts.
const wfCoverageChecks = 100

// wfStats count what the machine exercised.
type wfStats struct {
	rigStats
	terminated, continued, restarted, children                                       int
	timeouts, signalled, racesTimer, racesSignal, carried, turns                     int
	tasks, tasksCompleted, taskTimeouts, taskMoves, taskRaces, rejected, projections int
	panics                                                                           int
	// escalations counts TaskEscalated events: tasks still open when their
	// escalation step came due.
	escalations int
	outageStats
}

// add adds the counts of o to s.
func (s *wfStats) add(o *wfStats) {
	s.rigStats.add(&o.rigStats)
	s.outageStats.add(&o.outageStats)
	s.terminated += o.terminated
	s.continued += o.continued
	s.restarted += o.restarted
	s.children += o.children
	s.timeouts += o.timeouts
	s.signalled += o.signalled
	s.racesTimer += o.racesTimer
	s.racesSignal += o.racesSignal
	s.carried += o.carried
	s.turns += o.turns
	s.tasks += o.tasks
	s.tasksCompleted += o.tasksCompleted
	s.taskTimeouts += o.taskTimeouts
	s.taskMoves += o.taskMoves
	s.taskRaces += o.taskRaces
	s.rejected += o.rejected
	s.projections += o.projections
	s.panics += o.panics
	s.escalations += o.escalations
}

func (s *wfStats) String() string {
	return fmt.Sprintf("%d rounds (%d cold), %d crashes, %d injected faults, %d zombie rounds (%d rejected), %d duplicates and %d stale messages dropped; "+
		"%d activity attempts (%d retried), %d zombie activity claims (%d late settlements rejected); "+
		"instances: %d completed (%d children), %d terminated, %d failed, %d parked, %d continued as new, %d restarted; "+
		"waits: %d signalled, %d timed out; races: %d won by the signal, %d by the timer; %d signals carried over to a new execution; %d turns replayed by the checker; "+
		"human tasks: %d created, %d completed, %d timed out, %d escalated, %d claims, assignments, releases and reassignments, %d racing pairs of actions, %d actions rejected by a round; "+
		"%d projection sets checked against the fold of history; "+
		"%d instances purged and their ids reused (%d purges refused), %d child starts refused (id taken), %d projection folds panicked, "+
		"%d workers died holding a claim, %d paused rounds lost their lease and %d renewed it; "+
		"%d crashes and %d zombie rounds between two record writes of a step, %d purges crashed half-way and finished again; "+
		"%d transactions of several instances' rounds (%d with a failed round); %d rounds with an activity's completion, %d tasks handed over claimed",
		s.rounds, s.cold, s.crashes, s.faults, s.zombieRounds, s.zombieRejected, s.duplicates, s.stale,
		s.activities, s.retries, s.zombieTasks, s.zombieTasksRejected,
		s.completed, s.children, s.terminated, s.failed, s.parked, s.continued, s.restarted,
		s.signalled, s.timeouts, s.racesSignal, s.racesTimer, s.carried, s.turns,
		s.tasks, s.tasksCompleted, s.taskTimeouts, s.escalations, s.taskMoves, s.taskRaces, s.rejected, s.projections,
		s.purged, s.purgeRefused, s.refused, s.panics, s.deadWorkers, s.leaseLost, s.leaseRenewed,
		s.midStep, s.midZombies, s.midPurge, s.groups, s.groupFailures, s.inline, s.eager)
}

// wfMachine drives real workflow code on the rig.
type wfMachine struct {
	*rig
	known   map[string]bool // every instance: top-level ones and children found in histories
	scanned map[string]int  // events of each instance scanned for children
	prev    map[string]wfSeen
	effects atomic.Int64
	checker *wfReplayChecker
	// projector folds the custom projection for the nodes and the checks;
	// views caches its folds by instance.
	projector *projector.Projector
	views     map[string]*wfView
	// taskActions holds the ids of the task actions sent, the only
	// messages a round may dead-letter (rejected by its re-check).
	taskActions map[string]bool
	// arrivals holds when the signals and task actions sent took effect.
	arrivals arrivals

	// poison maps the tags of poisoned signals to how many more times the
	// nodes' fold of the custom projection panics on them.
	poisonMu sync.Mutex
	poison   map[string]int

	stats wfStats
}

// wfPoison is the start of the panic value of a poisoned fold.
const wfPoison = "rapid poison "

// poisoned is the nodes' hook in the fold of the custom projection: it
// panics while the event is a poisoned signal with panics left. A product's
// fold that fails for a while (a bug fixed by a redeploy, a dependency
// back) is what it models: the round fails with reason panic, its messages
// are retried, and everything still converges.
func (m *wfMachine) poisoned(e *history.Event) {
	if e.Kind != history.KindEventRaised {
		return
	}
	a, err := e.Attributes()
	if err != nil {
		return
	}
	var tag string
	if history.Decode(a.(*history.EventRaised).Payload, &tag) != nil {
		return
	}
	m.poisonMu.Lock()
	defer m.poisonMu.Unlock()
	if m.poison[tag] <= 0 {
		return
	}
	m.poison[tag]--
	m.stats.panics++
	panic(wfPoison + tag)
}

// wfPoisonedRound reports whether a round failed because the fold of the
// custom projection panicked on a poisoned signal; the runner wraps the
// panic into an error with reason panic.
func wfPoisonedRound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "projection panicked: "+wfPoison)
}

func newWfMachine(t *rapid.T, backend *wfBackend) *wfMachine {
	checkProjector, err := projector.New(wfAuditProjection())
	if err != nil {
		t.Fatal(err)
	}
	m := &wfMachine{
		known: map[string]bool{}, scanned: map[string]int{}, prev: map[string]wfSeen{}, checker: newWfReplayChecker(),
		projector: checkProjector, views: map[string]*wfView{}, taskActions: map[string]bool{},
		poison: map[string]int{},
	}
	m.rig = newRig(t, backend, &m.stats.rigStats, rigHooks{
		failed: wfPoisonedRound, attempt: wfAttempt, histories: m.histories, queued: m.queued, client: m.clientWhilePaused,
	})
	// The nodes' fold of the custom projection panics on poisoned
	// signals; the checks fold with m.projector, which never panics.
	nodeProjector, err := projector.New(wfAuditProjectionWith(m.poisoned))
	if err != nil {
		t.Fatal(err)
	}
	// A small cache evicts executors between rounds; none replays every
	// round from history.
	cacheSize := rapid.SampledFrom([]int{0, 1, 2, -1}).Draw(t, "cache size")
	// A small batch limit splits an instance's messages over rounds.
	batchLimit := rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "batch limit")
	m.arrivals = newArrivals(batchLimit)
	for _, name := range []string{"n1", "n2"} {
		env := &wfEnv{sideEffect: counterSideEffects(&m.effects)}
		m.addNode(t, name,
			round.RunnerOptions{Turn: newWfReplayer(env).Turn, Project: nodeProjector.Project, CacheSize: cacheSize, BatchLimit: batchLimit},
			round.ActivityWorkerOptions{Resolve: wfResolve})
	}
	return m
}

func (m *wfMachine) run(t *rapid.T) {
	t.Repeat(map[string]func(*rapid.T){
		"":          m.check,
		"outage":    m.outage,
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
		"task":      m.taskAction,
		"task2":     m.taskAction,
		"task3":     m.taskAction,
		"taskRace":  m.taskRace,
		"purge":     m.purgeAndReuse,
		"dead":      m.deadWorker,
		// purge_rapid_test.go
		"restartPurge":     m.restartPurge,
		"interruptedPurge": m.interruptedPurge,
		"orphanRedrive":    m.orphanRedrive,
		"zombiePurge":      m.zombieAcrossPurge,
	})
	m.finish(t)
}

// wfKnownNewInstanceWait keeps shared child ids off PostgreSQL: a round
// that enqueues the start of a child that does not exist yet waits for any
// other open transaction that creates the same child's instance row
// (PostgreSQL's unique check; documented in docs/providers.md), so a round
// paused by the machine would block the other node (see meanwhile). The
// memory machines cover shared child ids;
// TestRegressionPostgresEnqueueToANewInstance covers the wait.
const wfKnownNewInstanceWait = true

// shares reports whether programs may name shared child ids on this
// backend (see wfKnownNewInstanceWait).
func (b *wfBackend) shares() bool { return !wfKnownNewInstanceWait || b.waiting == nil }

// sharing returns steps, with the explicit ids of their child steps
// dropped on a backend that keeps them off (see shares).
func (m *wfMachine) sharing(steps []wfStep) []wfStep {
	if m.backend.shares() {
		return steps
	}
	for i := range steps {
		steps[i].ID = ""
	}
	return steps
}

// startMessage builds the message that starts a new execution of a
// program.
func (m *wfMachine) startMessage(t *rapid.T, id string, steps []wfStep) provider.Message {
	input, err := history.Encode(&wfProgram{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	exec := m.id("exec")
	msg, err := provider.NewMessage(history.DeterministicID(id, 0, "start:"+exec), id, exec, exec, &history.ExecutionStarted{Name: wfName, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	m.ledger.noteStart(msg)
	return msg
}

func (m *wfMachine) start(t *rapid.T) {
	if len(m.ids) >= 4 {
		t.Skip("enough instances")
	}
	id := m.id("program")
	steps := drawWfSteps(t, "program", false)
	if rapid.Bool().Draw(t, "shared child first") {
		// Parents started close together reach their shared child at
		// once: one start wins, the others are refused.
		steps = append([]wfStep{drawWfSharedChild(t, "program")}, steps...)
	}
	m.started(t, id, m.startMessage(t, id, m.sharing(steps)))
	m.known[id] = true
}

func (m *wfMachine) signal(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	m.enqueue(t, m.signalMessage(t))
}

// signalMessage draws a signal to one of the instances (there must be
// one).
func (m *wfMachine) signalMessage(t *rapid.T) provider.Message {
	id := rapid.SampledFrom(m.ids).Draw(t, "instance")
	name := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "name")
	// Keys come from a small set per name, so duplicates happen and every
	// name can still be raised a few times per execution.
	key := name + "." + rapid.SampledFrom([]string{"k1", "k2", "k3"}).Draw(t, "key")
	msgID := m.id("signal")
	// The payload names the message, so the checks can tell a signal
	// delivered twice from two signals with one key.
	tag := key + "#" + msgID
	payload, err := history.Encode(tag)
	if err != nil {
		t.Fatal(err)
	}
	if rapid.IntRange(0, 7).Draw(t, "poisoned") == 0 {
		// The nodes' fold of the custom projection panics on its first
		// folds of this signal.
		m.poisonMu.Lock()
		m.poison[tag] = rapid.IntRange(1, 3).Draw(t, "poisoned folds")
		m.poisonMu.Unlock()
	}
	msg, err := provider.NewMessage(msgID, id, "", key, &history.EventRaised{Name: name, Payload: payload, IdempotencyKey: key, Sender: "rapid"})
	if err != nil {
		t.Fatal(err)
	}
	// A delay reorders deliveries.
	msg.VisibleAt = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "delay")) * time.Second)
	m.arrivals.sent(tag, m.clock.Now(), &msg)
	return msg
}

// control suspends, resumes, terminates or restarts an instance.
func (m *wfMachine) control(t *rapid.T) {
	if len(m.ids) == 0 {
		t.Skip("no instance")
	}
	m.enqueue(t, m.controlMessages(t)...)
}

// controlMessages draws a control request to one of the instances (there
// must be one): its message, and the start of the new run of a restart.
func (m *wfMachine) controlMessages(t *rapid.T) []provider.Message {
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
	msg, err := provider.NewMessage(msgID, id, "", "", attrs)
	if err != nil {
		t.Fatal(err)
	}
	msg.Actor = history.UserActor("ops")
	msgs := []provider.Message{msg}
	if restart {
		msgs = append(msgs, m.startMessage(t, id, m.sharing(drawWfSteps(t, "restarted program", false))))
	}
	return msgs
}

// clientWhilePaused draws what clients send while a round is paused: a
// signal, control requests, or nothing.
func (m *wfMachine) clientWhilePaused(t *rapid.T) []provider.Message {
	if len(m.ids) == 0 {
		return nil
	}
	switch rapid.IntRange(0, 3).Draw(t, "client while paused") {
	case 1:
		return []provider.Message{m.signalMessage(t)}
	case 2:
		return m.controlMessages(t)
	}
	return nil
}

// purgeAndReuse purges an instance and starts it again under the same id
// with a new program, while nodes may still cache the purged instance (a
// node caching it that takes a round of the new one must not trust its
// cache). A purge of an instance that has not ended is refused.
func (m *wfMachine) purgeAndReuse(t *rapid.T) {
	id, purged := m.purge(t)
	if !purged {
		return
	}
	if c, err := m.store.GetCustomProjection(m.ctx, wfAuditName, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s: custom record %+v after the purge: %v", id, c, err)
	}
	// The id's history starts over: what the checks remember of it goes.
	m.forget(id)
	m.enqueue(t, m.startMessage(t, id, m.sharing(drawWfSteps(t, "reused program", false))))
}

// quiesce lets leases run out and drains, then checks that every open
// schedule has exactly one live work item and that fresh code replays
// every history. A failed round (an injected fault, a poisoned signal)
// holds its messages back for a retry delay (in peek-lock mode after its
// append, before it enqueued the work items its redelivery enqueues): it
// lets the longest delay pass too (round.DefaultRetryDelay: 64 s at most),
// so that the round runs again, until no round fails.
func (m *wfMachine) quiesce(t *rapid.T) {
	m.advanceBy(leaseDuration + time.Second)
	m.drain(t)
	for i := 0; ; i++ {
		m.advanceBy(2 * time.Minute)
		if !m.drain(t) {
			break
		}
		if i == 20 {
			t.Fatalf("rounds still fail on poisoned signals after %d drains", i)
		}
	}
	ids, histories := m.histories(t)
	queuedMsgs, queuedTasks := m.queued(t)
	m.checkCensus(t, ids, queuedMsgs, queuedTasks)
	checkLiveWork(t, ids, histories, queuedMsgs, queuedTasks, wfDump)
	for _, id := range ids {
		m.replayCheck(t, id, histories[id])
	}
	// Conversely, a task lives only while its activity is pending: the end
	// of an execution cancels its tasks.
	for _, qt := range queuedTasks {
		events := histories[qt.Task.InstanceID]
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

// checkCensus checks the machine's view of the store against the whole
// store: every instance with history is one the machine knows, and every
// queued message and activity task is one of theirs.
func (m *wfMachine) checkCensus(t *rapid.T, ids []string, msgs []provider.Message, tasks []provider.QueuedActivity) {
	c := m.backend.census(t, m.store)
	if !slices.Equal(c.instances, ids) || c.messages != len(msgs) || c.tasks != len(tasks) {
		t.Fatalf("the store holds instances %v, %d messages and %d activity tasks; the machine knows instances %v, %d messages and %d activity tasks",
			c.instances, c.messages, c.tasks, ids, len(msgs), len(tasks))
	}
}

func (m *wfMachine) replayCheck(t *rapid.T, id string, events []history.Event) {
	before := m.checker.turns
	if err := m.checker.check(id, events); err != nil {
		t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
	}
	m.stats.turns += m.checker.turns - before
}

// histories loads the history of every instance the machine knows, and
// learns the children they schedule (transitively); it returns the ids of
// the instances with history, sorted, and their histories.
func (m *wfMachine) histories(t *rapid.T) ([]string, map[string][]history.Event) {
	out := map[string][]history.Event{}
	todo := sortedIDs(m.known)
	for len(todo) > 0 {
		id := todo[0]
		todo = todo[1:]
		if _, ok := out[id]; ok {
			continue
		}
		events := m.load(t, id)
		if len(events) == 0 {
			continue
		}
		out[id] = events
		for i := min(m.scanned[id], len(events)); i < len(events); i++ {
			if events[i].Kind != history.KindSubWorkflowScheduled {
				continue
			}
			a, err := events[i].Attributes()
			if err != nil {
				t.Fatalf("%s: seq %d: %v", id, events[i].Seq, err)
			}
			child := a.(*history.SubWorkflowScheduled).InstanceID
			if !m.known[child] {
				m.known[child] = true
				todo = append(todo, child)
			}
		}
		m.scanned[id] = len(events)
	}
	return sortedIDs(out), out
}

// queued returns the messages and activity tasks queued for the
// instances the machine knows (call histories first, to know them all).
func (m *wfMachine) queued(t *rapid.T) ([]provider.Message, []provider.QueuedActivity) {
	var msgs []provider.Message
	var tasks []provider.QueuedActivity
	for _, id := range sortedIDs(m.known) {
		ms, err := m.store.ListMessages(m.ctx, &provider.ListMessagesParams{InstanceID: id, Limit: 100000})
		if err != nil {
			t.Fatalf("%s: list messages: %v", id, err)
		}
		ts, err := m.store.ListQueuedActivities(m.ctx, &provider.ListQueuedActivitiesParams{InstanceID: id})
		if err != nil {
			t.Fatalf("%s: list activity tasks: %v", id, err)
		}
		msgs, tasks = append(msgs, ms...), append(tasks, ts...)
	}
	return msgs, tasks
}

// wfSeen is an instance's history at the last check and its fold.
type wfSeen struct {
	events []history.Event
	snap   *round.Snapshot
}

// check asserts the invariants that hold after every step.
func (m *wfMachine) check(t *rapid.T) {
	ids, histories := m.histories(t)
	for _, id := range ids {
		events := histories[id]
		prev := m.prev[id]
		checkAppendOnly(t, id, events, prev.events)
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
		m.checkArrivalOrder(t, id, events)
		if err := wfOnceEach(events); err != nil {
			t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
		}
	}
	m.ledger.checkGone(t, histories)
	queuedMsgs, queuedTasks := m.queued(t)
	checkScheduled(t, histories, queuedMsgs, queuedTasks)
	// The only dead letters are task actions that lost a race (the round
	// re-checked them against the task and rejected them) and signals to
	// ids never started (orphanRedrive).
	letters, err := m.store.ListDeadLetters(m.ctx, &provider.ListDeadLettersParams{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for _, l := range letters {
		if l.Reason == provider.ReasonNotStarted && l.Message != nil && m.ledger.orphans[l.Message.ID] {
			continue
		}
		if l.Reason != provider.ReasonRejected || l.Message == nil || !m.taskActions[l.Message.ID] || l.Message.Kind.Class() != history.ClassTask {
			t.Fatalf("dead letter %s: %s %s (message %+v)", l.ID, l.Reason, l.Error, l.Message)
		}
		rejected++
	}
	m.stats.rejected = rejected
}

// wfOnceEach checks that each message the machine sent became at most one
// event: the messages carry unique tags (signal payloads, control
// reasons, task actions' message ids). The copies of unconsumed signals that continue-as-new carries
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
		case *history.TaskAssigned, *history.TaskReleased, *history.TaskReassigned, *history.TaskCompleted:
			// A task action's correlation is its message id.
			tag = "task action " + e.CorrelationID
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

// checkProjections: stored projections — snapshot, instance record, task
// records and events, custom record — are the fold of history up to the
// Seq they record, all the same; in transactional mode that is always the
// last event, in peek-lock mode a round that crashed between its append
// and its projections may have left them behind (never ahead).
func (m *wfMachine) checkProjections(t *rapid.T, id string, events []history.Event, snap *round.Snapshot) {
	m.stats.projections++
	data, seq, err := m.store.GetSnapshot(m.ctx, id)
	if errors.Is(err, provider.ErrNotFound) && m.mode == provider.ModePeekLock {
		// A round crashed between append and projection, or between two
		// of its projection writes: at most some records are projected,
		// never the snapshot, which is written last.
		m.checkLagging(t, id, events, 0)
		return
	}
	if err != nil {
		t.Fatalf("%s: snapshot: %v", id, err)
	}
	if seq < 1 || seq > snap.LastSeq || (m.mode == provider.ModeTransactional && seq != snap.LastSeq) {
		t.Fatalf("%s: snapshot at seq %d, history at %d", id, seq, snap.LastSeq)
	}
	want := snap
	if seq != snap.LastSeq {
		want = m.foldAt(t, id, events, seq).Snapshot
	}
	checkStoredSnapshot(t, id, want, data)
	if m.mode == provider.ModePeekLock && seq < snap.LastSeq {
		m.checkLagging(t, id, events, seq)
		return
	}
	rec, err := m.store.GetInstance(m.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !want.Record().Equal(rec) {
		t.Fatalf("%s: stored instance differs from the fold of history in %v:\nwant %+v\ngot  %+v", id, want.Record().Diff(rec), want.Record(), rec)
	}
	m.checkProducts(t, id, events, seq)
}

// finish stops injecting failures, lets every timer fire and every lease
// run out, has users complete the tasks left open, and checks the end
// state: nothing queued, every instance terminal or parked on an external
// wait, every history replayed by fresh code, and every completed
// program's output what its program predicts.
func (m *wfMachine) finish(t *rapid.T) {
	m.clearFault()
	for i := 0; i < 40; i++ {
		m.advanceBy(2 * time.Minute)
		m.drain(t)
		_, histories := m.histories(t)
		if msgs, tasks := m.queued(t); len(msgs) == 0 && len(tasks) == 0 && !m.completeOpenTasks(t, histories) {
			break
		}
	}
	m.check(t)
	ids, histories := m.histories(t)
	msgs, tasks := m.queued(t)
	m.checkCensus(t, ids, msgs, tasks)
	if len(msgs) > 0 {
		t.Fatalf("%d messages left, first %s %s for %s", len(msgs), msgs[0].Kind, msgs[0].ID, msgs[0].InstanceID)
	}
	if len(tasks) > 0 {
		t.Fatalf("%d tasks left", len(tasks))
	}
	m.ledger.checkStarts(t, histories, &m.stats.purgeStats)
	m.ledger.checkOrphans(t, m.rig)
	lost, err := wfLostInputs(histories)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		events := histories[id]
		snap, err := round.Fold(id, events)
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Status.Terminal() && (snap.Pending() || len(snap.Tasks) > 0) {
			t.Fatalf("%s is %s and still waits on its own work\n%s", id, snap.Status, wfDump(events))
		}
		// Projections left behind (peek-lock rounds that failed after
		// their append: crashes, faults, panicking folds) are caught up
		// by the redelivery of the failed round's batch.
		if _, seq, err := m.store.GetSnapshot(m.ctx, id); err != nil || seq != snap.LastSeq {
			t.Fatalf("%s: projections at seq %d (%v) at the end, history at %d", id, seq, err, snap.LastSeq)
		}
		m.replayCheck(t, id, events)
		child := snap.Parent != nil
		switch snap.Status {
		case provider.StatusCompleted:
			m.stats.completed++
			if child {
				m.stats.children++
			}
			if err := wfCheckOutput(events, snap.Output, lost); err != nil {
				t.Fatalf("%s: %v\n%s", id, err, wfDump(events))
			}
			m.checkCustomStatus(t, id, events, snap)
		case provider.StatusTerminated:
			m.stats.terminated++
		case provider.StatusFailed:
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
		case *history.TaskCreated:
			m.stats.tasks++
		case *history.TaskCompleted:
			m.stats.tasksCompleted++
		case *history.TaskCancelled:
			if a.Reason == wfTaskTimeout {
				m.stats.taskTimeouts++
			}
		case *history.TaskAssigned, *history.TaskReleased, *history.TaskReassigned:
			m.stats.taskMoves++
		case *history.TaskEscalated:
			m.stats.escalations++
		case *history.SubWorkflowFailed:
			if a.Failure.Type == round.FailureSubWorkflowAlreadyStarted {
				m.stats.refused++
			}
		}
	}
	var snap *round.Snapshot
	if s, err := round.Fold(events[0].InstanceID, events); err == nil && s.Status == provider.StatusCompleted {
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
