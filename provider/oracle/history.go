package oracle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// loadHistory reads the events of an instance from fromSeq, decoding the
// stored canonical bytes; a row that does not decode is reported as a
// *history.ChainError naming its seq.
func (s *Store) loadHistory(ctx context.Context, db dbtx, instanceID string, fromSeq int64) ([]history.Event, error) {
	rows, err := db.QueryContext(ctx, s.sql.loadHistory, named("inst", instanceID), named("from_seq", max(fromSeq, 1)))
	if err != nil {
		return nil, failf(err, "load history of %s", instanceID)
	}
	defer rows.Close()
	var out []history.Event
	for rows.Next() {
		var (
			seq  int64
			data []byte
		)
		if err := rows.Scan(intScan{&seq}, &data); err != nil {
			return nil, failf(err, "load history of %s", instanceID)
		}
		e, err := history.UnmarshalEvent(data)
		if err != nil {
			// Name the row, so that verification and the round's dead
			// letter say which event is broken.
			return nil, fmt.Errorf("oracle: load history of %s: %w", instanceID,
				&history.ChainError{Seq: seq, InstanceID: instanceID, Reason: "stored event does not decode: " + err.Error()})
		}
		out = append(out, e)
	}
	return out, failf(rows.Err(), "load history of %s", instanceID)
}

// LoadHistory implements provider.Store.
func (s *Store) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	return s.loadHistory(ctx, s.db, p.InstanceID, p.FromSeq)
}

// appendSQL returns the INSERT ALL statement that appends n events: one
// statement, so the events land together or not at all. Texts are kept
// per count.
func (st *statements) appendSQL(n int) string {
	if text, ok := st.appends.Load(n); ok {
		return text.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT ALL")
	for i := range n {
		fmt.Fprintf(&b, st.appendHistoryRow, i)
	}
	b.WriteString("\nSELECT 1 FROM dual")
	text, _ := st.appends.LoadOrStore(n, b.String())
	return text.(string)
}

// appendChunk is how many events one INSERT ALL writes: Oracle takes at
// most 999 target columns in a multitable insert, and an event has 9.
const appendChunk = 100

// insertEvents writes events with one INSERT ALL, or, beyond appendChunk,
// with one per chunk behind a savepoint that a failed chunk rolls back
// to, so that the append writes all of its events or none.
func (s *Store) insertEvents(ctx context.Context, db dbtx, instanceID string, events []history.Event) error {
	if len(events) <= appendChunk {
		_, err := db.ExecContext(ctx, s.sql.appendSQL(len(events)), appendArgs(instanceID, events)...)
		return err
	}
	if _, err := db.ExecContext(ctx, "SAVEPOINT chronicle_append"); err != nil {
		return err
	}
	for start := 0; start < len(events); start += appendChunk {
		chunk := events[start:min(start+appendChunk, len(events))]
		if _, err := db.ExecContext(ctx, s.sql.appendSQL(len(chunk)), appendArgs(instanceID, chunk)...); err != nil {
			if _, rbErr := db.ExecContext(ctx, "ROLLBACK TO SAVEPOINT chronicle_append"); rbErr != nil {
				return errors.Join(err, rbErr)
			}
			return err
		}
	}
	return nil
}

// appendArgs are the binds of appendSQL(len(events)).
func appendArgs(instanceID string, events []history.Event) []any {
	args := []any{named("inst", instanceID)}
	for i := range events {
		e := &events[i]
		var class any
		if c := e.Kind.Class(); c != "" {
			class = c
		}
		args = append(args,
			named(fmt.Sprintf("seq%d", i), e.Seq), named(fmt.Sprintf("exec%d", i), e.ExecutionID),
			named(fmt.Sprintf("kind%d", i), string(e.Kind)), named(fmt.Sprintf("class%d", i), class),
			named(fmt.Sprintf("corr%d", i), e.CorrelationID), named(fmt.Sprintf("occurred%d", i), timeArg(e.At)),
			named(fmt.Sprintf("hash%d", i), blobArg(e.Hash)), named(fmt.Sprintf("event%d", i), blobArg(history.MarshalEvent(e))))
	}
	return args
}

// appendHistory implements provider.Steps.AppendHistory on a transaction.
// It reads the stored last Seq; when the events continue it, one INSERT
// ALL writes them all or, on a unique violation (a concurrent append at
// the same Seq, or a used idempotency key), nothing: a failed statement
// changes nothing in Oracle and leaves the transaction usable. When they
// do not, a retried append of events already stored with the same hashes
// is a success and anything else a conflict.
func (s *Store) appendHistory(ctx context.Context, db dbtx, p *provider.AppendHistoryParams) error {
	events := p.Events
	if len(events) == 0 {
		return nil
	}
	first := events[0].Seq
	if first < 1 {
		return fmt.Errorf("oracle: append to %s: %w: first seq %d", p.InstanceID, provider.ErrConflict, first)
	}
	for i := range events {
		e := &events[i]
		if e.Seq != first+int64(i) || e.InstanceID != p.InstanceID {
			return fmt.Errorf("oracle: append to %s: %w: event %d has seq %d of instance %q", p.InstanceID, provider.ErrConflict, i, e.Seq, e.InstanceID)
		}
	}
	var last int64
	if err := db.QueryRowContext(ctx, s.sql.lastSeq, named("inst", p.InstanceID)).Scan(intScan{&last}); err != nil {
		return failf(err, "append to %s", p.InstanceID)
	}
	if last == first-1 {
		err := s.insertEvents(ctx, db, p.InstanceID, events)
		if err == nil {
			return nil
		}
		if !isDuplicate(err) {
			return failf(err, "append to %s at seq %d", p.InstanceID, first)
		}
		// Another append took the seq meanwhile, or an idempotency key
		// is used: compare with what is stored.
	}
	return s.compareTail(ctx, db, p.InstanceID, events)
}

// compareTail decides an append that found the log not ending right
// before it: events already stored with the same hashes (a retried
// append) are a success; anything else is a conflict.
func (s *Store) compareTail(ctx context.Context, db dbtx, instanceID string, events []history.Event) error {
	first, n := events[0].Seq, len(events)
	rows, err := db.QueryContext(ctx, s.sql.historyTail, named("inst", instanceID), named("from_seq", first), named("lim", int64(n)))
	if err != nil {
		return failf(err, "append to %s", instanceID)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var (
			seq  int64
			hash []byte
		)
		if err := rows.Scan(intScan{&seq}, &hash); err != nil {
			return failf(err, "append to %s", instanceID)
		}
		if seq != first+int64(i) || !bytes.Equal(hash, events[i].Hash) {
			return fmt.Errorf("oracle: append to %s at seq %d: %w: seq already taken", instanceID, seq, provider.ErrConflict)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return failf(err, "append to %s", instanceID)
	}
	if i == 0 {
		return fmt.Errorf("oracle: append to %s: %w: first seq %d does not follow the stored log, or an idempotency key is used", instanceID, provider.ErrConflict, first)
	}
	if i < n {
		return fmt.Errorf("oracle: append to %s: %w: a retried append reaches seq %d, beyond the stored log", instanceID, provider.ErrConflict, first+int64(i))
	}
	return nil
}
