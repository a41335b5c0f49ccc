package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// rollbackTimeout bounds the rollback of a failed round, which runs even
// when the round's context has ended.
const rollbackTimeout = 5 * time.Second

// RunRound implements provider.TxStore: fn runs in one READ COMMITTED
// transaction on one pooled connection, which commits when fn returns nil
// and ctx has not ended, and rolls back otherwise (a panic in fn rolls
// back too, then propagates). Instances dequeued by fn stay locked until
// the transaction ends; fn may dequeue several (group commit). The Tx must
// not be used after RunRound returns; its methods may be called from one
// goroutine at a time (concurrent calls are serialized).
//
// A commit error whose outcome is unknown (the connection broke after
// COMMIT was sent) is returned as it is; running the round again is safe,
// since appends are idempotent by Seq and hash and enqueues by id.
func (s *Store) RunRound(ctx context.Context, fn func(ctx context.Context, tx provider.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ptx, err := s.pool.BeginTx(ctx, s.sql.begin)
	if err != nil {
		return failf(err, "begin round")
	}
	t := &roundTx{s: s, tx: ptx}
	committed := false
	defer func() {
		if !committed {
			rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			// The round's error is returned; a failed rollback leaves the
			// connection inside a transaction, and the pool destroys such a
			// connection on release rather than reuse it.
			_ = ptx.Rollback(rbCtx)
			cancel()
		}
		t.end(committed)
	}()
	if err := fn(ctx, t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	t.insertUnsent()
	t.checkReleased()
	err = t.flush(ctx)
	t.closed = true
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := ptx.Commit(ctx); err != nil {
		// The outcome may be unknown: wake workers as if it committed.
		t.mu.Lock()
		t.wakeOnEnd = true
		t.mu.Unlock()
		return failf(err, "commit round")
	}
	committed = true
	if hook := s.afterCommit; hook != nil {
		return hook()
	}
	return nil
}

// roundTx is the provider.Tx of one RunRound.
type roundTx struct {
	s  *Store
	tx pgx.Tx

	mu     sync.Mutex
	closed bool
	// locked are the instances this round locked, in order; batches counts
	// those it returned, the last of which a savepoint follows.
	locked  []string
	batches int
	// enqueued records which queues got work, to wake them after commit;
	// atDequeue is what it was when the last instance was dequeued.
	enqueuedMessages, enqueuedTasks bool
	atDequeue                       [2]bool
	wakeOnEnd                       bool
	// msgParts and taskParts are the partitions of the messages and tasks
	// the round enqueued or may have (a superset; kept by a store of
	// several partitions only), whose workers its end wakes.
	msgParts, taskParts []int32
	// pending are the writes deferred until the next flush (see Flush).
	pending *pgx.Batch
	// results maps the instances whose activity results CompleteActivity
	// queued to those results' ids, until a dequeue returns them to the
	// round: what is left is announced after the commit.
	results map[string]string
	// busy are the instances of completed tasks that have other activity
	// tasks open: a dequeue of one by id leaves it to a later round.
	busy map[string]bool
	// inline is set by CompleteActivity: the round runs with an activity's
	// completion (see end); abandoned is set by AbandonMessages.
	inline, abandoned bool
	// unsent is the result of the task CompleteActivity completed while it
	// is not stored: a dequeue of its instance hands it to the round
	// without a row, and it is inserted only when the round does not
	// consume it (see insertUnsent).
	unsent *unsentResult
	// extraSavepoint is set when FlushAndDequeue's writes failed after
	// its dequeue set a savepoint of its own, which the abandon of the
	// writes' instance releases first.
	extraSavepoint bool
	// left tells whether the instances the round locked still had
	// messages at its last round trip, and arrivals is the store's count
	// of work hints just before it (see checkReleased).
	left     bool
	arrivals uint64
}

var (
	_ provider.Tx              = (*roundTx)(nil)
	_ provider.TxFlusher       = (*roundTx)(nil)
	_ provider.FlushDequeuer   = (*roundTx)(nil)
	_ provider.ActivityTx      = (*roundTx)(nil)
	_ provider.ClaimingTx      = (*roundTx)(nil)
	_ provider.ActivityTxStore = (*Store)(nil)
)

// CompletesInRound implements provider.ActivityTxStore.
func (s *Store) CompletesInRound() bool { return true }

// CompleteActivity implements provider.ActivityTx, deferred (see Flush):
// the statements of [Store.CompleteActivity] (the result's instance
// locked FOR KEY SHARE, then the task deleted while the token matches
// and the result inserted only then) join the round's next round trip,
// which a dequeue of the instance is; a task whose token no longer
// matches fails that call with ErrLeaseLost.
func (t *roundTx) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	return t.step(func() error {
		a, err := t.s.newMessageArgs([]provider.Message{p.Result}, p.Now)
		if err != nil {
			return fmt.Errorf("postgres: complete activity task %s: %w", p.TaskID, err)
		}
		t.inline = true
		msg, err := provider.UnmarshalMessage(a.envelopes[0])
		if err != nil {
			return fmt.Errorf("postgres: complete activity task %s: %w", p.TaskID, err)
		}
		t.unsent = &unsentResult{msg: msg, args: a}
		b := deferred{t}.batch()
		t.s.queueLock(b, a.instances, a.parts, nil)
		b.Queue(t.s.sql.deleteTask, p.TaskID, p.Token, t.s.part(p.Result.InstanceID)).QueryRow(func(row pgx.Row) error {
			var done int64
			if err := row.Scan(&done); err != nil {
				return fmt.Errorf("complete activity task %s: %w", p.TaskID, err)
			}
			if done == 0 {
				return leaseLost(p.TaskID)
			}
			return nil
		})
		b.Queue(t.s.sql.openActivities, p.Result.InstanceID, t.s.part(p.Result.InstanceID)).QueryRow(func(row pgx.Row) error {
			var open bool
			if err := row.Scan(&open); err != nil {
				return fmt.Errorf("complete activity task %s: open activities: %w", p.TaskID, err)
			}
			if open {
				if t.busy == nil {
					t.busy = map[string]bool{}
				}
				t.busy[p.Result.InstanceID] = true
			}
			return nil
		})
		return nil
	})
}

// unsentResult is an activity's result that a round's transaction holds
// without a row (roundTx.unsent).
type unsentResult struct {
	msg  provider.Message
	args *messageArgs
	// consumed is set when the round acked or dead-lettered it (undone by
	// an abandon of the instance).
	consumed bool
}

// deleteTaskSQL completes a claimed task whose result is not inserted with
// it (see roundTx.unsent): (completed) is 0 when the token no longer
// matches.
const deleteTaskSQL = `
WITH done AS (DELETE FROM {{schema}}.activity_tasks WHERE id = $1 AND token = $2 AND {{check part = $3}} RETURNING 1)
SELECT count(*) FROM done`

// lockInstanceByIDSQL locks an instance that is not held, whatever its
// queued messages: the round of a completion whose result has no row.
const lockInstanceByIDSQL = `
SELECT i.instance_id, i.hold_until IS NOT NULL AS held
FROM {{schema}}.instances i
WHERE i.part = $3 AND i.instance_id = $2
  AND (i.hold_until IS NULL OR i.hold_until <= $1)
FOR NO KEY UPDATE SKIP LOCKED`

// insertUnsent queues the insert of the unsent result, which the round
// did not consume (it could not lock the instance, left the result to a
// later round, or abandoned it); callers hold t.mu. Its instance is
// locked already (FOR KEY SHARE at the completion, at least).
func (t *roundTx) insertUnsent() {
	u := t.unsent
	if u == nil || u.consumed {
		return
	}
	t.unsent = nil
	id, instanceID := u.msg.ID, u.msg.InstanceID
	t.s.queueEnqueue(deferred{t}.batch(), u.args, nil, func(inserted int64) error {
		if inserted > 0 {
			if t.results == nil {
				t.results = map[string]string{}
			}
			t.results[instanceID] = id
		}
		return nil
	})
}

// consume marks the unsent result consumed when ids holds it; callers
// hold t.mu.
func (t *roundTx) consume(instanceID string, ids []string) {
	if u := t.unsent; u != nil && u.msg.InstanceID == instanceID && slices.Contains(ids, u.msg.ID) {
		u.consumed = true
	}
}

// anyMessagesSQL tells whether any of the instances $1 (of partitions $2)
// has a message queued, visible or not (a probe of the index on
// instance_id each). The partition is named in a test no index serves
// ((… = …) IS TRUE), so that the probe reads the instance's messages
// (messages_instance) rather than AND a bitmap of them with one of the
// partition's messages.
const anyMessagesSQL = `
SELECT EXISTS (
    SELECT 1 FROM unnest($1::text[], $2::int[]) AS u(id, part)
    CROSS JOIN LATERAL (
        SELECT 1 FROM {{schema}}.messages m
        WHERE m.instance_id = u.id AND (m.part = u.part) IS TRUE
        LIMIT 1) AS l)`

// checkReleased asks, in the round's last round trip, whether the
// instances it holds still have messages when it ends, and notes the
// store's count of work hints before it; callers hold t.mu. A worker of
// this store that skipped one of them while the round held it (its
// dequeue skips the row lock, and NextVisibleAt leaves the instance out)
// needs waking at the release only when the instance has work then: work
// queued before the check is seen by it, work queued after it comes with
// a hint, which end sees in the count.
func (t *roundTx) checkReleased() {
	if t.inline || len(t.locked) == 0 {
		return
	}
	t.arrivals = t.s.arrivals.Load()
	parts := make([]int32, len(t.locked))
	for i, id := range t.locked {
		parts[i] = t.s.part(id)
	}
	if !t.s.citus {
		deferred{t}.batch().Queue(t.s.sql.anyMessages, t.locked, parts).QueryRow(func(row pgx.Row) error {
			return row.Scan(&t.left)
		})
		return
	}
	// One router query per partition (citusAnyMessagesSQL).
	t.left = false
	order, groups := partGroups(parts)
	for _, p := range order {
		ids := make([]string, 0, len(groups[p]))
		for _, i := range groups[p] {
			ids = append(ids, t.locked[i])
		}
		deferred{t}.batch().Queue(t.s.sql.citusAnyMessages, ids, p).QueryRow(func(row pgx.Row) error {
			var left bool
			if err := row.Scan(&left); err != nil {
				return err
			}
			t.left = t.left || left
			return nil
		})
	}
}

// openActivitiesSQL tells whether an instance has activity tasks queued
// or claimed (a probe of the index on instance_id).
const openActivitiesSQL = `SELECT EXISTS (SELECT 1 FROM {{schema}}.activity_tasks WHERE instance_id = $1 AND {{check part = $2}})`

// deferred queues writes on the round's pending batch: its calls return
// at once, and the statements run, in order, at the next flush, where
// their callbacks (a task id taken, say) report errors.
type deferred struct{ t *roundTx }

var _ dbtx = deferred{}

func (d deferred) batch() *pgx.Batch {
	if d.t.pending == nil {
		d.t.pending = &pgx.Batch{}
	}
	return d.t.pending
}

// Exec implements dbtx; the command tag is empty.
func (d deferred) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.batch().Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// SendBatch implements dbtx: b's statements, with their callbacks, join
// the pending batch; the results are empty.
func (d deferred) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	d.batch().QueuedQueries = append(d.batch().QueuedQueries, b.QueuedQueries...)
	return deferredResults{}
}

