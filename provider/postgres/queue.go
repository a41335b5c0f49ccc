package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
)

// enqueueMessagesSQL inserts messages idempotently by id and creates the
// rows of their instances, with the order key of each ($7, see
// provider.OrderAt) and the partition of its instance ($8) computed by the
// caller; the verbs' parameters start at $9. Its three verbs are an optional guard CTE, a
// filter on the input using it, and an extra leading result column;
// without them the result is (inserted). The caller announces new work
// after commit (see announce): a NOTIFY inside the transaction would
// serialize its commit with every other notifying commit.
//
// The input keeps the slice's order (WITH ORDINALITY), and the identity
// column numbers rows in that order, which is the instance's enqueue order.
const enqueueMessagesSQL = `
WITH %s input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::text[], $6::bytea[], $7::timestamptz[], $8::int[])
        WITH ORDINALITY AS t(id, instance_id, visible_at, attempts, last_error, envelope, order_at, part, ord)
    %s
), new_instances AS (
    -- Only ids without a row are inserted: ON CONFLICT alone would meet the
    -- row version a running round wrote and wait for that round to end.
    -- OFFSET 0 keeps NOT EXISTS a primary-key probe per id: as an
    -- anti-join, a generic plan made while the table was small hashes
    -- the whole instances table, read by a sequential scan.
    INSERT INTO {{schema}}.instances (part, instance_id)
    SELECT DISTINCT part, instance_id FROM input
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.instances i WHERE i.part = input.part AND i.instance_id = input.instance_id OFFSET 0)
    ORDER BY instance_id
    ON CONFLICT DO NOTHING
), inserted AS (
    INSERT INTO {{schema}}.messages (part, id, instance_id, visible_at, attempts, last_error, envelope, order_at)
    SELECT part, id, instance_id, visible_at, attempts, last_error, envelope, order_at FROM input ORDER BY ord
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
)
SELECT %s count(*) FROM inserted`

// lockInstancesSQL takes a KEY SHARE lock on the rows of the instances
// messages are about to be enqueued to. It waits only for a purge (FOR
// UPDATE, then DELETE), never for a round (FOR NO KEY UPDATE), and a
// purge skips an instance it holds until the enqueue commits: a purge
// must not miss a message whose insert it cannot see yet, which would
// outlive the instance row and reach an instance that reuses the id. The
// enqueue runs in a statement of its own after it, whose snapshot sees a
// purge the lock waited for.
//
// The rows are locked in id order, one primary-key probe per id: the
// locking subquery cannot be flattened, so the planner has no plan but a
// nested loop over the ids. (instance_id = ANY ($1) ORDER BY instance_id
// got, as a generic plan made on a small table, a sequential scan and a
// sort.)
const lockInstancesSQL = `
SELECT 1
FROM (SELECT DISTINCT u.id COLLATE "C" AS id, u.part FROM unnest($1::text[], $2::int[]) AS u(id, part) ORDER BY 1) AS ids
CROSS JOIN LATERAL (
    SELECT 1 FROM {{schema}}.instances i WHERE i.part = ids.part AND i.instance_id = ids.id FOR KEY SHARE) AS l`

