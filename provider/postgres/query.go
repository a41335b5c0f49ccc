package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

const taskSelect = `
SELECT task_id, instance_id, execution_id, name, status, assignee, roles, payload, result,
    due, created_at, updated_at, completed_at, seq
FROM {{schema}}.human_tasks`

const getTaskSQL = taskSelect + `
WHERE task_id = $1`

const listTasksSQL = taskSelect + `
WHERE task_id > $1
  AND ($2 = '' OR instance_id = $2)
  AND ($3 = '' OR status = $3)
  AND ($4 = '' OR assignee = $4)
  AND (NOT $5 OR assignee = '')
  AND (coalesce(cardinality($6::text[]), 0) = 0 OR roles && $6)
ORDER BY task_id
LIMIT $7`

const listTaskEventsSQL = `
SELECT instance_id, task_id, seq, kind, actor, at, assignee, detail
FROM {{schema}}.human_task_events
WHERE part = $3 AND instance_id = $1 AND ($2 = '' OR task_id = $2)
ORDER BY seq, task_id`

const getCustomSQL = `
SELECT version, seq, data FROM {{schema}}.custom_projections WHERE part = $3 AND instance_id = $1 AND name = $2`

// resetInstanceSQL clears the snapshot and record of an instance, keeping
// its queue state and incident.
var resetInstanceSQL = func() string {
	sql := `
UPDATE {{schema}}.instances SET snapshot = NULL, snapshot_seq = 0, record_seq = NULL`
	for _, c := range recordColumns {
		sql += ", " + c + " = NULL"
	}
	return sql + `
WHERE part = $2 AND instance_id = $1`
}()

const (
	resetTasksSQL      = `DELETE FROM {{schema}}.human_tasks WHERE part = $2 AND instance_id = $1`
	resetTaskEventsSQL = `DELETE FROM {{schema}}.human_task_events WHERE part = $2 AND instance_id = $1`
	resetCustomSQL     = `DELETE FROM {{schema}}.custom_projections WHERE part = $3 AND instance_id = $1 AND name = ANY($2)`
)

// purgeLockSQL locks the row of an instance to purge, unless a round
// holds it (FOR NO KEY UPDATE) or an enqueue to the instance has not
// committed (FOR KEY SHARE): a purge cannot see that enqueue's message,
// which would outlive the instance. Enqueues that come later wait for the
// purge to end.
const purgeLockSQL = `
SELECT record_seq IS NOT NULL, coalesce(status, ''), coalesce(execution_id, '') FROM {{schema}}.instances WHERE part = $2 AND instance_id = $1
FOR UPDATE SKIP LOCKED`

// purgeMessagesSQL reads the queued messages of an instance to purge,
// whose row the purge holds (so no enqueue adds one meanwhile).
const purgeMessagesSQL = `
SELECT envelope FROM {{schema}}.messages WHERE instance_id = $1 AND {{check part = $2}} ORDER BY seq`

const purgeProbeSQL = `
SELECT EXISTS (SELECT 1 FROM {{schema}}.instances WHERE part = $2 AND instance_id = $1 AND record_seq IS NOT NULL),
       EXISTS (SELECT 1 FROM {{schema}}.history WHERE part = $2 AND instance_id = $1)`

const purgeTailSQL = `
SELECT seq, hash FROM {{schema}}.history WHERE part = $2 AND instance_id = $1 ORDER BY seq DESC LIMIT 1`

// purgeSQL deletes everything of an instance; $1 is its id, $2 its
// partition.
var purgeSQL = []string{
	`DELETE FROM {{schema}}.history WHERE part = $2 AND instance_id = $1`,
	`DELETE FROM {{schema}}.messages WHERE instance_id = $1 AND {{check part = $2}}`,
	`DELETE FROM {{schema}}.activity_tasks WHERE instance_id = $1 AND {{check part = $2}}`,
	`DELETE FROM {{schema}}.activity_task_ids WHERE part = $2 AND instance_id = $1`,
	`DELETE FROM {{schema}}.dead_letters WHERE part = $2 AND instance_id = $1`,
	resetTasksSQL, resetTaskEventsSQL,
	`DELETE FROM {{schema}}.custom_projections WHERE part = $2 AND instance_id = $1`,
	`DELETE FROM {{schema}}.instances WHERE part = $2 AND instance_id = $1`,
}

// tombstoneSQL adds the tombstone of a purge; those of earlier purges of
// the id stay.
const tombstoneSQL = `
INSERT INTO {{schema}}.tombstones (part, instance_id, last_seq, last_hash, purged_at, purged_by)
VALUES ($6, $1, $2, $3, $4, $5)`

const getTombstoneSQL = `
SELECT last_seq, last_hash, purged_at, purged_by FROM {{schema}}.tombstones WHERE part = $2 AND instance_id = $1
ORDER BY seq DESC LIMIT 1`

const listTombstonesSQL = `
SELECT last_seq, last_hash, purged_at, purged_by FROM {{schema}}.tombstones WHERE part = $2 AND instance_id = $1
ORDER BY seq`

