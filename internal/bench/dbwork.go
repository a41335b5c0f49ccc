package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBWork is a snapshot of PostgreSQL's cumulative statistics: the
// database's counters (pg_stat_database, which every session of the
// database adds to) and those of the tables of one schema
// (pg_stat_user_tables, pg_statio_user_tables). [DBWork.Sub] of two
// snapshots is the work done in between.
type DBWork struct {
	// Commits and Rollbacks count transactions (xact_commit,
	// xact_rollback).
	Commits, Rollbacks int64
	// TuplesReturned and TuplesFetched are tup_returned (rows read by
	// sequential scans and index entries returned) and tup_fetched (rows
	// fetched by index scans).
	TuplesReturned, TuplesFetched int64
	// Inserted, Updated and Deleted count rows written (tup_inserted,
	// tup_updated, tup_deleted).
	Inserted, Updated, Deleted int64
	// BufferHits and BufferReads count shared buffers found in the
	// cache and read from the kernel (blks_hit, blks_read).
	BufferHits, BufferReads int64
	// Tables are the schema's tables, by name.
	Tables []TableWork
}

// TableWork is the statistics of one table.
type TableWork struct {
	Name string
	// SeqScans counts sequential scans of the table and SeqTuples the
	// rows they read (seq_scan, seq_tup_read).
	SeqScans, SeqTuples int64
	// IndexScans counts index scans of the table (idx_scan).
	IndexScans int64
	// Inserted, Updated and Deleted count rows written (n_tup_ins,
	// n_tup_upd, n_tup_del).
	Inserted, Updated, Deleted int64
	// BufferHits counts shared-buffer hits of the table and its indexes
	// (heap_blks_hit + idx_blks_hit).
	BufferHits int64
}

// StoreTables are the store's tables whose rows stay when instances end:
// they grow with the store, and a sequential scan of one costs more every
// day.
var StoreTables = []string{
	"instances", "history", "activity_task_ids", "dead_letters", "human_tasks", "human_task_events",
	"custom_projections", "tombstones", "checkpoints", "checkpoint_leaves",
}

// QueueTables are the tables of work in flight, which an ended instance
// leaves no row in. Vacuumed, they stay as small as the work in flight;
// where nothing vacuums them, the dead rows of every message and task ever
// processed stay, and a sequential scan reads them all.
var QueueTables = []string{"messages", "activity_tasks"}

// Table returns the statistics of the table named name, and whether the
// snapshot has it.
func (w *DBWork) Table(name string) (TableWork, bool) {
	for _, t := range w.Tables {
		if t.Name == name {
			return t, true
		}
	}
	return TableWork{}, false
}

// Sub returns w minus before: the work done between two snapshots.
// Tables missing from before count from zero.
func (w *DBWork) Sub(before *DBWork) *DBWork {
	d := &DBWork{
		Commits: w.Commits - before.Commits, Rollbacks: w.Rollbacks - before.Rollbacks,
		TuplesReturned: w.TuplesReturned - before.TuplesReturned, TuplesFetched: w.TuplesFetched - before.TuplesFetched,
		Inserted: w.Inserted - before.Inserted, Updated: w.Updated - before.Updated, Deleted: w.Deleted - before.Deleted,
		BufferHits: w.BufferHits - before.BufferHits, BufferReads: w.BufferReads - before.BufferReads,
	}
	for _, t := range w.Tables {
		b, _ := before.Table(t.Name)
		d.Tables = append(d.Tables, TableWork{
			Name: t.Name, SeqScans: t.SeqScans - b.SeqScans, SeqTuples: t.SeqTuples - b.SeqTuples,
			IndexScans: t.IndexScans - b.IndexScans,
			Inserted:   t.Inserted - b.Inserted, Updated: t.Updated - b.Updated, Deleted: t.Deleted - b.Deleted,
			BufferHits: t.BufferHits - b.BufferHits,
		})
	}
	return d
}

