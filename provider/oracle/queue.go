package oracle

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// ensureInstances creates the rows of instances that have none. A unique
// violation means a concurrent transaction created the row first, which
// is as good: Oracle rolls back only the failed statement.
//
// Rows are created in id order, so that two transactions creating the
// same new instances never wait for each other in a cycle (ORA-00060).
func (s *Store) ensureInstances(ctx context.Context, db dbtx, ids []string) error {
	ids = slices.Sorted(slices.Values(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, err := db.ExecContext(ctx, s.sql.ensureInstance, named("inst", id)); err != nil && !isDuplicate(err) {
			return failf(err, "create the row of instance %s", id)
		}
	}
	return nil
}

// enqueueMessages queues msgs on db, creating the rows of their instances
// first (but those that locked reports as held by the caller's round),
// and reports whether it queued any. Of two messages with one id the
// first wins, as it would when enqueued one by one; an id already queued
// is left as it is.
func (s *Store) enqueueMessages(ctx context.Context, db dbtx, p *provider.EnqueueMessagesParams, locked func(string) bool) (bool, error) {
	if len(p.Messages) == 0 {
		return false, nil
	}
	for i := range p.Messages {
		if err := provider.ValidatePriority(p.Messages[i].Priority); err != nil {
			return false, fmt.Errorf("%w: message %s: %w", ErrInvalidArgument, p.Messages[i].ID, err)
		}
	}
	var instances []string
	for i := range p.Messages {
		if id := p.Messages[i].InstanceID; locked == nil || !locked(id) {
			instances = append(instances, id)
		}
	}
	if err := s.ensureInstances(ctx, db, instances); err != nil {
		return false, err
	}
	added := false
	seen := make(map[string]bool, len(p.Messages))
	for _, m := range p.Messages {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		m.SetDefaults(p.Now)
		attempts, lastError := m.Attempts, m.LastError
		// The envelope is the message as enqueued; the delivery count
		// lives in columns, which AbandonMessages updates.
		m.Attempts, m.LastError = 0, ""
		env, err := provider.MarshalMessage(&m)
		if err != nil {
			return false, fmt.Errorf("oracle: encode message %s: %w", m.ID, err)
		}
		_, err = db.ExecContext(ctx, s.sql.insertMessage,
			named("id", m.ID), named("inst", m.InstanceID), named("visible", timeArg(m.VisibleAt)),
			named("prio", int64(m.Priority)), named("attempts", int64(attempts)), named("lerr", textArg(lastError)), named("env", blobArg(env)))
		switch {
		case isDuplicate(err):
			// Queued already: the enqueue of this message is a no-op.
		case err != nil:
			return false, failf(err, "enqueue message %s", m.ID)
		default:
			added = true
		}
	}
	return added, nil
}

// EnqueueMessages implements provider.Store: one transaction creates the
// instances' rows, inserts the new messages and enqueues the wake-up.
func (s *Store) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	var added bool
	err := s.inTx(ctx, fmt.Sprintf("enqueue %d messages", len(p.Messages)), func(tx *sql.Tx) error {
		var err error
		if added, err = s.enqueueMessages(ctx, tx, p, nil); err != nil || !added {
			return err
		}
		s.enqueueWake(ctx, tx, true, false)
		return nil
	})
	if added {
		s.wake(provider.QueueOrchestration)
	}
	return err
}

// storedMessage is a row of the messages table before its envelope is
// decoded.
type storedMessage struct {
	id        string
	envelope  []byte
	attempts  int64
	lastError string
}

// storedMessages reads the visible messages of an instance in enqueue
// order, at most limit.
func (s *Store) storedMessages(ctx context.Context, db dbtx, id string, now time.Time, limit int) ([]storedMessage, error) {
	rows, err := db.QueryContext(ctx, s.sql.dequeueFetch, named("inst", id), named("now", timeArg(now)), named("lim", int64(limit)))
	if err != nil {
		return nil, failf(err, "dequeue messages of %s", id)
	}
	defer rows.Close()
	var out []storedMessage
	for rows.Next() {
		var sm storedMessage
		if err := rows.Scan(strScan{&sm.id}, &sm.envelope, intScan{&sm.attempts}, strScan{&sm.lastError}); err != nil {
			return nil, failf(err, "dequeue messages of %s", id)
		}
		out = append(out, sm)
	}
	return out, failf(rows.Err(), "dequeue messages of %s", id)
}

// deleteMessages removes messages of an instance by id.
func (s *Store) deleteMessages(ctx context.Context, db dbtx, instanceID string, ids []string) error {
	for _, part := range chunks(ids) {
		query, args := expandList(s.sql.ackMessages, "ids", part)
		if _, err := db.ExecContext(ctx, query, append(args, named("inst", instanceID))...); err != nil {
			return failf(err, "remove messages of %s", instanceID)
		}
	}
	return nil
}

