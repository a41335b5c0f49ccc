package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// RunRound implements provider.TxStore: fn runs in one READ COMMITTED
// transaction on one pooled connection, which commits when fn returns nil
// and ctx has not ended, and rolls back otherwise (a panic in fn rolls
// back too, then propagates). Instances dequeued by fn stay locked until
// the transaction ends; fn may dequeue several (group commit). Before the
// commit the round enqueues its wake messages (AQ, ON_COMMIT visibility)
// for the queues it gave work to. The Tx must not be used after RunRound
// returns; its methods may be called from one goroutine at a time
// (concurrent calls are serialized).
//
// A commit whose connection broke returns an error wrapping
// [ErrOutcomeUnknown] and [ErrRetryable]; running the round again is safe,
// since appends are idempotent by Seq and hash and enqueues by id.
func (s *Store) RunRound(ctx context.Context, fn func(ctx context.Context, tx provider.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sqlTx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return failf(err, "begin round")
	}
	t := &roundTx{s: s, tx: sqlTx}
	committed := false
	defer func() {
		if !committed {
			// The round's error is returned; the driver discards a
			// connection whose rollback failed.
			_ = sqlTx.Rollback()
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
	t.closed = true
	orch, act := t.enqueuedMessages, t.enqueuedTasks
	t.mu.Unlock()
	s.enqueueWake(ctx, sqlTx, orch, act)
	if err := sqlTx.Commit(); err != nil {
		// The outcome may be unknown: wake workers as if it committed.
		t.mu.Lock()
		t.wakeOnEnd = true
		t.mu.Unlock()
		return fmt.Errorf("oracle: commit round: %w", translateCommit(err))
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
	tx *sql.Tx

	mu     sync.Mutex
	closed bool
	// locked are the instances this round locked, in order; last is the
	// one whose batch it returned last, which the savepoint follows.
	locked []string
	last   string
	// enqueued records which queues got work, for the wake-up; atDequeue
	// is what it was when the last batch was returned.
	enqueuedMessages, enqueuedTasks bool
	atDequeue                       [2]bool
	wakeOnEnd                       bool
}

var _ provider.Tx = (*roundTx)(nil)

// step serializes the calls on the round's connection.
func (t *roundTx) step(fn func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("oracle: round transaction already ended")
	}
	return fn()
}

// end releases the round's instances in the store's bookkeeping and wakes
// this process's workers waiting on what the round changed.
func (t *roundTx) end(committed bool) {
	t.mu.Lock()
	t.closed = true
	locked := t.locked
	enqueued := committed || t.wakeOnEnd
	msgs, tasks := enqueued && t.enqueuedMessages, enqueued && t.enqueuedTasks
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
	if msgs || len(locked) > 0 {
		// Released instances may have work this process's workers
		// skipped while the round held them.
		s.wake(provider.QueueOrchestration)
	}
	if tasks {
		s.wake(provider.QueueActivity)
	}
}

// holds reports whether this round locked instanceID; callers hold t.mu.
func (t *roundTx) holds(instanceID string) bool {
	return slices.Contains(t.locked, instanceID)
}

func (t *roundTx) requireLock(instanceID string) error {
	if !t.holds(instanceID) {
		return fmt.Errorf("oracle: instance %s is not locked by this round", instanceID)
	}
	return nil
}

// lock records a locked instance; callers hold t.mu.
func (t *roundTx) lock(id string) {
	t.locked = append(t.locked, id)
	t.s.mu.Lock()
	t.s.locked[id]++
	t.s.mu.Unlock()
}

// candidate is an instance with visible messages that a dequeue may lock.
type candidate struct {
	id string
	// orphan: the instance has messages but no row (a purge deleted it
	// while a message to it was being enqueued); the dequeue creates it.
	orphan bool
}

// DequeueInstance implements provider.Tx. A first statement lists the
// instances of the oldest visible messages, without locking; the dequeue
// then locks them one by one with SELECT … FOR UPDATE SKIP LOCKED until
// one is free, and reads its visible messages in a statement of its own,
// which follows the lock. An instance whose messages were acked in
// between by the round that held it is passed over (it stays locked
// until the round ends, harmlessly), so another worker's lock never makes
// the result spuriously empty.
func (t *roundTx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	var batch *provider.Batch
	err := t.step(func() error {
		var err error
		if p.InstanceID != "" {
			batch, err = t.dequeueByID(ctx, p)
			return err
		}
		skip := slices.Clone(t.locked)
		for len(skip) < maxListLength {
			cands, err := t.candidates(ctx, p.Now, skip)
			if err != nil || len(cands) == 0 {
				return err
			}
			for _, c := range cands {
				skip = append(skip, c.id)
				if batch, err = t.take(ctx, p, c); err != nil || batch != nil {
					return err
				}
			}
		}
		// Hundreds of instances with work are all locked by other rounds:
		// as good as none for this one.
		return nil
	})
	return batch, err
}

// dequeueByID dequeues the instance p names, if it has visible messages
// and is neither held nor locked.
func (t *roundTx) dequeueByID(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	if t.holds(p.InstanceID) {
		return nil, nil
	}
	var visible, rows int64
	if err := t.tx.QueryRowContext(ctx, t.s.sql.hasVisible, named("inst", p.InstanceID), named("now", timeArg(p.Now))).
		Scan(intScan{&visible}, intScan{&rows}); err != nil {
		return nil, failf(err, "dequeue %s", p.InstanceID)
	}
	if visible == 0 {
		return nil, nil
	}
	return t.take(ctx, p, candidate{id: p.InstanceID, orphan: rows == 0})
}

// candidates lists the instances of the oldest visible messages, in
// order, leaving out those of skip.
func (t *roundTx) candidates(ctx context.Context, now time.Time, skip []string) ([]candidate, error) {
	list := skip
	if len(list) == 0 {
		list = []string{noMatch}
	}
	query, args := expandList(t.s.sql.dequeueCandidates, "skip", list)
	rows, err := t.tx.QueryContext(ctx, query, append(args, named("now", timeArg(now)))...)
	if err != nil {
		return nil, failf(err, "dequeue: list instances with work")
	}
	defer rows.Close()
	var (
		out  []candidate
		seen = map[string]bool{}
	)
	for rows.Next() {
		var (
			c      candidate
			orphan int64
		)
		if err := rows.Scan(&c.id, intScan{&orphan}); err != nil {
			return nil, failf(err, "dequeue: list instances with work")
		}
		if seen[c.id] {
			continue
		}
		seen[c.id] = true
		c.orphan = orphan == 1
		out = append(out, c)
	}
	return out, failf(rows.Err(), "dequeue: list instances with work")
}

// take locks the candidate instance unless another round holds it or a
// hold delays it, and returns its batch; nil when it could not lock it or
// found no visible message. Callers hold t.mu.
func (t *roundTx) take(ctx context.Context, p *provider.DequeueParams, c candidate) (*provider.Batch, error) {
	if c.orphan {
		if err := t.s.ensureInstances(ctx, t.tx, []string{c.id}); err != nil {
			return nil, err
		}
	}
	var held int64
	err := t.tx.QueryRowContext(ctx, t.s.sql.lockInstance, named("inst", c.id), named("now", timeArg(p.Now))).Scan(intScan{&held})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // held, or locked by another round
	}
	if err != nil {
		return nil, failf(err, "dequeue: lock instance %s", c.id)
	}
	t.lock(c.id)
	msgs, head, err := t.fetch(ctx, c.id, p, held == 1)
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	t.last = c.id
	t.atDequeue = [2]bool{t.enqueuedMessages, t.enqueuedTasks}
	return &provider.Batch{InstanceID: c.id, Messages: msgs, Head: head}, nil
}

// dequeuedSavepoint follows the dequeue of the instance whose batch a
// dequeue returned: AbandonMessages rolls back to it, undoing the round's
// writes since but not the row lock, which was taken before it. A
// savepoint of a name already used replaces the older one.
const dequeuedSavepoint = "chronicle_dequeued"

// fetch reads the visible messages and the history head of a locked
// instance, clears a hold that has passed and sets dequeuedSavepoint.
// Rows whose envelope does not decode are dead-lettered, with their
// bytes, rather than failing every round that meets them.
func (t *roundTx) fetch(ctx context.Context, id string, p *provider.DequeueParams, held bool) ([]provider.Message, *provider.Head, error) {
	stored, err := t.s.storedMessages(ctx, t.tx, id, p.Now, limitOf(p.Limit))
	if err != nil {
		return nil, nil, err
	}
	if len(stored) == 0 {
		return nil, nil, nil
	}
	head := &provider.Head{}
	err = t.tx.QueryRowContext(ctx, t.s.sql.historyHead, named("inst", id)).Scan(intScan{&head.Seq}, &head.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		head, err = &provider.Head{}, nil
	}
	if err != nil {
		return nil, nil, failf(err, "dequeue: history head of %s", id)
	}
	if held {
		if _, err := t.tx.ExecContext(ctx, t.s.sql.clearHold, named("inst", id), named("now", timeArg(p.Now))); err != nil {
			return nil, nil, failf(err, "dequeue: clear the hold of %s", id)
		}
	}
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
	for _, l := range letters {
		t.s.log.WarnContext(ctx, "undecodable message dead-lettered", slog.String("instance", id), slog.String("error", l.Error))
	}
	// The dead letters go before the savepoint: an abandon keeps them.
	if err := t.s.deadLetterRows(ctx, t.tx, id, letters, bad); err != nil {
		return nil, nil, err
	}
	if len(msgs) == 0 {
		return nil, nil, nil
	}
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+dequeuedSavepoint); err != nil {
		return nil, nil, failf(err, "dequeue: savepoint after %s", id)
	}
	return msgs, head, nil
}

