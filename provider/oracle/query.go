package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// ListInstances implements provider.QueryStore.
func (s *Store) ListInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	terminal := int64(0)
	if p.Terminal {
		terminal = 1
	}
	text, args, err := s.withWhere(s.sql.listInstances, p.Where)
	if err != nil {
		return nil, err
	}
	args = append(args, named("after", p.AfterID), named("status", string(p.Status)),
		named("name", p.Name), named("bkey", p.BusinessKey), named("cfrom", timeArg(p.CreatedFrom)),
		named("cto", timeArg(p.CreatedTo)), named("ubefore", timeArg(p.UpdatedBefore)),
		named("terminal", terminal), named("lim", int64(limitOf(p.Limit))))
	rows, err := s.db.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, failf(err, "list instances")
	}
	defer rows.Close()
	var out []*provider.InstanceRecord
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, failf(err, "list instances")
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, failf(err, "list instances")
	}
	if err := s.loadAttributes(ctx, out); err != nil {
		return nil, err
	}
	recs := make([]provider.InstanceRecord, len(out))
	for i, r := range out {
		recs[i] = *r
	}
	return recs, nil
}

// scanTask reads the columns of taskSelect.
func scanTask(row rowScanner) (*provider.TaskRecord, error) {
	var (
		t      provider.TaskRecord
		status string
		roles  []byte
	)
	if err := row.Scan(strScan{&t.TaskID}, strScan{&t.InstanceID}, strScan{&t.ExecutionID}, strScan{&t.Name},
		strScan{&status}, strScan{&t.Assignee}, &roles, &t.Payload, &t.Result, timeScan{&t.Due},
		timeScan{&t.CreatedAt}, timeScan{&t.UpdatedAt}, timeScan{&t.CompletedAt}, intScan{&t.Seq}); err != nil {
		return nil, err
	}
	t.Status = provider.TaskStatus(status)
	if roles != nil {
		if err := history.Decode(roles, &t.Roles); err != nil {
			return nil, fmt.Errorf("task %s: decode roles: %w", t.TaskID, err)
		}
	}
	return &t, nil
}

// GetTask implements provider.QueryStore.
func (s *Store) GetTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	t, err := scanTask(s.db.QueryRowContext(ctx, s.sql.getTask, named("task_id", taskID)))
	if err != nil {
		return nil, failf(err, "task %s", taskID)
	}
	return t, nil
}

// ListTasks implements provider.QueryStore.
func (s *Store) ListTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	roles, anyRole := p.Roles, int64(1)
	if len(roles) == 0 {
		roles, anyRole = []string{noMatch}, 0
	}
	if len(roles) > maxListLength {
		return nil, fmt.Errorf("oracle: list tasks: %d roles, at most %d", len(roles), maxListLength)
	}
	unassigned := int64(0)
	if p.Unassigned {
		unassigned = 1
	}
	query, args := expandList(s.sql.listTasks, "roles", roles)
	args = append(args, named("after", p.AfterID), named("inst", p.InstanceID), named("status", string(p.Status)),
		named("assignee", p.Assignee), named("unassigned", unassigned), named("any_role", anyRole),
		named("lim", int64(limitOf(p.Limit))))
	rows, err := s.db.QueryContext(ctx, query, args...)
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

// ListTaskEvents implements provider.QueryStore.
func (s *Store) ListTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listTaskEvents, named("inst", p.InstanceID), named("task_id", p.TaskID))
	if err != nil {
		return nil, failf(err, "list task events of %s", p.InstanceID)
	}
	defer rows.Close()
	var out []provider.TaskEventRecord
	for rows.Next() {
		var (
			e    provider.TaskEventRecord
			kind string
		)
		if err := rows.Scan(strScan{&e.InstanceID}, strScan{&e.TaskID}, intScan{&e.Seq}, strScan{&kind}, strScan{&e.Actor},
			timeScan{&e.At}, strScan{&e.Assignee}, strScan{&e.Detail}); err != nil {
			return nil, failf(err, "list task events of %s", p.InstanceID)
		}
		e.Kind = history.Kind(kind)
		out = append(out, e)
	}
	return out, failf(rows.Err(), "list task events of %s", p.InstanceID)
}

// GetCustomProjection implements provider.QueryStore.
func (s *Store) GetCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	c := &provider.CustomRecord{Name: name, InstanceID: instanceID}
	var version int64
	if err := s.db.QueryRowContext(ctx, s.sql.getCustom, named("inst", instanceID), named("name", name)).
		Scan(intScan{&version}, intScan{&c.Seq}, &c.Data); err != nil {
		return nil, failf(err, "projection %s of %s", name, instanceID)
	}
	c.Version = int(version)
	return c, nil
}