// terminalStatuses are the statuses of ended instances.
var terminalStatuses = func() []string {
	var out []string
	for _, st := range []provider.Status{provider.StatusRunning, provider.StatusSuspended, provider.StatusCompleted, provider.StatusFailed, provider.StatusTerminated} {
		if st.Terminal() {
			out = append(out, string(st))
		}
	}
	return out
}()

func limitOf(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

// scanTask reads the columns of taskSelect.
func scanTask(row pgx.Row) (*provider.TaskRecord, error) {
	var (
		t                                provider.TaskRecord
		status                           string
		due, created, updated, completed *time.Time
	)
	if err := row.Scan(&t.TaskID, &t.InstanceID, &t.ExecutionID, &t.Name, &status, &t.Assignee, &t.Roles,
		&t.Payload, &t.Result, &due, &created, &updated, &completed, &t.Seq); err != nil {
		return nil, err
	}
	t.Status = provider.TaskStatus(status)
	t.Due, t.CreatedAt, t.UpdatedAt, t.CompletedAt = fromNullTime(due), fromNullTime(created), fromNullTime(updated), fromNullTime(completed)
	return &t, nil
}

// GetTask implements provider.Store.
func (s *Store) GetTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, s.sql.getTask, taskID))
	if err != nil {
		return nil, failf(err, "task %s", taskID)
	}
	return t, nil
}

// ListTasks implements provider.Store.
func (s *Store) ListTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	rows, err := s.pool.Query(ctx, s.sql.listTasks, p.AfterID, p.InstanceID, string(p.Status), p.Assignee,
		p.Unassigned, p.Roles, limitOf(p.Limit))
	if err != nil {
		return nil, failf(err, "list tasks")
	}
	defer rows.Close()
	var out []provider.TaskRecord
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, failf(err, "list tasks")
		}
		out = append(out, *t)
	}
	return out, failf(rows.Err(), "list tasks")
}

// ListTaskEvents implements provider.Store.
func (s *Store) ListTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	rows, err := s.pool.Query(ctx, s.sql.listTaskEvents, p.InstanceID, p.TaskID, s.part(p.InstanceID))
	if err != nil {
		return nil, failf(err, "list task events of %s", p.InstanceID)
	}
	defer rows.Close()
	var out []provider.TaskEventRecord
	for rows.Next() {
		var (
			e    provider.TaskEventRecord
			kind string
			at   *time.Time
		)
		if err := rows.Scan(&e.InstanceID, &e.TaskID, &e.Seq, &kind, &e.Actor, &at, &e.Assignee, &e.Detail); err != nil {
			return nil, failf(err, "list task events of %s", p.InstanceID)
		}
		e.Kind, e.At = history.Kind(kind), fromNullTime(at)
		out = append(out, e)
	}
	return out, failf(rows.Err(), "list task events of %s", p.InstanceID)
}

// GetCustomProjection implements provider.Store.
func (s *Store) GetCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	c := &provider.CustomRecord{Name: name, InstanceID: instanceID}
	var version int32
	if err := s.pool.QueryRow(ctx, s.sql.getCustom, instanceID, name, s.part(instanceID)).Scan(&version, &c.Seq, &c.Data); err != nil {
		return nil, failf(err, "projection %s of %s", name, instanceID)
	}
	c.Version = int(version)
	return c, nil
}

// resetProjections deletes an instance's projections in one round trip.
func (s *Store) resetProjections(ctx context.Context, db dbtx, p *provider.ResetProjectionsParams) error {
	b := &pgx.Batch{}
	part := s.part(p.InstanceID)
	b.Queue(s.sql.resetInstance, p.InstanceID, part)
	b.Queue(s.sql.resetTasks, p.InstanceID, part)
	b.Queue(s.sql.resetTaskEvents, p.InstanceID, part)
	if len(p.Custom) > 0 {
		b.Queue(s.sql.resetCustom, p.InstanceID, p.Custom, part)
	}
	return failf(db.SendBatch(ctx, b).Close(), "reset projections of %s", p.InstanceID)
}

