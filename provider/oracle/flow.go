package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/chronicleflow/chronicle/provider"
)

// Concurrency slots of instances, parking and waking (provider.FlowSteps
// on a round's transaction, provider.FlowStore on the store). A slot set
// is a row of FLOW_SLOTS, whose row lock serializes the acquires and
// releases of its key for the rest of the round that takes it, and its
// members, rows of FLOW_SLOT_MEMBERS. A parked instance is held with
// hold_until = parkedHold.

var (
	_ provider.FlowSteps = (*roundTx)(nil)
	_ provider.FlowStore = (*Store)(nil)
)

// validateSlot refuses a slot key the store cannot keep, and a limit
// below 1 when acquiring.
func validateSlot(key string, limit int, acquire bool) error {
	if key == "" {
		return fmt.Errorf("%w: a slot key is empty", ErrInvalidArgument)
	}
	if !acquire {
		limit = 1
	}
	if err := provider.ValidateLimit(key, limit); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// acquireSlot is AcquireSlot in tx (see provider.FlowSteps): it creates
// the set's row, sets its limit (which locks the row until tx ends) and
// then decides on the members as they are, which no other acquire or
// release changes meanwhile.
func (s *Store) acquireSlot(ctx context.Context, tx dbtx, p *provider.AcquireSlotParams) (bool, error) {
	if err := validateSlot(p.Key, p.Limit, true); err != nil {
		return false, err
	}
	if p.Holder == "" {
		return false, fmt.Errorf("%w: acquire slot %s: no holder", ErrInvalidArgument, p.Key)
	}
	key, limit := named("skey", p.Key), named("lim", int64(p.Limit))
	if _, err := tx.ExecContext(ctx, s.sql.ensureSlot, key, limit); err != nil && !isDuplicate(err) {
		return false, failf(err, "acquire slot %s", p.Key)
	}
	if _, err := tx.ExecContext(ctx, s.sql.setSlotLimit, key, limit); err != nil {
		return false, failf(err, "acquire slot %s: lock", p.Key)
	}
	holder := named("holder", p.Holder)
	var waiting, seq int64
	err := tx.QueryRowContext(ctx, s.sql.slotMember, key, holder).Scan(intScan{&waiting}, intScan{&seq})
	member := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
		seq = math.MaxInt64 // a newcomer: every waiter is ahead of it
	case err != nil:
		return false, failf(err, "acquire slot %s for %s", p.Key, p.Holder)
	case waiting == 0:
		return true, nil // it holds one already
	}
	var holders, ahead int64
	if err := tx.QueryRowContext(ctx, s.sql.slotCounts, key, named("ahead_of", seq)).Scan(intScan{&holders}, intScan{&ahead}); err != nil {
		return false, failf(err, "acquire slot %s for %s", p.Key, p.Holder)
	}
	takes := ahead < int64(p.Limit)-holders
	since := named("since", timeArg(p.Now))
	switch {
	case member && takes:
		_, err = tx.ExecContext(ctx, s.sql.promoteSlotMember, since, key, holder)
	case member:
		return false, nil // it waits, and keeps its place
	default:
		_, err = tx.ExecContext(ctx, s.sql.insertSlotMember, key, holder, named("waiting", flag(!takes)), since)
	}
	if err != nil {
		return false, failf(err, "acquire slot %s for %s", p.Key, p.Holder)
	}
	return takes, nil
}

// releaseSlot is ReleaseSlot in tx: it locks the set's row (nothing to do
// when there is none), removes the holder or waiter and returns the first
// (limit - holders) waiters.
func (s *Store) releaseSlot(ctx context.Context, tx dbtx, p *provider.ReleaseSlotParams) ([]string, error) {
	if err := validateSlot(p.Key, 0, false); err != nil {
		return nil, err
	}
	key := named("skey", p.Key)
	var limit int64
	err := tx.QueryRowContext(ctx, s.sql.lockSlot, key).Scan(intScan{&limit})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, failf(err, "release slot %s: lock", p.Key)
	}
	if _, err := tx.ExecContext(ctx, s.sql.deleteSlotMember, key, named("holder", p.Holder)); err != nil {
		return nil, failf(err, "release slot %s of %s", p.Key, p.Holder)
	}
	var holders, waiters int64
	if err := tx.QueryRowContext(ctx, s.sql.slotCounts, key, named("ahead_of", int64(math.MaxInt64))).Scan(intScan{&holders}, intScan{&waiters}); err != nil {
		return nil, failf(err, "release slot %s", p.Key)
	}
	free := min(limit-holders, waiters)
	if free <= 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, s.sql.firstWaiters, key, named("lim", free))
	if err != nil {
		return nil, failf(err, "release slot %s: waiters", p.Key)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(strScan{&id}); err != nil {
			return nil, failf(err, "release slot %s: waiters", p.Key)
		}
		out = append(out, id)
	}
	return out, failf(rows.Err(), "release slot %s: waiters", p.Key)
}

// parkInstance holds an instance until a wake, creating its row when it
// has none.
func (s *Store) parkInstance(ctx context.Context, tx dbtx, id string) error {
	if id == "" {
		return fmt.Errorf("%w: park: no instance id", ErrInvalidArgument)
	}
	n, err := affected(ctx, tx, s.sql.parkInstance, named("inst", id))
	if err != nil {
		return failf(err, "park instance %s", id)
	}
	if n > 0 {
		return nil
	}
	if err := s.ensureInstances(ctx, tx, []string{id}); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.sql.parkInstance, named("inst", id))
	return failf(err, "park instance %s", id)
}