// dequeueLockSQL locks, in partition $3, the instance of the first visible message by
// (order_at, seq) — order_at is provider.OrderAt(VisibleAt, Priority) —
// among instances that are not held, not locked by another transaction
// (skipped, never waited for) and not in $2: those this transaction took
// already and those the store's other open rounds hold. $2 filters the
// messages before the instance's probe: the messages of instances in
// rounds are the oldest visible ones, which every dequeue walks past, and
// a probe and lock attempt for each cost most of a dequeue under load.
//
// A visible message of priority >= 0 has order_at <= visible_at <= now:
// head walks the index on (order_at, seq) up to now and stops at the
// first instance it locks, or at now when there is none (it never reads
// the messages that become visible later, timers say). A visible message
// of negative priority may have order_at > now; late finds those in the
// partial index that holds only negative priorities, and runs only when
// head found nothing (all its messages come after head's). Each part is
// an ordered index scan under its own LIMIT 1 (a union under one LIMIT
// was planned, generic and on small tables, as a sort of the whole
// table), and the instance is locked in a LATERAL probe of its primary
// key per message, which the planner cannot turn into a hash join.
const dequeueLockSQL = `
WITH head AS (
    SELECT l.instance_id, l.held
    FROM {{schema}}.messages m
    CROSS JOIN LATERAL (
        SELECT i.instance_id, i.hold_until IS NOT NULL AS held
        FROM {{schema}}.instances i
        WHERE i.part = $3 AND i.instance_id = m.instance_id
          AND (i.hold_until IS NULL OR i.hold_until <= $1)
        FOR NO KEY UPDATE SKIP LOCKED) AS l
    WHERE m.part = $3 AND m.order_at <= $1 AND m.visible_at <= $1
      AND m.instance_id <> ALL (coalesce($2::text[], '{}'))
    ORDER BY m.order_at, m.seq
    LIMIT 1
), late AS (
    SELECT l.instance_id, l.held
    FROM {{schema}}.messages m
    CROSS JOIN LATERAL (
        SELECT i.instance_id, i.hold_until IS NOT NULL AS held
        FROM {{schema}}.instances i
        WHERE i.part = $3 AND i.instance_id = m.instance_id
          AND (i.hold_until IS NULL OR i.hold_until <= $1)
        FOR NO KEY UPDATE SKIP LOCKED) AS l
    WHERE m.part = $3 AND m.order_at > m.visible_at AND m.order_at > $1 AND m.visible_at <= $1
      AND m.instance_id <> ALL (coalesce($2::text[], '{}'))
      AND NOT EXISTS (SELECT 1 FROM head)
    ORDER BY m.order_at, m.seq
    LIMIT 1
)
SELECT instance_id, held FROM head
UNION ALL
SELECT instance_id, held FROM late`

const dequeueLockByIDSQL = `
SELECT i.instance_id, i.hold_until IS NOT NULL AS held
FROM {{schema}}.instances i
WHERE i.part = $3 AND i.instance_id = $2
  AND (i.hold_until IS NULL OR i.hold_until <= $1)
  AND EXISTS (SELECT 1 FROM {{schema}}.messages m WHERE m.instance_id = $2 AND {{check m.part = $3}} AND m.visible_at <= $1)
FOR NO KEY UPDATE SKIP LOCKED`

// dequeueFetchSQL reads the visible messages of a locked instance. It is a
// statement of its own so that it sees every commit up to the lock: the
// lock statement's snapshot may predate the ack of the round that held
// the instance before.
const dequeueFetchSQL = `
SELECT id, envelope, attempts, last_error
FROM {{schema}}.messages
WHERE instance_id = $1 AND {{check part = $4}} AND visible_at <= $2
ORDER BY seq
LIMIT $3`

// pickSQL wraps a statement that locks at most one instance and returns
// its (instance_id, held): the wrapped statement returns one row always,
// (the id, held), or ("", false) when it locked none, and records both in
// the transaction's settings chronicle.dequeued and chronicle.held, from
// which fetchDequeuedSQL, sent after it in the dequeue's round trip, reads
// its instance.
func pickSQL(lock string) string {
	return `
WITH picked AS (` + lock + `)
SELECT set_config('chronicle.dequeued', coalesce((SELECT instance_id FROM picked), ''), true),
       set_config('chronicle.held', coalesce((SELECT held FROM picked), false)::text, true) = 'true'`
}

// dequeuedSQL is the instance the dequeue's lock recorded (pickSQL), and
// someDequeuedSQL tells whether it recorded one: a test without columns,
// which the plan runs once, before any scan (a One-Time Filter), so that
// a dequeue that locked none reads nothing more.
const (
	dequeuedSQL     = `current_setting('chronicle.dequeued', true)`
	someDequeuedSQL = `current_setting('chronicle.dequeued', true) <> ''`
)