// PurgeInstance implements provider.PurgeStore in one transaction. The
// instance row is locked without waiting (FOR UPDATE SKIP LOCKED): an
// instance in a round is not purged ([provider.ErrInvalidState]).
func (s *Store) PurgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	if p.OnlyUnfinished {
		// A purge is one transaction: none is ever unfinished.
		return nil, fmt.Errorf("oracle: purge %s: %w: no purge of it is unfinished", p.InstanceID, provider.ErrNotFound)
	}
	var ts *provider.Tombstone
	err := s.inTx(ctx, "purge "+p.InstanceID, func(tx *sql.Tx) error {
		var (
			hasRecord int64
			status    string
			exec      string
		)
		err := tx.QueryRowContext(ctx, s.sql.purgeLock, named("inst", p.InstanceID)).Scan(intScan{&hasRecord}, strScan{&status}, strScan{&exec})
		if errors.Is(err, sql.ErrNoRows) {
			// No row, or a row a round holds.
			record, hist, err := s.purgeProbe(ctx, tx, p.InstanceID)
			if err != nil {
				return err
			}
			if !record && !hist {
				return fmt.Errorf("oracle: purge %s: %w", p.InstanceID, provider.ErrNotFound)
			}
			return fmt.Errorf("oracle: purge %s: %w: the instance has not ended or is in a round", p.InstanceID, provider.ErrInvalidState)
		}
		if err != nil {
			return failf(err, "purge %s", p.InstanceID)
		}
		if hasRecord == 0 {
			_, hist, err := s.purgeProbe(ctx, tx, p.InstanceID)
			if err != nil {
				return err
			}
			if !hist {
				return fmt.Errorf("oracle: purge %s: %w", p.InstanceID, provider.ErrNotFound)
			}
		}
		if hasRecord == 0 || !provider.Status(status).Terminal() {
			return fmt.Errorf("oracle: purge %s: %w: the instance has not ended", p.InstanceID, provider.ErrInvalidState)
		}
		if err := s.purgeHeld(ctx, tx, p.InstanceID); err != nil {
			return err
		}
		if err := s.purgeKeepsNextRun(ctx, tx, p.InstanceID, exec); err != nil {
			return err
		}
		ts = &provider.Tombstone{InstanceID: p.InstanceID, PurgedAt: p.Now, PurgedBy: p.By}
		err = tx.QueryRowContext(ctx, s.sql.historyHead, named("inst", p.InstanceID)).Scan(intScan{&ts.LastSeq}, &ts.LastHash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return failf(err, "purge %s", p.InstanceID)
		}
		for _, stmt := range s.sql.purge {
			if _, err := tx.ExecContext(ctx, stmt, named("inst", p.InstanceID)); err != nil {
				return failf(err, "purge %s", p.InstanceID)
			}
		}
		_, err = tx.ExecContext(ctx, s.sql.tombstone, named("inst", p.InstanceID), named("last_seq", ts.LastSeq),
			named("last_hash", blobArg(ts.LastHash)), named("purged", timeArg(p.Now)), named("purged_by", p.By))
		return failf(err, "purge %s: keep the tombstone", p.InstanceID)
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
func (s *Store) purgeKeepsNextRun(ctx context.Context, tx *sql.Tx, instanceID, exec string) error {
	rows, err := tx.QueryContext(ctx, s.sql.purgeMessages, named("inst", instanceID))
	if err != nil {
		return failf(err, "purge %s", instanceID)
	}
	defer rows.Close()
	for rows.Next() {
		var env []byte
		if err := rows.Scan(&env); err != nil {
			return failf(err, "purge %s", instanceID)
		}
		m, err := provider.UnmarshalMessage(env)
		if err != nil {
			// An undecodable message is dead-lettered by its round; it
			// starts nothing.
			continue
		}
		if provider.StartsNextRun(&m, exec) {
			return fmt.Errorf("oracle: purge %s: %w: message %s starts its next run", instanceID, provider.ErrInvalidState, m.ID)
		}
		if m.Kind.IsRecord() {
			return fmt.Errorf("oracle: purge %s: %w: message %s records a legal hold", instanceID, provider.ErrInvalidState, m.ID)
		}
	}
	return failf(rows.Err(), "purge %s", instanceID)
}

// purgeProbe tells whether an instance has a record and a history.
func (s *Store) purgeProbe(ctx context.Context, tx *sql.Tx, instanceID string) (record, hist bool, err error) {
	var r, h int64
	if err := tx.QueryRowContext(ctx, s.sql.purgeProbe, named("inst", instanceID)).Scan(intScan{&r}, intScan{&h}); err != nil {
		return false, false, failf(err, "purge %s", instanceID)
	}
	return r > 0, h > 0, nil
}

// GetTombstone implements provider.PurgeStore.
func (s *Store) GetTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	ts := &provider.Tombstone{InstanceID: instanceID}
	err := s.db.QueryRowContext(ctx, s.sql.getTombstone, named("inst", instanceID)).
		Scan(intScan{&ts.LastSeq}, &ts.LastHash, timeScan{&ts.PurgedAt}, strScan{&ts.PurgedBy})
	if err != nil {
		return nil, failf(err, "tombstone of %s", instanceID)
	}
	return ts, nil
}

// ListTombstones implements provider.PurgeStore.
func (s *Store) ListTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listTombstones, named("inst", instanceID))
	if err != nil {
		return nil, failf(err, "tombstones of %s", instanceID)
	}
	defer rows.Close()
	var out []provider.Tombstone
	for rows.Next() {
		ts := provider.Tombstone{InstanceID: instanceID}
		if err := rows.Scan(intScan{&ts.LastSeq}, &ts.LastHash, timeScan{&ts.PurgedAt}, strScan{&ts.PurgedBy}); err != nil {
			return nil, failf(err, "tombstones of %s", instanceID)
		}
		out = append(out, ts)
	}
	return out, failf(rows.Err(), "tombstones of %s", instanceID)
}