// Query implements dbtx; nothing reads through deferred.
func (d deferred) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errDeferredRead
}

// QueryRow implements dbtx; nothing reads through deferred.
func (d deferred) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errDeferredRead}
}

var errDeferredRead = errors.New("postgres: a read among deferred writes")

// deferredResults are the results of a deferred batch: none yet.
type deferredResults struct{}

func (deferredResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errDeferredRead }
func (deferredResults) Query() (pgx.Rows, error)         { return nil, errDeferredRead }
func (deferredResults) QueryRow() pgx.Row                { return errRow{errDeferredRead} }
func (deferredResults) Close() error                     { return nil }
func (deferredResults) Tx() pgx.Tx                       { return nil }

// flush sends the pending writes in one round trip; callers hold t.mu.
func (t *roundTx) flush(ctx context.Context) error {
	// The callbacks of a batch may queue more (on Citus, the rows of the
	// instances an enqueue found without one): they go in the next round
	// trip.
	for {
		b := t.pending
		if b == nil || b.Len() == 0 {
			return nil
		}
		t.pending = nil
		if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
			return failf(err, "round writes")
		}
	}
}

// Flush implements provider.TxFlusher: the projections, enqueues, cancels
// and acks of a round are deferred, and sent in one round trip by Flush,
// by the next read or dequeue, or before the commit.
func (t *roundTx) Flush(ctx context.Context) error {
	return t.step(func() error { return t.flush(ctx) })
}