// fetchDequeuedSQL reads what a round needs of the instance pickSQL
// recorded, in a statement of its own, so that it sees every commit up to
// the lock (see dequeueFetchSQL): the head of its history (a row with
// head set; none when the history is empty) and its visible messages (at
// most $2), and it clears the instance's hold when it was held and the
// hold has passed (a row the lock holds, found by its key: a test of the
// partition that an index could serve let the update walk the
// partition's held instances; chronicle.held is a One-Time Filter too).
// It is dequeueFetchSQL, historyHeadSQL and clearHoldSQL in one
// statement.
const fetchDequeuedSQL = `
WITH cleared AS (
    UPDATE {{schema}}.instances SET hold_until = NULL
    WHERE current_setting('chronicle.held', true) = 'true'
      AND instance_id = ` + dequeuedSQL + ` AND {{check part = $3}} AND hold_until <= $1)
SELECT true AS head, NULL::text AS id, NULL::bytea AS envelope, 0 AS attempts, '' AS last_error, h.seq, h.hash
FROM (SELECT seq, hash FROM {{schema}}.history
      WHERE ` + someDequeuedSQL + ` AND part = $3 AND instance_id = ` + dequeuedSQL + `
      ORDER BY seq DESC LIMIT 1) AS h
UNION ALL
SELECT false, m.id, m.envelope, m.attempts, m.last_error, m.seq, NULL
FROM (SELECT id, envelope, attempts, last_error, seq FROM {{schema}}.messages
      WHERE ` + someDequeuedSQL + ` AND instance_id = ` + dequeuedSQL + ` AND {{check part = $3}} AND visible_at <= $1
      ORDER BY seq LIMIT $2) AS m`

