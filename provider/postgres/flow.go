package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider"
)

// A parked instance's queued messages are moved out of the queue's order
// while it is parked: their visible_at and order_at move parkShift ahead,
// past any time a message is due (provider.ParkedUntil, year 9999), and
// the wake moves them back. Otherwise they would stay at the head of the
// queue, before every message queued after them, and each dequeue would
// read them and probe their held instances before finding work: with a
// thousand waiting starts, a thousand rows per round. Moving both columns
// by the same interval keeps each message's order among the others and
// its place in the partial index of negative priorities; a message at or
// past parkedFrom is a moved one, and only messages due before
// provider.ParkedUntil are moved, so a park and a wake are idempotent.
// Messages enqueued while the instance is parked are not moved; the
// dequeue passes over them as before.
const (
	parkShift  = `interval '100000 years'`
	parkedFrom = `interval '90000 years'` // after provider.ParkedUntil
)

// parkInstanceSQL holds an instance until a wake ($2 is
// provider.ParkedUntil, a hold no clock reaches) and moves its queued
// messages out of the queue's order.
const parkInstanceSQL = `
WITH parked AS (
    UPDATE {{schema}}.instances SET hold_until = $2 WHERE part = $3 AND instance_id = $1
)
UPDATE {{schema}}.messages
SET visible_at = visible_at + ` + parkShift + `, order_at = order_at + ` + parkShift + `
WHERE instance_id = $1 AND {{check part = $3}} AND visible_at < $2`

// wakeInstancesSQL ends the park of the instances named that are parked
// ($2 is provider.ParkedUntil), and leaves the others as they are; it
// moves their messages back into the queue's order. The rows it counts
// are the instances it woke.
const wakeInstancesSQL = `
WITH restored AS (
    UPDATE {{schema}}.messages
    SET visible_at = visible_at - ` + parkShift + `, order_at = order_at - ` + parkShift + `
    WHERE part = ANY ($3::int[]) AND instance_id = ANY ($1::text[]) AND visible_at >= $2::timestamptz + ` + parkedFrom + `
)
UPDATE {{schema}}.instances SET hold_until = NULL
WHERE part = ANY ($3::int[]) AND instance_id = ANY ($1::text[]) AND hold_until >= $2`

// upsertSlotKeySQL creates the row of a slot key or sets its limit, and
// so locks it until the round ends: the acquires and releases of one key
// are serialized by that row lock. ON CONFLICT DO UPDATE locks the row
// also when its WHERE leaves it as it is, so an acquire with the key's
// current limit writes no new row version.
const upsertSlotKeySQL = `
INSERT INTO {{schema}}.flow_keys AS k (key, lim) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET lim = EXCLUDED.lim WHERE k.lim <> EXCLUDED.lim`

// lockSlotKeySQL locks the row of a slot key for a release; no row, no
// slot set.
const lockSlotKeySQL = `
SELECT lim FROM {{schema}}.flow_keys WHERE key = $1 FOR UPDATE`

// acquireSlotSQL decides an acquire of key $1 for holder $2 at $3 with
// limit $4, and writes it. It runs after upsertSlotKeySQL, in a statement
// of its own whose snapshot follows the key's lock, so it sees every
// acquire and release of the key committed before. The holder holds when
// it holds already, or when the holders and the waiters ahead of it (all
// the waiters, for a newcomer) are fewer than the limit; a waiter that
// gets a slot becomes a holder since $3, a newcomer that does not joins
// the waiters since $3.
const acquireSlotSQL = `
WITH me AS (
    SELECT waiting, seq FROM {{schema}}.flow_slots WHERE key = $1 AND holder = $2
), decision AS (
    SELECT mine, (mine IS NOT NULL AND NOT mine) OR holders + ahead < $4 AS granted
    FROM (SELECT
        (SELECT waiting FROM me) AS mine,
        (SELECT count(*) FROM {{schema}}.flow_slots WHERE key = $1 AND NOT waiting) AS holders,
        (SELECT count(*) FROM {{schema}}.flow_slots
         WHERE key = $1 AND waiting
           AND seq < coalesce((SELECT seq FROM me WHERE waiting), 9223372036854775807)) AS ahead) AS st
), added AS (
    INSERT INTO {{schema}}.flow_slots (key, holder, waiting, since)
    SELECT $1, $2, NOT granted, $3 FROM decision WHERE mine IS NULL
), promoted AS (
    UPDATE {{schema}}.flow_slots SET waiting = false, since = $3
    WHERE key = $1 AND holder = $2 AND waiting AND (SELECT granted FROM decision)
)
SELECT granted FROM decision`