// PurgeInstance implements provider.Store in one transaction. The instance
// row is locked without waiting: an instance in a round is not purged
// (ErrInvalidState).
func (s *Store) PurgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	if p.OnlyUnfinished {
		// A purge is one transaction: none is ever unfinished.
		return nil, fmt.Errorf("postgres: purge %s: %w: no purge of it is unfinished", p.InstanceID, provider.ErrNotFound)
	}
	var ts *provider.Tombstone
	err := s.inTx(ctx, "purge "+p.InstanceID, func(tx pgx.Tx) error {
		var (
			hasRecord bool
			status    string
			exec      string
		)
		part := s.part(p.InstanceID)
		err := tx.QueryRow(ctx, s.sql.purgeLock, p.InstanceID, part).Scan(&hasRecord, &status, &exec)
		if errors.Is(err, pgx.ErrNoRows) {
			// No row, or a row a round holds.
			var hasHistory bool
			if err := tx.QueryRow(ctx, s.sql.purgeProbe, p.InstanceID, part).Scan(&hasRecord, &hasHistory); err != nil {
				return failf(err, "purge %s", p.InstanceID)
			}
			if !hasRecord && !hasHistory {
				return fmt.Errorf("postgres: purge %s: %w", p.InstanceID, provider.ErrNotFound)
			}
			return fmt.Errorf("postgres: purge %s: %w: the instance has not ended, is in a round or is being sent a message", p.InstanceID, provider.ErrInvalidState)
		}
		if err != nil {
			return failf(err, "purge %s", p.InstanceID)
		}
		if !hasRecord {
			var hasHistory bool
			if err := tx.QueryRow(ctx, s.sql.purgeProbe, p.InstanceID, part).Scan(&hasRecord, &hasHistory); err != nil {
				return failf(err, "purge %s", p.InstanceID)
			}
			if !hasHistory {
				return fmt.Errorf("postgres: purge %s: %w", p.InstanceID, provider.ErrNotFound)
			}
		}
		if !hasRecord || !provider.Status(status).Terminal() {
			return fmt.Errorf("postgres: purge %s: %w: the instance has not ended", p.InstanceID, provider.ErrInvalidState)
		}
		if err := s.purgeHeld(ctx, tx, p.InstanceID); err != nil {
			return err
		}
		if err := s.purgeKeepsNextRun(ctx, tx, p.InstanceID, exec); err != nil {
			return err
		}
		ts = &provider.Tombstone{InstanceID: p.InstanceID, PurgedAt: p.Now, PurgedBy: p.By}
		err = tx.QueryRow(ctx, s.sql.purgeTail, p.InstanceID, part).Scan(&ts.LastSeq, &ts.LastHash)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return failf(err, "purge %s", p.InstanceID)
		}
		b := &pgx.Batch{}
		for _, sql := range s.sql.purge {
			b.Queue(sql, p.InstanceID, part)
		}
		b.Queue(s.sql.tombstone, p.InstanceID, ts.LastSeq, ts.LastHash, nullTime(p.Now), p.By, part)
		return failf(tx.SendBatch(ctx, b).Close(), "purge %s", p.InstanceID)
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// purgeKeepsNextRun refuses the purge of an ended instance while a queued
// message starts its next run (an execution other than exec, the ended
// one: a client's restart, or a parent starting a child under an ended
// child's id): the purge would delete it.
func (s *Store) purgeKeepsNextRun(ctx context.Context, tx pgx.Tx, instanceID, exec string) error {
	rows, err := tx.Query(ctx, s.sql.purgeMessages, instanceID, s.part(instanceID))
	if err != nil {
		return failf(err, "purge %s", instanceID)
	}
	envs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return failf(err, "purge %s", instanceID)
	}
	for _, env := range envs {
		m, err := provider.UnmarshalMessage(env)
		if err != nil {
			// An undecodable message is dead-lettered by its round; it
			// starts nothing.
			continue
		}
		if provider.StartsNextRun(&m, exec) {
			return fmt.Errorf("postgres: purge %s: %w: message %s starts its next run", instanceID, provider.ErrInvalidState, m.ID)
		}
		if m.Kind.IsRecord() {
			return fmt.Errorf("postgres: purge %s: %w: message %s records a legal hold", instanceID, provider.ErrInvalidState, m.ID)
		}
	}
	return nil
}

// GetTombstone implements provider.Store.
func (s *Store) GetTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	ts := &provider.Tombstone{InstanceID: instanceID}
	var purgedAt *time.Time
	err := s.pool.QueryRow(ctx, s.sql.getTombstone, instanceID, s.part(instanceID)).Scan(&ts.LastSeq, &ts.LastHash, &purgedAt, &ts.PurgedBy)
	if err != nil {
		return nil, failf(err, "tombstone of %s", instanceID)
	}
	ts.PurgedAt = fromNullTime(purgedAt)
	return ts, nil
}

// ListTombstones implements provider.Store.
func (s *Store) ListTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	rows, err := s.pool.Query(ctx, s.sql.listTombstones, instanceID, s.part(instanceID))
	if err != nil {
		return nil, failf(err, "tombstones of %s", instanceID)
	}
	defer rows.Close()
	var out []provider.Tombstone
	for rows.Next() {
		ts := provider.Tombstone{InstanceID: instanceID}
		var purgedAt *time.Time
		if err := rows.Scan(&ts.LastSeq, &ts.LastHash, &purgedAt, &ts.PurgedBy); err != nil {
			return nil, failf(err, "tombstones of %s", instanceID)
		}
		ts.PurgedAt = fromNullTime(purgedAt)
		out = append(out, ts)
	}
	return out, failf(rows.Err(), "tombstones of %s", instanceID)
}

// ResetProjections implements provider.Steps.
func (t *roundTx) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	return t.step(func() error { return t.s.resetProjections(ctx, t.tx, p) })
}
