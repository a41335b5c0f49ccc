package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// enqueueActivities queues the tasks whose ids were never seen, in the
// slice's order, and reports whether it queued any. A task id is
// remembered in ACTIVITY_TASK_IDS first; a unique violation there means
// the task was enqueued before (and may have completed), so its enqueue
// is a no-op.
func (s *Store) enqueueActivities(ctx context.Context, db dbtx, p *provider.EnqueueActivitiesParams) (bool, error) {
	added := false
	seen := make(map[string]bool, len(p.Tasks))
	for _, t := range p.Tasks {
		if seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		t.SetDefaults(p.Now)
		env, err := provider.MarshalActivityTask(&t)
		if err != nil {
			return false, fmt.Errorf("oracle: encode activity task %s: %w", t.ID, err)
		}
		_, err = db.ExecContext(ctx, s.sql.insertTaskID, named("id", t.ID), named("inst", t.InstanceID))
		if isDuplicate(err) {
			continue
		}
		if err != nil {
			return false, failf(err, "enqueue activity task %s", t.ID)
		}
		_, err = db.ExecContext(ctx, s.sql.insertTask, named("id", t.ID), named("inst", t.InstanceID),
			named("exec", t.ExecutionID), named("queue", queueKey(t.Queue)), named("ready", timeArg(t.VisibleAt)),
			named("env", blobArg(env)))
		if err != nil {
			return false, failf(err, "enqueue activity task %s", t.ID)
		}
		added = true
	}
	return added, nil
}

// ClaimActivity implements provider.Store in one transaction: it lists the
// oldest claimable tasks of the queues, locks the first that no other
// claim holds (SELECT … FOR UPDATE SKIP LOCKED, which re-checks that it is
// claimable), and gives it a new claim whose token comes from the
// LEASE_TOKENS sequence (UPDATE … RETURNING token INTO).
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	queues := queueKeys(p.Queues)
	if len(queues) > maxListLength {
		return nil, fmt.Errorf("oracle: claim activity task: %d queues, at most %d", len(queues), maxListLength)
	}
	var lease *provider.ActivityLease
	err := s.inTx(ctx, "claim activity task", func(tx *sql.Tx) error {
		var skip []string
		for len(skip) < maxListLength {
			ids, err := s.claimCandidates(ctx, tx, queues, skip, p.Now)
			if err != nil || len(ids) == 0 {
				return err
			}
			for _, id := range ids {
				skip = append(skip, id)
				if lease, err = s.claimOne(ctx, tx, id, p); err != nil || lease != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// claimCandidates lists the ids of the oldest claimable tasks.
func (s *Store) claimCandidates(ctx context.Context, tx *sql.Tx, queues, skip []string, now time.Time) ([]string, error) {
	if len(skip) == 0 {
		skip = []string{noMatch}
	}
	query, qargs := expandList(s.sql.claimCandidates, "queues", queues)
	query, sargs := expandList(query, "skip", skip)
	args := append(append(qargs, sargs...), named("now", timeArg(now)))
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, failf(err, "claim activity task")
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(strScan{&id}); err != nil {
			return nil, failf(err, "claim activity task")
		}
		ids = append(ids, id)
	}
	return ids, failf(rows.Err(), "claim activity task")
}

// claimOne claims task id unless another claim holds it or it is no
// longer claimable; nil then.
func (s *Store) claimOne(ctx context.Context, tx *sql.Tx, id string, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	var (
		env                []byte
		oldToken, oldOwner string
		oldUntil           time.Time
	)
	err := tx.QueryRowContext(ctx, s.sql.claimLock, named("id", id), named("now", timeArg(p.Now))).
		Scan(&env, strScan{&oldToken}, strScan{&oldOwner}, timeScan{&oldUntil})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, failf(err, "claim activity task %s", id)
	}
	var token string
	_, err = tx.ExecContext(ctx, s.sql.claim, named("owner", p.Owner), named("until", timeArg(p.LockedUntil)),
		named("id", id), named("tok", sql.Out{Dest: &token}))
	if err != nil {
		return nil, failf(err, "claim activity task %s", id)
	}
	task, err := provider.UnmarshalActivityTask(env)
	if err != nil {
		return nil, fmt.Errorf("oracle: claim activity task %s: %w", id, err)
	}
	l := &provider.ActivityLease{Task: task, Token: token, Owner: p.Owner, LockedUntil: p.LockedUntil}
	if oldToken != "" {
		l.Expired = &provider.ExpiredClaim{Owner: oldOwner, LockedUntil: oldUntil}
	}
	return l, nil
}

// leaseLost is the error of a call whose token does not match.
func leaseLost(taskID string) error {
	return fmt.Errorf("oracle: activity task %s: %w", taskID, provider.ErrLeaseLost)
}

// HeartbeatActivity implements provider.Store with one UPDATE conditional
// on the token.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	n, err := affected(ctx, s.db, s.sql.heartbeatActivity, named("until", timeArg(p.LockedUntil)),
		named("id", p.TaskID), named("tok", p.Token))
	if err != nil {
		return failf(err, "heartbeat activity task %s", p.TaskID)
	}
	if n == 0 {
		return leaseLost(p.TaskID)
	}
	return nil
}

// CompleteActivity implements provider.Store in one transaction: it
// deletes the task while the token matches and, only then, enqueues the
// result and its wake-up.
func (s *Store) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	var added bool
	err := s.inTx(ctx, "complete activity task "+p.TaskID, func(tx *sql.Tx) error {
		n, err := affected(ctx, tx, s.sql.completeActivity, named("id", p.TaskID), named("tok", p.Token))
		if err != nil {
			return failf(err, "complete activity task %s", p.TaskID)
		}
		if n == 0 {
			return leaseLost(p.TaskID)
		}
		added, err = s.enqueueMessages(ctx, tx, &provider.EnqueueMessagesParams{Messages: []provider.Message{p.Result}, Now: p.Now}, nil)
		if err != nil || !added {
			return err
		}
		s.enqueueWake(ctx, tx, true, false)
		return nil
	})
	if err == nil && added {
		s.wake(provider.QueueOrchestration)
	}
	return err
}

