package postgres

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// loadHistorySQL reads a page of an instance's events. The page size is a
// constant so that every plan of it, generic or not, with or without
// statistics, is an ordered scan of the primary key that stops early: on
// a large history table without statistics the planner expects tens of
// thousands of rows for one instance, and without a limit it chose a
// bitmap scan and a sort costly enough to have each execution compiled
// by JIT (milliseconds a call).
var loadHistorySQL = `
SELECT seq, event FROM {{schema}}.history WHERE part = $3 AND instance_id = $1 AND seq >= $2 ORDER BY seq LIMIT ` + strconv.Itoa(loadHistoryPageSize)

// loadHistoryPageSize is the number of events loadHistorySQL reads at most.
const loadHistoryPageSize = 1000

// appendHistorySQL inserts the events only when the first one ($10)
// continues the stored log: nothing at or after it, and its predecessor
// present. It then inserts all or, on a unique violation (a concurrent
// append at the same Seq, or a used idempotency key), nothing.
const appendHistorySQL = `
INSERT INTO {{schema}}.history (part, instance_id, seq, execution_id, kind, class, correlation_id, at, hash, event)
SELECT $11, $1, e.seq, e.execution_id, e.kind, nullif(e.class, ''), e.correlation_id, e.at, e.hash, e.event
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::bytea[], $9::bytea[])
    AS e(seq, execution_id, kind, class, correlation_id, at, hash, event)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.history h WHERE h.part = $11 AND h.instance_id = $1 AND h.seq >= $10)
  AND ($10 = 1 OR EXISTS (SELECT 1 FROM {{schema}}.history h WHERE h.part = $11 AND h.instance_id = $1 AND h.seq = $10 - 1))`

// appendCheckedSQL is appendHistorySQL followed, in the same statement,
// by the stored log over the events' seqs ($12 of them): the rows it
// inserted, or, when it inserted none, those the log held before it (its
// snapshot's), which checkAppended compares with the events (in seq
// order, which it sorts them in).
var appendCheckedSQL = `
WITH ins AS (` + appendHistorySQL + `
    RETURNING seq, hash)
SELECT seq, hash FROM ins
UNION ALL
SELECT seq, hash FROM (
    SELECT h.seq, h.hash FROM {{schema}}.history h
    WHERE h.part = $11 AND h.instance_id = $1 AND h.seq >= $10
    ORDER BY h.seq LIMIT $12) AS stored
WHERE NOT EXISTS (SELECT 1 FROM ins)`

// historyHeadSQL reads the last event's seq and hash of an instance.
const historyHeadSQL = `
SELECT seq, hash FROM {{schema}}.history WHERE part = $2 AND instance_id = $1 ORDER BY seq DESC LIMIT 1`

const historyTailSQL = `
SELECT seq, hash FROM {{schema}}.history WHERE part = $4 AND instance_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`

// loadHistory reads the events of an instance from fromSeq, decoding the
// stored canonical bytes; a row that does not decode is reported as a
// *history.ChainError naming its seq. It reads page after page until one
// is not full; on the pool each page is a statement of its own, which
// sees the appends committed since the previous one (the log only grows
// at its end, so the pages still join up).
func loadHistory(ctx context.Context, db dbtx, sql, instanceID string, part int32, fromSeq int64) ([]history.Event, error) {
	var out []history.Event
	next := max(fromSeq, 1)
	for {
		n, err := loadHistoryPageFrom(ctx, db, sql, instanceID, part, next, &out)
		if err != nil {
			return nil, err
		}
		if n < loadHistoryPageSize {
			return out, nil
		}
		next = out[len(out)-1].Seq + 1
	}
}

// loadHistoryPageFrom appends to out one page of events from fromSeq and
// returns how many rows it read.
func loadHistoryPageFrom(ctx context.Context, db dbtx, sql, instanceID string, part int32, fromSeq int64, out *[]history.Event) (int, error) {
	rows, err := db.Query(ctx, sql, instanceID, fromSeq, part)
	if err != nil {
		return 0, failf(err, "load history of %s", instanceID)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		var (
			seq  int64
			data []byte
		)
		if err := rows.Scan(&seq, &data); err != nil {
			return n, failf(err, "load history of %s", instanceID)
		}
		e, err := history.UnmarshalEvent(data)
		if err != nil {
			// Name the row, so that verification and the round's dead
			// letter say which event is broken.
			return n, fmt.Errorf("postgres: load history of %s: %w", instanceID,
				&history.ChainError{Seq: seq, InstanceID: instanceID, Reason: "stored event does not decode: " + err.Error()})
		}
		*out = append(*out, e)
	}
	return n, failf(rows.Err(), "load history of %s", instanceID)
}

// LoadHistory implements provider.Store.
func (s *Store) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	return loadHistory(ctx, s.pool, s.sql.loadHistory, p.InstanceID, s.part(p.InstanceID), p.FromSeq)
}

// appendArgs are the arguments of appendHistorySQL for the events of p:
// first is the seq of the first one. It checks that the events are one
// instance's and numbered in a row.
type appendArgs struct {
	id                                       string
	first                                    int64
	part                                     int32
	seqs                                     []int64
	executions, kinds, classes, correlations []string
	ats                                      []time.Time
	hashes, blobs                            [][]byte
}

