package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
)

// enqueueActivitiesSQL records the task ids never seen before and queues
// those tasks, in the slice's order; the caller announces them after
// commit.
const enqueueActivitiesSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bytea[])
        WITH ORDINALITY AS t(id, instance_id, execution_id, queue, ready_at, envelope, ord)
), known AS (
    INSERT INTO {{schema}}.activity_task_ids (id, instance_id)
    SELECT id, instance_id FROM input ORDER BY ord
    ON CONFLICT DO NOTHING
    RETURNING id
), inserted AS (
    INSERT INTO {{schema}}.activity_tasks (id, instance_id, execution_id, queue, ready_at, envelope)
    SELECT id, instance_id, execution_id, queue, ready_at, envelope FROM input
    WHERE id IN (SELECT id FROM known)
    ORDER BY ord
    RETURNING 1
)
SELECT count(*) FROM inserted`

// claimActivitySQL leases the oldest claimable tasks of one queue, at
// most $5 (each with a token of its own), skipping
// tasks another claim is taking right now; the token comes from a
// sequence. It also returns the claim it took over, if any (a claimed task
// is claimable only once its claim ran out). One queue, compared by
// equality, makes the index on (queue, ready_at, seq) return the tasks in
// the order wanted, so LIMIT stops after the first ones; with queue = ANY (…)
// the index's order is lost, and a generic plan sorted the whole table
// after a sequential scan.
const claimActivitySQL = `
WITH old AS (
    SELECT id, token, owner, locked_until FROM {{schema}}.activity_tasks
    WHERE queue = $1 AND ready_at <= $2
    ORDER BY ready_at, seq
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.activity_tasks AS t
SET token = nextval('{{schema}}.lease_tokens')::text, owner = $3, locked_until = $4, ready_at = $4
FROM old
WHERE t.id = old.id
RETURNING t.envelope, t.token, old.token IS NOT NULL, coalesce(old.owner, ''), old.locked_until`

// claimOrderSQL orders queues by their oldest claimable task, leaving out
// those with none: a claim from several queues tries them in this order.
const claimOrderSQL = `
SELECT q.name
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT ready_at, seq FROM {{schema}}.activity_tasks
    WHERE queue = q.name AND ready_at <= $2
    ORDER BY ready_at, seq
    LIMIT 1) AS t
ORDER BY t.ready_at, t.seq`

const heartbeatActivitySQL = `
UPDATE {{schema}}.activity_tasks SET locked_until = $3, ready_at = $3 WHERE id = $1 AND token = $2`

const taskEnvelopeSQL = `
SELECT envelope FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2`

// retryActivitySQL stores the task's next attempt and releases the claim,
// only while the token matches.
const retryActivitySQL = `
WITH updated AS (
    UPDATE {{schema}}.activity_tasks
    SET envelope = $3, ready_at = $4, token = NULL, owner = NULL, locked_until = NULL
    WHERE id = $1 AND token = $2
    RETURNING 1
)
SELECT count(*) FROM updated`

// lockTaskInstanceSQL locks the instance row of a claimed task, waiting
// for the round or purge that holds it: the instance row comes before the
// task's, as in a round that cancels the task.
const lockTaskInstanceSQL = `
SELECT 1 FROM {{schema}}.instances
WHERE instance_id = (SELECT instance_id FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2)
FOR NO KEY UPDATE`

// deadLetterActivitySQL removes a claimed task, stores its dead letter
// (with the stored task when the letter has none) and sets the incident
// of its instance, only while the token matches.
const deadLetterActivitySQL = `
WITH done AS (
    DELETE FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2 RETURNING instance_id, envelope
), letter AS (
    INSERT INTO {{schema}}.dead_letters (id, instance_id, message, activity, reason, error, node, at, attempts,
        status, resolved_by, resolved_at)
    SELECT $3::text, $4::text, $5::bytea, coalesce($6::bytea, done.envelope), $7::text, $8::text, $9::text,
        $10::timestamptz, $11::int, $12::text, $13::text, $14::timestamptz
    FROM done
    ON CONFLICT (id) DO NOTHING
), incident AS (
    INSERT INTO {{schema}}.instances (instance_id, incident)
    SELECT instance_id, $7::text || ': ' || $8::text FROM done
    ON CONFLICT (instance_id) DO UPDATE SET incident = EXCLUDED.incident
)
SELECT count(*) FROM done`

const listQueuedActivitiesSQL = `
SELECT envelope, coalesce(owner, ''), locked_until
FROM {{schema}}.activity_tasks
WHERE instance_id = $1
ORDER BY seq`

// ListQueuedActivities implements provider.Store.
func (s *Store) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	rows, err := s.pool.Query(ctx, s.sql.listQueuedActivities, p.InstanceID)
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
WHERE instance_id = $1 AND CASE WHEN $3 <> '' THEN execution_id <> $3 ELSE execution_id = $2 END`

// activityArgs are the parameters of enqueueActivitiesSQL for the tasks
// of p (of two with one id the first wins); nil when there are none.
func activityArgs(p *provider.EnqueueActivitiesParams) ([]any, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	n := len(p.Tasks)
	var (
		ids, instances, executions, queues = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		ready                              = make([]time.Time, 0, n)
		envelopes                          = make([][]byte, 0, n)
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
	}
	return []any{ids, instances, executions, queues, ready, envelopes}, nil
}

