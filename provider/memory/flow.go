package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

var (
	_ provider.FlowSteps   = (*Store)(nil)
	_ provider.FlowSteps   = (*tx)(nil)
	_ provider.FlowStore   = (*Store)(nil)
	_ provider.StartWaiter = (*Store)(nil)
)

// errSlotBusy is returned by a transactional round that already holds the
// lock of a slot set and meets another set locked by another round:
// waiting could deadlock, so the round fails and is delivered again.
var errSlotBusy = errors.New("memory: slot set locked by another round")

// slotSet is the slot set of a concurrency key.
type slotSet struct {
	key     string
	limit   int
	holders []provider.SlotHolder
	waiters []provider.SlotHolder
	// lockedBy is the transactional round that changed it and has not
	// ended: other rounds wait for it, as for a row lock.
	lockedBy *tx
}

// slotSave is a slot set's state before a round changed it.
type slotSave struct {
	set              *slotSet
	limit            int
	holders, waiters []provider.SlotHolder
}

func (s *Store) slot(key string) *slotSet {
	set := s.slots[key]
	if set == nil {
		set = &slotSet{key: key}
		s.slots[key] = set
	}
	return set
}

// acquire applies AcquireSlot to set.
func (set *slotSet) acquire(p *provider.AcquireSlotParams) bool {
	set.limit = p.Limit
	if slices.ContainsFunc(set.holders, func(h provider.SlotHolder) bool { return h.ID == p.Holder }) {
		return true
	}
	free := p.Limit - len(set.holders)
	pos := slices.IndexFunc(set.waiters, func(h provider.SlotHolder) bool { return h.ID == p.Holder })
	if free > 0 && ((pos >= 0 && pos < free) || (pos < 0 && len(set.waiters) < free)) {
		if pos >= 0 {
			set.waiters = slices.Delete(set.waiters, pos, pos+1)
		}
		set.holders = append(set.holders, provider.SlotHolder{ID: p.Holder, Since: p.Now})
		return true
	}
	if pos < 0 {
		set.waiters = append(set.waiters, provider.SlotHolder{ID: p.Holder, Since: p.Now})
	}
	return false
}

// wait applies a provider.SlotWait to set at now and reports whether the
// instance must be parked: it joins the end of the waiters unless it holds
// or waits already, and waits parked unless it is one of the first
// (Limit - holders) waiters.
func (set *slotSet) wait(w *provider.SlotWait, now time.Time) bool {
	is := func(h provider.SlotHolder) bool { return h.ID == w.InstanceID }
	if slices.ContainsFunc(set.holders, is) || slices.ContainsFunc(set.waiters, is) {
		return false
	}
	if set.limit == 0 {
		set.limit = w.Limit
	}
	set.waiters = append(set.waiters, provider.SlotHolder{ID: w.InstanceID, Since: now})
	return len(set.waiters) > w.Limit-len(set.holders)
}

// release applies ReleaseSlot to set.
func (set *slotSet) release(holder string) []string {
	is := func(h provider.SlotHolder) bool { return h.ID == holder }
	set.holders = slices.DeleteFunc(set.holders, is)
	set.waiters = slices.DeleteFunc(set.waiters, is)
	free := set.limit - len(set.holders)
	var wake []string
	for i := 0; i < free && i < len(set.waiters); i++ {
		wake = append(wake, set.waiters[i].ID)
	}
	return wake
}

func (set *slotSet) record() *provider.SlotRecord {
	return &provider.SlotRecord{
		Key: set.key, Limit: set.limit,
		Holders: slices.Clone(set.holders), Waiters: slices.Clone(set.waiters),
	}
}

// park holds an instance until woken; callers hold s.mu.
func (s *Store) park(id string) {
	in := s.instance(id)
	in.holdUntil = provider.ParkedUntil
	s.reindex(in)
}

// wake ends the park of the instances named; callers hold s.mu.
func (s *Store) wake(ids []string) {
	woken := false
	for _, id := range ids {
		if in := s.instances[id]; in != nil && provider.IsParked(in.holdUntil) {
			in.holdUntil = time.Time{}
			s.reindex(in)
			woken = true
		}
	}
	if woken {
		s.notify(provider.QueueOrchestration)
	}
}

// AcquireSlot implements provider.FlowSteps in peek-lock mode: one write
// of the key's record.
func (s *Store) AcquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (bool, error) {
	var ok bool
	err := s.do(ctx, OpAcquireSlot, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.fence(p.Lease); err != nil {
			return err
		}
		ok = s.slot(p.Key).acquire(p)
		return nil
	})
	return ok, err
}

// ReleaseSlot implements provider.FlowSteps in peek-lock mode.
func (s *Store) ReleaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	var wake []string
	err := s.do(ctx, OpReleaseSlot, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.fence(p.Lease); err != nil {
			return err
		}
		if set := s.slots[p.Key]; set != nil {
			wake = set.release(p.Holder)
		}
		return nil
	})
	return wake, err
}

// ParkInstance implements provider.FlowSteps in peek-lock mode.
func (s *Store) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	return s.do(ctx, OpParkInstance, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.fence(p.Lease); err != nil {
			return err
		}
		s.park(p.InstanceID)
		return nil
	})
}