// step serializes the calls on the round's connection.
func (t *roundTx) step(fn func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("postgres: round transaction already ended")
	}
	return fn()
}

// end releases the round's instances in the store's bookkeeping and wakes
// the workers waiting on what the round changed.
//
// The release of a round run with an activity's completion wakes no
// worker: its instance was never left out of NextVisibleAt (see lock), so
// a worker of this store that skipped work of the instance while the
// round held it saw that work visible and looks again soon. Waking one
// at every such release sent an idle worker to an empty round
// transaction for each completion.
func (t *roundTx) end(committed bool) {
	t.mu.Lock()
	t.closed = true
	locked := t.locked
	var msgParts, taskParts, lockedParts []int32
	if t.s.partitions > 1 {
		msgParts, taskParts = t.msgParts, t.taskParts
		for id := range t.results {
			msgParts = append(msgParts, t.s.part(id))
		}
		lockedParts = t.s.partsOfInstances(t.locked)
	}
	// Released instances may have work only this process's workers
	// skipped while the round held them (see checkReleased); an abandoned
	// round's instance is held with its messages, and a worker must look
	// again when the hold ends.
	var release bool
	if t.inline {
		release, locked = t.abandoned, nil
	} else {
		release = len(locked) > 0 && (!committed || t.left || t.abandoned || t.s.arrivals.Load() != t.arrivals)
	}
	enqueued := committed || t.wakeOnEnd
	msgs, tasks := enqueued && (t.enqueuedMessages || len(t.results) > 0), enqueued && t.enqueuedTasks
	t.mu.Unlock()
	s := t.s
	if len(locked) > 0 {
		s.mu.Lock()
		for _, id := range locked {
			if s.locked[id]--; s.locked[id] <= 0 {
				delete(s.locked, id)
			}
		}
		s.mu.Unlock()
	}
	switch {
	case msgs:
		s.announce(provider.QueueOrchestration, msgParts)
		if release && lockedParts != nil {
			// The announce named the partitions of the messages; the
			// released instances' may be others.
			s.wakeParts(provider.QueueOrchestration, lockedParts)
		}
	case release:
		// This wake-up counts as no arrival: it makes no other round's
		// release wake a worker.
		s.wakeParts(provider.QueueOrchestration, lockedParts)
	}
	if tasks {
		s.announce(provider.QueueActivity, taskParts)
	}
}

