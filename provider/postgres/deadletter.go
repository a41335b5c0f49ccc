package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider"
)

// letterColumnList are the stored columns of a dead letter, in the order
// of letterColumns.
const letterColumnList = `id, instance_id, message, activity, reason, error, node, at, attempts, status, resolved_by, resolved_at`

const insertDeadLetterSQL = `
INSERT INTO {{schema}}.dead_letters (part, ` + letterColumnList + `)
VALUES ($13, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (id) DO NOTHING`

const setIncidentSQL = `
INSERT INTO {{schema}}.instances (part, instance_id, incident) VALUES ($3, $1, $2)
ON CONFLICT (instance_id) DO UPDATE SET incident = EXCLUDED.incident`

const lockDeadLetterSQL = `
SELECT instance_id, message, activity, status, reason, error FROM {{schema}}.dead_letters WHERE id = $1 FOR UPDATE`

const resolveDeadLetterSQL = `
UPDATE {{schema}}.dead_letters SET status = $2, resolved_by = $3, resolved_at = $4 WHERE id = $1`

// refreshIncidentSQL sets an instance's incident to its newest unresolved
// dead letter (by time, then id), or clears it.
const refreshIncidentSQL = `
UPDATE {{schema}}.instances SET incident = coalesce((
    SELECT d.reason || ': ' || d.error
    FROM {{schema}}.dead_letters d
    WHERE d.part = $2 AND d.instance_id = $1 AND d.status = 'dead'
    ORDER BY d.at DESC NULLS LAST, d.id DESC
    LIMIT 1), '')
WHERE part = $2 AND instance_id = $1`

const redriveTaskDeleteSQL = `
DELETE FROM {{schema}}.activity_tasks WHERE id = $1 AND {{check part = $2}}`

const redriveTaskIDsSQL = `
INSERT INTO {{schema}}.activity_task_ids (part, id, instance_id) VALUES ($3, $1, $2) ON CONFLICT DO NOTHING`

const redriveTaskInsertSQL = `
INSERT INTO {{schema}}.activity_tasks (part, id, instance_id, execution_id, queue, ready_at, envelope,
    priority, order_at, name, concurrency_key, concurrency_limit)
VALUES ($12, $1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10::text, ''), CASE WHEN $10::text <> '' THEN $11::int END)`

const selectDeadLetterSQL = `
SELECT ` + letterColumnList + ` FROM {{schema}}.dead_letters WHERE id = $1`

const listDeadLettersSQL = `
SELECT ` + letterColumnList + `
FROM {{schema}}.dead_letters
WHERE id > $1 AND ($2 = '' OR instance_id = $2) AND ($3 = '' OR status = $3)
ORDER BY id
LIMIT $4`

// letterColumns returns the stored columns of l; an empty Status is
// stored as dead.
func letterColumns(l *provider.DeadLetter) ([]any, error) {
	// The message column keeps the bytes of an undecodable message.
	msg, task := l.Raw, []byte(nil)
	var err error
	if l.Message != nil {
		if msg, err = provider.MarshalMessage(l.Message); err != nil {
			return nil, fmt.Errorf("encode message of dead letter %s: %w", l.ID, err)
		}
	}
	if l.Activity != nil {
		if task, err = provider.MarshalActivityTask(l.Activity); err != nil {
			return nil, fmt.Errorf("encode activity task of dead letter %s: %w", l.ID, err)
		}
	}
	status := l.Status
	if status == "" {
		status = provider.DeadLetterDead
	}
	return []any{
		l.ID, l.InstanceID, msg, task, string(l.Reason), l.Error, l.Node, nullTime(l.At), int32(l.Attempts),
		string(status), l.ResolvedBy, nullTime(l.ResolvedAt),
	}, nil
}

