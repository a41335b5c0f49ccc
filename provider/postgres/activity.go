package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
)

// newTasksSQL opens both enqueues of tasks: the input rows ($1–$12, in
// the slice's order, $12 the partition of each task's instance) and the task ids never seen before, recorded; the
// enqueue's own "inserted" CTE follows.
const newTasksSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bytea[],
            $7::int[], $8::timestamptz[], $9::text[], $10::text[], $11::int[], $12::int[])
        WITH ORDINALITY AS t(id, instance_id, execution_id, queue, ready_at, envelope,
            priority, order_at, name, concurrency_key, concurrency_limit, part, ord)
), known AS (
    INSERT INTO {{schema}}.activity_task_ids (part, id, instance_id)
    SELECT part, id, instance_id FROM input ORDER BY ord
    ON CONFLICT DO NOTHING
    RETURNING id
), inserted AS (`

// enqueueActivitiesSQL records the task ids never seen before and queues
// those tasks, in the slice's order; the caller announces them after
// commit. Each row carries the task's priority and order key
// (provider.OrderAt of its VisibleAt), its name, and its concurrency key
// and limit (NULL without a key).
const enqueueActivitiesSQL = newTasksSQL + `
    INSERT INTO {{schema}}.activity_tasks (part, id, instance_id, execution_id, queue, ready_at, envelope,
        priority, order_at, name, concurrency_key, concurrency_limit)
    SELECT part, id, instance_id, execution_id, queue, ready_at, envelope,
        priority, order_at, name, nullif(concurrency_key, ''), CASE WHEN concurrency_key <> '' THEN concurrency_limit END
    FROM input
    WHERE id IN (SELECT id FROM known)
    ORDER BY ord
    RETURNING 1
)
SELECT count(*) FROM inserted`

// enqueueClaimedSQL is enqueueActivitiesSQL for tasks inserted claimed
// with token $13 by owner $14 until $15, as claimActivitySQL leaves a
// claimed row (ready_at and order_at at the claim's end).
const enqueueClaimedSQL = newTasksSQL + `
    INSERT INTO {{schema}}.activity_tasks (part, id, instance_id, execution_id, queue, ready_at, envelope,
        priority, order_at, name, concurrency_key, concurrency_limit, token, owner, locked_until)
    SELECT part, id, instance_id, execution_id, queue, $15::timestamptz, envelope,
        priority, $15::timestamptz - make_interval(mins => priority), name,
        nullif(concurrency_key, ''), CASE WHEN concurrency_key <> '' THEN concurrency_limit END,
        $13::text, $14::text, $15::timestamptz
    FROM input
    WHERE id IN (SELECT id FROM known)
    ORDER BY ord
    RETURNING 1
)
SELECT count(*) FROM inserted`

// claimableSQL is the WHERE clause of the claimable tasks of queue $1 in
// partition {{part}} (a parameter of each statement) at $2 whose order key is at most $2: every claimable task of priority >= 0
// (order_at <= ready_at <= $2), and so a range of the index on (queue,
// order_at, seq) that ends at now. claimableLateSQL is that of the others,
// claimable tasks of negative priority ordered after now, found in the
// partial index of negative priorities. The claims read the first and
// turn to the second only when the first did not fill them: all of its
// tasks come first. Each is an ordered index scan that stops at its
// LIMIT, or at now.
const (
	claimableSQL     = `part = {{part}} AND queue = $1 AND order_at <= $2 AND ready_at <= $2`
	claimableLateSQL = `part = {{part}} AND queue = $1 AND priority < 0 AND order_at > $2 AND ready_at <= $2`
)

// specialSQL is true for a task the combined claim must leave to
// claimLimited: one with a concurrency key, or one that a rate limit of
// the claim ($6 activities, $7 queues, matched as RateLimit.Matches)
// matches, or may match (a task queued before migration 0007 has no name
// column).
const specialSQL = `concurrency_key IS NOT NULL OR (cardinality($6::text[]) > 0 AND (name IS NULL OR EXISTS (
            SELECT 1 FROM unnest($6::text[], $7::text[]) AS r(a, q)
            WHERE (r.a = '' OR r.a = name) AND (r.q = '' OR r.q = queue))))`

// claimActivitySQL leases the first claimable tasks of one queue by
// (order_at, seq), at most $5 (each with a token of its own), skipping
// tasks another claim is taking right now; the token comes from a
// sequence. It also returns the claim it took over, if any (a claimed task
// is claimable only once its claim ran out). One queue, compared by
// equality, makes the index on (queue, order_at, seq) return the tasks in
// the order wanted, so LIMIT stops after the first ones; with queue = ANY (…)
// the index's order is lost, and a generic plan sorted the whole table
// after a sequential scan.
//
// A task with a concurrency key or a rate limit ("special", see
// specialSQL) is not claimed here, nor is any task after it (the order
// would be lost): the statement claims the tasks before the first such
// one and then returns a row whose envelope is NULL, telling the caller
// to go on with claimLimited. Without such tasks it costs what it cost
// before limits existed: one statement.
//
// The update reaches the rows head and late locked by their ctid, a TID
// scan (a locked row keeps its place until this transaction ends). A row
// changed after this statement's snapshot and still claimable (a retry
// committed meanwhile, say) is locked as its newest version, which the
// update, reading the statement's snapshot, does not see: it is not
// claimed this time and is left for the next claim. A join on id alone
// was planned, generic and on new tables, as a walk of the partition's
// order index.
var claimActivitySQL = strings.ReplaceAll(`
WITH head AS (
    SELECT ctid, id, token, owner, locked_until, order_at, seq, `+specialSQL+` AS special
    FROM {{schema}}.activity_tasks
    WHERE `+claimableSQL+`
    ORDER BY order_at, seq
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), late AS (
    SELECT ctid, id, token, owner, locked_until, order_at, seq, `+specialSQL+` AS special
    FROM {{schema}}.activity_tasks
    WHERE `+claimableLateSQL+`
      AND (SELECT count(*) FROM head) < $5
    ORDER BY order_at, seq
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), old AS (
    SELECT c.*, bool_or(c.special) OVER (ORDER BY c.order_at, c.seq ROWS UNBOUNDED PRECEDING) AS blocked
    FROM (SELECT * FROM head UNION ALL SELECT * FROM late ORDER BY order_at, seq LIMIT $5) AS c
), claimed AS (
    UPDATE {{schema}}.activity_tasks AS t
    SET token = nextval('{{schema}}.lease_tokens')::text, owner = $3, locked_until = $4, ready_at = $4,
        order_at = $4::timestamptz - make_interval(mins => t.priority)
    FROM old
    WHERE t.ctid = old.ctid AND t.id = old.id AND {{check t.part = $8}} AND NOT old.blocked
    RETURNING t.envelope, t.token, old.token IS NOT NULL AS taken, coalesce(old.owner, '') AS old_owner, old.locked_until AS old_until
)
SELECT envelope, token, taken, old_owner, old_until FROM claimed
UNION ALL
SELECT NULL, NULL, false, '', NULL WHERE EXISTS (SELECT 1 FROM old WHERE special)`, "{{part}}", "$8")

// claimCandidateSQL locks the first claimable task of queue $1 at $2
// whose key is not full ($3), that no exhausted rate limit matches ($4
// activities, $5 queues), and not passed over already ($6): the next
// candidate of claimLimited.
var claimCandidateSQL = strings.ReplaceAll(`
WITH head AS (
    SELECT id, envelope, token, owner, locked_until, concurrency_key, concurrency_limit
    FROM {{schema}}.activity_tasks
    WHERE `+claimableSQL+` AND `+candidateFilterSQL+`
    ORDER BY order_at, seq
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), late AS (
    SELECT id, envelope, token, owner, locked_until, concurrency_key, concurrency_limit
    FROM {{schema}}.activity_tasks
    WHERE `+claimableLateSQL+` AND `+candidateFilterSQL+`
      AND NOT EXISTS (SELECT 1 FROM head)
    ORDER BY order_at, seq
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
SELECT * FROM head UNION ALL SELECT * FROM late`, "{{part}}", "$7")

const candidateFilterSQL = `(concurrency_key IS NULL OR concurrency_key <> ALL ($3::text[]))
      AND id <> ALL ($6::text[])
      AND NOT EXISTS (SELECT 1 FROM unnest($4::text[], $5::text[]) AS r(a, q)
                      WHERE (r.a = '' OR r.a = name) AND (r.q = '' OR r.q = queue))`

// lockFlowKeySQL serializes the claims of one concurrency key: a
// transaction-level advisory lock on a hash of the schema and key (two
// keys with one hash only share the lock). It is released at commit, or
// by the rollback to the savepoint taken before the candidate.
const lockFlowKeySQL = `SELECT pg_advisory_xact_lock($1)`

// countClaimsSQL counts the live claims of a concurrency key. In
// claimLimited it runs after lockFlowKeySQL, in a statement of its own
// whose snapshot follows the lock, and so sees every claim of the key
// committed by the claims that held the lock before.
const countClaimsSQL = `
SELECT count(*) FROM {{schema}}.activity_tasks WHERE concurrency_key = $1 AND locked_until > $2`

// takeTokenSQL takes a token of rate limit $1 in the window starting at
// $2 with $3 tokens, returning a row only when one was left. Its row
// lock serializes the claims of the key; a window later than the stored
// one starts the count again (a window earlier, of a node whose clock
// lags, counts in the stored one).
const takeTokenSQL = `
INSERT INTO {{schema}}.flow_rates AS r (key, window_start, used) VALUES ($1, $2, 1)
ON CONFLICT (key) DO UPDATE
SET window_start = greatest(r.window_start, EXCLUDED.window_start),
    used = CASE WHEN r.window_start < EXCLUDED.window_start THEN 1 ELSE r.used + 1 END
WHERE r.window_start < EXCLUDED.window_start OR r.used < $3
RETURNING 1`

// claimTaskSQL claims the candidate claimLimited locked.
const claimTaskSQL = `
UPDATE {{schema}}.activity_tasks
SET token = nextval('{{schema}}.lease_tokens')::text, owner = $2, locked_until = $3, ready_at = $3,
    order_at = $3::timestamptz - make_interval(mins => priority)
WHERE id = $1 AND {{check part = $4}}
RETURNING token`

// claimOrderSQL orders queues by their first claimable task in partition
// $3, leaving out those with none: a claim from several queues tries them
// in this order.
const claimOrderSQL = `
SELECT q.name
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT f.order_at, f.seq FROM (
        (SELECT order_at, seq FROM {{schema}}.activity_tasks
         WHERE part = $3 AND queue = q.name AND order_at <= $2 AND ready_at <= $2
         ORDER BY order_at, seq
         LIMIT 1)
        UNION ALL
        (SELECT order_at, seq FROM {{schema}}.activity_tasks
         WHERE part = $3 AND queue = q.name AND priority < 0 AND order_at > $2 AND ready_at <= $2
         ORDER BY order_at, seq
         LIMIT 1)) AS f
    ORDER BY f.order_at, f.seq
    LIMIT 1) AS t