// releaseSlotSQL removes holder $2 from the holders and waiters of key
// $1 and returns the first (limit - holders) waiters, counting as if the
// removal were done (the statement's reads do not see its own delete).
// It runs after lockSlotKeySQL.
const releaseSlotSQL = `
WITH gone AS (
    DELETE FROM {{schema}}.flow_slots WHERE key = $1 AND holder = $2
)
SELECT holder FROM {{schema}}.flow_slots
WHERE key = $1 AND waiting AND holder <> $2
ORDER BY seq
LIMIT greatest(
    coalesce((SELECT lim FROM {{schema}}.flow_keys WHERE key = $1), 0)
    - (SELECT count(*) FROM {{schema}}.flow_slots WHERE key = $1 AND NOT waiting AND holder <> $2), 0)`

// ensureSlotKeysSQL creates the rows of the keys $1 that have none, with
// the limits $2, in a transaction of its own before an enqueue with waits
// (see Store.EnqueueWaiting). It waits only for a round inserting the same
// key's row.
const ensureSlotKeysSQL = `
INSERT INTO {{schema}}.flow_keys (key, lim)
SELECT t.key, t.lim FROM unnest($1::text[], $2::int[]) AS t(key, lim)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.flow_keys k WHERE k.key = t.key)
ORDER BY t.key
ON CONFLICT (key) DO NOTHING`

// lockSlotKeysSQL locks the rows of the keys $1 that no other transaction
// holds, and returns them: an enqueue never waits for a round, and leaves
// the waits of a key a round holds to the instances' first rounds.
const lockSlotKeysSQL = `
SELECT key FROM {{schema}}.flow_keys WHERE key = ANY ($1::text[]) ORDER BY key FOR UPDATE SKIP LOCKED`

// waitSlotsSQL applies the waits ($1 instances, $2 keys, $3 limits, in
// input order) at $4 (see provider.StartWaiter): each instance that
// neither holds nor waits joins the end of its key's waiters, in input
// order, and is returned when its place among the waiters is past the
// key's free slots under its limit, in id order (the order in which the
// caller locks their rows): the caller parks it
// (parkInstanceSQL, one statement per instance, found by its key; an
// update of the instances joined with the waits was planned, generic and
// on small tables, as a sequential scan of instances). It runs after
// lockSlotKeysSQL, in a statement whose snapshot follows the keys' locks,
// and only for the keys that statement locked.
const waitSlotsSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS t(instance_id, key, lim, ord)
), fresh AS (
    SELECT i.* FROM input i
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.flow_slots s WHERE s.key = i.key AND s.holder = i.instance_id)
), placed AS (
    SELECT f.instance_id, f.key, f.lim, f.ord,
        (SELECT count(*) FROM {{schema}}.flow_slots s WHERE s.key = f.key AND NOT s.waiting) AS holders,
        (SELECT count(*) FROM {{schema}}.flow_slots s WHERE s.key = f.key AND s.waiting)
            + row_number() OVER (PARTITION BY f.key ORDER BY f.ord) AS place
    FROM fresh f
), added AS (
    INSERT INTO {{schema}}.flow_slots (key, holder, waiting, since)
    SELECT key, instance_id, true, $4 FROM placed ORDER BY ord
    ON CONFLICT (key, holder) DO NOTHING
)
SELECT instance_id FROM placed WHERE place > lim - holders ORDER BY instance_id`

const getSlotKeysSQL = `
SELECT key, lim FROM {{schema}}.flow_keys WHERE key = ANY ($1::text[]) ORDER BY key`

const listSlotKeysSQL = `
SELECT key, lim FROM {{schema}}.flow_keys k
WHERE key > $1
  AND (NOT $2 OR EXISTS (SELECT 1 FROM {{schema}}.flow_slots s WHERE s.key = k.key AND s.waiting))
