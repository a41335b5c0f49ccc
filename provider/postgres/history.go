package postgres

import (
	"bytes"
	"context"
	"fmt"
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

// appendHistory implements provider.Steps.AppendHistory on a transaction. The
// insert runs under a savepoint, so a conflict leaves the transaction
// usable and writes nothing; savepoint, insert and release travel in one
// round trip.
func (s *Store) appendHistory(ctx context.Context, tx pgx.Tx, p *provider.AppendHistoryParams) error {
	events := p.Events
	if len(events) == 0 {
		return nil
	}
	first := events[0].Seq
	n := len(events)
	if first < 1 {
		return fmt.Errorf("postgres: append to %s: %w: first seq %d", p.InstanceID, provider.ErrConflict, first)
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
			return fmt.Errorf("postgres: append to %s: %w: event %d has seq %d of instance %q", p.InstanceID, provider.ErrConflict, i, e.Seq, e.InstanceID)
		}
		seqs[i], executions[i], kinds[i], correlations[i] = e.Seq, e.ExecutionID, string(e.Kind), e.CorrelationID
		classes[i], ats[i], hashes[i], blobs[i] = e.Kind.Class(), e.At, e.Hash, history.MarshalEvent(e)
	}
	part := s.part(p.InstanceID)
	var inserted int64
	var err error
	if s.citus {
		inserted, err = s.citusAppend(ctx, tx, p.InstanceID, part, first, seqs, executions, kinds, classes, correlations, ats, hashes, blobs)
	} else {
		b := &pgx.Batch{}
		b.Queue(`SAVEPOINT chronicle_append`)
		b.Queue(s.sql.appendHistory, p.InstanceID, seqs, executions, kinds, classes, correlations, ats, hashes, blobs, first, part)
		b.Queue(`RELEASE SAVEPOINT chronicle_append`)
		br := tx.SendBatch(ctx, b)
		_, err = br.Exec()
		if err == nil {
			tag, tagErr := br.Exec()
			inserted, err = tag.RowsAffected(), tagErr
		}
		if err == nil {
			_, err = br.Exec()
		}
		if closeErr := br.Close(); err == nil {
			err = closeErr
		}
	}
	if err != nil {
		if _, rbErr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT chronicle_append`); rbErr != nil {
			return failf(rbErr, "append to %s: %v; roll back to savepoint", p.InstanceID, err)
		}
		return failf(err, "append to %s at seq %d", p.InstanceID, first)
	}
	if inserted == int64(n) {
		return nil
	}
	// Nothing was written: the log does not end at first-1. A retried
	// append of events already stored is a success.
	rows, err := tx.Query(ctx, s.sql.historyTail, p.InstanceID, first, n, part)
	if err != nil {
		return failf(err, "append to %s", p.InstanceID)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var (
			seq  int64
			hash []byte
		)
		if err := rows.Scan(&seq, &hash); err != nil {
			return failf(err, "append to %s", p.InstanceID)
		}
		if seq != first+int64(i) || !bytes.Equal(hash, events[i].Hash) {
			return fmt.Errorf("postgres: append to %s at seq %d: %w: seq already taken", p.InstanceID, seq, provider.ErrConflict)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return failf(err, "append to %s", p.InstanceID)
	}
	if i == 0 {
		return fmt.Errorf("postgres: append to %s: %w: first seq %d does not follow the stored log", p.InstanceID, provider.ErrConflict, first)
	}
	if i < n {
		return fmt.Errorf("postgres: append to %s: %w: a retried append reaches seq %d, beyond the stored log", p.InstanceID, provider.ErrConflict, first+int64(i))
	}
	return nil
}