// holds reports whether this round dequeued instanceID; callers hold t.mu.
func (t *roundTx) holds(instanceID string) bool {
	return slices.Contains(t.locked, instanceID)
}

func (t *roundTx) requireLock(instanceID string) error {
	if !t.holds(instanceID) {
		return fmt.Errorf("postgres: instance %s is not locked by this round", instanceID)
	}
	return nil
}

// DequeueInstance implements provider.Tx. A first statement locks an
// instance row with FOR UPDATE SKIP LOCKED; a second, whose snapshot
// follows the lock, reads the instance's visible messages. When those
// were acked in between by the round that held the instance, the search
// goes on with the next instance, so another worker's lock never makes
// the result spuriously empty.
func (t *roundTx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	return t.dequeue(ctx, p, false)
}

// FlushAndDequeue implements provider.FlushDequeuer: on PostgreSQL the
// deferred writes go first in the pipeline of the dequeue's first lock.
// When one fails, the error wraps provider.ErrFlush; if the lock ran
// (the writes' statements succeeded and a callback reported the
// failure: a conflicting append), it is undone by the abandon that
// follows (see extraSavepoint).
func (t *roundTx) FlushAndDequeue(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	return t.dequeue(ctx, p, true)
}

// dequeue is DequeueInstance; with carry the deferred writes are sent
// with the first lock (FlushAndDequeue).
func (t *roundTx) dequeue(ctx context.Context, p *provider.DequeueParams, carry bool) (*provider.Batch, error) {
	var batch *provider.Batch
	err := t.step(func() error {
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		t.extraSavepoint = false
		var carried *pgx.Batch
		if carry && !t.s.citus && p.InstanceID == "" && t.unsent == nil && t.pending != nil && t.pending.Len() > 0 {
			carried, t.pending = t.pending, nil
		} else if err := t.flush(ctx); err != nil {
			if carry {
				return fmt.Errorf("%w: %w", provider.ErrFlush, err)
			}
			return err
		}
		if p.InstanceID != "" && t.holds(p.InstanceID) {
			return nil
		}
		// The completion's result, unless its instance turns out busy:
		// then it is inserted before the commit.
		unsent := t.unsent != nil && !t.unsent.consumed && t.unsent.msg.InstanceID == p.InstanceID
		if p.InstanceID != "" && t.busy[p.InstanceID] {
			return nil
		}
		// The instances the store's other rounds hold are locked: skip
		// them without a probe. One whose round ends meanwhile is left to
		// the next dequeue, which the end of that round wakes (end).
		skip := append(slices.Clone(t.locked), t.s.lockedInstances()...)
		var parts []int32
		if p.InstanceID != "" {
			parts = []int32{t.s.part(p.InstanceID)}
		} else {
			parts = t.s.partsOf(p.Partitions)
		}
		for len(parts) > 0 {
			part := parts[0]
			var lock, pick string
			args := []any{p.Now, p.InstanceID, part}
			switch {
			case unsent:
				lock, pick = t.s.sql.lockInstanceByID, t.s.sql.lockInstancePick
			case p.InstanceID != "":
				lock, pick = t.s.sql.dequeueLockByID, t.s.sql.dequeuePickByID
			default:
				lock, pick, args[1] = t.s.sql.dequeueLock, t.s.sql.dequeuePick, skip
			}
			var (
				id     string
				stored []storedMessage
				head   *provider.Head
				err    error
			)
			if t.s.citus {
				id, stored, head, err = t.lockThenFetch(ctx, lock, args, part, p, limit)
			} else {
				id, stored, head, err = t.pickAndFetch(ctx, carried, pick, args, part, p, limit)
				carried = nil
			}
			if err != nil {
				return err
			}
			if id == "" {
				if unsent {
					// Held, or locked by another round: the result waits
					// for a later round, queued.
					t.insertUnsent()
					return nil
				}
				parts = parts[1:] // nothing (more) in this partition
				continue
			}
			t.lock(id)
			msgs, err := t.decode(ctx, id, stored, p)
			if err != nil {
				return err
			}
			if unsent && len(msgs) < limit {
				// The result follows what was queued before it, when the
				// batch has room for it; otherwise it is inserted before
				// the commit (or by an abandon, whose rollback to the
				// dequeue's savepoint would undo an insert made now), and
				// a later round takes it.
				msgs = append(msgs, t.unsent.msg)
			}
			if len(msgs) > 0 {
				if r, ok := t.results[id]; ok && slices.ContainsFunc(msgs, func(m provider.Message) bool { return m.ID == r }) {
					delete(t.results, id) // the round takes it
				}
				batch = &provider.Batch{InstanceID: id, Messages: msgs, Head: head}
				t.batches++
				t.atDequeue = [2]bool{t.enqueuedMessages, t.enqueuedTasks}
				return nil
			}
			if p.InstanceID != "" {
				return nil
			}
			skip = append(skip, id)
		}
		return nil
	})
	return batch, err
}

