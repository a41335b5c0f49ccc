package oracle

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// saveProjections writes the projections of p on db: the instance record,
// the task records (with their roles) and the task events, the custom
// records, and the snapshot last, each only when newer than the stored
// one. rowExists says the instance row is known to exist (the round
// locked it); otherwise it is created first.
func (s *Store) saveProjections(ctx context.Context, db dbtx, p *provider.Projections, rowExists bool) error {
	if err := checkProjectionTimes(p); err != nil {
		return err
	}
	snapshot := p.Snapshot != nil && p.Seq > 0
	if !rowExists && (snapshot || p.Instance != nil) {
		if err := s.ensureInstances(ctx, db, []string{p.InstanceID}); err != nil {
			return err
		}
	}
	if r := p.Instance; r != nil {
		args, err := recordArgs(p.InstanceID, p.Seq, r)
		if err != nil {
			return err
		}
		n, err := affected(ctx, db, s.sql.saveRecord, args...)
		if err != nil {
			return failf(err, "save the record of %s", p.InstanceID)
		}
		if n > 0 {
			if err := s.saveAttributes(ctx, db, p.InstanceID, r.Attributes); err != nil {
				return err
			}
		}
	}
	if err := s.saveTasks(ctx, db, p); err != nil {
		return err
	}
	for _, e := range p.TaskEvents {
		_, err := db.ExecContext(ctx, s.sql.saveTaskEvent, named("inst", p.InstanceID), named("seq", e.Seq),
			named("task_id", e.TaskID), named("kind", string(e.Kind)), named("actor", e.Actor),
			named("occurred", timeArg(e.At)), named("assignee", e.Assignee), named("detail", textArg(e.Detail)))
		if err != nil && !isDuplicate(err) {
			return failf(err, "save task event of %s at seq %d", p.InstanceID, e.Seq)
		}
	}
	for _, c := range p.Custom {
		save := func() error {
			_, err := db.ExecContext(ctx, s.sql.saveCustom, named("inst", p.InstanceID), named("name", c.Name),
				named("version", int64(c.Version)), named("seq", c.Seq), named("data", blobArg(c.Data)))
			return err
		}
		err := save()
		if isDuplicate(err) {
			// A concurrent MERGE inserted the record first (MERGE is not
			// atomic against another insert): it is there now.
			err = save()
		}
		if err != nil {
			return failf(err, "save projection %s of %s", c.Name, p.InstanceID)
		}
	}
	if snapshot {
		_, err := db.ExecContext(ctx, s.sql.saveSnapshot, named("snap", blobArg(p.Snapshot)), named("seq", p.Seq), named("inst", p.InstanceID))
		if err != nil {
			return failf(err, "save the snapshot of %s", p.InstanceID)
		}
	}
	return nil
}

// checkProjectionTimes refuses times the store cannot keep exactly (a
// user's due date far away, say) before anything is written.
func checkProjectionTimes(p *provider.Projections) error {
	var errs []error
	if r := p.Instance; r != nil {
		errs = append(errs, checkTime("created at", r.CreatedAt), checkTime("updated at", r.UpdatedAt), checkTime("completed at", r.CompletedAt))
	}
	for _, t := range p.Tasks {
		errs = append(errs, checkTime("due date of task "+t.TaskID, t.Due), checkTime("created at", t.CreatedAt),
			checkTime("updated at", t.UpdatedAt), checkTime("completed at", t.CompletedAt))
	}
	for _, e := range p.TaskEvents {
		errs = append(errs, checkTime("task event time", e.At))
	}
	return errors.Join(errs...)
}

// recordArgs are the binds of saveRecordSQL.
func recordArgs(instanceID string, seq int64, r *provider.InstanceRecord) ([]any, error) {
	var parts string
	if r.BusinessParts != nil {
		b, err := json.Marshal(r.BusinessParts)
		if err != nil {
			return nil, fmt.Errorf("oracle: encode business parts of %s: %w", instanceID, err)
		}
		parts = string(b)
	}
	var failure []byte
	if r.Failure != nil {
		var err error
		if failure, err = history.Encode(r.Failure); err != nil {
			return nil, fmt.Errorf("oracle: encode failure of %s: %w", instanceID, err)
		}
	}
	values := []any{
		r.ExecutionID, r.Name, r.Version, string(r.Status), r.BusinessKey, textArg(parts), blobArg(r.CustomStatus),
		r.ParentID, timeArg(r.CreatedAt), timeArg(r.UpdatedAt), timeArg(r.CompletedAt), blobArg(r.Output),
		blobArg(failure), textArg(r.LastError), textArg(r.CustomStatusText), statusKey(r.CustomStatusText),
	}
	args := []any{named("inst", instanceID), named("seq", seq)}
	for i, v := range values {
		args = append(args, named(recordBinds[i], v))
	}
	return args, nil
}

