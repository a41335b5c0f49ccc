package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// recordColumns are the columns of the instance record, in the order of
// saveInstanceSQL's parameters $5 onwards.
var recordColumns = []string{
	"execution_id", "name", "version", "status", "business_key", "business_parts", "custom_status",
	"parent_id", "created_at", "updated_at", "completed_at", "output", "failure", "last_error",
	"attrs", "custom_status_text",
}

// saveInstanceSQL upserts the snapshot ($2, folded to $3) and the record
// (folded to $4, NULL when unchanged) of an instance in one row version,
// each only when newer than the stored one.
var saveInstanceSQL = func() string {
	const (
		snapNew = `(EXCLUDED.snapshot IS NOT NULL AND EXCLUDED.snapshot_seq > i.snapshot_seq)`
		recNew  = `(EXCLUDED.record_seq IS NOT NULL AND (i.record_seq IS NULL OR EXCLUDED.record_seq > i.record_seq))`
	)
	params := make([]string, len(recordColumns))
	sets := []string{
		"snapshot = CASE WHEN " + snapNew + " THEN EXCLUDED.snapshot ELSE i.snapshot END",
		"snapshot_seq = CASE WHEN " + snapNew + " THEN EXCLUDED.snapshot_seq ELSE i.snapshot_seq END",
		"record_seq = CASE WHEN " + recNew + " THEN EXCLUDED.record_seq ELSE i.record_seq END",
	}
	for n, c := range recordColumns {
		params[n] = fmt.Sprintf("$%d", n+5)
		sets = append(sets, fmt.Sprintf("%s = CASE WHEN %s THEN EXCLUDED.%s ELSE i.%s END", c, recNew, c, c))
	}
	return `
INSERT INTO {{schema}}.instances AS i (part, instance_id, snapshot, snapshot_seq, record_seq, ` + strings.Join(recordColumns, ", ") + `)
VALUES ($` + strconv.Itoa(len(recordColumns)+5) + `, $1, $2, $3, $4, ` + strings.Join(params, ", ") + `)
ON CONFLICT (instance_id) DO UPDATE SET
    ` + strings.Join(sets, ",\n    ") + `
WHERE ` + snapNew + ` OR ` + recNew
}()

const saveTaskSQL = `
INSERT INTO {{schema}}.human_tasks AS t (part, instance_id, task_id, execution_id, name, status, assignee, roles,
    payload, result, due, created_at, updated_at, completed_at, seq)
VALUES ($15, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (task_id) DO UPDATE SET
    part = EXCLUDED.part, instance_id = EXCLUDED.instance_id, execution_id = EXCLUDED.execution_id, name = EXCLUDED.name, status = EXCLUDED.status,
    assignee = EXCLUDED.assignee, roles = EXCLUDED.roles, payload = EXCLUDED.payload,
    result = EXCLUDED.result, due = EXCLUDED.due, created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at, completed_at = EXCLUDED.completed_at, seq = EXCLUDED.seq
WHERE EXCLUDED.seq > t.seq AND t.instance_id = EXCLUDED.instance_id`

// takenTaskSQL finds a task id of $1 that another instance than $2 has. It
// runs after the task upserts, as a statement of its own, so that under
// READ COMMITTED it sees a task a concurrent round committed while an
// upsert waited for it.
const takenTaskSQL = `
SELECT task_id, instance_id FROM {{schema}}.human_tasks
WHERE task_id = ANY ($1::text[]) AND instance_id <> $2
ORDER BY task_id
LIMIT 1`

const saveTaskEventSQL = `
INSERT INTO {{schema}}.human_task_events (part, instance_id, seq, task_id, kind, actor, at, assignee, detail)
VALUES ($9, $1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (instance_id, seq, task_id) DO NOTHING`