// lock records a locked instance; callers hold t.mu. The store's
// bookkeeping (which NextVisibleAt leaves out, and end releases with a
// wake-up) leaves out the instance of a round run with an activity's
// completion: the message such a round takes is mostly its own result,
// which other sessions cannot see (see unsent), so the instance
// rarely has visible work while it is held, and when it has, a worker
// that skips it finds that work visible and looks again soon, as it does
// for an instance held by another process.
func (t *roundTx) lock(id string) {
	t.locked = append(t.locked, id)
	if t.inline {
		return
	}
	t.s.mu.Lock()
	t.s.locked[id]++
	t.s.mu.Unlock()
}

// dequeuedSavepoint follows the lock of the instance a dequeue returned:
// AbandonMessages rolls back to it, undoing the round's writes but not
// the lock.
const dequeuedSavepoint = "chronicle_dequeued"

// pickAndFetch locks an instance with pick (pickSQL), reads its visible
// messages and the head of its history, clears a hold that has passed,
// and sets dequeuedSavepoint, in one round trip; id is "" when pick
// locked none. The writes of carried, when set, go first in that round
// trip: their failure is returned wrapping provider.ErrFlush.
func (t *roundTx) pickAndFetch(ctx context.Context, carried *pgx.Batch, pick string, args []any, part int32, p *provider.DequeueParams, limit int) (id string, stored []storedMessage, head *provider.Head, err error) {
	b := carried
	if b == nil {
		b = &pgx.Batch{}
	}
	var writesErr error
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err != nil && writesErr == nil {
				writesErr = err
			}
			return err
		}
	}
	b.Queue(pick, args...).QueryRow(func(row pgx.Row) error {
		var held bool
		return row.Scan(&id, &held)
	})
	b.Queue(t.s.sql.fetchDequeued, p.Now, limit, part).Query(func(rows pgx.Rows) error {
		var err error
		stored, head, err = scanDequeued(rows)
		return err
	})
	b.Queue("SAVEPOINT " + dequeuedSavepoint)
	err = t.tx.SendBatch(ctx, b).Close()
	if writesErr != nil {
		// Unless a write's statement failed, which aborted the
		// transaction (the server skipped what followed), the lock and
		// its savepoint ran after the writes: the abandon of their
		// instance rolls back past that savepoint too.
		t.extraSavepoint = t.tx.Conn().PgConn().TxStatus() != 'E'
		return "", nil, nil, fmt.Errorf("%w: %w", provider.ErrFlush, failf(writesErr, "round writes"))
	}
	if err != nil {
		return "", nil, nil, failf(err, "dequeue: lock an instance and read its messages")
	}
	return id, stored, head, nil
}

