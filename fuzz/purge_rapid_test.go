package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
	"github.com/chronicleflow/chronicle/round"
)

// The workflows machine's actions around purge, dead letters and id
// reuse, on every store it runs on: a restart of an ended instance queued
// before its purge, a purge that crashes half-way and is finished after
// the id was started again, a dead-lettering that crashes between the
// letter and the message's removal followed by a redrive, and a zombie
// round whose instance ends, is purged and is started again while it is
// paused. Their checks: no start the machine queued is lost (each runs,
// or its execution was purged after it ran), no execution a purge
// deleted comes back, every purge's tombstone is stored as the purge
// returned it, a redrive requeues its message or is refused while the
// dead-lettering is unfinished, and a message dead-lettered ends in an
// unresolved letter.

// purgeStats count what the actions of this file exercised.
type purgeStats struct {
	restartPurges, interruptedPurges, zombiePurges, redrives, redrivesRefused, orphans, startsChecked int
}

func (s *purgeStats) add(o *purgeStats) {
	s.restartPurges += o.restartPurges
	s.interruptedPurges += o.interruptedPurges
	s.zombiePurges += o.zombiePurges
	s.redrives += o.redrives
	s.redrivesRefused += o.redrivesRefused
	s.orphans += o.orphans
	s.startsChecked += o.startsChecked
}

func (s *purgeStats) String() string {
	return fmt.Sprintf("purges: %d refused for a queued next run, %d crashed half-way and finished after a restart, %d across a paused round; "+
		"%d signals to ids never started dead-lettered, %d redrives (%d refused: the dead-lettering had not finished); %d starts checked",
		s.restartPurges, s.interruptedPurges, s.zombiePurges, s.orphans, s.redrives, s.redrivesRefused, s.startsChecked)
}

// purgeLedger is what the rig remembers of purges, starts and
// dead-lettered signals.
type purgeLedger struct {
	// purgedExecs holds the executions of every purged run of an id.
	purgedExecs map[string]map[string]bool
	// tombstones holds the tombstones the purges of an id returned.
	tombstones map[string][]provider.Tombstone
	starts     []notedStart
	// orphans holds the ids of signals sent to ids never started.
	orphans map[string]bool
}

// notedStart is a start the machine queued.
type notedStart struct{ id, exec, msgID string }

func (l *purgeLedger) noteStart(m provider.Message) {
	l.starts = append(l.starts, notedStart{m.InstanceID, m.ExecutionID, m.ID})
}

// purged records the purge of id, whose history was events, and checks
// that the store keeps every purge's tombstone of the id, in order, as
// the purges returned them.
func (l *purgeLedger) purged(t *rapid.T, r *rig, id string, events []history.Event, ts *provider.Tombstone) {
	if l.purgedExecs == nil {
		l.purgedExecs, l.tombstones = map[string]map[string]bool{}, map[string][]provider.Tombstone{}
	}
	if l.purgedExecs[id] == nil {
		l.purgedExecs[id] = map[string]bool{}
	}
	for _, e := range events {
		l.purgedExecs[id][e.ExecutionID] = true
	}
	l.tombstones[id] = append(l.tombstones[id], *ts)
	all, err := r.store.ListTombstones(r.ctx, id)
	if err != nil {
		t.Fatalf("%s: list tombstones: %v", id, err)
	}
	want := l.tombstones[id]
	same := len(all) == len(want)
	for i := 0; same && i < len(all); i++ {
		a, w := all[i], want[i]
		same = a.InstanceID == w.InstanceID && a.LastSeq == w.LastSeq && string(a.LastHash) == string(w.LastHash) &&
			a.PurgedAt.Equal(w.PurgedAt) && a.PurgedBy == w.PurgedBy
	}
	if !same {
		t.Fatalf("%s: the store keeps tombstones %+v, the purges returned %+v", id, all, want)
	}
}

// checkGone: no history holds an execution that a purge of its id
// deleted (a zombie round appending across the purge would bring it back).
func (l *purgeLedger) checkGone(t *rapid.T, histories map[string][]history.Event) {
	for id, execs := range l.purgedExecs {
		for _, e := range histories[id] {
			if execs[e.ExecutionID] {
				t.Fatalf("%s: seq %d belongs to execution %s, which a purge deleted\n%s", id, e.Seq, e.ExecutionID, wfDump(histories[id]))
			}
		}
	}
}

// checkStarts: every start the machine queued ran: its execution is in
// its id's history, or in a run of the id that was purged since.
func (l *purgeLedger) checkStarts(t *rapid.T, histories map[string][]history.Event, stats *purgeStats) {
	for _, s := range l.starts {
		ran := l.purgedExecs[s.id][s.exec]
		for i := 0; !ran && i < len(histories[s.id]); i++ {
			ran = histories[s.id][i].ExecutionID == s.exec
		}
		if !ran {
			t.Fatalf("%s: the start %s of execution %s never ran and is not queued\n%s", s.id, s.msgID, s.exec, wfDump(histories[s.id]))
		}
		stats.startsChecked++
	}
}