// LoadHistory implements provider.Steps; it sees the round's own appends.
func (t *roundTx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var events []history.Event
	err := t.step(func() error {
		var err error
		events, err = t.s.loadHistory(ctx, t.tx, p.InstanceID, p.FromSeq)
		return err
	})
	return events, err
}

// GetSnapshot implements provider.Steps.
func (t *roundTx) GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error) {
	err = t.step(func() error {
		data, seq, err = t.s.getSnapshot(ctx, t.tx, instanceID)
		return err
	})
	return data, seq, err
}

// AppendHistory implements provider.Steps.
func (t *roundTx) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	return t.step(func() error { return t.s.appendHistory(ctx, t.tx, p) })
}

// SaveProjections implements provider.Steps.
func (t *roundTx) SaveProjections(ctx context.Context, p *provider.Projections) error {
	return t.step(func() error { return t.s.saveProjections(ctx, t.tx, p, t.holds(p.InstanceID)) })
}

// EnqueueMessages implements provider.Steps; the wake-up is enqueued
// before the commit.
func (t *roundTx) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return t.step(func() error {
		added, err := t.s.enqueueMessages(ctx, t.tx, p, t.holds)
		t.enqueuedMessages = t.enqueuedMessages || added
		return err
	})
}

// EnqueueActivities implements provider.Steps.
func (t *roundTx) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	return t.step(func() error {
		added, err := t.s.enqueueActivities(ctx, t.tx, p)
		t.enqueuedTasks = t.enqueuedTasks || added
		return err
	})
}

