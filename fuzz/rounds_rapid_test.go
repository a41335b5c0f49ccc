package fuzz_test

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
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

func TestRapidRoundsTransactional(t *testing.T) { testRapidRounds(t, provider.ModeTransactional) }

func TestRapidRoundsPeekLock(t *testing.T) { testRapidRounds(t, provider.ModePeekLock) }

func testRapidRounds(t *testing.T, mode provider.Mode) {
	printSeed(t)
	var total rigStats
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(rt, mode)
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
	require.Positive(t, total.purged, "no instance purged and its id reused")
	if mode == provider.ModeTransactional {
		require.Positive(t, total.groups, "no transaction ran the rounds of several instances")
		require.Positive(t, total.groupFailures, "no round failed inside a group whose other rounds committed")
		require.Positive(t, total.inline, "no round ran with an activity's completion")
		// Tasks handed over claimed are rare in these machines (0 to a
		// few per hundred checks: a completion's round must schedule a
		// due task of the worker's queue); they are counted in the log,
		// and the round package's tests drive that path step by step.
	}
	if mode == provider.ModePeekLock {
		require.Positive(t, total.midStep, "no crash between two record writes of a step")
		require.Positive(t, total.midPurge, "no purge crashed half-way and finished again")
		require.Positive(t, total.midZombies, "no round went on as a zombie between two record writes")
	}
	require.Positive(t, total.refused, "no child start refused because its id was taken")
	require.Positive(t, total.deadWorkers, "no activity worker died holding a claim")
	if mode == provider.ModePeekLock {
		require.Positive(t, total.leaseLost, "no paused round lost its lease")
		require.Positive(t, total.leaseRenewed, "no paused round renewed its lease")
	}
}

// String tells what the rounds machine exercised.
func (s *rigStats) String() string {
	return fmt.Sprintf("%d rounds, %d crashes, %d injected faults, %d zombie rounds (%d rejected), %d duplicates and %d stale messages dropped; %d zombie activity claims (%d late settlements rejected); instances: %d completed, %d failed or terminated, %d parked; "+
		"%d purged and their ids reused (%d purges refused, %d crashed half-way), %d child starts refused (id taken), %d workers died holding a claim, %d paused rounds lost their lease and %d renewed it, "+
		"%d crashes and %d zombie rounds between two record writes; %d transactions of several instances' rounds (%d with a failed round); %d rounds with an activity's completion, %d tasks handed over claimed",
		s.rounds, s.crashes, s.faults, s.zombieRounds, s.zombieRejected, s.duplicates, s.stale, s.zombieTasks, s.zombieTasksRejected, s.completed, s.failed, s.parked,
		s.purged, s.purgeRefused, s.midPurge, s.refused, s.deadWorkers, s.leaseLost, s.leaseRenewed, s.midStep, s.midZombies, s.groups, s.groupFailures, s.inline, s.eager)
}

// machine drives scripted turns (internal/scripted), without the replayer,
// on the memory store through the rig.
type machine struct {
	*rig
	mem   *memory.Store
	prev  map[string][]history.Event
	stats rigStats
}

func newMachine(t *rapid.T, mode provider.Mode) *machine {
	m := &machine{prev: map[string][]history.Event{}}
	m.rig = newRig(t, wfMemory(mode), &m.stats, rigHooks{
		attempt:   func(*provider.ActivityTask) ([]byte, error) { return []byte("late"), nil },
		histories: m.histories,
		queued:    m.queued,
	})
	m.mem = m.store.(*memory.Store)
	for _, name := range []string{"n1", "n2"} {
		m.addNode(t, name, round.RunnerOptions{Turn: scripted.Turn}, round.ActivityWorkerOptions{Resolve: scripted.Resolve})
	}
	return m
}

// histories returns the ids of the instances with history, sorted, and
// their histories.
func (m *machine) histories(t *rapid.T) ([]string, map[string][]history.Event) {
	ids := m.mem.InstanceIDs()
	out := make(map[string][]history.Event, len(ids))
	for _, id := range ids {
		out[id] = m.load(t, id)
	}
	return ids, out
}