// scanLetter reads the columns of letterColumnList.
func scanLetter(row pgx.Row) (*provider.DeadLetter, error) {
	var (
		l              provider.DeadLetter
		msg, task      []byte
		reason, status string
		at, resolvedAt *time.Time
		attempts       int32
	)
	if err := row.Scan(&l.ID, &l.InstanceID, &msg, &task, &reason, &l.Error, &l.Node, &at, &attempts,
		&status, &l.ResolvedBy, &resolvedAt); err != nil {
		return nil, err
	}
	l.Reason, l.Status, l.Attempts = provider.Reason(reason), provider.DeadLetterStatus(status), int(attempts)
	l.At, l.ResolvedAt = fromNullTime(at), fromNullTime(resolvedAt)
	if msg != nil {
		// Bytes that do not decode are shown as they are: listing dead
		// letters must not fail on the letter of an undecodable message.
		if m, err := provider.UnmarshalMessage(msg); err != nil {
			l.Raw = msg
		} else {
			l.Message = &m
		}
	}
	if task != nil {
		t, err := provider.UnmarshalActivityTask(task)
		if err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", l.ID, err)
		}
		l.Activity = &t
	}
	return &l, nil
}

// deadLetterMessages stores letters, removes their messages from the
// instance's queue and sets its incident to the last letter, in one round
// trip.
func (s *Store) deadLetterMessages(ctx context.Context, db dbtx, instanceID string, letters []provider.DeadLetter) error {
	var ids []string
	for i := range letters {
		if m := letters[i].Message; m != nil {
			ids = append(ids, m.ID)
		}
	}
	return s.deadLetterRows(ctx, db, instanceID, letters, ids)
}

// deadLetterRows is deadLetterMessages with the ids of the message rows
// to remove given: those of undecodable rows are not in their letters.
func (s *Store) deadLetterRows(ctx context.Context, db dbtx, instanceID string, letters []provider.DeadLetter, ids []string) error {
	if len(letters) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for i := range letters {
		cols, err := letterColumns(&letters[i])
		if err != nil {
			return fmt.Errorf("postgres: dead-letter messages of %s: %w", instanceID, err)
		}
		b.Queue(s.sql.insertDeadLetter, append(cols, s.part(letters[i].InstanceID))...)
	}
	part := s.part(instanceID)
	b.Queue(s.sql.ackMessages, instanceID, ids, part)
	last := letters[len(letters)-1]
	b.Queue(s.sql.setIncident, instanceID, string(last.Reason)+": "+last.Error, part)
	return failf(db.SendBatch(ctx, b).Close(), "dead-letter messages of %s", instanceID)
}

// ListDeadLetters implements provider.Store.
func (s *Store) ListDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, s.sql.listDeadLetters, p.AfterID, p.InstanceID, string(p.Status), limit)
	if err != nil {
		return nil, failf(err, "list dead letters")
	}
	defer rows.Close()
	var out []provider.DeadLetter
	for rows.Next() {
		l, err := scanLetter(rows)
		if err != nil {
			return nil, failf(err, "list dead letters")
		}
		out = append(out, *l)
	}
	return out, failf(rows.Err(), "list dead letters")
}

// GetDeadLetter implements provider.Store.
func (s *Store) GetDeadLetter(ctx context.Context, id string) (*provider.DeadLetter, error) {
	l, err := scanLetter(s.pool.QueryRow(ctx, s.sql.selectDeadLetter, id))
	if err != nil {
		return nil, failf(err, "dead letter %s", id)
	}
	return l, nil
}