// saveTasks upserts the task records of p and their roles, then checks
// that no task id belongs to another instance.
func (s *Store) saveTasks(ctx context.Context, db dbtx, p *provider.Projections) error {
	if len(p.Tasks) == 0 {
		return nil
	}
	ids := make([]string, 0, len(p.Tasks))
	for _, t := range p.Tasks {
		ids = append(ids, t.TaskID)
		var roles []byte
		if len(t.Roles) > 0 {
			var err error
			if roles, err = history.Encode(t.Roles); err != nil {
				return fmt.Errorf("oracle: encode roles of task %s: %w", t.TaskID, err)
			}
		}
		n, err := affected(ctx, db, s.sql.saveTask, named("task_id", t.TaskID), named("inst", p.InstanceID),
			named("exec", t.ExecutionID), named("name", t.Name), named("status", string(t.Status)),
			named("assignee", t.Assignee), named("roles", blobArg(roles)), named("payload", blobArg(t.Payload)),
			named("result", blobArg(t.Result)), named("due", timeArg(t.Due)), named("created", timeArg(t.CreatedAt)),
			named("updated", timeArg(t.UpdatedAt)), named("completed", timeArg(t.CompletedAt)), named("seq", t.Seq))
		if isDuplicate(err) {
			// A concurrent round inserted the id first; takenTask tells
			// whose it is.
			n, err = 0, nil
		}
		if err != nil {
			return failf(err, "save task %s of %s", t.TaskID, p.InstanceID)
		}
		if n == 0 {
			continue
		}
		if err := s.saveRoles(ctx, db, t.TaskID, t.Roles); err != nil {
			return err
		}
	}
	for _, part := range chunks(ids) {
		query, args := expandList(s.sql.takenTask, "ids", part)
		var taskID, owner string
		err := db.QueryRowContext(ctx, query, append(args, named("inst", p.InstanceID))...).Scan(strScan{&taskID}, strScan{&owner})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return failf(err, "check the task ids of %s", p.InstanceID)
		}
		return &provider.TaskIDTakenError{TaskID: taskID, InstanceID: p.InstanceID, Owner: owner}
	}
	return nil
}

// saveRoles replaces the indexed roles of a task.
func (s *Store) saveRoles(ctx context.Context, db dbtx, taskID string, roles []string) error {
	if _, err := db.ExecContext(ctx, s.sql.deleteTaskRoles, named("task_id", taskID)); err != nil {
		return failf(err, "save the roles of task %s", taskID)
	}
	distinct := slices.Clone(roles)
	slices.Sort(distinct)
	for _, role := range slices.Compact(distinct) {
		if role == "" {
			continue // Oracle keeps no empty text; no filter asks for it
		}
		if _, err := db.ExecContext(ctx, s.sql.insertTaskRole, named("task_id", taskID), named("role_name", role)); err != nil {
			return failf(err, "save the roles of task %s", taskID)
		}
	}
	return nil
}

// scanRecord reads the columns of recordSelect.
func scanRecord(row rowScanner) (*provider.InstanceRecord, error) {
	r := &provider.InstanceRecord{}
	var (
		status, parts string
		failure       []byte
	)
	err := row.Scan(strScan{&r.InstanceID}, intScan{&r.LastSeq}, strScan{&r.ExecutionID}, strScan{&r.Name},
		strScan{&r.Version}, strScan{&status}, strScan{&r.BusinessKey}, strScan{&parts}, &r.CustomStatus,
		strScan{&r.ParentID}, timeScan{&r.CreatedAt}, timeScan{&r.UpdatedAt}, timeScan{&r.CompletedAt},
		&r.Output, &failure, strScan{&r.LastError}, strScan{&r.Incident}, strScan{&r.CustomStatusText})
	if err != nil {
		return nil, err
	}
	r.Status = provider.Status(status)
	if parts != "" {
		if err := json.Unmarshal([]byte(parts), &r.BusinessParts); err != nil {
			return nil, fmt.Errorf("instance %s: decode business parts: %w", r.InstanceID, err)
		}
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
	r, err := scanRecord(s.db.QueryRowContext(ctx, s.sql.getInstance, named("inst", instanceID)))
	if err != nil {
		return nil, failf(err, "instance %s", instanceID)
	}
	if err := s.loadAttributes(ctx, []*provider.InstanceRecord{r}); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Store) getSnapshot(ctx context.Context, db dbtx, instanceID string) ([]byte, int64, error) {
	var (
		data []byte
		seq  int64
	)
	if err := db.QueryRowContext(ctx, s.sql.getSnapshot, named("inst", instanceID)).Scan(&data, intScan{&seq}); err != nil {
		return nil, 0, failf(err, "snapshot of %s", instanceID)
	}
	return data, seq, nil
}

// GetSnapshot implements provider.Store.
func (s *Store) GetSnapshot(ctx context.Context, instanceID string) ([]byte, int64, error) {
	return s.getSnapshot(ctx, s.db, instanceID)
}

// resetProjections deletes an instance's built-in projections, the
// snapshot first, and the custom records p names.
func (s *Store) resetProjections(ctx context.Context, db dbtx, p *provider.ResetProjectionsParams) error {
	for _, sql := range []string{s.sql.resetInstance, s.sql.deleteAttributes, s.sql.resetTaskRoles, s.sql.resetTasks, s.sql.resetTaskEvents} {
		if _, err := db.ExecContext(ctx, sql, named("inst", p.InstanceID)); err != nil {
			return failf(err, "reset projections of %s", p.InstanceID)
		}
	}
	for _, part := range chunks(p.Custom) {
		query, args := expandList(s.sql.resetCustom, "names", part)
		if _, err := db.ExecContext(ctx, query, append(args, named("inst", p.InstanceID))...); err != nil {
			return failf(err, "reset projections of %s", p.InstanceID)
		}
	}
	return nil
}