// queued returns every queued message and activity task.
func (m *machine) queued(*rapid.T) ([]provider.Message, []provider.QueuedActivity) {
	return m.mem.QueuedMessages(), m.mem.QueuedActivities()
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
		"outage":    m.outage,
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
	m.started(t, id, msg)
}

func (m *machine) signal(t *rapid.T) {
	id := m.instance(t)
	name := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "name")
	key := rapid.SampledFrom([]string{"k1", "k2", "k3", "k4"}).Draw(t, "key")
	msg, err := provider.NewMessage(m.id("signal"), id, "", key, &history.EventRaised{Name: name, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	// A delay reorders deliveries.
	msg.VisibleAt = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "delay")) * time.Second)
	m.enqueue(t, msg)
}

// control suspends, resumes or terminates an instance.
func (m *machine) control(t *rapid.T) {
	id := m.instance(t)
	var attrs history.Attributes
	switch rapid.IntRange(0, 4).Draw(t, "control") {
	case 0:
		attrs = &history.ExecutionTerminated{Reason: "operator"}
	case 1, 2:
		attrs = &history.ExecutionSuspended{Reason: "review"}
	default:
		attrs = &history.ExecutionResumed{}
	}
	msg, err := provider.NewMessage(m.id("control"), id, "", "", attrs)
	if err != nil {
		t.Fatal(err)
	}
	msg.Actor = history.UserActor("ops")
	m.enqueue(t, msg)
}

// purgeAndReuse purges an instance and starts a new run of it under the
// same id while nodes may still cache the purged one.
func (m *machine) purgeAndReuse(t *rapid.T) {
	id, purged := m.purge(t)
	if !purged {
		return
	}
	delete(m.prev, id)
	msg, err := scripted.StartRunMessage(id, m.id("run"), scripted.Script{Steps: drawSteps(t, "reused script", false)})
	if err != nil {
		t.Fatal(err)
	}
	m.enqueue(t, msg)
}

// quiesce lets leases run out and drains, then checks that every open
// schedule has exactly one live work item and that every history
// replays.
func (m *machine) quiesce(t *rapid.T) {
	m.advanceBy(leaseDuration + time.Second)
	m.drain(t)
	ids, histories := m.histories(t)
	msgs, tasks := m.queued(t)
	checkLiveWork(t, ids, histories, msgs, tasks, wfDump)
	for _, id := range ids {
		if err := scripted.CheckReplay(id, histories[id]); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// check asserts the invariants that hold after every step.
func (m *machine) check(t *rapid.T) {
	ids, histories := m.histories(t)
	for _, id := range ids {
		events := histories[id]
		checkAppendOnly(t, id, events, m.prev[id])
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
	msgs, tasks := m.queued(t)
	checkScheduled(t, histories, msgs, tasks)
	letters, err := m.store.ListDeadLetters(m.ctx, &provider.ListDeadLettersParams{})
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
	if errors.Is(err, provider.ErrNotFound) && m.mode == provider.ModePeekLock {
		return // a round crashed between append and projection
	}
	if err != nil {
		t.Fatalf("%s: snapshot: %v", id, err)
	}
	if m.mode == provider.ModeTransactional && seq != snap.LastSeq {
		t.Fatalf("%s: snapshot at seq %d, history at %d", id, seq, snap.LastSeq)
	}
	want, err := round.Fold(id, events[:seq])
	if err != nil {
		t.Fatal(err)
	}
	checkStoredSnapshot(t, id, want, data)
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
		m.advanceBy(2 * time.Minute)
		m.drain(t)
		if len(m.mem.QueuedMessages()) == 0 && len(m.mem.QueuedActivities()) == 0 {
			break
		}
	}
	m.check(t)
	if q := m.mem.QueuedMessages(); len(q) > 0 {
		t.Fatalf("%d messages left, first %s %s for %s", len(q), q[0].Kind, q[0].ID, q[0].InstanceID)
	}
	if q := m.mem.QueuedActivities(); len(q) > 0 {
		t.Fatalf("%d tasks left", len(q))
	}
	for _, id := range m.mem.InstanceIDs() {
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
		case provider.StatusCompleted:
			m.stats.completed++
		case provider.StatusFailed, provider.StatusTerminated:
			m.stats.failed++
		default:
			m.stats.parked++
		}
		if err := scripted.CheckReplay(id, events); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}