ORDER BY key
LIMIT $3`

// listSlotsSQL reads the holders and waiters of keys: holders by the time
// they took their slot, waiters in the order they first waited.
const listSlotsSQL = `
SELECT key, holder, waiting, since FROM {{schema}}.flow_slots
WHERE key = ANY ($1::text[])
ORDER BY key, waiting, CASE WHEN waiting THEN NULL ELSE since END, seq`

var (
	_ provider.FlowSteps   = (*roundTx)(nil)
	_ provider.FlowStore   = (*Store)(nil)
	_ provider.StartWaiter = (*Store)(nil)
)

// AcquireSlot implements provider.FlowSteps in the round's transaction:
// the key's row is upserted (and so locked until the round ends), then
// a statement whose snapshot follows the lock decides and writes the
// acquire; both go in one round trip.
func (t *roundTx) AcquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (bool, error) {
	if err := provider.ValidateLimit(p.Key, p.Limit); err != nil || p.Key == "" {
		return false, fmt.Errorf("postgres: acquire slot: %w", orEmptyKey(err))
	}
	if p.Holder == "" {
		return false, fmt.Errorf("postgres: acquire slot of %s: no holder", p.Key)
	}
	var granted bool
	err := t.step(func() error {
		if err := t.flush(ctx); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(t.s.sql.upsertSlotKey, p.Key, int32(p.Limit))
		b.Queue(t.s.sql.acquireSlot, p.Key, p.Holder, p.Now, int32(p.Limit))
		return failf(sendLocked(ctx, t.tx, b, &granted), "acquire slot of %s for %s", p.Key, p.Holder)
	})
	return granted, err
}

// orEmptyKey is err, or the error of an empty key.
func orEmptyKey(err error) error {
	if err == nil {
		return errors.New("no concurrency key")
	}
	return err
}

// ReleaseSlot implements provider.FlowSteps in the round's transaction:
// the key's row is locked, then a statement whose snapshot follows the
// lock removes the holder and reads the waiters to wake.
func (t *roundTx) ReleaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	var wake []string
	err := t.step(func() error {
		if err := t.flush(ctx); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(t.s.sql.lockSlotKey, p.Key)
		b.Queue(t.s.sql.releaseSlot, p.Key, p.Holder)
		br := t.tx.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				wake, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
		}
		if closeErr := br.Close(); err == nil {
			err = closeErr
		}
		return failf(err, "release slot of %s for %s", p.Key, p.Holder)
	})
	return wake, err
}

// ParkInstance implements provider.FlowSteps, deferred (see Flush): the
// instance's hold becomes provider.ParkedUntil.
func (t *roundTx) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	return t.step(func() error {
		_, err := deferred{t}.Exec(ctx, t.s.sql.parkInstance, p.InstanceID, provider.ParkedUntil, t.s.part(p.InstanceID))
		return err
	})
}

// WakeInstances implements provider.FlowSteps, deferred (see Flush); the
// work is announced after the commit.
func (t *roundTx) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	return t.step(func() error {
		if len(p.InstanceIDs) == 0 {
			return nil
		}
		ids := slices.Sorted(slices.Values(p.InstanceIDs))
		parts := t.s.partsOfInstances(ids)
		_, err := deferred{t}.Exec(ctx, t.s.sql.wakeInstances, ids, provider.ParkedUntil, parts)
		t.enqueuedMessages = true
		if t.s.partitions > 1 {
			t.msgParts = append(t.msgParts, parts...)
		}
		return err
	})
}

// WakeInstances implements provider.FlowStore: one statement, and the
// work is announced when it woke an instance.
func (s *Store) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	if len(p.InstanceIDs) == 0 {
		return nil
	}
	ids := slices.Sorted(slices.Values(p.InstanceIDs))
	parts := s.partsOfInstances(ids)
	tag, err := s.rc.Exec(ctx, s.sql.wakeInstances, ids, provider.ParkedUntil, parts)
	if err != nil {
		return failf(err, "wake %d instances", len(ids))
	}
	if tag.RowsAffected() > 0 {
		s.announce(provider.QueueOrchestration, parts)
	}
	return nil
}

// EnqueueWaiting implements provider.StartWaiter. The rows of keys that
// have none are created first, in a transaction of their own (when it
// fails, for a deadlock with rounds creating the same keys, say, the waits
// of those keys are left to the rounds). Then one transaction enqueues the
// messages as EnqueueMessages does, locks the keys' rows it can without
// waiting (a key a round holds is left to the instances' first rounds),
// and applies the waits of the keys it locked in a statement whose
// snapshot follows the locks, then parks the instances that statement
// placed past their keys' free slots, in instance id order (one batch).
// New work is announced after the commit.
func (s *Store) EnqueueWaiting(ctx context.Context, p *provider.EnqueueWaitingParams) error {
	if len(p.Waits) == 0 {
		return s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: p.Messages, Now: p.Now})
	}
	if len(p.Messages) == 0 {
		return nil
	}
	limits := map[string]int32{}
	for _, w := range p.Waits {
		if err := provider.ValidateLimit(w.Key, w.Limit); err != nil || w.Key == "" {
			return fmt.Errorf("postgres: wait of %s: %w", w.InstanceID, orEmptyKey(err))
		}
		if _, ok := limits[w.Key]; !ok {
			limits[w.Key] = int32(w.Limit)
		}
	}
	a, err := s.newMessageArgs(p.Messages, p.Now)
	if err != nil {
		return fmt.Errorf("postgres: enqueue: %w", err)
	}
	keys := slices.Sorted(maps.Keys(limits))
	lims := make([]int32, len(keys))
	for i, k := range keys {
		lims[i] = limits[k]
	}
	if _, err := s.rc.Exec(ctx, s.sql.ensureSlotKeys, keys, lims); err != nil {
		if ctx.Err() != nil {
			return failf(err, "create %d slot keys", len(keys))
		}
		s.log.DebugContext(ctx, "slot keys not created: their waits are left to the rounds", slog.Int("keys", len(keys)), slog.Any("error", err))
	}
	var inserted int64
	err = pgx.BeginTxFunc(ctx, s.pool, s.sql.begin, func(tx pgx.Tx) error {
		b, next := &pgx.Batch{}, (*pgx.Batch)(nil)
		s.queueEnqueue(b, a, laterOf(&next), func(n int64) error { inserted = n; return nil })
		var locked []string
		b.Queue(s.sql.lockSlotKeys, keys).Query(func(rows pgx.Rows) error {
			var err error
			locked, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		err := sendAll(ctx, tx, b, &next)
		if err != nil || len(locked) == 0 {
			return err
		}
		var ids, wkeys []string
		var wlims []int32
		for _, w := range p.Waits {
			if _, ok := slices.BinarySearch(locked, w.Key); ok {
				ids, wkeys, wlims = append(ids, w.InstanceID), append(wkeys, w.Key), append(wlims, int32(w.Limit))
			}
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, s.sql.waitSlots, ids, wkeys, wlims, p.Now)
		if err != nil {
			return err
		}
		park, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(park) == 0 {
			return err
		}
		b = &pgx.Batch{}
		for _, id := range park {
			b.Queue(s.sql.parkInstance, id, provider.ParkedUntil, s.part(id))
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return failf(err, "enqueue %d messages with %d waits", len(a.ids), len(p.Waits))
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration, a.parts)
	}
	return nil
}

// CountClaims implements provider.FlowStore.
func (s *Store) CountClaims(ctx context.Context, key string, now time.Time) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql.countClaims, key, now).Scan(&n); err != nil {
		return 0, failf(err, "count the claims of %s", key)
	}
	return int(n), nil
}

// GetSlots implements provider.FlowStore.
func (s *Store) GetSlots(ctx context.Context, key string) (*provider.SlotRecord, error) {
	recs, err := s.slotRecords(ctx, s.sql.getSlotKeys, []string{key})
	if err != nil {
		return nil, failf(err, "slots of %s", key)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("postgres: slots of %s: %w", key, provider.ErrNotFound)
	}
	return &recs[0], nil
}

// ListSlots implements provider.FlowStore.
func (s *Store) ListSlots(ctx context.Context, p *provider.ListSlotsParams) ([]provider.SlotRecord, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	recs, err := s.slotRecords(ctx, s.sql.listSlotKeys, p.AfterKey, p.OnlyWaiting, limit)
	return recs, failf(err, "list slots")
}

// slotRecords reads the keys that keysSQL selects, then their holders and
// waiters, in one snapshot.
func (s *Store) slotRecords(ctx context.Context, keysSQL string, args ...any) ([]provider.SlotRecord, error) {
	var out []provider.SlotRecord
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, keysSQL, args...)
		if err != nil {
			return err
		}
		var keys []string
		index := map[string]int{}
		for rows.Next() {
			var (
				key string
				lim int32
			)
			if err := rows.Scan(&key, &lim); err != nil {
				rows.Close()
				return err
			}
			index[key] = len(out)
			keys = append(keys, key)
			out = append(out, provider.SlotRecord{Key: key, Limit: int(lim)})
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(keys) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, s.sql.listSlots, keys)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				key, holder string
				waiting     bool
				since       time.Time
			)
			if err := rows.Scan(&key, &holder, &waiting, &since); err != nil {
				return err
			}
			rec := &out[index[key]]
			h := provider.SlotHolder{ID: holder, Since: since.UTC()}
			if waiting {
				rec.Waiters = append(rec.Waiters, h)
			} else {
				rec.Holders = append(rec.Holders, h)
			}
		}
		return rows.Err()
	})
	return out, err
}

// partsOfInstances returns the distinct partitions of instances.
func (s *Store) partsOfInstances(ids []string) []int32 {
	var out []int32
	for _, id := range ids {
		if p := s.part(id); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