// CancelActivities implements provider.Steps.
func (t *roundTx) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	return t.step(func() error { return t.s.cancelActivities(ctx, t.tx, p) })
}

// ResetProjections implements provider.Steps.
func (t *roundTx) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	return t.step(func() error { return t.s.resetProjections(ctx, t.tx, p) })
}

// DeadLetterMessages implements provider.Tx.
func (t *roundTx) DeadLetterMessages(ctx context.Context, p *provider.DeadLetterMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		return t.s.deadLetterMessages(ctx, t.tx, p.InstanceID, p.Letters)
	})
}

// AckMessages implements provider.Tx.
func (t *roundTx) AckMessages(ctx context.Context, p *provider.AckMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		return t.s.deleteMessages(ctx, t.tx, p.InstanceID, p.MessageIDs)
	})
}

// AbandonMessages implements provider.Tx: it rolls back to the savepoint
// that follows the dequeue of the instance, which must be the one whose
// batch was returned last, so the rounds of instances dequeued before it
// keep their writes and every row lock stays (Oracle releases at a
// rollback to a savepoint only the locks taken after it). It then records
// the failed delivery, the instance row first, as every writer does.
func (t *roundTx) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return t.step(func() error {
		if err := t.requireLock(p.InstanceID); err != nil {
			return err
		}
		if t.last != p.InstanceID {
			return fmt.Errorf("oracle: abandon of %s, which is not the instance dequeued last", p.InstanceID)
		}
		if _, err := t.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+dequeuedSavepoint); err != nil {
			return failf(err, "abandon messages of %s: roll back to savepoint", p.InstanceID)
		}
		// What the instance's round enqueued is undone: nobody needs
		// waking for it.
		t.enqueuedMessages, t.enqueuedTasks = t.atDequeue[0], t.atDequeue[1]
		return t.s.abandonMessages(ctx, t.tx, p)
	})
}