func (a *appendArgs) args() []any {
	return []any{a.id, a.seqs, a.executions, a.kinds, a.classes, a.correlations, a.ats, a.hashes, a.blobs, a.first, a.part}
}

func (s *Store) appendArgs(p *provider.AppendHistoryParams) (*appendArgs, error) {
	events := p.Events
	first := events[0].Seq
	n := len(events)
	if first < 1 {
		return nil, fmt.Errorf("postgres: append to %s: %w: first seq %d", p.InstanceID, provider.ErrConflict, first)
	}
	var (
		seqs                                     = make([]int64, n)
		executions, kinds, classes, correlations = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ats                                      = make([]time.Time, n)
		hashes, blobs                            = make([][]byte, n), make([][]byte, n)
	)
	for i := range events {
		e := &events[i]
		if e.Seq != first+int64(i) || e.InstanceID != p.InstanceID {
			return nil, fmt.Errorf("postgres: append to %s: %w: event %d has seq %d of instance %q", p.InstanceID, provider.ErrConflict, i, e.Seq, e.InstanceID)
		}
		seqs[i], executions[i], kinds[i], correlations[i] = e.Seq, e.ExecutionID, string(e.Kind), e.CorrelationID
		classes[i], ats[i], hashes[i], blobs[i] = e.Kind.Class(), e.At, e.Hash, history.MarshalEvent(e)
	}
	return &appendArgs{id: p.InstanceID, first: first, part: s.part(p.InstanceID), seqs: seqs, executions: executions, kinds: kinds,
		classes: classes, correlations: correlations, ats: ats, hashes: hashes, blobs: blobs}, nil
}

// citusAppendHistory implements provider.Steps.AppendHistory in a round
// of a distributed store, at once (citusAppend: under a savepoint, so a
// conflict leaves the transaction usable and writes nothing). A store
// on PostgreSQL defers its appends instead (deferAppend).
func (s *Store) citusAppendHistory(ctx context.Context, tx pgx.Tx, p *provider.AppendHistoryParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	a, err := s.appendArgs(p)
	if err != nil {
		return err
	}
	inserted, err := s.citusAppend(ctx, tx, a)
	if err != nil {
		if _, rbErr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT chronicle_append`); rbErr != nil {
			return failf(rbErr, "append to %s; roll back to savepoint", p.InstanceID)
		}
		return failf(err, "append to %s at seq %d", p.InstanceID, a.first)
	}
	if inserted == int64(len(p.Events)) {
		return nil
	}
	// Nothing was written: the log does not end at first-1. A retried
	// append of events already stored is a success.
	rows, err := tx.Query(ctx, s.sql.historyTail, p.InstanceID, a.first, len(p.Events), a.part)
	if err != nil {
		return failf(err, "append to %s", p.InstanceID)
	}
	return checkAppended(rows, p)
}

// deferAppend queues the append of p's events on b, a round's deferred
// writes (see roundTx.AppendHistory), with a read of the stored log over
// the events' seqs in the same statement (appendCheckedSQL), whose
// callback checks that the log holds them: just inserted, or stored
// before by an append of the same events (a retried append is a
// success). A conflict (the log does not end
// before the first event, holds other events there, or a unique
// violation) fails the round's writes when they are sent; the round is
// then abandoned, which rolls its writes back to its dequeue.
func (s *Store) deferAppend(b *pgx.Batch, p *provider.AppendHistoryParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	a, err := s.appendArgs(p)
	if err != nil {
		return err
	}
	b.Queue(s.sql.appendChecked, append(a.args(), len(p.Events))...).Query(func(rows pgx.Rows) error {
		return checkAppended(rows, p)
	})
	return nil
}

// checkAppended reads the stored log over the seqs of p's events
// (historyTailSQL) and returns nil when it holds exactly those events,
// and an error wrapping [provider.ErrConflict] otherwise. It closes rows.
func checkAppended(rows pgx.Rows, p *provider.AppendHistoryParams) error {
	defer rows.Close()
	events, first := p.Events, p.Events[0].Seq
	n := len(events)
	type stored struct {
		seq  int64
		hash []byte
	}
	var log []stored
	for rows.Next() {
		var r stored
		if err := rows.Scan(&r.seq, &r.hash); err != nil {
			return failf(err, "append to %s", p.InstanceID)
		}
		log = append(log, r)
	}
	if err := rows.Err(); err != nil {
		return failf(err, "append to %s", p.InstanceID)
	}
	slices.SortFunc(log, func(a, b stored) int { return cmp.Compare(a.seq, b.seq) })
	i := 0
	for _, r := range log {
		if i >= n || r.seq != first+int64(i) || !bytes.Equal(r.hash, events[i].Hash) {
			return fmt.Errorf("postgres: append to %s at seq %d: %w: seq already taken", p.InstanceID, r.seq, provider.ErrConflict)
		}
		i++
	}
	if i == 0 {
		return fmt.Errorf("postgres: append to %s: %w: first seq %d does not follow the stored log", p.InstanceID, provider.ErrConflict, first)
	}
	if i < n {
		return fmt.Errorf("postgres: append to %s: %w: a retried append reaches seq %d, beyond the stored log", p.InstanceID, provider.ErrConflict, first+int64(i))
	}
	return nil
}