// saveCustomSQL writes a custom record when it replaces the stored one
// (see provider.CustomRecord.Replaces).
const saveCustomSQL = `
INSERT INTO {{schema}}.custom_projections AS c (part, instance_id, name, version, seq, data)
VALUES ($6, $1, $2, $3, $4, $5)
ON CONFLICT (instance_id, name) DO UPDATE SET version = EXCLUDED.version, seq = EXCLUDED.seq, data = EXCLUDED.data
WHERE (EXCLUDED.version = c.version AND EXCLUDED.seq > c.seq) OR (EXCLUDED.version > c.version AND EXCLUDED.seq >= c.seq)`

// recordSelect reads an instance record; scanRecord takes its columns.
const recordSelect = `
SELECT ` + recordColumnsSQL + `
FROM {{schema}}.instances`

const getInstanceSQL = recordSelect + `
WHERE part = $2 AND instance_id = $1 AND record_seq IS NOT NULL`

// getInstanceHoldSQL is getInstanceSQL with the instance's legal hold,
// if any, in the same row (provider.InstanceHoldReader).
const getInstanceHoldSQL = `
SELECT r.*, h.hold_id, h.reason, h.actor, h.ticket, h.placed_at
FROM (` + getInstanceSQL + `) AS r
LEFT JOIN LATERAL (
    SELECT hold_id, reason, actor, ticket, placed_at FROM {{schema}}.legal_holds WHERE part = $2 AND instance_id = $1
) AS h ON true`

const getSnapshotSQL = `
SELECT snapshot, snapshot_seq FROM {{schema}}.instances WHERE part = $2 AND instance_id = $1 AND snapshot IS NOT NULL`

// nullTime maps the zero time to NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// fromNullTime maps NULL to the zero time and others to UTC.
func fromNullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// saveProjections queues the writes of p on one batch: one round trip.
func (s *Store) saveProjections(ctx context.Context, db dbtx, p *provider.Projections) error {
	b := &pgx.Batch{}
	var (
		snapshot    []byte
		snapshotSeq int64
		recordSeq   *int64
		rec         = make([]any, len(recordColumns))
	)
	if p.Snapshot != nil && p.Seq > 0 {
		snapshot, snapshotSeq = p.Snapshot, p.Seq
	}
	if r := p.Instance; r != nil {
		seq := p.Seq
		recordSeq = &seq
		var parts, failure []byte
		var err error
		if r.BusinessParts != nil {
			if parts, err = json.Marshal(r.BusinessParts); err != nil {
				return fmt.Errorf("postgres: encode business parts of %s: %w", p.InstanceID, err)
			}
		}
		if r.Failure != nil {
			if failure, err = history.Encode(r.Failure); err != nil {
				return fmt.Errorf("postgres: encode failure of %s: %w", p.InstanceID, err)
			}
		}
		attrs, err := encodeAttrs(r.Attributes)
		if err != nil {
			return fmt.Errorf("postgres: encode search attributes of %s: %w", p.InstanceID, err)
		}
		rec = []any{
			r.ExecutionID, r.Name, r.Version, string(r.Status), r.BusinessKey, parts, r.CustomStatus,
			r.ParentID, nullTime(r.CreatedAt), nullTime(r.UpdatedAt), nullTime(r.CompletedAt), r.Output, failure, r.LastError,
			attrs, r.CustomStatusText,
		}
	}
	part := s.part(p.InstanceID)
	if snapshot != nil || recordSeq != nil {
		b.Queue(s.sql.saveInstance, append(append([]any{p.InstanceID, snapshot, snapshotSeq, recordSeq}, rec...), part)...)
	}
	for _, t := range p.Tasks {
		b.Queue(s.sql.saveTask, p.InstanceID, t.TaskID, t.ExecutionID, t.Name, string(t.Status), t.Assignee, t.Roles,
			t.Payload, t.Result, nullTime(t.Due), nullTime(t.CreatedAt), nullTime(t.UpdatedAt), nullTime(t.CompletedAt), t.Seq, part)
	}
	if len(p.Tasks) > 0 {
		ids := make([]string, len(p.Tasks))
		for i, t := range p.Tasks {
			ids[i] = t.TaskID
		}
		b.Queue(s.sql.takenTask, ids, p.InstanceID).QueryRow(func(row pgx.Row) error {
			var taskID, owner string
			err := row.Scan(&taskID, &owner)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			return &provider.TaskIDTakenError{TaskID: taskID, InstanceID: p.InstanceID, Owner: owner}
		})
	}
	for _, e := range p.TaskEvents {
		b.Queue(s.sql.saveTaskEvent, p.InstanceID, e.Seq, e.TaskID, string(e.Kind), e.Actor, nullTime(e.At), e.Assignee, e.Detail, part)
	}
	for _, c := range p.Custom {
		b.Queue(s.sql.saveCustom, p.InstanceID, c.Name, c.Version, c.Seq, c.Data, part)
	}
	if b.Len() == 0 {
		return nil
	}
	return failf(db.SendBatch(ctx, b).Close(), "save projections of %s", p.InstanceID)
}

