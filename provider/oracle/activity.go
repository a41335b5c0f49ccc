package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// enqueueActivities queues the tasks whose ids were never seen, in the
// slice's order, and reports whether it queued any. A task id is
// remembered in ACTIVITY_TASK_IDS first; a unique violation there means
// the task was enqueued before (and may have completed), so its enqueue
// is a no-op.
func (s *Store) enqueueActivities(ctx context.Context, db dbtx, p *provider.EnqueueActivitiesParams) (bool, error) {
	for i := range p.Tasks {
		if err := validateTask(&p.Tasks[i]); err != nil {
			return false, err
		}
	}
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
		_, err = db.ExecContext(ctx, s.sql.insertTask, taskArgs(&t, env)...)
		if err != nil {
			return false, failf(err, "enqueue activity task %s", t.ID)
		}
		added = true
	}
	return added, nil
}

// validateTask refuses a task whose priority or concurrency limit the
// store cannot keep.
func validateTask(t *provider.ActivityTask) error {
	if err := provider.ValidatePriority(t.Priority); err != nil {
		return fmt.Errorf("%w: activity task %s: %w", ErrInvalidArgument, t.ID, err)
	}
	if err := provider.ValidateLimit(t.ConcurrencyKey, t.ConcurrencyLimit); err != nil {
		return fmt.Errorf("%w: activity task %s: %w", ErrInvalidArgument, t.ID, err)
	}
	return nil
}

// maxNameColumn is the size of ACTIVITY_TASKS.name: a longer name is not
// stored there (the rate filter of the candidates then passes the task,
// and the claim checks its envelope).
const maxNameColumn = 1000

// taskArgs are the binds of insertTaskSQL for task t with envelope env.
func taskArgs(t *provider.ActivityTask, env []byte) []any {
	var name, key, limit any
	if t.Name != "" && len(t.Name) <= maxNameColumn {
		name = t.Name
	}
	if t.ConcurrencyKey != "" {
		key, limit = t.ConcurrencyKey, int64(t.ConcurrencyLimit)
	}
	return []any{
		named("id", t.ID), named("inst", t.InstanceID), named("exec", t.ExecutionID),
		named("queue", queueKey(t.Queue)), named("ready", timeArg(t.VisibleAt)), named("env", blobArg(env)),
		named("aname", name), named("prio", int64(t.Priority)), named("ckey", key), named("clim", limit),
	}
}

// ClaimActivity implements provider.Store. A plain query lists the
// claimable tasks of the queues in queue order, leaving out those whose
// concurrency key is full and those an exhausted rate limit matches (as
// read before the query); each candidate is then tried in a transaction
// of its own (see claimOne), until one is claimed. A candidate turned
// down rolls its transaction back, so a claim holds at most one task,
// one key and its windows at a time, and never spends a token or keeps a
// lock for a task it does not claim.
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	queues := queueKeys(p.Queues)
	if len(queues) > maxListLength {
		return nil, fmt.Errorf("%w: claim activity task: %d queues, at most %d", ErrInvalidArgument, len(queues), maxListLength)
	}
	for i := range p.Rates {
		if err := p.Rates[i].Validate(); err != nil {
			return nil, fmt.Errorf("%w: claim activity task: %w", ErrInvalidArgument, err)
		}
	}
	exhausted, err := s.exhaustedRates(ctx, p.Rates, p.Now)
	if err != nil {
		return nil, err
	}
	var skip []string
	for len(skip) < maxListLength {
		ids, err := s.claimCandidates(ctx, s.db, queues, skip, exhausted, p.Now)
		if err != nil || len(ids) == 0 {
			return nil, err
		}
		for _, id := range ids {
			skip = append(skip, id)
			var lease *provider.ActivityLease
			err := s.inTx(ctx, "claim activity task "+id, func(tx *sql.Tx) error {
				var err error
				lease, err = s.claimOne(ctx, tx, id, p)
				if err == nil && lease == nil {
					// Turned down: the deferred rollback undoes what
					// the try wrote and releases its locks.
					return errTurnedDown
				}
				return err
			})
			switch {
			case errors.Is(err, errTurnedDown):
			case err != nil:
				return nil, err
			default:
				return lease, nil
			}
		}
	}
	return nil, nil
}

