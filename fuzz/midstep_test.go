package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
	"github.com/chronicleflow/chronicle/round"
)

// Peek-lock steps that write several records, by who calls them: the
// round, the activity worker, an operator. A mid-step crash stops one of
// them after some of its writes, as a document store whose atomic unit is
// one record would be left (see "Peek-lock mode: one record at a time" in
// docs/providers.md).
var (
	midStepRoundOps = []memory.Op{
		memory.OpSaveProjections, memory.OpSaveProjections, memory.OpEnqueueMessages, memory.OpEnqueueActivities,
		memory.OpPinMessages, memory.OpCancelActivities, memory.OpAckLease, memory.OpAckLease, memory.OpAbandonLease,
		memory.OpDeadLetterLeased, memory.OpResetProjections,
	}
	midStepActivityOps = []memory.Op{memory.OpCompleteActivity, memory.OpCompleteActivity, memory.OpDeadLetterActivity}
	// midStepPauseOps are the multi-record steps a round takes while it
	// renews its lease, where a paused round can turn zombie (a failed
	// round abandons or dead-letters after its renewals stopped).
	midStepPauseOps = []memory.Op{
		memory.OpSaveProjections, memory.OpEnqueueMessages, memory.OpEnqueueActivities, memory.OpPinMessages,
		memory.OpCancelActivities, memory.OpAckLease,
	}
)

// midStep plans one crash inside a multi-record step of a peek-lock memory
// store: the step returns an error after its k-th record write. The error
// wraps both memory.ErrInjected and providertest.ErrInjected, so the
// machines' checks of injected faults accept it.
type midStep struct {
	mu    sync.Mutex
	op    memory.Op
	after int
	fired bool
	// stall, when set, stalls the next step of op stall.op before its
	// write stall.done+1 (see between).
	stall *pause
}

// errMidStep is the error of a mid-step crash.
var errMidStep = errors.New("crash between two record writes")

// plan draws, one time in three, a step among ops and the write after
// which it crashes; ops is empty outside peek-lock mode.
func (c *midStep) plan(t *rapid.T, ops []memory.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.op, c.fired = "", false
	if len(ops) == 0 || rapid.IntRange(0, 2).Draw(t, "mid-step crash?") > 0 {
		return
	}
	c.op = rapid.SampledFrom(ops).Draw(t, "mid-step op")
	c.after = rapid.IntRange(1, 4).Draw(t, "crash after write")
}

// clear ends the plan and reports whether its crash happened.
func (c *midStep) clear() (fired bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.op = ""
	fired, c.fired = c.fired, false
	return fired
}

// pauseRound sets up pz, a pause of a round inside a multi-record step
// instead of at a crash point: the step stalls between two of its record
// writes, so that the round turns zombie there. ops is empty outside
// peek-lock mode, and then pz is left as it is.
func (c *midStep) pauseRound(t *rapid.T, pz *pause, ops []memory.Op) (armed bool) {
	if len(ops) == 0 || !rapid.Bool().Draw(t, "pause between writes?") {
		return false
	}
	pz.at = ""
	pz.op = rapid.SampledFrom(ops).Draw(t, "pause in step")
	pz.done = rapid.IntRange(0, 2).Draw(t, "pause after writes")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stall = pz
	return true
}

// unpause drops a stall that no step reached.
func (c *midStep) unpause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stall = nil
}

// between is the store's BetweenWrites hook: it stalls the planned step
// before its write done+1 until the pause is resumed, once.
func (c *midStep) between(op memory.Op, done int) {
	c.mu.Lock()
	pz := c.stall
	if pz == nil || pz.op != op || pz.done != done {
		c.mu.Unlock()
		return
	}
	c.stall = nil
	c.mu.Unlock()
	close(pz.paused)
	<-pz.resumed
}

// fault is the store's fault hook for the planned crash, once.
func (c *midStep) fault(op memory.Op) *memory.Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.op == "" || c.op != op {
		return nil
	}
	c.op, c.fired = "", true
	return &memory.Fault{
		AfterWrites: c.after,
		Err:         fmt.Errorf("%w: %w: %w: %s after write %d", errMidStep, memory.ErrInjected, providertest.ErrInjected, op, c.after),
	}
}

// purge purges an instance on store; in peek-lock mode (peekLock set) it
// may crash half-way: then meanwhile runs (a round, which must not take
// the half-purged instance), and the operator purges again, which must
// finish the purge with the same tombstone. crashed tells whether it did.
func (c *midStep) purge(ctx context.Context, t *rapid.T, store provider.PurgeStore, p *provider.PurgeInstanceParams, peekLock bool, meanwhile func(*rapid.T)) (ts *provider.Tombstone, crashed bool, err error) {
	if peekLock {
		c.plan(t, []memory.Op{memory.OpPurgeInstance})
	}
	ts, err = store.PurgeInstance(ctx, p)
	c.clear()
	if !errors.Is(err, errMidStep) {
		return ts, false, err
	}
	meanwhile(t)
	ts, err = store.PurgeInstance(ctx, p)
	if err != nil {
		t.Fatalf("%s: purge again after a crash half-way: %v", p.InstanceID, err)
	}
	return ts, true, nil
}

// checkPurge checks what a purge of an instance whose history was events
// returned, and reports whether it purged. A refusal is allowed (in
// transactional mode only of an instance whose history has not ended, or
// whose next run's start was queued, nextRun: in peek-lock mode the
// record may lag, and a live lease refuses too); not found only when
// nothing is stored (the action is then skipped); a purge only of an
// ended history, with a tombstone that ends where it did.
func checkPurge(t *rapid.T, mode provider.Mode, id string, events []history.Event, nextRun bool, ts *provider.Tombstone, err error) bool {
	switch {
	case errors.Is(err, provider.ErrInvalidState):
		if mode == provider.ModeTransactional && !nextRun {
			if snap, ferr := round.Fold(id, events); ferr != nil || snap.Status.Terminal() {
				t.Fatalf("%s: purge refused (%v) but the history is %s (%v)", id, err, snap.Status, ferr)
			}
		}
		return false
	case errors.Is(err, provider.ErrNotFound):
		if len(events) > 0 {
			t.Fatalf("%s: purge: %v, but %d events are stored", id, err, len(events))
		}
		t.Skip("not started yet")
	case err != nil:
		t.Fatalf("%s: purge: %v", id, err)
	}
	snap, err := round.Fold(id, events)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Status.Terminal() {
		t.Fatalf("%s: purged while %s", id, snap.Status)
	}
	if nextRun && mode == provider.ModeTransactional {
		t.Fatalf("%s: purged while the start of its next run was queued", id)
	}
	// The tombstone proves the purged history: its last Seq and hash.
	last := events[len(events)-1]
	if ts == nil || ts.InstanceID != id || ts.LastSeq != last.Seq || string(ts.LastHash) != string(last.Hash) {
		t.Fatalf("%s: tombstone %+v, history ends at seq %d hash %x", id, ts, last.Seq, last.Hash)
	}
	return true
}

// claimFor claims an activity task for owner (a worker that will stall or
// die) at the clock's reading, with a claim of leaseDuration; it skips the
// action when no task is visible.
func claimFor(ctx context.Context, t *rapid.T, store provider.Store, clock *round.ManualClock, owner string) *provider.ActivityLease {
	now := clock.Now()
	l, err := store.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: owner, Now: now, LockedUntil: now.Add(leaseDuration)})
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		t.Skip("no task")
	}
	return l
}