// WakeInstances implements provider.FlowSteps in peek-lock mode and
// provider.FlowStore: one write per instance.
func (s *Store) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	return s.step(ctx, OpWakeInstances, func(w *writes) error {
		if err := w.read(func() error { return s.fence(p.Lease) }); err != nil {
			return err
		}
		for _, id := range p.InstanceIDs {
			if err := w.write(func() error { s.wake([]string{id}); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
}

// EnqueueWaiting implements provider.StartWaiter. In transactional mode
// the messages and the waits are one atomic write; a wait whose slot set a
// round's transaction holds is left to the instance's first round. In
// peek-lock mode it applies no wait (see provider.StartWaiter).
func (s *Store) EnqueueWaiting(ctx context.Context, p *provider.EnqueueWaitingParams) error {
	if s.mode == provider.ModePeekLock {
		return s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: p.Messages, Now: p.Now})
	}
	return s.do(ctx, OpEnqueueWaiting, func() error {
		for i := range p.Waits {
			if err := provider.ValidateLimit(p.Waits[i].Key, p.Waits[i].Limit); err != nil || p.Waits[i].Key == "" {
				return fmt.Errorf("memory: wait of %s: %w", p.Waits[i].InstanceID, orEmptyKey(err))
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.enqueueMessages(p.Messages, p.Now)
		for i := range p.Waits {
			w := &p.Waits[i]
			set := s.slot(w.Key)
			if set.lockedBy != nil {
				continue
			}
			if set.wait(w, p.Now) {
				s.park(w.InstanceID)
			}
		}
		return nil
	})
}

// orEmptyKey is err, or the error of an empty key.
func orEmptyKey(err error) error {
	if err == nil {
		return errors.New("no concurrency key")
	}
	return err
}

// GetSlots implements provider.FlowStore.
func (s *Store) GetSlots(ctx context.Context, key string) (*provider.SlotRecord, error) {
	var rec *provider.SlotRecord
	err := s.do(ctx, OpGetSlots, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		set := s.slots[key]
		if set == nil || set.limit == 0 {
			return fmt.Errorf("slots of %q: %w", key, provider.ErrNotFound)
		}
		rec = set.record()
		return nil
	})
	return rec, err
}

// ListSlots implements provider.FlowStore.
func (s *Store) ListSlots(ctx context.Context, p *provider.ListSlotsParams) ([]provider.SlotRecord, error) {
	var out []provider.SlotRecord
	err := s.do(ctx, OpListSlots, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		for _, key := range slices.Sorted(maps.Keys(s.slots)) {
			set := s.slots[key]
			if key <= p.AfterKey || set.limit == 0 || (p.OnlyWaiting && len(set.waiters) == 0) {
				continue
			}
			out = append(out, *set.record())
			if len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// lockSlot locks the slot set of key for the round, waiting while
// another round holds it, and saves its state for an undo; callers hold
// s.mu.
func (t *tx) lockSlot(ctx context.Context, key string) (*slotSet, error) {
	s := t.s
	set := s.slot(key)
	if set.lockedBy != nil && set.lockedBy != t {
		if len(t.slotLocks) > 0 {
			return nil, fmt.Errorf("%w: %q", errSlotBusy, key)
		}
		stop := context.AfterFunc(ctx, func() {
			s.mu.Lock()
			s.slotsFree.Broadcast()
			s.mu.Unlock()
		})
		defer stop()
		for set.lockedBy != nil && set.lockedBy != t {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s.slotsFree.Wait()
		}
		if t.closed {
			return nil, errTxClosed
		}
	}
	if set.lockedBy == nil {
		set.lockedBy = t
		t.slotLocks = append(t.slotLocks, set)
	}
	t.slotSaves = append(t.slotSaves, slotSave{set: set, limit: set.limit, holders: slices.Clone(set.holders), waiters: slices.Clone(set.waiters)})
	return set, nil
}

// restoreSlots undoes the round's slot changes saved from index from on;
// callers hold s.mu.
func (t *tx) restoreSlots(from int) {
	for i := len(t.slotSaves) - 1; i >= from; i-- {
		sv := t.slotSaves[i]
		sv.set.limit, sv.set.holders, sv.set.waiters = sv.limit, sv.holders, sv.waiters
	}
	t.slotSaves = t.slotSaves[:from]
}

// unlockSlots releases the round's slot sets; callers hold s.mu.
func (t *tx) unlockSlots() {
	for _, set := range t.slotLocks {
		set.lockedBy = nil
		if set.limit == 0 && len(set.holders) == 0 && len(set.waiters) == 0 {
			delete(t.s.slots, set.key)
		}
	}
	if len(t.slotLocks) > 0 {
		t.slotsFree()
	}
	t.slotLocks = nil
}

func (t *tx) slotsFree() { t.s.slotsFree.Broadcast() }

// AcquireSlot implements provider.FlowSteps inside a transaction.
func (t *tx) AcquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (bool, error) {
	var ok bool
	err := t.step(ctx, OpAcquireSlot, func() error {
		t.s.mu.Lock()
		defer t.s.mu.Unlock()
		set, err := t.lockSlot(ctx, p.Key)
		if err != nil {
			return err
		}
		ok = set.acquire(p)
		return nil
	})
	return ok, err
}

// ReleaseSlot implements provider.FlowSteps inside a transaction.
func (t *tx) ReleaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	var wake []string
	err := t.step(ctx, OpReleaseSlot, func() error {
		t.s.mu.Lock()
		defer t.s.mu.Unlock()
		if t.s.slots[p.Key] == nil {
			return nil
		}
		set, err := t.lockSlot(ctx, p.Key)
		if err != nil {
			return err
		}
		wake = set.release(p.Holder)
		return nil
	})
	return wake, err
}

// ParkInstance implements provider.FlowSteps inside a transaction: staged
// until the commit.
func (t *tx) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	return t.step(ctx, OpParkInstance, func() error {
		t.parks = append(t.parks, p.InstanceID)
		return nil
	})
}

// WakeInstances implements provider.FlowSteps inside a transaction:
// staged until the commit.
func (t *tx) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	return t.step(ctx, OpWakeInstances, func() error {
		t.wakes = append(t.wakes, p.InstanceIDs...)
		return nil
	})
}