// scanDequeued reads the rows of fetchDequeuedSQL: the messages in seq
// order, and the head of the history (zero when it has none).
func scanDequeued(rows pgx.Rows) ([]storedMessage, *provider.Head, error) {
	defer rows.Close()
	type row struct {
		seq int64
		sm  storedMessage
	}
	var (
		read []row
		head = &provider.Head{}
	)
	for rows.Next() {
		var (
			isHead bool
			id     *string
			r      row
			hash   []byte
		)
		if err := rows.Scan(&isHead, &id, &r.sm.envelope, &r.sm.attempts, &r.sm.lastError, &r.seq, &hash); err != nil {
			return nil, nil, err
		}
		if isHead {
			head.Seq, head.Hash = r.seq, hash
			continue
		}
		r.sm.id = *id
		read = append(read, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	// The union returns the messages in seq order already; the sort only
	// makes that independent of how the executor runs the union.
	slices.SortStableFunc(read, func(a, b row) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]storedMessage, len(read))
	for i := range read {
		out[i] = read[i].sm
	}
	return out, head, nil
}

const clearHoldSQL = `
UPDATE {{schema}}.instances SET hold_until = NULL WHERE part = $3 AND instance_id = $1 AND hold_until <= $2`

const ackMessagesSQL = `
DELETE FROM {{schema}}.messages WHERE instance_id = $1 AND id = ANY ($2::text[]) AND {{check part = $3}}`

const abandonMessagesSQL = `
UPDATE {{schema}}.messages SET attempts = attempts + 1, last_error = $3
WHERE instance_id = $1 AND id = ANY ($2::text[]) AND {{check part = $4}}`

const holdInstanceSQL = `
UPDATE {{schema}}.instances SET hold_until = greatest(hold_until, $2) WHERE part = $3 AND instance_id = $1`

const listMessagesSQL = `
SELECT envelope, attempts, last_error
FROM {{schema}}.messages
WHERE instance_id = $1 AND {{check part = $3}}
ORDER BY seq
LIMIT $2`

// nextOrchestrationSQL is the earliest time an instance can be dequeued:
// min over instances of greatest(earliest VisibleAt, hold). The first part
// takes messages not delayed by a hold (an ordered index scan stopping at
// the first), the second held instances whose hold delays a message.
// Instances in $1 (locked by this store's open rounds) are left out, and
// so are parked instances (hold $2, provider.ParkedUntil): only a wake
// makes their messages due (the messages a park moved past $2 too, see
// parkShift). It looks at partition $3 (the store sends
// one per partition in one round trip and takes the least). Both parts
// walk an index in order under LIMIT 1 and probe the other table per row
// (LATERAL … OFFSET 0, and a LIMITed probe of the instance's messages in
// seq order): with part = $3 the generic plan's estimates are small, and
// joins planned on them hashed or bitmap-scanned whole partitions. The
// probe of a held instance's messages names neither the partition (the
// instance's messages are in its own) nor an indexable time test ((… <
// …) IS TRUE), so that it reads the instance's messages
// (messages_instance) rather than AND a bitmap of them with one of the
// partition's messages.
const nextOrchestrationSQL = `
SELECT least(
    (SELECT m.visible_at
     FROM {{schema}}.messages m
     CROSS JOIN LATERAL (
         SELECT 1 FROM {{schema}}.instances i
         WHERE i.part = $3 AND i.instance_id = m.instance_id
           AND (i.hold_until IS NULL OR i.hold_until <= m.visible_at)
         OFFSET 0) AS l
     WHERE m.part = $3 AND m.visible_at < $2
       AND m.instance_id <> ALL (coalesce($1::text[], '{}'))
     ORDER BY m.part, m.visible_at
     LIMIT 1),
    (SELECT i.hold_until
     FROM {{schema}}.instances i
     CROSS JOIN LATERAL (
         SELECT 1 FROM {{schema}}.messages m
         WHERE m.instance_id = i.instance_id AND (m.visible_at < i.hold_until) IS TRUE
         LIMIT 1) AS l
     WHERE i.part = $3 AND i.hold_until IS NOT NULL AND i.hold_until < $2
       AND i.instance_id <> ALL (coalesce($1::text[], '{}'))
     ORDER BY i.part, i.hold_until
     LIMIT 1))`

// nextActivitySQL is the earliest ready time of the activity queues $1 in
// partition $2.
const nextActivitySQL = `
SELECT min(t.ready_at)
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT ready_at FROM {{schema}}.activity_tasks
    WHERE part = $2 AND queue = q.name
    ORDER BY ready_at
    LIMIT 1) AS t`

// messageArgs are the columns of messages to enqueue, in the order of
// enqueueMessagesSQL's parameters $1–$7.
type messageArgs struct {
	ids, instances []string
	visible        []time.Time
	attempts       []int32
	errors         []string
	envelopes      [][]byte
	order          []time.Time
	parts          []int32
}

// newMessageArgs prepares msgs for enqueueing at now: zero times take now,
// and of two messages with one id the first wins, as it would when
// enqueued one by one.
func (s *Store) newMessageArgs(msgs []provider.Message, now time.Time) (*messageArgs, error) {
	a := &messageArgs{}
	seen := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		m.SetDefaults(now)
		attempts, lastError := m.Attempts, m.LastError
		// The envelope is the message as enqueued; the delivery count
		// lives in columns, which AbandonMessages updates.
		m.Attempts, m.LastError = 0, ""
		env, err := provider.MarshalMessage(&m)
		if err != nil {
			return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
		}
		a.ids = append(a.ids, m.ID)
		a.instances = append(a.instances, m.InstanceID)
		a.visible = append(a.visible, m.VisibleAt)
		a.attempts = append(a.attempts, int32(attempts))
		a.errors = append(a.errors, lastError)
		a.envelopes = append(a.envelopes, env)
		a.order = append(a.order, provider.OrderAt(m.VisibleAt, m.Priority))
		a.parts = append(a.parts, s.part(m.InstanceID))
	}
	return a, nil
}

func (a *messageArgs) args(extra ...any) []any {
	return append([]any{a.ids, a.instances, a.visible, a.attempts, a.errors, a.envelopes, a.order, a.parts}, extra...)
}

