package oracle

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
)

// letterArgs returns the named binds of insertDeadLetterSQL for l; an
// empty Status is stored as dead.
func letterArgs(l *provider.DeadLetter) ([]any, error) {
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
		named("id", l.ID), named("inst", l.InstanceID), named("message", blobArg(msg)), named("activity", blobArg(task)),
		named("reason", string(l.Reason)), named("error", textArg(l.Error)), named("node", l.Node),
		named("failed", timeArg(l.At)), named("attempts", int64(l.Attempts)), named("status", string(status)),
		named("resolved_by", l.ResolvedBy), named("resolved", timeArg(l.ResolvedAt)),
	}, nil
}

// replaceArg returns args with the value of the named bind name replaced.
func replaceArg(args []any, name string, value any) []any {
	for i, a := range args {
		if na, ok := a.(sql.NamedArg); ok && na.Name == name {
			args[i] = named(name, value)
		}
	}
	return args
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanLetter reads the columns of letterColumnList.
func scanLetter(row rowScanner) (*provider.DeadLetter, error) {
	var (
		l              provider.DeadLetter
		msg, task      []byte
		reason, status string
		attempts       int64
	)
	if err := row.Scan(strScan{&l.ID}, strScan{&l.InstanceID}, &msg, &task, strScan{&reason}, strScan{&l.Error},
		strScan{&l.Node}, timeScan{&l.At}, intScan{&attempts}, strScan{&status}, strScan{&l.ResolvedBy},
		timeScan{&l.ResolvedAt}); err != nil {
		return nil, err
	}
	l.Reason, l.Status, l.Attempts = provider.Reason(reason), provider.DeadLetterStatus(status), int(attempts)
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

// setIncident sets an instance's incident, creating its row if needed.
func (s *Store) setIncident(ctx context.Context, db dbtx, instanceID, incident string) error {
	_, err := db.ExecContext(ctx, s.sql.setIncident, named("inst", instanceID), named("incident", textArg(incident)))
	if isDuplicate(err) {
		// A concurrent transaction created the row: update it.
		_, err = db.ExecContext(ctx, s.sql.setIncident, named("inst", instanceID), named("incident", textArg(incident)))
	}
	return failf(err, "set the incident of %s", instanceID)
}

// deadLetterMessages stores letters, removes their messages from the
// instance's queue and sets its incident to the last letter.
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
// A letter stored before (the same id) is left as it is.
func (s *Store) deadLetterRows(ctx context.Context, db dbtx, instanceID string, letters []provider.DeadLetter, ids []string) error {
	if len(letters) == 0 {
		return nil
	}
	for i := range letters {
		args, err := letterArgs(&letters[i])
		if err != nil {
			return fmt.Errorf("oracle: dead-letter messages of %s: %w", instanceID, err)
		}
		if _, err := db.ExecContext(ctx, s.sql.insertDeadLetter, args...); err != nil && !isDuplicate(err) {
			return failf(err, "dead-letter messages of %s", instanceID)
		}
	}
	if err := s.deleteMessages(ctx, db, instanceID, ids); err != nil {
		return err
	}
	last := letters[len(letters)-1]
	return s.setIncident(ctx, db, instanceID, string(last.Reason)+": "+last.Error)
}

// ListDeadLetters implements provider.DeadLetterStore.
func (s *Store) ListDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listDeadLetters, named("after", p.AfterID), named("inst", p.InstanceID),
		named("status", string(p.Status)), named("lim", int64(limitOf(p.Limit))))
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

// GetDeadLetter implements provider.DeadLetterStore.
func (s *Store) GetDeadLetter(ctx context.Context, id string) (*provider.DeadLetter, error) {
	l, err := scanLetter(s.db.QueryRowContext(ctx, s.sql.selectDeadLetter, named("id", id)))
	if err != nil {
		return nil, failf(err, "dead letter %s", id)
	}
	return l, nil
}

// ResolveDeadLetter implements provider.DeadLetterStore in one transaction
// that locks the dead letter, requeues its item when redriven (or queues
// the failure a discard owes a waiting workflow), records the decision
// and recomputes the instance's incident.
func (s *Store) ResolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	var wakeOrchestration, wakeActivity bool
	err := s.inTx(ctx, "resolve dead letter "+p.ID, func(tx *sql.Tx) error {
		var (
			instanceID           string
			msg, task            []byte
			status, reason, text string
		)
		if err := tx.QueryRowContext(ctx, s.sql.lockDeadLetter, named("id", p.ID)).
			Scan(strScan{&instanceID}, &msg, &task, strScan{&status}, strScan{&reason}, strScan{&text}); err != nil {
			return failf(err, "dead letter %s", p.ID)
		}
		if provider.DeadLetterStatus(status) != provider.DeadLetterDead {
			return fmt.Errorf("oracle: dead letter %s is %s: %w", p.ID, status, provider.ErrInvalidState)
		}
		enqueue := func(m provider.Message) error {
			added, err := s.enqueueMessages(ctx, tx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: p.Now}, nil)
			wakeOrchestration = wakeOrchestration || added
			return err
		}
		switch p.Status {
		case provider.DeadLetterRedriven:
			if msg != nil {
				m, err := provider.UnmarshalMessage(msg)
				if err != nil {
					return fmt.Errorf("oracle: redrive dead letter %s: %w: its message does not decode (%v); discard it", p.ID, provider.ErrInvalidState, err)
				}
				m.Attempts, m.LastError, m.VisibleAt, m.EnqueuedAt = 0, "", p.Now, p.Now
				if err := enqueue(m); err != nil {
					return err
				}
			}
			if task != nil {
				if err := s.redriveTask(ctx, tx, p, task); err != nil {
					return err
				}
				wakeActivity = true
			}
		case provider.DeadLetterDiscarded:
			if task != nil {
				t, err := provider.UnmarshalActivityTask(task)
				if err != nil {
					return fmt.Errorf("oracle: discard dead letter %s: %w", p.ID, err)
				}
				m, err := provider.DiscardedActivityResult(&provider.DeadLetter{ID: p.ID, Activity: &t, Reason: provider.Reason(reason), Error: text}, p.By)
				if err != nil {
					return err
				}
				if err := enqueue(m); err != nil {
					return err
				}
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
						if err := enqueue(n); err != nil {
							return err
						}
					}
				}
			}
		default:
			return fmt.Errorf("oracle: dead letter %s: %w: cannot resolve to %q", p.ID, provider.ErrInvalidState, p.Status)
		}
		if _, err := tx.ExecContext(ctx, s.sql.resolveDeadLetter, named("status", string(p.Status)),
			named("resolved_by", p.By), named("resolved", timeArg(p.Now)), named("id", p.ID)); err != nil {
			return failf(err, "resolve dead letter %s", p.ID)
		}
		if _, err := tx.ExecContext(ctx, s.sql.refreshIncident, named("inst", instanceID)); err != nil {
			return failf(err, "resolve dead letter %s: refresh the incident of %s", p.ID, instanceID)
		}
		if wakeOrchestration || wakeActivity {
			s.enqueueWake(ctx, tx, wakeOrchestration, wakeActivity)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if wakeOrchestration {
		s.wake(provider.QueueOrchestration)
	}
	if wakeActivity {
		s.wake(provider.QueueActivity)
	}
	return nil
}