// lockThenFetch locks an instance with lock, then reads its visible
// messages and the head of its history, clears a hold that has passed,
// and sets dequeuedSavepoint, in a second round trip; id is "" when lock
// locked none. It is the dequeue of a store on Citus, which routes each
// statement by the partition and instance it names.
func (t *roundTx) lockThenFetch(ctx context.Context, lock string, args []any, part int32, p *provider.DequeueParams, limit int) (id string, stored []storedMessage, head *provider.Head, err error) {
	var held bool
	err = t.tx.QueryRow(ctx, lock, args...).Scan(&id, &held)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, failf(err, "dequeue: lock an instance")
	}
	b := &pgx.Batch{}
	b.Queue(t.s.sql.dequeueFetch, id, p.Now, limit, part)
	b.Queue(t.s.sql.historyHead, id, part)
	if held {
		b.Queue(t.s.sql.clearHold, id, p.Now, part)
	}
	b.Queue("SAVEPOINT " + dequeuedSavepoint)
	br := t.tx.SendBatch(ctx, b)
	stored, head, err = readFetched(br)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return "", nil, nil, failf(err, "dequeue messages of %s", id)
	}
	return id, stored, head, nil
}

// readFetched reads the results of a dequeue's fetch: the messages, then
// the head of the history (zero when the instance has none).
func readFetched(br pgx.BatchResults) ([]storedMessage, *provider.Head, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	stored, err := scanStoredMessages(rows)
	if err != nil {
		return nil, nil, err
	}
	head := &provider.Head{}
	if err := br.QueryRow().Scan(&head.Seq, &head.Hash); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, err
	}
	return stored, head, nil
}

// decode decodes the messages a dequeue read of the locked instance id.
// Rows whose envelope does not decode are dead-lettered, with their
// bytes, rather than failing every round that meets them.
func (t *roundTx) decode(ctx context.Context, id string, stored []storedMessage, p *provider.DequeueParams) ([]provider.Message, error) {
	msgs := make([]provider.Message, 0, len(stored))
	var (
		letters []provider.DeadLetter
		bad     []string
	)
	for _, sm := range stored {
		m, err := provider.UnmarshalMessage(sm.envelope)
		if err != nil {
			letters = append(letters, provider.DeadLetter{
				ID: provider.DeadLetterID(sm.id, time.Time{}), InstanceID: id, Raw: sm.envelope,
				Reason: provider.ReasonUndecodable, Error: fmt.Sprintf("message %s: %v", sm.id, err),
				Node: p.Owner, At: p.Now, Attempts: int(sm.attempts) + 1, Status: provider.DeadLetterDead,
			})
			bad = append(bad, sm.id)
			continue
		}
		m.Attempts, m.LastError = int(sm.attempts), sm.lastError
		msgs = append(msgs, m)
	}
	if len(letters) == 0 {
		return msgs, nil
	}
	for _, l := range letters {
		t.s.log.WarnContext(ctx, "undecodable message dead-lettered", slog.String("instance", id), slog.String("error", l.Error))
	}
	if err := t.s.deadLetterRows(ctx, t.tx, id, letters, bad); err != nil {
		return nil, err
	}
	// The dead letters go before the savepoint: an abandon keeps them.
	_, err := t.tx.Exec(ctx, "SAVEPOINT "+dequeuedSavepoint)
	return msgs, failf(err, "dequeue messages of %s", id)
}