ORDER BY t.order_at, t.seq`

const heartbeatActivitySQL = `
UPDATE {{schema}}.activity_tasks SET locked_until = $3, ready_at = $3, order_at = $3::timestamptz - make_interval(mins => priority)
WHERE id = $1 AND token = $2 AND {{check part = $4}}`

const taskEnvelopeSQL = `
SELECT envelope FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2 AND {{check part = $3}}`

// retryActivitySQL stores the task's next attempt and releases the claim,
// only while the token matches.
const retryActivitySQL = `
WITH updated AS (
    UPDATE {{schema}}.activity_tasks
    SET envelope = $3, ready_at = $4, order_at = $4::timestamptz - make_interval(mins => priority),
        token = NULL, owner = NULL, locked_until = NULL
    WHERE id = $1 AND token = $2 AND {{check part = $5}}
    RETURNING 1
)
SELECT count(*) FROM updated`

// lockTaskInstanceSQL locks the instance row of a claimed task, waiting
// for the round or purge that holds it: the instance row comes before the
// task's, as in a round that cancels the task.
const lockTaskInstanceSQL = `
SELECT 1 FROM {{schema}}.instances
WHERE part = $3 AND instance_id = (SELECT instance_id FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2 AND {{check part = $3}})
FOR NO KEY UPDATE`

// deadLetterActivitySQL removes a claimed task, stores its dead letter
// (with the stored task when the letter has none) and sets the incident
// of its instance, only while the token matches.
const deadLetterActivitySQL = `
WITH done AS (
    DELETE FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2 AND {{check part = $15}} RETURNING instance_id, envelope
), letter AS (
    INSERT INTO {{schema}}.dead_letters (part, id, instance_id, message, activity, reason, error, node, at, attempts,
        status, resolved_by, resolved_at)
    SELECT $15::int, $3::text, $4::text, $5::bytea, coalesce($6::bytea, done.envelope), $7::text, $8::text, $9::text,
        $10::timestamptz, $11::int, $12::text, $13::text, $14::timestamptz
    FROM done
    ON CONFLICT (id) DO NOTHING
), incident AS (
    INSERT INTO {{schema}}.instances (part, instance_id, incident)
    SELECT $15::int, instance_id, $7::text || ': ' || $8::text FROM done
    ON CONFLICT (instance_id) DO UPDATE SET incident = EXCLUDED.incident
)
SELECT count(*) FROM done`

const listQueuedActivitiesSQL = `
SELECT envelope, coalesce(owner, ''), locked_until
FROM {{schema}}.activity_tasks
WHERE instance_id = $1 AND {{check part = $2}}
ORDER BY seq`

// ListQueuedActivities implements provider.Store.
func (s *Store) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	rows, err := s.pool.Query(ctx, s.sql.listQueuedActivities, p.InstanceID, s.part(p.InstanceID))
	if err != nil {
		return nil, failf(err, "list activity tasks of %s", p.InstanceID)
	}
	defer rows.Close()
	var out []provider.QueuedActivity
	for rows.Next() {
		var (
			env   []byte
			owner string
			until *time.Time
		)
		if err := rows.Scan(&env, &owner, &until); err != nil {
			return nil, failf(err, "list activity tasks of %s", p.InstanceID)
		}
		task, err := provider.UnmarshalActivityTask(env)
		if err != nil {
			return nil, fmt.Errorf("list activity tasks of %s: %w", p.InstanceID, err)
		}
		q := provider.QueuedActivity{Task: task, Owner: owner}
		if until != nil && owner != "" {
			q.LockedUntil = until.UTC()
		}
		out = append(out, q)
	}
	return out, failf(rows.Err(), "list activity tasks of %s", p.InstanceID)
}

const cancelActivitiesSQL = `
DELETE FROM {{schema}}.activity_tasks
WHERE instance_id = $1 AND {{check part = $4}} AND CASE WHEN $3 <> '' THEN execution_id <> $3 ELSE execution_id = $2 END`

// activityArgs are the parameters of enqueueActivitiesSQL for the tasks
// of p (of two with one id the first wins); nil when there are none.
func (s *Store) activityArgs(p *provider.EnqueueActivitiesParams) ([]any, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	n := len(p.Tasks)
	var (
		ids, instances, executions, queues = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		ready, order                       = make([]time.Time, 0, n), make([]time.Time, 0, n)
		envelopes                          = make([][]byte, 0, n)
		priorities, limits                 = make([]int32, 0, n), make([]int32, 0, n)
		names, keys                        = make([]string, 0, n), make([]string, 0, n)
		parts                              = make([]int32, 0, n)
		seen                               = make(map[string]bool, n)
	)
	for _, t := range p.Tasks {
		if seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		t.SetDefaults(p.Now)
		env, err := provider.MarshalActivityTask(&t)
		if err != nil {
			return nil, fmt.Errorf("postgres: encode activity task %s: %w", t.ID, err)
		}
		ids, instances, executions, queues = append(ids, t.ID), append(instances, t.InstanceID), append(executions, t.ExecutionID), append(queues, t.Queue)
		ready, envelopes = append(ready, t.VisibleAt), append(envelopes, env)
		order = append(order, provider.OrderAt(t.VisibleAt, t.Priority))
		priorities, limits = append(priorities, int32(t.Priority)), append(limits, int32(t.ConcurrencyLimit))
		names, keys = append(names, t.Name), append(keys, t.ConcurrencyKey)
		parts = append(parts, s.part(t.InstanceID))
	}
	return []any{ids, instances, executions, queues, ready, envelopes, priorities, order, names, keys, limits, parts}, nil
}

// ClaimActivity implements provider.Store with one UPDATE … FROM (SELECT …
// FOR UPDATE SKIP LOCKED) on one queue. Several queues are first ordered
// by their first claimable task, then claimed from in that order until a
// claim succeeds. Tasks with a concurrency key or a matching rate limit
// are claimed by claimLimited, in a transaction that serializes them per
// key.
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	for i := range p.Rates {
		if err := p.Rates[i].Validate(); err != nil {
			return nil, fmt.Errorf("postgres: claim activity task: %w", err)
		}
	}
	for _, part := range s.partsOf(p.Partitions) {
		queues := p.Queues
		switch len(queues) {
		case 0:
			queues = []string{""}
		case 1:
		default:
			rows, err := s.pool.Query(ctx, s.sql.claimOrder, queues, p.Now, part)
			if err == nil {
				queues, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				return nil, failf(err, "claim activity task")
			}
		}
		for _, q := range queues {
			l, err := s.claimActivity(ctx, q, part, p)
			if l != nil || err != nil {
				return l, err
			}
		}
	}
	return nil, nil
}

// claimActivity claims the first claimable task of queue q; nil when
// there is none. Concurrent claims of one queue by one owner with the
// same rate limits are combined into one statement that claims a task
// for each of them (see combiner).
func (s *Store) claimActivity(ctx context.Context, q string, part int32, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	s.mu.Lock()
	key := claimKey{queue: q, part: part, owner: p.Owner, rates: ratesKey(p.Rates)}
	c := s.claims[key]
	if c == nil {
		c = &combiner[*provider.ClaimActivityParams, *provider.ActivityLease]{max: maxCombined}
		s.claims[key] = c
	}
	s.mu.Unlock()
	return c.do(ctx, p, func(ctx context.Context, calls []*combined[*provider.ClaimActivityParams, *provider.ActivityLease]) {
		s.claimActivities(ctx, q, part, calls)
	})
}

// maxCombined bounds the calls one combined statement serves.
const maxCombined = 64

// claimKey names the claims that may be combined: those of one queue by
// one owner with one set of rate limits (ratesKey).
type claimKey struct {
	queue, owner, rates string
	part                int32
}

// ratesKey encodes rate limits for claimKey; "" when there are none.
func ratesKey(rates []provider.RateLimit) string {
	if len(rates) == 0 {
		return ""
	}
	var b strings.Builder
	for _, r := range rates {
		fmt.Fprintf(&b, "%q %q %q %d %d;", r.Key, r.Activity, r.Queue, r.Tokens, r.Interval)
	}
	return b.String()
}

// rateColumns returns the activities and queues of rates, as the
// parameters of specialSQL (empty, never nil: a NULL array would make
// every task special).
func rateColumns(rates []provider.RateLimit) (activities, queues []string) {
	activities, queues = make([]string, 0, len(rates)), make([]string, 0, len(rates))
	for _, r := range rates {
		activities, queues = append(activities, r.Activity), append(queues, r.Queue)
	}
	return activities, queues
}

// claimActivities claims a task for each call, in one statement: at the
// latest Now of the calls, until the latest LockedUntil (a claim never
// holds for less than its caller asked). Calls whose ctx has ended get
// its error and no task; calls beyond the tasks found get none. When the
// statement stopped at a task with a concurrency key or a rate limit,
// the calls it did not serve go on, one by one, with claimLimited.
func (s *Store) claimActivities(ctx context.Context, q string, part int32, calls []*combined[*provider.ClaimActivityParams, *provider.ActivityLease]) {
	live := calls[:0:0]
	var now, until time.Time
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		live = append(live, c)
		if c.in.Now.After(now) {
			now = c.in.Now
		}
		if c.in.LockedUntil.After(until) {
			until = c.in.LockedUntil
		}
	}
	if len(live) == 0 {
		return
	}
	owner, rates := live[0].in.Owner, live[0].in.Rates
	activities, queues := rateColumns(rates)
	args := []any{q, now, owner, until, len(live), activities, queues, part}
	if s.citus {
		args = append(args, newToken())
	}
	rows, err := s.rc.Query(ctx, s.sql.claimActivity, args...)
	if err != nil {
		for _, c := range live {
			c.err = failf(err, "claim activity task")
		}
		return
	}
	defer rows.Close()
	i := 0
	limited := false
	for rows.Next() {
		var (
			env      []byte
			token    *string
			taken    bool
			oldOwner string
			oldUntil *time.Time
		)
		if err = rows.Scan(&env, &token, &taken, &oldOwner, &oldUntil); err != nil {
			break
		}
		if token == nil {
			limited = true
			continue
		}
		task, err := provider.UnmarshalActivityTask(env)
		if err != nil {
			// The task stays claimed until its claim runs out, as a
			// claim that could not be decoded did before.
			live[i].err = fmt.Errorf("postgres: claim activity task: %w", err)
			i++
			continue
		}
		l := &provider.ActivityLease{Task: task, Token: *token, Owner: owner, LockedUntil: until}
		if taken {
			l.Expired = &provider.ExpiredClaim{Owner: oldOwner, LockedUntil: fromNullTime(oldUntil)}
		}
		live[i].out = l
		i++
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		// The commit may have failed: no call may take a task whose
		// claim is not known to be stored.
		for _, c := range live {
			c.out, c.err = nil, failf(err, "claim activity task")
		}
		return
	}
	rows.Close()
	if !limited {
		return
	}
	for _, c := range live[i:] {
		l, err := s.claimLimited(ctx, q, part, owner, now, until, rates)
		c.out, c.err = l, err
		if l == nil {
			return
		}
	}
}

// candidateSavepoint precedes each candidate of claimLimited: passing
// over the candidate rolls back to it, giving back the candidate's row
// lock, its key's advisory lock and the rate tokens it took.
const candidateSavepoint = "chronicle_candidate"

// claimLimited claims the first claimable task of queue q that its
// limits allow, in one READ COMMITTED transaction; nil when there is
// none. For each candidate (locked FOR UPDATE SKIP LOCKED, in queue
// order):
//
//   - with a concurrency key, it takes the key's advisory lock and then,
//     in a statement whose snapshot follows the lock, counts the key's
//     live claims; a full key is passed over, with every task of it;
//   - for each rate limit matching it (one per key, in key order, so
//     that two claims wait for each other's rows in one order), it takes
//     a token of the window of now; a limit without one is passed over,
//     with every task it matches;
//   - it claims the candidate, and the commit releases the locks.
//
// A candidate passed over gives back what it took (candidateSavepoint):
// a claim that fails spends no token, and the transaction holds the lock
// of at most one key while it waits for another's.
func (s *Store) claimLimited(ctx context.Context, q string, part int32, owner string, now, until time.Time, rates []provider.RateLimit) (*provider.ActivityLease, error) {
	var lease *provider.ActivityLease
	err := s.inTx(ctx, "claim activity task", func(tx pgx.Tx) error {
		full, skip := []string{}, []string{}
		dryActivities, dryQueues := []string{}, []string{}
		for {
			var (
				id, token, key, oldOwner *string
				env                      []byte
				oldUntil                 *time.Time
				limit                    *int32
			)
			b := &pgx.Batch{}
			b.Queue("SAVEPOINT " + candidateSavepoint)
			b.Queue(s.sql.claimCandidate, q, now, full, dryActivities, dryQueues, skip, part)
			err := sendLocked(ctx, tx, b, &id, &env, &token, &oldOwner, &oldUntil, &key, &limit)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return failf(err, "claim activity task")
			}
			task, err := provider.UnmarshalActivityTask(env)
			if err != nil {
				return fmt.Errorf("postgres: claim activity task %s: %w", *id, err)
			}
			passOver := func() error {
				b := &pgx.Batch{}
				b.Queue("ROLLBACK TO SAVEPOINT " + candidateSavepoint)
				b.Queue("RELEASE SAVEPOINT " + candidateSavepoint)
				return failf(tx.SendBatch(ctx, b).Close(), "claim activity task")
			}
			if key != nil {
				max := int64(task.ConcurrencyLimit)
				if limit != nil {
					max = int64(*limit)
				}
				b := &pgx.Batch{}
				b.Queue(s.sql.lockFlowKey, s.flowLockKey(*key))
				b.Queue(s.sql.countClaims, *key, now)
				var n int64
				if err := sendLocked(ctx, tx, b, &n); err != nil {
					return failf(err, "claim activity task: count the claims of %s", *key)
				}
				if n >= max {
					if err := passOver(); err != nil {
						return err
					}
					full = append(full, *key)
					continue
				}
			}
			if matched := matchingRates(rates, &task); len(matched) > 0 {
				dry, err := s.takeTokens(ctx, tx, matched, now)
				if err != nil {
					return err
				}
				if len(dry) > 0 {
					if err := passOver(); err != nil {
						return err
					}
					for _, r := range dry {
						dryActivities, dryQueues = append(dryActivities, r.Activity), append(dryQueues, r.Queue)
					}
					skip = append(skip, *id)
					continue
				}
			}
			args := []any{*id, owner, until, part}
			if s.citus {
				args = append(args, newToken())
			}
			var taken string
			if err := tx.QueryRow(ctx, s.sql.claimTask, args...).Scan(&taken); err != nil {
				return failf(err, "claim activity task %s", *id)
			}
			lease = &provider.ActivityLease{Task: task, Token: taken, Owner: owner, LockedUntil: until}
			if token != nil {
				lease.Expired = &provider.ExpiredClaim{Owner: deref(oldOwner), LockedUntil: fromNullTime(oldUntil)}
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// matchingRates returns the rate limits that match task, one per key (the
// first), ordered by key.
func matchingRates(rates []provider.RateLimit, task *provider.ActivityTask) []provider.RateLimit {
	var out []provider.RateLimit
	for _, r := range rates {
		if r.Matches(task) && !slices.ContainsFunc(out, func(o provider.RateLimit) bool { return o.Key == r.Key }) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b provider.RateLimit) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// takeTokens takes a token of each limit in one round trip and returns
// the limits that had none left.
func (s *Store) takeTokens(ctx context.Context, tx pgx.Tx, rates []provider.RateLimit, now time.Time) ([]provider.RateLimit, error) {
	b := &pgx.Batch{}
	for _, r := range rates {
		b.Queue(s.sql.takeToken, r.Key, r.Window(now), int32(r.Tokens))
	}
	br := tx.SendBatch(ctx, b)
	var dry []provider.RateLimit
	var err error
	for _, r := range rates {
		var one int32
		switch e := br.QueryRow().Scan(&one); {
		case errors.Is(e, pgx.ErrNoRows):
			dry = append(dry, r)
		case e != nil && err == nil:
			err = e
		}
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return nil, failf(err, "claim activity task: take a token")
	}
	return dry, nil
}

// flowLockKey is the advisory lock key of a concurrency key of the
// store's schema.
func (s *Store) flowLockKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("chronicle/flow/" + s.schema + "\x00" + key))
	return int64(h.Sum64())
}

// leaseLost is the error of a call whose token does not match.
func leaseLost(taskID string) error {
	return fmt.Errorf("postgres: activity task %s: %w", taskID, provider.ErrLeaseLost)
}

// HeartbeatActivity implements provider.Store.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	part, err := s.taskPart(ctx, p.InstanceID, p.TaskID)
	if err != nil {
		return failf(err, "heartbeat activity task %s", p.TaskID)
	}
	tag, err := s.rc.Exec(ctx, s.sql.heartbeatActivity, p.TaskID, p.Token, p.LockedUntil, part)
	if err != nil {
		return failf(err, "heartbeat activity task %s", p.TaskID)
	}
	if tag.RowsAffected() == 0 {
		return leaseLost(p.TaskID)
	}
	return nil
}

// CompleteActivity implements provider.Store: one statement deletes the task
// while the token matches and, only then, enqueues the result. Concurrent
// completions are combined into one transaction (see combiner), each
// result enqueued only when its own task was deleted.
func (s *Store) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	_, err := s.completions.do(ctx, p, s.completeActivities)
	return err
}

// completeActivities completes the tasks of calls in one transaction and
// round trip, each task with its own statement (a primary-key probe).
// When the transaction fails, each is completed on its own, so that one
// call's bad result fails only that call.
func (s *Store) completeActivities(ctx context.Context, calls []*combined[*provider.CompleteActivityParams, struct{}]) {
	if len(calls) == 1 {
		calls[0].err = s.completeActivity(ctx, calls[0].in)
		return
	}
	if s.citus {
		// On Citus each completion is a transaction of its own (see
		// citusCompleteActivity).
		for _, c := range calls {
			c.err = s.completeActivity(c.ctx, c.in)
		}
		return
	}
	now := calls[0].in.Now
	for _, c := range calls {
		if c.in.Now.After(now) {
			now = c.in.Now
		}
	}
	// One transaction and round trip: the results' instances locked
	// first, in id order, then each task's own statement.
	instances, parts := make([]string, len(calls)), make([]int32, len(calls))
	for i, c := range calls {
		instances[i], parts[i] = c.in.Result.InstanceID, s.part(c.in.Result.InstanceID)
	}
	b := &pgx.Batch{}
	b.Queue(s.sql.lockInstances, instances, parts)
	for _, c := range calls {
		a, err := s.newMessageArgs([]provider.Message{c.in.Result}, now)
		if err != nil {
			c.err = fmt.Errorf("postgres: complete activity task %s: %w", c.in.TaskID, err)
			continue
		}
		b.Queue(s.sql.completeActivity, a.args(c.in.TaskID, c.in.Token, s.part(c.in.Result.InstanceID))...)
	}
	br := s.rc.SendBatch(ctx, b)
	_, err := br.Exec()
	done := make([]int64, len(calls))
	var inserted int64
	for i, c := range calls {
		if err != nil || c.err != nil {
			continue
		}
		var n int64
		err = br.QueryRow().Scan(&done[i], &n)
		inserted += n
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		for i, c := range calls {
			if c.err == nil && done[i] == 0 {
				c.err = leaseLost(c.in.TaskID)
			}
		}
		if inserted > 0 {
			s.announce(provider.QueueOrchestration, parts)
		}
		return
	}
	for _, c := range calls {
		if c.err == nil {
			c.err = s.completeActivity(c.ctx, c.in)
		}
	}
}

// completeActivity completes one task.
func (s *Store) completeActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	a, err := s.newMessageArgs([]provider.Message{p.Result}, p.Now)
	if err != nil {
		return fmt.Errorf("postgres: complete activity task %s: %w", p.TaskID, err)
	}
	if s.citus {
		return s.citusCompleteActivity(ctx, p, a)
	}
	// The result's instance is locked first, as in EnqueueMessages.
	b := &pgx.Batch{}
	b.Queue(s.sql.lockInstances, a.instances, a.parts)
	b.Queue(s.sql.completeActivity, a.args(p.TaskID, p.Token, s.part(p.Result.InstanceID))...)
	var done, inserted int64
	if err := sendLocked(ctx, s.rc, b, &done, &inserted); err != nil {
		return failf(err, "complete activity task %s", p.TaskID)
	}
	if done == 0 {
		return leaseLost(p.TaskID)
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration, a.parts)
	}
	return nil
}

// RetryActivity implements provider.Store. It reads the claimed task, then
// writes its next attempt only while the token still matches, so a
// concurrent change of the claim makes it fail with ErrLeaseLost.
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	part, err := s.taskPart(ctx, p.InstanceID, p.TaskID)
	if err != nil {
		return failf(err, "retry activity task %s", p.TaskID)
	}
	var env []byte
	err = s.pool.QueryRow(ctx, s.sql.taskEnvelope, p.TaskID, p.Token, part).Scan(&env)
	if errors.Is(err, pgx.ErrNoRows) {
		return leaseLost(p.TaskID)
	}
	if err != nil {
		return failf(err, "retry activity task %s", p.TaskID)
	}
	task, err := provider.UnmarshalActivityTask(env)
	if err != nil {
		return fmt.Errorf("postgres: retry activity task %s: %w", p.TaskID, err)
	}
	task.Attempt++
	task.VisibleAt, task.LastError = p.VisibleAt, p.Error
	if env, err = provider.MarshalActivityTask(&task); err != nil {
		return fmt.Errorf("postgres: retry activity task %s: %w", p.TaskID, err)
	}
	var updated int64
	err = s.rc.QueryRow(ctx, s.sql.retryActivity, p.TaskID, p.Token, env, p.VisibleAt, part).Scan(&updated)
	if err != nil {
		return failf(err, "retry activity task %s", p.TaskID)
	}
	if updated == 0 {
		return leaseLost(p.TaskID)
	}
	s.announce(provider.QueueActivity, []int32{part})
	return nil
}

// DeadLetterActivity implements provider.Store in one transaction and round
// trip: it locks the task's instance row, then moves the task. A round or
// purge that held the instance and removed the task meanwhile makes it
// return ErrLeaseLost.
func (s *Store) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
	l := p.Letter
	cols, err := letterColumns(&l)
	if err != nil {
		return fmt.Errorf("postgres: dead-letter activity task %s: %w", p.TaskID, err)
	}
	part, err := s.taskPart(ctx, l.InstanceID, p.TaskID)
	if err != nil {
		return failf(err, "dead-letter activity task %s", p.TaskID)
	}
	b := &pgx.Batch{}
	b.Queue(s.sql.lockTaskInstance, p.TaskID, p.Token, part)
	b.Queue(s.sql.deadLetterActivity, append(append([]any{p.TaskID, p.Token}, cols...), part)...)
	var done int64
	if err := sendLocked(ctx, s.rc, b, &done); err != nil {
		return failf(err, "dead-letter activity task %s", p.TaskID)
	}
	if done == 0 {
		return leaseLost(p.TaskID)
	}
	return nil
}

// cancelActivities deletes an execution's queued and claimed tasks; their
// ids stay in activity_task_ids.
func (s *Store) cancelActivities(ctx context.Context, db dbtx, p *provider.CancelActivitiesParams) error {
	_, err := db.Exec(ctx, s.sql.cancelActivities, p.InstanceID, p.ExecutionID, p.OtherThan, s.part(p.InstanceID))
	return failf(err, "cancel activities of %s/%s", p.InstanceID, p.ExecutionID)
}

// taskPart returns the partition of an activity task of instanceID, or,
// when instanceID is empty, of the task found by id (in a store of more
// than one partition, one statement more).
func (s *Store) taskPart(ctx context.Context, instanceID, taskID string) (int32, error) {
	if instanceID != "" || s.partitions == 1 {
		return s.part(instanceID), nil
	}
	var part int32
	err := s.pool.QueryRow(ctx, s.sql.taskPart, taskID).Scan(&part)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // the task is gone: the statement finds nothing
	}
	return part, err
}

const taskPartSQL = `SELECT part FROM {{schema}}.activity_tasks WHERE id = $1`