// redriveTask queues a dead-lettered activity task again as a first
// attempt's fresh delivery: its id stays remembered.
func (s *Store) redriveTask(ctx context.Context, tx *sql.Tx, p *provider.ResolveDeadLetterParams, stored []byte) error {
	t, err := provider.UnmarshalActivityTask(stored)
	if err != nil {
		return fmt.Errorf("oracle: redrive dead letter %s: %w", p.ID, err)
	}
	t.VisibleAt, t.EnqueuedAt, t.LastError = p.Now, p.Now, ""
	env, err := provider.MarshalActivityTask(&t)
	if err != nil {
		return fmt.Errorf("oracle: redrive dead letter %s: %w", p.ID, err)
	}
	if _, err := tx.ExecContext(ctx, s.sql.redriveTaskDelete, named("id", t.ID)); err != nil {
		return failf(err, "redrive dead letter %s", p.ID)
	}
	if _, err := tx.ExecContext(ctx, s.sql.insertTaskID, named("id", t.ID), named("inst", t.InstanceID)); err != nil && !isDuplicate(err) {
		return failf(err, "redrive dead letter %s", p.ID)
	}
	_, err = tx.ExecContext(ctx, s.sql.insertTask, taskArgs(&t, env)...)
	return failf(err, "redrive dead letter %s", p.ID)
}