// enqueueMessages runs the enqueue statement on db and, when it inserted
// any message, returns the partitions of the messages (nil otherwise).
func (s *Store) enqueueMessages(ctx context.Context, db dbtx, p *provider.EnqueueMessagesParams) ([]int32, error) {
	if len(p.Messages) == 0 {
		return nil, nil
	}
	a, err := s.newMessageArgs(p.Messages, p.Now)
	if err != nil {
		return nil, err
	}
	var inserted int64
	b, next := &pgx.Batch{}, (*pgx.Batch)(nil)
	s.queueEnqueue(b, a, laterOf(&next), func(n int64) error { inserted = n; return nil })
	send := func(db dbtx) error { return sendAll(ctx, db, b, &next) }
	if _, inTx := db.(pgx.Tx); s.citus && !inTx {
		// The rows of new instances come in a second round trip, which
		// must be in the transaction of the first.
		err = s.inTx(ctx, "enqueue", func(tx pgx.Tx) error { return send(tx) })
	} else {
		err = send(db)
	}
	if err != nil {
		return nil, failf(err, "enqueue %d messages", len(a.ids))
	}
	if inserted == 0 {
		return nil, nil
	}
	return a.parts, nil
}

// EnqueueMessages implements provider.Store: one statement inserts the new
// messages and creates their instances' rows; new work is announced after
// the commit.
func (s *Store) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	parts, err := s.enqueueMessages(ctx, s.rc, p)
	if parts != nil {
		s.announce(provider.QueueOrchestration, parts)
	}
	return err
}

// EnqueueStart implements provider.InstanceStarter in one statement and
// round trip: it inserts the instance's row, and its messages only when
// that insert did. Every write that knows of an instance (an enqueue, a
// round, a dead letter) creates its row, which only a purge deletes, so a
// row that exists already means the instance does; a concurrent insert of
// the row makes this one wait for its commit and then find it. With no row
// to lock, the enqueue needs no lock against a purge (see
// lockInstancesSQL).
func (s *Store) EnqueueStart(ctx context.Context, p *provider.EnqueueStartParams) (bool, error) {
	for i := range p.Messages {
		if p.Messages[i].InstanceID != p.InstanceID {
			return false, fmt.Errorf("postgres: start of %s: message %s is of instance %s", p.InstanceID, p.Messages[i].ID, p.Messages[i].InstanceID)
		}
	}
	a, err := s.newMessageArgs(p.Messages, p.Now)
	if err != nil {
		return false, fmt.Errorf("postgres: start of %s: %w", p.InstanceID, err)
	}
	if s.citus {
		return s.citusEnqueueStart(ctx, p, a)
	}
	var created, inserted int64
	if err := s.rc.QueryRow(ctx, s.sql.enqueueStart, a.args(p.InstanceID, s.part(p.InstanceID))...).Scan(&created, &inserted); err != nil {
		return false, failf(err, "start of %s", p.InstanceID)
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration, []int32{s.part(p.InstanceID)})
	}
	return created > 0, nil
}

// scanMessages reads rows of (envelope, attempts, last_error).
func scanMessages(rows pgx.Rows) ([]provider.Message, error) {
	defer rows.Close()
	var out []provider.Message
	for rows.Next() {
		var (
			env       []byte
			attempts  int32
			lastError string
		)
		if err := rows.Scan(&env, &attempts, &lastError); err != nil {
			return nil, err
		}
		m, err := provider.UnmarshalMessage(env)
		if err != nil {
			return nil, err
		}
		m.Attempts, m.LastError = int(attempts), lastError
		out = append(out, m)
	}
	return out, rows.Err()
}

func (s *Store) listMessages(ctx context.Context, db dbtx, sql string, args ...any) ([]provider.Message, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return scanMessages(rows)
}

// ListMessages implements provider.Store.
func (s *Store) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	// On generic plans (rcPool): left to choose, PostgreSQL planned it
	// anew at some calls as the table grew (TestPostgresStatementsPlannedOnce).
	msgs, err := s.listMessages(ctx, s.rc, s.sql.listMessages, p.InstanceID, limit, s.part(p.InstanceID))
	return msgs, failf(err, "list messages of %s", p.InstanceID)
}