// errTurnedDown rolls back the transaction of a candidate not claimed.
var errTurnedDown = errors.New("oracle: activity task not claimed")

// exhaustedRates returns the limits of rates whose window of now has no
// token left, as last committed: the candidates leave out the tasks they
// match. The claim takes its tokens under the windows' row locks, so a
// limit read here as not exhausted may turn a task down still.
func (s *Store) exhaustedRates(ctx context.Context, rates []provider.RateLimit, now time.Time) ([]provider.RateLimit, error) {
	var out []provider.RateLimit
	for _, r := range rates {
		var used int64
		err := s.db.QueryRowContext(ctx, s.sql.rateUsed, named("rkey", r.Key), named("win", r.Window(now).UnixNano())).Scan(intScan{&used})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, failf(err, "claim activity task: read rate limit %s", r.Key)
		}
		if used >= int64(r.Tokens) {
			out = append(out, r)
		}
	}
	return out, nil
}

// rateFilter returns the conditions of claimCandidatesSQL's {{rates}} for
// the exhausted limits, and their binds: SQL of this package and bind
// names only.
func rateFilter(exhausted []provider.RateLimit) (string, []any) {
	var (
		sb   strings.Builder
		args []any
	)
	for i, r := range exhausted {
		rn, rq := fmt.Sprintf("rn%d", i), fmt.Sprintf("rq%d", i)
		switch {
		case r.Activity != "" && r.Queue != "":
			fmt.Fprintf(&sb, rateFilterBoth, i)
			args = append(args, named(rn, r.Activity), named(rq, queueKey(r.Queue)))
		case r.Activity != "":
			fmt.Fprintf(&sb, rateFilterActivity, i)
			args = append(args, named(rn, r.Activity))
		default:
			fmt.Fprintf(&sb, rateFilterQueue, i)
			args = append(args, named(rq, queueKey(r.Queue)))
		}
	}
	return sb.String(), args
}

// claimCandidates lists the ids of the first claimable tasks in queue
// order.
func (s *Store) claimCandidates(ctx context.Context, db dbtx, queues, skip []string, exhausted []provider.RateLimit, now time.Time) ([]string, error) {
	if len(skip) == 0 {
		skip = []string{noMatch}
	}
	rates, rargs := rateFilter(exhausted)
	query := strings.Replace(s.sql.claimCandidates, "{{rates}}", rates, 1)
	query, qargs := expandList(query, "queues", queues)
	query, sargs := expandList(query, "skip", skip)
	args := append(append(append(qargs, sargs...), rargs...), named("now", timeArg(now)))
	rows, err := db.QueryContext(ctx, query, args...)
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

// claimOne claims task id in tx unless another claim holds it, it is no
// longer claimable, its concurrency key has its limit of live claims or a
// rate limit that matches it has no token left in the window of p.Now;
// nil then, and the caller rolls tx back. The locks come in one order:
// the task (never waiting), its key's row, the windows' rows by key, so
// claims never wait for each other in a cycle.
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
	task, err := provider.UnmarshalActivityTask(env)
	if err != nil {
		return nil, fmt.Errorf("oracle: claim activity task %s: %w", id, err)
	}
	if ok, err := s.keyHasRoom(ctx, tx, &task, p.Now); err != nil || !ok {
		return nil, err
	}
	if ok, err := s.takeTokens(ctx, tx, &task, p.Rates, p.Now); err != nil || !ok {
		return nil, err
	}
	var token string
	_, err = tx.ExecContext(ctx, s.sql.claim, named("owner", p.Owner), named("until", timeArg(p.LockedUntil)),
		named("id", id), named("tok", sql.Out{Dest: &token}))
	if err != nil {
		return nil, failf(err, "claim activity task %s", id)
	}
	l := &provider.ActivityLease{Task: task, Token: token, Owner: p.Owner, LockedUntil: p.LockedUntil}
	if oldToken != "" {
		l.Expired = &provider.ExpiredClaim{Owner: oldOwner, LockedUntil: oldUntil}
	}
	return l, nil
}