// ClaimActivity implements provider.Store with one UPDATE … WHERE id =
// (SELECT … FOR UPDATE SKIP LOCKED) on one queue. Several queues are
// first ordered by their oldest claimable task, then claimed from in that
// order until a claim succeeds.
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	queues := p.Queues
	switch len(queues) {
	case 0:
		queues = []string{""}
	case 1:
	default:
		rows, err := s.pool.Query(ctx, s.sql.claimOrder, queues, p.Now)
		if err == nil {
			queues, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return nil, failf(err, "claim activity task")
		}
	}
	for _, q := range queues {
		l, err := s.claimActivity(ctx, q, p)
		if l != nil || err != nil {
			return l, err
		}
	}
	return nil, nil
}

// claimActivity claims the oldest claimable task of queue q; nil when
// there is none. Concurrent claims of one queue by one owner are combined
// into one statement that claims a task for each of them (see combiner).
func (s *Store) claimActivity(ctx context.Context, q string, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	s.mu.Lock()
	key := claimKey{queue: q, owner: p.Owner}
	c := s.claims[key]
	if c == nil {
		c = &combiner[*provider.ClaimActivityParams, *provider.ActivityLease]{max: maxCombined}
		s.claims[key] = c
	}
	s.mu.Unlock()
	return c.do(ctx, p, func(ctx context.Context, calls []*combined[*provider.ClaimActivityParams, *provider.ActivityLease]) {
		s.claimActivities(ctx, q, calls)
	})
}

// maxCombined bounds the calls one combined statement serves.
const maxCombined = 64

// claimKey names the claims that may be combined: those of one queue by
// one owner.
type claimKey struct{ queue, owner string }

// claimActivities claims a task for each call, in one statement: at the
// latest Now of the calls, until the latest LockedUntil (a claim never
// holds for less than its caller asked). Calls whose ctx has ended get
// its error and no task; calls beyond the tasks found get none.
func (s *Store) claimActivities(ctx context.Context, q string, calls []*combined[*provider.ClaimActivityParams, *provider.ActivityLease]) {
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
	rows, err := s.rc.Query(ctx, s.sql.claimActivity, q, now, live[0].in.Owner, until, len(live))
	if err != nil {
		for _, c := range live {
			c.err = failf(err, "claim activity task")
		}
		return
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var (
			env      []byte
			token    string
			taken    bool
			oldOwner string
			oldUntil *time.Time
		)
		if err = rows.Scan(&env, &token, &taken, &oldOwner, &oldUntil); err != nil {
			break
		}
		task, err := provider.UnmarshalActivityTask(env)
		if err != nil {
			// The task stays claimed until its claim runs out, as a
			// claim that could not be decoded did before.
			live[i].err = fmt.Errorf("postgres: claim activity task: %w", err)
			i++
			continue
		}
		l := &provider.ActivityLease{Task: task, Token: token, Owner: live[i].in.Owner, LockedUntil: until}
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
	}
}

// leaseLost is the error of a call whose token does not match.
func leaseLost(taskID string) error {
	return fmt.Errorf("postgres: activity task %s: %w", taskID, provider.ErrLeaseLost)
}

// HeartbeatActivity implements provider.Store.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	tag, err := s.rc.Exec(ctx, s.sql.heartbeatActivity, p.TaskID, p.Token, p.LockedUntil)
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
	now := calls[0].in.Now
	for _, c := range calls {
		if c.in.Now.After(now) {
			now = c.in.Now
		}
	}
	// One transaction and round trip: the results' instances locked
	// first, in id order, then each task's own statement.
	instances := make([]string, len(calls))
	for i, c := range calls {
		instances[i] = c.in.Result.InstanceID
	}
	b := &pgx.Batch{}
	b.Queue(s.sql.lockInstances, instances)
	for _, c := range calls {
		a, err := newMessageArgs([]provider.Message{c.in.Result}, now)
		if err != nil {
			c.err = fmt.Errorf("postgres: complete activity task %s: %w", c.in.TaskID, err)
			continue
		}
		b.Queue(s.sql.completeActivity, a.args(c.in.TaskID, c.in.Token)...)
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
			s.announce(provider.QueueOrchestration)
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
	a, err := newMessageArgs([]provider.Message{p.Result}, p.Now)
	if err != nil {
		return fmt.Errorf("postgres: complete activity task %s: %w", p.TaskID, err)
	}
	// The result's instance is locked first, as in EnqueueMessages.
	b := &pgx.Batch{}
	b.Queue(s.sql.lockInstances, a.instances)
	b.Queue(s.sql.completeActivity, a.args(p.TaskID, p.Token)...)
	var done, inserted int64
	if err := sendLocked(ctx, s.rc, b, &done, &inserted); err != nil {
		return failf(err, "complete activity task %s", p.TaskID)
	}
	if done == 0 {
		return leaseLost(p.TaskID)
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration)
	}
	return nil
}

// RetryActivity implements provider.Store. It reads the claimed task, then
// writes its next attempt only while the token still matches, so a
// concurrent change of the claim makes it fail with ErrLeaseLost.
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	var env []byte
	err := s.pool.QueryRow(ctx, s.sql.taskEnvelope, p.TaskID, p.Token).Scan(&env)
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
	err = s.rc.QueryRow(ctx, s.sql.retryActivity, p.TaskID, p.Token, env, p.VisibleAt).Scan(&updated)
	if err != nil {
		return failf(err, "retry activity task %s", p.TaskID)
	}
	if updated == 0 {
		return leaseLost(p.TaskID)
	}
	s.announce(provider.QueueActivity)
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
	b := &pgx.Batch{}
	b.Queue(s.sql.lockTaskInstance, p.TaskID, p.Token)
	b.Queue(s.sql.deadLetterActivity, append([]any{p.TaskID, p.Token}, cols...)...)
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
	_, err := db.Exec(ctx, s.sql.cancelActivities, p.InstanceID, p.ExecutionID, p.OtherThan)
	return failf(err, "cancel activities of %s/%s", p.InstanceID, p.ExecutionID)
}