// AbandonMessages implements provider.Store: in one transaction it moves the
// instance's hold to VisibleAt unless it is later already and counts the
// failed delivery on the messages still queued. It waits for a round that
// holds the instance to end. The instance row is locked first, as a round
// locks it before it deletes messages: the other order deadlocks with a
// round acking those messages.
func (s *Store) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	b := &pgx.Batch{}
	part := s.part(p.InstanceID)
	b.Queue(s.sql.holdInstance, p.InstanceID, p.VisibleAt, part)
	b.Queue(s.sql.abandonMessages, p.InstanceID, p.MessageIDs, p.Error, part)
	return failf(s.rc.SendBatch(ctx, b).Close(), "abandon messages of %s", p.InstanceID)
}

// NextVisibleAt implements provider.Store. Instances locked by rounds of
// other stores count (their row locks cannot be seen without taking
// locks), and so do those of this store's rounds run with activity
// completions (see roundTx.lock), so a worker may find the time passed
// and no instance to dequeue until those rounds end.
func (s *Store) NextVisibleAt(ctx context.Context, p *provider.NextVisibleAtParams) (time.Time, bool, error) {
	parts := s.partsOf(p.Partitions)
	b := &pgx.Batch{}
	if s.sql.generic {
		b.Queue(genericPlansImplicitSQL)
	}
	switch p.Queue {
	case provider.QueueOrchestration:
		locked := s.lockedInstances()
		for _, part := range parts {
			b.Queue(s.sql.nextOrchestration, locked, provider.ParkedUntil, part)
		}
	case provider.QueueActivity:
		queues := p.Queues
		if len(queues) == 0 {
			queues = []string{""}
		}
		for _, part := range parts {
			b.Queue(s.sql.nextActivity, queues, part)
		}
	default:
		return time.Time{}, false, fmt.Errorf("postgres: unknown queue %q", p.Queue)
	}
	// One statement per partition, each a router query of its
	// partition, in one round trip.
	var first *time.Time
	br := s.pool.SendBatch(ctx, b)
	var err error
	if s.sql.generic {
		_, err = br.Exec()
	}
	for range parts {
		if err != nil {
			break
		}
		var at *time.Time
		if err = br.QueryRow().Scan(&at); err != nil {
			break
		}
		if at != nil && (first == nil || at.Before(*first)) {
			first = at
		}
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return time.Time{}, false, failf(err, "next visible time of the %s queue", p.Queue)
	}
	if first == nil {
		return time.Time{}, false, nil
	}
	return first.UTC(), true, nil
}

// lockedInstances returns the instances this store's open rounds hold.
func (s *Store) lockedInstances() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.locked))
	for id := range s.locked {
		ids = append(ids, id)
	}
	return ids
}

// sendLocked sends b, a locking statement followed by one whose single
// row is scanned into dest, and closes it.
func sendLocked(ctx context.Context, db dbtx, b *pgx.Batch, dest ...any) error {
	br := db.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// storedMessage is a row of the messages table as dequeueFetchSQL reads
// it, before its envelope is decoded.
type storedMessage struct {
	id        string
	envelope  []byte
	attempts  int32
	lastError string
}

func scanStoredMessages(rows pgx.Rows) ([]storedMessage, error) {
	defer rows.Close()
	var out []storedMessage
	for rows.Next() {
		var sm storedMessage
		if err := rows.Scan(&sm.id, &sm.envelope, &sm.attempts, &sm.lastError); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, rows.Err()
}

// partsOf returns the partitions to look at: parts, or every partition of
// the store when parts is empty. Partitions out of range are left out.
func (s *Store) partsOf(parts []int) []int32 {
	out := make([]int32, 0, max(len(parts), s.partitions))
	if len(parts) == 0 {
		for i := range s.partitions {
			out = append(out, int32(i))
		}
		return out
	}
	for _, p := range parts {
		if p >= 0 && p < s.partitions {
			out = append(out, int32(p))
		}
	}
	return out
}