// LoadHistory implements provider.Steps; it sees the round's own appends.
func (t *roundTx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var events []history.Event
	err := t.step(func() error {
		if err := t.flush(ctx); err != nil {
			return err
		}
		var err error
		events, err = loadHistory(ctx, t.tx, t.s.sql.loadHistory, p.InstanceID, t.s.part(p.InstanceID), p.FromSeq)
		return err
	})
	return events, err
}

// GetSnapshot implements provider.Steps.
func (t *roundTx) GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error) {
	err = t.step(func() error {
		if err := t.flush(ctx); err != nil {
			return err
		}
		if err := t.tx.QueryRow(ctx, t.s.sql.getSnapshot, instanceID, t.s.part(instanceID)).Scan(&data, &seq); err != nil {
			return failf(err, "snapshot of %s", instanceID)
		}
		return nil
	})
	return data, seq, err
}

// AppendHistory implements provider.Steps. On PostgreSQL it is deferred
// (see Flush) with the round's other writes, in one round trip: a
// conflict fails those writes, the round's own (the runner flushes at the
// end of each instance's round), and the round is abandoned, which rolls
// back to its dequeue. On Citus it runs at once, under a savepoint.
func (t *roundTx) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	return t.step(func() error {
		if !t.s.citus {
			return t.s.deferAppend(deferred{t}.batch(), p)
		}
		if err := t.flush(ctx); err != nil {
			return err
		}
		return t.s.citusAppendHistory(ctx, t.tx, p)
	})
}

// SaveProjections implements provider.Steps. It is deferred (see Flush)
// unless it writes human tasks, whose taken ids it reports at once.
func (t *roundTx) SaveProjections(ctx context.Context, p *provider.Projections) error {
	return t.step(func() error {
		if len(p.Tasks) > 0 {
			if err := t.flush(ctx); err != nil {
				return err
			}
			return t.s.saveProjections(ctx, t.tx, p)
		}
		return t.s.saveProjections(ctx, deferred{t}, p)
	})
}

// EnqueueMessages implements provider.Steps; new work is announced after
// the commit. It is not deferred: its messages may be another instance's,
// whose row it locks at once against a purge (see lockInstancesSQL). The
// writes deferred before it go first, in the same round trip.
func (t *roundTx) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return t.step(func() error {
		if len(p.Messages) == 0 {
			return t.flush(ctx)
		}
		a, err := t.s.newMessageArgs(p.Messages, p.Now)
		if err != nil {
			return fmt.Errorf("postgres: enqueue %d messages: %w", len(p.Messages), err)
		}
		var inserted int64
		t.s.queueEnqueue(deferred{t}.batch(), a, deferred{t}.batch, func(n int64) error {
			inserted = n
			return nil
		})
		err = t.flush(ctx)
		t.enqueuedMessages = t.enqueuedMessages || inserted > 0
		if t.s.partitions > 1 {
			t.msgParts = append(t.msgParts, a.parts...)
		}
		return err
	})
}

// EnqueueActivities implements provider.Steps, deferred (see Flush).
func (t *roundTx) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	return t.step(func() error {
		args, err := t.s.activityArgs(p)
		if err != nil || args == nil {
			return err
		}
		if t.s.partitions > 1 {
			for i := range p.Tasks {
				t.taskParts = append(t.taskParts, t.s.part(p.Tasks[i].InstanceID))
			}
		}
		if t.s.citus {
			return t.citusEnqueueActivities(ctx, args, nil, func(n int64) { t.enqueuedTasks = t.enqueuedTasks || n > 0 })
		}
		deferred{t}.batch().Queue(t.s.sql.enqueueActivities, args...).QueryRow(func(row pgx.Row) error {
			var inserted int64
			if err := row.Scan(&inserted); err != nil {
				return fmt.Errorf("enqueue %d activity tasks: %w", len(p.Tasks), err)
			}
			t.enqueuedTasks = t.enqueuedTasks || inserted > 0
			return nil
		})
		return nil
	})
}