// ResolveDeadLetter implements provider.Store in one transaction that locks
// the dead letter, requeues its item when redriven, records the decision
// and recomputes the instance's incident.
func (s *Store) ResolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	var wakeOrchestration, wakeActivity bool
	err := s.inTx(ctx, "resolve dead letter "+p.ID, func(tx pgx.Tx) error {
		var (
			instanceID           string
			msg, task            []byte
			status, reason, text string
		)
		args := []any{p.ID}
		if s.citus {
			var part int32
			if err := tx.QueryRow(ctx, s.sql.citusDeadLetterPart, p.ID).Scan(&part); err != nil {
				return failf(err, "dead letter %s", p.ID)
			}
			args = append(args, part)
		}
		if err := tx.QueryRow(ctx, s.sql.lockDeadLetter, args...).Scan(&instanceID, &msg, &task, &status, &reason, &text); err != nil {
			return failf(err, "dead letter %s", p.ID)
		}
		if provider.DeadLetterStatus(status) != provider.DeadLetterDead {
			return fmt.Errorf("postgres: dead letter %s is %s: %w", p.ID, status, provider.ErrInvalidState)
		}
		switch p.Status {
		case provider.DeadLetterRedriven:
			if msg != nil {
				m, err := provider.UnmarshalMessage(msg)
				if err != nil {
					return fmt.Errorf("postgres: redrive dead letter %s: %w: its message does not decode (%v); discard it", p.ID, provider.ErrInvalidState, err)
				}
				m.Attempts, m.LastError, m.VisibleAt, m.EnqueuedAt = 0, "", p.Now, p.Now
				parts, err := s.enqueueMessages(ctx, tx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: p.Now})
				if err != nil {
					return err
				}
				wakeOrchestration = parts != nil
			}
			if task != nil {
				t, err := provider.UnmarshalActivityTask(task)
				if err != nil {
					return fmt.Errorf("postgres: redrive dead letter %s: %w", p.ID, err)
				}
				t.VisibleAt, t.EnqueuedAt, t.LastError = p.Now, p.Now, ""
				env, err := provider.MarshalActivityTask(&t)
				if err != nil {
					return fmt.Errorf("postgres: redrive dead letter %s: %w", p.ID, err)
				}
				b := &pgx.Batch{}
				part := s.part(t.InstanceID)
				b.Queue(s.sql.redriveTaskDelete, t.ID, part)
				b.Queue(s.sql.redriveTaskIDs, t.ID, t.InstanceID, part)
				b.Queue(s.sql.redriveTaskInsert, t.ID, t.InstanceID, t.ExecutionID, t.Queue, t.VisibleAt, env,
					int32(t.Priority), provider.OrderAt(t.VisibleAt, t.Priority), t.Name, t.ConcurrencyKey, int32(t.ConcurrencyLimit), part)
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return failf(err, "redrive dead letter %s", p.ID)
				}
				wakeActivity = true
			}
		case provider.DeadLetterDiscarded:
			if task != nil {
				t, err := provider.UnmarshalActivityTask(task)
				if err != nil {
					return fmt.Errorf("postgres: discard dead letter %s: %w", p.ID, err)
				}
				m, err := provider.DiscardedActivityResult(&provider.DeadLetter{ID: p.ID, Activity: &t, Reason: provider.Reason(reason), Error: text}, p.By)
				if err != nil {
					return err
				}
				parts, err := s.enqueueMessages(ctx, tx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: p.Now})
				if err != nil {
					return err
				}
				wakeOrchestration = parts != nil
			}
			if msg != nil {
				// An undecodable message tells nobody anything; a child's
				// start fails its parent's sub-workflow.
				if m, err := provider.UnmarshalMessage(msg); err == nil {
					n, ok, err := provider.DiscardedSubWorkflowResult(&provider.DeadLetter{ID: p.ID, Message: &m, Reason: provider.Reason(reason), Error: text}, p.By)
					if err != nil {
						return err
					}
					if ok {
						parts, err := s.enqueueMessages(ctx, tx, &provider.EnqueueMessagesParams{Messages: []provider.Message{n}, Now: p.Now})
						if err != nil {
							return err
						}
						wakeOrchestration = wakeOrchestration || parts != nil
					}
				}
			}
		default:
			return fmt.Errorf("postgres: dead letter %s: %w: cannot resolve to %q", p.ID, provider.ErrInvalidState, p.Status)
		}
		b := &pgx.Batch{}
		b.Queue(s.sql.resolveDeadLetter, p.ID, string(p.Status), p.By, nullTime(p.Now))
		b.Queue(s.sql.refreshIncident, instanceID, s.part(instanceID))
		return failf(tx.SendBatch(ctx, b).Close(), "resolve dead letter %s", p.ID)
	})
	if err != nil {
		return err
	}
	if wakeOrchestration {
		s.announce(provider.QueueOrchestration, nil)
	}
	if wakeActivity {
		s.announce(provider.QueueActivity, nil)
	}
	return nil
}