// checkOrphans: every signal sent to an id never started ends in an
// unresolved dead letter (none is left queued at the end).
func (l *purgeLedger) checkOrphans(t *rapid.T, r *rig) {
	if len(l.orphans) == 0 {
		return
	}
	letters, err := r.store.ListDeadLetters(r.ctx, &provider.ListDeadLettersParams{Status: provider.DeadLetterDead, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, l := range letters {
		if l.Message != nil {
			held[l.Message.ID] = true
		}
	}
	for id := range l.orphans {
		if !held[id] {
			t.Fatalf("signal %s to an id never started is lost: no unresolved dead letter holds it", id)
		}
	}
}

// midStepMongoPurge are the deletes of a MongoDB purge before which a
// planned crash after write 1 to 4 stops it (see mongoFault).
var midStepMongoPurge = []string{"messages", "instance record", "history", "leases"}

// force plans a crash of op after its after-th write, without drawing.
func (c *midStep) force(op memory.Op, after int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.op, c.after, c.fired = op, after, false
}

// mongoFault is the MongoDB store's BeforeWrite hook for the planned
// crash: a purge stops before the delete midStepMongoPurge names for its
// planned write, a dead-lettering before its first message removal.
func (c *midStep) mongoFault(what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var op memory.Op
	switch {
	case strings.HasPrefix(what, "purge: "):
		op = memory.OpPurgeInstance
		if c.op != op || slices.Index(midStepMongoPurge, strings.TrimPrefix(what, "purge: "))+1 != c.after {
			return nil
		}
	case strings.HasPrefix(what, "dead letter: remove "):
		op = memory.OpDeadLetterLeased
	default:
		return nil
	}
	if c.op != op {
		return nil
	}
	c.op, c.fired = "", true
	return fmt.Errorf("%w: %w: %s before %s", errMidStep, providertest.ErrInjected, op, what)
}

// forget drops what the checks remember of an id whose history starts
// over.
func (m *wfMachine) forget(id string) {
	delete(m.prev, id)
	delete(m.scanned, id)
	delete(m.views, id)
}

// isQueued reports whether the message msgID of id is queued (enqueued
// at enqueuedAt, when it is not zero).
func (m *wfMachine) isQueued(t *rapid.T, id, msgID string, enqueuedAt time.Time) bool {
	msgs, err := m.store.ListMessages(m.ctx, &provider.ListMessagesParams{InstanceID: id, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range msgs {
		if q.ID == msgID && (enqueuedAt.IsZero() || q.EnqueuedAt.Equal(enqueuedAt)) {
			return true
		}
	}
	return false
}

// restartPurge restarts an ended instance (the start of its next run
// queued, as Start with ReuseTerminateAndRestart, or a parent starting a
// child under an ended child's id, queues it) and purges it at once: the
// purge must not take the start away.
func (m *wfMachine) restartPurge(t *rapid.T) {
	id := m.instance(t)
	events := m.load(t, id)
	if len(events) == 0 {
		t.Skip("not started yet")
	}
	if snap, err := round.Fold(id, events); err != nil || !snap.Status.Terminal() {
		t.Skip("not ended")
	}
	if m.queuesNextRun(t, id, events) {
		// A second restart would find the first one's run running, as
		// two concurrent Start calls do (dead-lettered, documented).
		t.Skip("restarted already")
	}
	next := m.startMessage(t, id, m.sharing(drawWfSteps(t, "next run", false)))
	m.enqueue(t, next)
	if m.purgeID(t, id) {
		t.Fatalf("%s: purged while the start of its next run was queued", id)
	}
	if !m.isQueued(t, id, next.ID, time.Time{}) {
		t.Fatalf("%s: the refused purge took the start of the next run away", id)
	}
	m.stats.restartPurges++
}

// interruptedPurge crashes the purge of an ended instance half-way (a
// peek-lock store: memory, or MongoDB through its BeforeWrite hook),
// starts the id again before anyone finishes the purge, runs rounds
// (which must leave the half-purged id alone), and finishes the purge as
// Engine.Start does (OnlyUnfinished): the tombstone is the purged
// history's and the new run's start is kept.
func (m *wfMachine) interruptedPurge(t *rapid.T) {
	if m.mode != provider.ModePeekLock {
		t.Skip("a purge is one transaction")
	}
	id := m.instance(t)
	events := m.load(t, id)
	if len(events) == 0 {
		t.Skip("not started yet")
	}
	if snap, err := round.Fold(id, events); err != nil || !snap.Status.Terminal() {
		t.Skip("not ended")
	}
	nextRun := m.queuesNextRun(t, id, events)
	m.mid.force(memory.OpPurgeInstance, rapid.IntRange(1, 4).Draw(t, "purge crash after write"))
	ts, err := m.store.PurgeInstance(m.ctx, &provider.PurgeInstanceParams{InstanceID: id, By: "rapid", Now: m.clock.Now()})
	m.mid.clear()
	if !errors.Is(err, errMidStep) {
		if checkPurge(t, m.mode, id, events, nextRun, ts, err) {
			t.Fatalf("%s: the purge did not crash after the planned write", id)
		}
		m.counts.purgeRefused++
		return
	}
	m.counts.midPurge++
	next := m.startMessage(t, id, m.sharing(drawWfSteps(t, "program after a crashed purge", false)))
	m.enqueue(t, next)
	for i := rapid.IntRange(0, 2).Draw(t, "rounds before the purge is finished"); i > 0; i-- {
		n := rapid.SampledFrom(m.nodes).Draw(t, "node")
		rep, err := n.runner.RunOnce(m.ctx)
		m.count(rep)
		if !m.allowedRoundError(err) {
			t.Fatalf("round on %s: %v", n.name, err)
		}
	}
	if !m.isQueued(t, id, next.ID, time.Time{}) {
		t.Fatalf("%s: a round took the start of a half-purged instance", id)
	}
	ts, err = m.store.PurgeInstance(m.ctx, &provider.PurgeInstanceParams{InstanceID: id, By: "someone else", Now: m.clock.Now(), OnlyUnfinished: true})
	if err != nil {
		t.Fatalf("%s: finish the crashed purge: %v", id, err)
	}
	if !checkPurge(t, m.mode, id, events, false, ts, nil) {
		t.Fatalf("%s: the crashed purge was not finished", id)
	}
	if ts.PurgedBy != "rapid" {
		t.Fatalf("%s: the finished purge's tombstone %+v is not the crashed purge's", id, ts)
	}
	m.ledger.purged(t, m.rig, id, events, ts)
	if n := len(m.load(t, id)); n > 0 {
		t.Fatalf("%s: %d events left after the purge was finished", id, n)
	}
	if _, err := m.store.GetInstance(m.ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s: instance record after the purge was finished: %v", id, err)
	}
	if !m.isQueued(t, id, next.ID, time.Time{}) {
		t.Fatalf("%s: finishing the purge took the new run's start away", id)
	}
	m.forget(id)
	m.counts.purged++
	m.stats.interruptedPurges++
}

// orphanRedrive sends a signal to an id that was never started, which its
// round dead-letters (in peek-lock mode crashing between the letter and
// the message's removal), and redrives the letter at once: a redrive
// must requeue the message, or be refused while the message is still
// queued as it was lettered; either way the message ends in an
// unresolved letter (checkOrphans).
func (m *wfMachine) orphanRedrive(t *rapid.T) {
	if m.stats.orphans >= 2 {
		// Each id is read at every check of the machine: a few keep the
		// checks cheap on the database stores.
		t.Skip("enough ids never started")
	}
	if m.ledger.orphans == nil {
		m.ledger.orphans = map[string]bool{}
	}
	id, key := m.id("orphan"), m.id("orphan-key")
	msg, err := provider.NewMessage(history.DeterministicID(id, 0, "signal:"+key), id, "", key, &history.EventRaised{Name: "go", IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	m.known[id] = true
	m.ledger.orphans[msg.ID] = true
	m.enqueue(t, msg)
	m.stats.orphans++
	if m.mode == provider.ModePeekLock && rapid.Bool().Draw(t, "crash inside the dead-lettering") {
		m.mid.force(memory.OpDeadLetterLeased, 1)
	}
	letters := func() []provider.DeadLetter {
		ls, err := m.store.ListDeadLetters(m.ctx, &provider.ListDeadLettersParams{InstanceID: id, Status: provider.DeadLetterDead})
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	for i := 0; i < 4 && len(letters()) == 0; i++ {
		n := m.nodes[i%len(m.nodes)]
		rep, err := n.runner.RunOnce(m.ctx)
		m.count(rep)
		if errors.Is(err, errMidStep) {
			m.counts.midStep++
			m.counts.crashes++
			n.runner.Forget()
		}
		if !m.allowedRoundError(err) {
			t.Fatalf("round on %s: %v", n.name, err)
		}
	}
	m.mid.clear()
	ls := letters()
	if len(ls) == 0 {
		return // other instances' rounds came first; the finish delivers it
	}
	l := ls[0]
	// A second later, so that a requeued message differs from the one
	// lettered.
	m.advanceBy(time.Second)
	now := m.clock.Now()
	err = m.store.ResolveDeadLetter(m.ctx, &provider.ResolveDeadLetterParams{ID: l.ID, Status: provider.DeadLetterRedriven, By: "rapid", Now: now})
	switch {
	case errors.Is(err, provider.ErrDeadLetteringUnfinished):
		if !m.isQueued(t, id, l.Message.ID, l.Message.EnqueuedAt) {
			t.Fatalf("dead letter %s: redrive refused as unfinished, but its message is not queued", l.ID)
		}
		m.stats.redrivesRefused++
	case err != nil:
		t.Fatalf("redrive %s: %v", l.ID, err)
	default:
		if !m.isQueued(t, id, l.Message.ID, now) {
			t.Fatalf("dead letter %s marked redriven, but nothing was requeued", l.ID)
		}
		m.stats.redrives++
	}
}

// zombieAcrossPurge pauses a round on one node at a crash point; while
// it is paused its lease runs out, its instance (a top-level one) is
// terminated by the other node, purged and started again; then the
// paused round goes on as a zombie. Its writes must not reach the new
// run (checkGone).
func (m *wfMachine) zombieAcrossPurge(t *rapid.T) {
	a := rapid.SampledFrom(m.nodes).Draw(t, "paused node")
	var b *node
	for _, n := range m.nodes {
		if n != a {
			b = n
		}
	}
	pz := &pause{
		at:     rapid.SampledFrom([]round.CrashPoint{round.AfterLoad, round.AfterLoad, round.AfterAppend, round.AfterProject}).Draw(t, "pause at"),
		paused: make(chan struct{}), resumed: make(chan struct{}),
	}
	a.mu.Lock()
	a.pause = pz
	a.mu.Unlock()
	done, resume := m.roundInBackground(a, pz)
	var res roundResult
	select {
	case <-pz.paused:
		m.counts.zombieRounds++
		defer resume()
		a.mu.Lock()
		id := a.paused
		a.mu.Unlock()
		err := m.acrossPurge(t, b, id)
		res = resume()
		if err != nil {
			t.Fatal(err)
		}
	case res = <-done:
		a.mu.Lock()
		a.pause = nil
		a.mu.Unlock()
	}
	m.zombieEnded(t, a, res)
}

// acrossPurge is what happens while a round of id is paused: its lease
// runs out, node b terminates and ends id, purges it and starts it
// again. It returns what went wrong, for the caller to fail once the
// paused round is let go.
func (m *wfMachine) acrossPurge(t *rapid.T, b *node, id string) error {
	if err := m.leaseRunsOut(t); err != nil {
		return err
	}
	if !slices.Contains(m.ids, id) {
		return nil // a child: its parent decides its fate
	}
	msgID := m.id("control")
	stop, err := provider.NewMessage(msgID, id, "", "", &history.ExecutionTerminated{Reason: "operator " + msgID})
	if err != nil {
		return err
	}
	stop.Actor = history.UserActor("ops")
	if err := m.meanwhile(func(ctx context.Context) error {
		return m.store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{stop}, Now: m.clock.Now()})
	}); err != nil {
		return fmt.Errorf("terminate while paused: %w", err)
	}
	for i := 0; i < 4; i++ {
		var rep *round.Report
		if err := m.meanwhile(func(ctx context.Context) (err error) {
			rep, err = b.runner.RunOnce(ctx)
			if m.allowedRoundError(err) {
				return nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("round on %s while paused: %w", b.name, err)
		}
		m.count(rep)
	}
	// Learn the children the rounds scheduled before their parent's
	// history goes.
	m.histories(t)
	events := m.load(t, id)
	nextRun := m.queuesNextRun(t, id, events)
	var ts *provider.Tombstone
	if err := m.meanwhile(func(ctx context.Context) (err error) {
		ts, err = m.store.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: id, By: "rapid", Now: m.clock.Now()})
		if errors.Is(err, provider.ErrInvalidState) || errors.Is(err, provider.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("purge while paused: %w", err)
	}
	if ts == nil {
		m.counts.purgeRefused++
		return nil
	}
	if !checkPurge(t, m.mode, id, events, nextRun, ts, nil) {
		return fmt.Errorf("%s: purge while paused returned %+v", id, ts)
	}
	m.ledger.purged(t, m.rig, id, events, ts)
	m.forget(id)
	m.counts.purged++
	m.stats.zombiePurges++
	next := m.startMessage(t, id, m.sharing(drawWfSteps(t, "program after a purge across a paused round", false)))
	return m.meanwhile(func(ctx context.Context) error {
		return m.store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{next}, Now: m.clock.Now()})
	})
}