// EnqueueClaimedActivity implements provider.ClaimingTx, deferred (see
// Flush): the task is inserted with its claim, its id remembered as any
// enqueued task's.
func (t *roundTx) EnqueueClaimedActivity(ctx context.Context, p *provider.EnqueueClaimedActivityParams) error {
	return t.step(func() error {
		args, err := t.s.activityArgs(&provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{p.Task}, Now: p.Now})
		if err != nil {
			return err
		}
		if t.s.citus {
			return t.citusEnqueueActivities(ctx, args, &claimOf{token: p.Token, owner: p.Owner, until: p.LockedUntil}, nil)
		}
		args = append(args, p.Token, p.Owner, p.LockedUntil)
		deferred{t}.batch().Queue(t.s.sql.enqueueClaimed, args...).QueryRow(func(row pgx.Row) error {
			var inserted int64
			if err := row.Scan(&inserted); err != nil {
				return fmt.Errorf("enqueue claimed activity task %s: %w", p.Task.ID, err)
			}
			return nil
		})
		return nil
	})
}

// CancelActivities implements provider.Steps, deferred (see Flush).
func (t *roundTx) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	return t.step(func() error { return t.s.cancelActivities(ctx, deferred{t}, p) })
}

// DeadLetterMessages implements provider.Tx.
func (t *roundTx) DeadLetterMessages(ctx context.Context, p *provider.DeadLetterMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		if err := t.flush(ctx); err != nil {
			return err
		}
		for i := range p.Letters {
			if m := p.Letters[i].Message; m != nil {
				t.consume(p.InstanceID, []string{m.ID})
			}
		}
		return t.s.deadLetterMessages(ctx, t.tx, p.InstanceID, p.Letters)
	})
}

// AckMessages implements provider.Tx, deferred (see Flush).
func (t *roundTx) AckMessages(ctx context.Context, p *provider.AckMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		if len(p.MessageIDs) == 0 {
			return nil
		}
		t.consume(p.InstanceID, p.MessageIDs)
		_, err := deferred{t}.Exec(ctx, t.s.sql.ackMessages, p.InstanceID, p.MessageIDs, t.s.part(p.InstanceID))
		return err
	})
}

// AbandonMessages implements provider.Tx: it rolls back to the savepoint that
// follows the dequeue of the instance, which must be the one dequeued last
// (a savepoint of one name stacks: the rollback goes to the newest), so the
// rounds of instances dequeued before it keep their writes and every row
// lock stays. It then records the failed delivery with the instance row
// first, the lock order of every writer.
func (t *roundTx) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		if t.locked[len(t.locked)-1] != p.InstanceID {
			return fmt.Errorf("postgres: abandon of %s, which is not the instance dequeued last", p.InstanceID)
		}
		// The writes still deferred follow the instance's dequeue (which
		// flushed those before it): the rollback would undo them.
		t.pending = nil
		t.abandoned = true
		b := &pgx.Batch{}
		rollback := "ROLLBACK TO SAVEPOINT " + dequeuedSavepoint
		if t.extraSavepoint {
			// A dequeue sent with the instance's writes set a savepoint
			// of the same name after them (FlushAndDequeue): released,
			// the rollback goes to the instance's own, and undoes that
			// dequeue's lock too.
			t.extraSavepoint = false
			b.Queue("RELEASE SAVEPOINT " + dequeuedSavepoint)
		}
		if t.tx.Conn().PgConn().TxStatus() == 'E' {
			// A failed statement (a deferred write of the round, say)
			// aborted the transaction: pgx prepares a batch's new
			// statements before it runs the first, which the server
			// refuses until the rollback has run.
			if _, err := t.tx.Exec(ctx, rollback); err != nil {
				return failf(err, "abandon messages of %s", p.InstanceID)
			}
		} else {
			b.Queue(rollback)
		}
		if u := t.unsent; u != nil && u.msg.InstanceID == p.InstanceID {
			// The result is queued (an ack or dead letter of it is
			// undone), and counts the failed delivery.
			t.unsent = nil
			t.s.queueEnqueue(b, u.args, nil, nil)
		}
		part := t.s.part(p.InstanceID)
		b.Queue(t.s.sql.holdInstance, p.InstanceID, p.VisibleAt, part)
		b.Queue(t.s.sql.abandonMessages, p.InstanceID, p.MessageIDs, p.Error, part)
		if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
			return failf(err, "abandon messages of %s", p.InstanceID)
		}
		// What the instance's round enqueued is undone: nobody needs
		// waking for it.
		t.enqueuedMessages, t.enqueuedTasks = t.atDequeue[0], t.atDequeue[1]
		return nil
	})
}