// wakeInstances ends the park of the named instances that are parked, one
// statement each in id order (so that two wakes never wait for each
// other in a cycle), and reports whether it woke any. Each waits for a
// round that holds its instance.
func (s *Store) wakeInstances(ctx context.Context, tx dbtx, ids []string) (bool, error) {
	woke := false
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		n, err := affected(ctx, tx, s.sql.wakeInstance, named("inst", id))
		if err != nil {
			return false, failf(err, "wake instance %s", id)
		}
		woke = woke || n > 0
	}
	return woke, nil
}

// AcquireSlot implements provider.FlowSteps in the round's transaction:
// the set's row stays locked until the round ends, and a rollback undoes
// the acquire. Lease is for peek-lock stores and is ignored.
func (t *roundTx) AcquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (bool, error) {
	var ok bool
	err := t.step(func() error {
		var err error
		ok, err = t.s.acquireSlot(ctx, t.tx, p)
		return err
	})
	return ok, err
}

// ReleaseSlot implements provider.FlowSteps in the round's transaction.
func (t *roundTx) ReleaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	var wake []string
	err := t.step(func() error {
		var err error
		wake, err = t.s.releaseSlot(ctx, t.tx, p)
		return err
	})
	return wake, err
}

// ParkInstance implements provider.FlowSteps in the round's transaction.
func (t *roundTx) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	return t.step(func() error { return t.s.parkInstance(ctx, t.tx, p.InstanceID) })
}

// WakeInstances implements provider.FlowSteps in the round's transaction;
// when it woke an instance, the round announces work as an enqueue does.
func (t *roundTx) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	return t.step(func() error {
		woke, err := t.s.wakeInstances(ctx, t.tx, p.InstanceIDs)
		t.enqueuedMessages = t.enqueuedMessages || woke
		return err
	})
}

// WakeInstances implements provider.FlowStore in a transaction of its own,
// which announces the work when it woke an instance.
func (s *Store) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	var woke bool
	err := s.inTx(ctx, fmt.Sprintf("wake %d instances", len(p.InstanceIDs)), func(tx *sql.Tx) error {
		var err error
		if woke, err = s.wakeInstances(ctx, tx, p.InstanceIDs); err != nil || !woke {
			return err
		}
		s.enqueueWake(ctx, tx, true, false)
		return nil
	})
	if err == nil && woke {
		s.wake(provider.QueueOrchestration)
	}
	return err
}

// GetSlots implements provider.FlowStore.
func (s *Store) GetSlots(ctx context.Context, key string) (*provider.SlotRecord, error) {
	var limit int64
	err := s.db.QueryRowContext(ctx, s.sql.getSlot, named("skey", key)).Scan(intScan{&limit})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("oracle: slots of %s: %w", key, provider.ErrNotFound)
	}
	if err != nil {
		return nil, failf(err, "slots of %s", key)
	}
	recs := []provider.SlotRecord{{Key: key, Limit: int(limit)}}
	if err := s.slotMembers(ctx, recs); err != nil {
		return nil, err
	}
	return &recs[0], nil
}

// ListSlots implements provider.FlowStore: the sets in key order (binary,
// as the session check of New ensures), then their members.
func (s *Store) ListSlots(ctx context.Context, p *provider.ListSlotsParams) ([]provider.SlotRecord, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listSlots, named("after", p.AfterKey),
		named("only_waiting", flag(p.OnlyWaiting)), named("lim", int64(limitOf(p.Limit))))
	if err != nil {
		return nil, failf(err, "list slots")
	}
	defer rows.Close()
	var out []provider.SlotRecord
	for rows.Next() {
		var (
			rec   provider.SlotRecord
			limit int64
		)
		if err := rows.Scan(strScan{&rec.Key}, intScan{&limit}); err != nil {
			return nil, failf(err, "list slots")
		}
		rec.Limit = int(limit)
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, failf(err, "list slots")
	}
	rows.Close()
	if err := s.slotMembers(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// slotMembers fills in the holders and waiters of recs.
func (s *Store) slotMembers(ctx context.Context, recs []provider.SlotRecord) error {
	if len(recs) == 0 {
		return nil
	}
	index := make(map[string]int, len(recs))
	keys := make([]string, len(recs))
	for i := range recs {
		index[recs[i].Key], keys[i] = i, recs[i].Key
	}
	for _, part := range chunks(keys) {
		query, args := expandList(s.sql.slotMembers, "keys", part)
		if err := s.readSlotMembers(ctx, query, args, recs, index); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) readSlotMembers(ctx context.Context, query string, args []any, recs []provider.SlotRecord, index map[string]int) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return failf(err, "read slot members")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key     string
			h       provider.SlotHolder
			waiting int64
		)
		if err := rows.Scan(strScan{&key}, strScan{&h.ID}, intScan{&waiting}, timeScan{&h.Since}); err != nil {
			return failf(err, "read slot members")
		}
		i, ok := index[key]
		if !ok {
			continue
		}
		if waiting == 1 {
			recs[i].Waiters = append(recs[i].Waiters, h)
		} else {
			recs[i].Holders = append(recs[i].Holders, h)
		}
	}
	return failf(rows.Err(), "read slot members")
}