// keyHasRoom locks the row of the task's concurrency key (creating it)
// and reports whether the key has fewer live claims than the task's
// limit. The lock is held until tx ends: a concurrent claim of the key
// waits, then counts this one if it committed. A task without a key
// always has room.
func (s *Store) keyHasRoom(ctx context.Context, tx dbtx, t *provider.ActivityTask, now time.Time) (bool, error) {
	if t.ConcurrencyKey == "" {
		return true, nil
	}
	key := named("ckey", t.ConcurrencyKey)
	if _, err := tx.ExecContext(ctx, s.sql.ensureActivityKey, key); err != nil && !isDuplicate(err) {
		return false, failf(err, "claim activity task %s: concurrency key %s", t.ID, t.ConcurrencyKey)
	}
	var one int64
	if err := tx.QueryRowContext(ctx, s.sql.lockActivityKey, key).Scan(intScan{&one}); err != nil {
		return false, failf(err, "claim activity task %s: lock concurrency key %s", t.ID, t.ConcurrencyKey)
	}
	var live int64
	if err := tx.QueryRowContext(ctx, s.sql.countClaims, key, named("now", timeArg(now))).Scan(intScan{&live}); err != nil {
		return false, failf(err, "claim activity task %s: count the claims of %s", t.ID, t.ConcurrencyKey)
	}
	return live < int64(t.ConcurrencyLimit), nil
}

// rateTake is the token a claim takes of one rate limit key.
type rateTake struct {
	key    string
	window time.Time
	tokens int
}

// rateTakes returns the tokens a claim of t takes: one per key of the
// limits that match it, in key order (the lock order of windows), with
// the fewest tokens of that key's matching limits and the window of the
// first of them.
func rateTakes(t *provider.ActivityTask, rates []provider.RateLimit, now time.Time) []rateTake {
	var out []rateTake
	for i := range rates {
		r := &rates[i]
		if !r.Matches(t) {
			continue
		}
		j := slices.IndexFunc(out, func(x rateTake) bool { return x.key == r.Key })
		if j < 0 {
			out = append(out, rateTake{key: r.Key, window: r.Window(now), tokens: r.Tokens})
			continue
		}
		out[j].tokens = min(out[j].tokens, r.Tokens)
	}
	slices.SortFunc(out, func(a, b rateTake) int { return strings.Compare(a.key, b.key) })
	return out
}

// takeTokens takes, in tx, a token of each rate limit key that matches the
// task, and reports false when a window has none left (the caller then
// rolls back, which gives back those taken). The first claim of a window
// creates its row and deletes the key's older windows.
func (s *Store) takeTokens(ctx context.Context, tx dbtx, t *provider.ActivityTask, rates []provider.RateLimit, now time.Time) (bool, error) {
	for _, r := range rateTakes(t, rates, now) {
		key, win := named("rkey", r.key), named("win", r.window.UnixNano())
		n, err := affected(ctx, tx, s.sql.ensureRateWindow, key, win)
		if err != nil && !isDuplicate(err) {
			return false, failf(err, "claim activity task %s: rate limit %s", t.ID, r.key)
		}
		if n == 1 {
			if _, err := tx.ExecContext(ctx, s.sql.dropRateWindows, key, win); err != nil {
				return false, failf(err, "claim activity task %s: rate limit %s", t.ID, r.key)
			}
		}
		n, err = affected(ctx, tx, s.sql.takeRateToken, key, win, named("tokens", int64(r.tokens)))
		if err != nil {
			return false, failf(err, "claim activity task %s: rate limit %s", t.ID, r.key)
		}
		if n == 0 {
			return false, nil
		}
	}
	return true, nil
}

// CountClaims implements provider.FlowStore: the live claims of tasks
// with concurrency key key, claims that have not run out at now.
func (s *Store) CountClaims(ctx context.Context, key string, now time.Time) (int, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, s.sql.countClaims, named("ckey", key), named("now", timeArg(now))).Scan(intScan{&n})
	if err != nil {
		return 0, failf(err, "count the claims of %s", key)
	}
	return int(n), nil
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