// RetryActivity implements provider.Store. It reads the claimed task,
// then writes its next attempt only while the token still matches, so a
// concurrent change of the claim makes it fail with ErrLeaseLost.
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	var env []byte
	err := s.db.QueryRowContext(ctx, s.sql.taskEnvelope, named("id", p.TaskID), named("tok", p.Token)).Scan(&env)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseLost(p.TaskID)
	}
	if err != nil {
		return failf(err, "retry activity task %s", p.TaskID)
	}
	task, err := provider.UnmarshalActivityTask(env)
	if err != nil {
		return fmt.Errorf("oracle: retry activity task %s: %w", p.TaskID, err)
	}
	task.Attempt++
	task.VisibleAt, task.LastError = p.VisibleAt, p.Error
	if env, err = provider.MarshalActivityTask(&task); err != nil {
		return fmt.Errorf("oracle: retry activity task %s: %w", p.TaskID, err)
	}
	err = s.inTx(ctx, "retry activity task "+p.TaskID, func(tx *sql.Tx) error {
		n, err := affected(ctx, tx, s.sql.retryActivity, named("env", blobArg(env)), named("ready", timeArg(p.VisibleAt)),
			named("id", p.TaskID), named("tok", p.Token))
		if err != nil {
			return failf(err, "retry activity task %s", p.TaskID)
		}
		if n == 0 {
			return leaseLost(p.TaskID)
		}
		s.enqueueWake(ctx, tx, false, true)
		return nil
	})
	if err == nil {
		s.wake(provider.QueueActivity)
	}
	return err
}

// DeadLetterActivity implements provider.Store in one transaction: it
// finds the task's instance, locks the instance row (waiting for a round
// or purge that holds it: the instance row comes first, as in a round
// that cancels the task), then locks the task while the token still
// matches, stores the dead letter (with the stored task when the letter
// has none), removes the task and sets the incident. A round or purge
// that removed the task meanwhile makes it return ErrLeaseLost.
func (s *Store) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
	return s.inTx(ctx, "dead-letter activity task "+p.TaskID, func(tx *sql.Tx) error {
		var instanceID string
		err := tx.QueryRowContext(ctx, s.sql.claimedTask, named("id", p.TaskID), named("tok", p.Token)).Scan(strScan{&instanceID})
		if errors.Is(err, sql.ErrNoRows) {
			return leaseLost(p.TaskID)
		}
		if err != nil {
			return failf(err, "dead-letter activity task %s", p.TaskID)
		}
		var one int64
		err = tx.QueryRowContext(ctx, s.sql.lockInstanceWait, named("inst", instanceID)).Scan(intScan{&one})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return failf(err, "dead-letter activity task %s: lock instance %s", p.TaskID, instanceID)
		}
		var env []byte
		err = tx.QueryRowContext(ctx, s.sql.lockClaimedTask, named("id", p.TaskID), named("tok", p.Token)).Scan(strScan{&instanceID}, &env)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseLost(p.TaskID)
		}
		if err != nil {
			return failf(err, "dead-letter activity task %s", p.TaskID)
		}
		l := p.Letter
		args, err := letterArgs(&l)
		if err != nil {
			return fmt.Errorf("oracle: dead-letter activity task %s: %w", p.TaskID, err)
		}
		if l.Activity == nil {
			args = replaceArg(args, "activity", blobArg(env))
		}
		if _, err := tx.ExecContext(ctx, s.sql.insertDeadLetter, args...); err != nil && !isDuplicate(err) {
			return failf(err, "dead-letter activity task %s", p.TaskID)
		}
		if _, err := tx.ExecContext(ctx, s.sql.completeActivity, named("id", p.TaskID), named("tok", p.Token)); err != nil {
			return failf(err, "dead-letter activity task %s", p.TaskID)
		}
		return s.setIncident(ctx, tx, instanceID, string(l.Reason)+": "+l.Error)
	})
}

// cancelActivities deletes an execution's queued and claimed tasks; their
// ids stay in ACTIVITY_TASK_IDS.
func (s *Store) cancelActivities(ctx context.Context, db dbtx, p *provider.CancelActivitiesParams) error {
	_, err := db.ExecContext(ctx, s.sql.cancelActivities, named("inst", p.InstanceID), named("exec", p.ExecutionID), named("other", p.OtherThan))
	return failf(err, "cancel activities of %s/%s", p.InstanceID, p.ExecutionID)
}

// ListQueuedActivities implements provider.InspectStore.
func (s *Store) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listQueuedActivities, named("inst", p.InstanceID))
	if err != nil {
		return nil, failf(err, "list activity tasks of %s", p.InstanceID)
	}
	defer rows.Close()
	var out []provider.QueuedActivity
	for rows.Next() {
		var (
			env   []byte
			owner string
			until time.Time
		)
		if err := rows.Scan(&env, strScan{&owner}, timeScan{&until}); err != nil {
			return nil, failf(err, "list activity tasks of %s", p.InstanceID)
		}
		task, err := provider.UnmarshalActivityTask(env)
		if err != nil {
			return nil, fmt.Errorf("oracle: list activity tasks of %s: %w", p.InstanceID, err)
		}
		q := provider.QueuedActivity{Task: task, Owner: owner}
		if owner != "" {
			q.LockedUntil = until
		}
		out = append(out, q)
	}
	return out, failf(rows.Err(), "list activity tasks of %s", p.InstanceID)
}