// ErrStatsUnavailable is returned by [FlushStats] when the server cannot
// flush its statistics on demand (PostgreSQL before 15).
var ErrStatsUnavailable = errors.New("bench: the server cannot flush statistics on demand (PostgreSQL 15 or later can)")

// FlushStats makes the statistics gathered by the connections of pool
// visible to every session. It runs pg_stat_force_next_flush() on each
// idle connection: a backend flushes a forced report when its transaction
// ends, before it tells the client it is ready, so the statement's answer
// comes after the flush (without it, an idle backend flushes up to a
// second later: PostgreSQL 15's cumulative statistics). A connection the
// pool closed (a query cancelled when a run stopped, say) flushes when its
// backend exits, which happens after the client has gone: when the pool's
// connections carry an application_name, FlushStats then waits, up to
// statsExitWait, until no other backend of the database has that name. A
// backend reports its statistics before it leaves pg_stat_activity, so
// its work is counted once it is gone. Connections in use are not reached:
// call it when the pool's users have stopped.
func FlushStats(ctx context.Context, pool *pgxpool.Pool) error {
	name := pool.Config().ConnConfig.RuntimeParams["application_name"]
	wctx, cancel := context.WithTimeout(ctx, statsExitWait)
	defer cancel()
	flushed := map[uint32]bool{}
	for {
		// Connections that came back to the pool since the last look (a
		// listener's, say, released as its store stopped) are flushed
		// and counted as the pool's.
		var errs []error
		for _, c := range pool.AcquireAllIdle(ctx) {
			pid := c.Conn().PgConn().PID()
			if !flushed[pid] {
				_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
				if undefinedFunction(err) {
					c.Release()
					return ErrStatsUnavailable
				}
				errs = append(errs, err)
				flushed[pid] = err == nil
			}
			c.Release()
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("bench: flush statistics: %w", err)
		}
		if name == "" {
			return nil
		}
		pids := make([]uint32, 0, len(flushed))
		for pid := range flushed {
			pids = append(pids, pid)
		}
		var others int
		err := pool.QueryRow(wctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = $1 AND pid <> ALL ($2::int[]) AND pid <> pg_backend_pid()`,
			name, pids).Scan(&others)
		if err != nil {
			return fmt.Errorf("bench: wait for closed connections' statistics: %w", err)
		}
		if others == 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("bench: %d closed connections named %q have not exited: %w", others, name, wctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// statsExitWait bounds how long [FlushStats] waits for the backends of
// closed connections to exit.
const statsExitWait = 10 * time.Second

// undefinedFunction reports whether err is PostgreSQL's undefined_function.
func undefinedFunction(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42883"
}

// ReadDBWork takes a snapshot of the statistics of the current database
// and of schema's tables. It clears the session's statistics snapshot
// first, so it sees everything flushed so far (see [FlushStats]).
func ReadDBWork(ctx context.Context, pool *pgxpool.Pool, schema string) (*DBWork, error) {
	w := &DBWork{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted, blks_hit, blks_read
FROM pg_stat_database WHERE datname = current_database()`).Scan(
			&w.Commits, &w.Rollbacks, &w.TuplesReturned, &w.TuplesFetched, &w.Inserted, &w.Updated, &w.Deleted, &w.BufferHits, &w.BufferReads)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT t.relname, t.seq_scan, t.seq_tup_read, coalesce(t.idx_scan, 0), t.n_tup_ins, t.n_tup_upd, t.n_tup_del,
    coalesce(io.heap_blks_hit, 0) + coalesce(io.idx_blks_hit, 0)
FROM pg_stat_user_tables t
JOIN pg_statio_user_tables io ON io.relid = t.relid
WHERE t.schemaname = $1
ORDER BY t.relname`, schema)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t TableWork
			if err := rows.Scan(&t.Name, &t.SeqScans, &t.SeqTuples, &t.IndexScans, &t.Inserted, &t.Updated, &t.Deleted, &t.BufferHits); err != nil {
				return err
			}
			w.Tables = append(w.Tables, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("bench: read statistics: %w", err)
	}
	return w, nil
}