// scanRecord reads the columns of recordSelect.
func scanRecord(row pgx.Row, extra ...any) (*provider.InstanceRecord, error) {
	r := &provider.InstanceRecord{}
	var (
		status                      string
		parts, failure, attrs       []byte
		created, updated, completed *time.Time
	)
	err := row.Scan(append([]any{&r.InstanceID, &r.LastSeq, &r.ExecutionID, &r.Name, &r.Version, &status, &r.BusinessKey, &parts,
		&r.CustomStatus, &r.ParentID, &created, &updated, &completed, &r.Output, &failure, &r.LastError, &r.Incident,
		&attrs, &r.CustomStatusText}, extra...)...)
	if err != nil {
		return nil, err
	}
	r.Status = provider.Status(status)
	r.CreatedAt, r.UpdatedAt, r.CompletedAt = fromNullTime(created), fromNullTime(updated), fromNullTime(completed)
	if parts != nil {
		if err := json.Unmarshal(parts, &r.BusinessParts); err != nil {
			return nil, fmt.Errorf("instance %s: decode business parts: %w", r.InstanceID, err)
		}
	}
	if r.Attributes, err = decodeAttrs(attrs); err != nil {
		return nil, fmt.Errorf("instance %s: %w", r.InstanceID, err)
	}
	if failure != nil {
		r.Failure = &history.Failure{}
		if err := history.Decode(failure, r.Failure); err != nil {
			return nil, fmt.Errorf("instance %s: decode failure: %w", r.InstanceID, err)
		}
	}
	return r, nil
}

// GetInstance implements provider.Store.
func (s *Store) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceRecord, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, s.sql.getInstance, instanceID, s.part(instanceID)))
	if err != nil {
		return nil, failf(err, "instance %s", instanceID)
	}
	return r, nil
}

// GetInstanceHold implements provider.InstanceHoldReader in one
// statement.
func (s *Store) GetInstanceHold(ctx context.Context, instanceID string) (*provider.InstanceRecord, *provider.Hold, error) {
	var (
		holdID, reason, actor, ticket *string
		placedAt                      *time.Time
	)
	r, err := scanRecord(s.pool.QueryRow(ctx, s.sql.getInstanceHold, instanceID, s.part(instanceID)),
		&holdID, &reason, &actor, &ticket, &placedAt)
	if err != nil {
		return nil, nil, failf(err, "instance %s", instanceID)
	}
	if holdID == nil {
		return r, nil, nil
	}
	h := &provider.Hold{InstanceID: r.InstanceID, HoldID: *holdID, Reason: *reason, Actor: *actor, Ticket: *ticket}
	if placedAt != nil {
		h.PlacedAt = placedAt.UTC()
	}
	return r, h, nil
}

// GetSnapshot implements provider.Store.
func (s *Store) GetSnapshot(ctx context.Context, instanceID string) ([]byte, int64, error) {
	var (
		data []byte
		seq  int64
	)
	if err := s.pool.QueryRow(ctx, s.sql.getSnapshot, instanceID, s.part(instanceID)).Scan(&data, &seq); err != nil {
		return nil, 0, failf(err, "snapshot of %s", instanceID)
	}
	return data, seq, nil
}