// abandonMessages holds the instance until p.VisibleAt (unless it is held
// longer) and counts the failed delivery on the messages still queued:
// the instance row first, then the messages, the order of every writer.
func (s *Store) abandonMessages(ctx context.Context, db dbtx, p *provider.AbandonMessagesParams) error {
	if _, err := db.ExecContext(ctx, s.sql.holdInstance, named("inst", p.InstanceID), named("until", timeArg(p.VisibleAt))); err != nil {
		return failf(err, "hold instance %s", p.InstanceID)
	}
	for _, part := range chunks(p.MessageIDs) {
		query, args := expandList(s.sql.abandonMessages, "ids", part)
		args = append(args, named("inst", p.InstanceID), named("lerr", textArg(p.Error)))
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			return failf(err, "abandon messages of %s", p.InstanceID)
		}
	}
	return nil
}

// AbandonMessages implements provider.Store in one transaction that holds
// the instance and counts the failed delivery. It waits for a round that
// holds the instance to end.
func (s *Store) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return s.inTx(ctx, "abandon messages of "+p.InstanceID, func(tx *sql.Tx) error {
		return s.abandonMessages(ctx, tx, p)
	})
}

// ListMessages implements provider.Store.
func (s *Store) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.listMessages, named("inst", p.InstanceID), named("lim", int64(limitOf(p.Limit))))
	if err != nil {
		return nil, failf(err, "list messages of %s", p.InstanceID)
	}
	defer rows.Close()
	var out []provider.Message
	for rows.Next() {
		var (
			env       []byte
			attempts  int64
			lastError string
		)
		if err := rows.Scan(&env, intScan{&attempts}, strScan{&lastError}); err != nil {
			return nil, failf(err, "list messages of %s", p.InstanceID)
		}
		m, err := provider.UnmarshalMessage(env)
		if err != nil {
			return nil, fmt.Errorf("oracle: list messages of %s: %w", p.InstanceID, err)
		}
		m.Attempts, m.LastError = int(attempts), lastError
		out = append(out, m)
	}
	return out, failf(rows.Err(), "list messages of %s", p.InstanceID)
}

// queueKey is the stored form of an activity queue's name: Oracle would
// store the default queue "" as NULL, which no IN list matches.
func queueKey(q string) string { return ":" + q }

// queueKeys returns the stored names of the served queues; none means
// the default queue.
func queueKeys(queues []string) []string {
	if len(queues) == 0 {
		return []string{queueKey("")}
	}
	out := make([]string, len(queues))
	for i, q := range queues {
		out[i] = queueKey(q)
	}
	return out
}

// NextVisibleAt implements provider.Store. Instances locked by rounds of
// other stores count (their row locks cannot be seen without taking
// locks), so a worker may find the time passed and no instance to
// dequeue until those rounds end.
func (s *Store) NextVisibleAt(ctx context.Context, p *provider.NextVisibleAtParams) (time.Time, bool, error) {
	var (
		query string
		args  []any
	)
	switch p.Queue {
	case provider.QueueOrchestration:
		skip := s.lockedInstances()
		if len(skip) == 0 {
			skip = []string{noMatch}
		}
		query, args = expandList(s.sql.nextOrchestration, "skip", skip)
	case provider.QueueActivity:
		queues := queueKeys(p.Queues)
		if len(queues) > maxListLength {
			return time.Time{}, false, fmt.Errorf("oracle: next visible time: %d activity queues, at most %d", len(queues), maxListLength)
		}
		query, args = expandList(s.sql.nextActivity, "queues", queues)
	default:
		return time.Time{}, false, fmt.Errorf("oracle: unknown queue %q", p.Queue)
	}
	var (
		at    int64
		valid bool
	)
	err := s.db.QueryRowContext(ctx, query, args...).Scan(nullableInt{&at, &valid})
	if err != nil {
		return time.Time{}, false, failf(err, "next visible time of the %s queue", p.Queue)
	}
	if !valid || at == math.MaxInt64 {
		return time.Time{}, false, nil
	}
	return time.Unix(0, at).UTC(), true, nil
}

// nullableInt scans a NUMBER column and whether it was not NULL.
type nullableInt struct {
	p     *int64
	valid *bool
}

// Scan implements sql.Scanner.
func (s nullableInt) Scan(v any) error {
	n, ok, err := scanNumber(v)
	*s.p, *s.valid = n, ok
	return err
}

// lockedInstances returns the instances this store's open rounds hold, at
// most as many as an IN list takes.
func (s *Store) lockedInstances() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, min(len(s.locked), maxListLength))
	for id := range s.locked {
		if len(ids) == maxListLength {
			break
		}
		ids = append(ids, id)
	}
	return ids
}
