package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Every transaction of the store runs at READ COMMITTED, whatever the
// server's or the connection's default_transaction_isolation: the
// statements rely on it (a statement that waited for a row lock sees the
// row's newest version; ON CONFLICT and FOR UPDATE SKIP LOCKED never fail
// with a serialization error; a round reads the history its lock protects,
// not an older snapshot). Explicit transactions begin with readCommitted
// (the store's own with statements.begin); writes outside them go
// through rcPool.
//
// On PostgreSQL (not on Citus, whose planner cannot distribute some of
// them generically) the store's transactions also run their statements
// on generic plans (genericPlansSQL). pgx prepares each statement once per connection, and
// PostgreSQL, left to choose, plans a statement anew at every execution
// while a plan for its parameters' values looks cheaper than the generic
// one: the statements that take arrays (unnest estimates 100 rows for an
// array of unknown length) were planned at every call, for about a
// quarter of a millisecond each, which was more than a third of the
// database's time per workflow (docs/benchmarks.md, "Planning at every
// call"). The generic plans of every statement are checked by
// TestStatementPlans and TestQueuePlans; the search statements, which
// want plans for their values, run outside these transactions.
var (
	readCommitted        = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	readCommittedGeneric = pgx.TxOptions{IsoLevel: pgx.ReadCommitted, BeginQuery: beginReadCommitted + "; " + genericPlansSQL}
)

// beginReadCommitted opens the transaction rcPool wraps around a write.
const beginReadCommitted = "BEGIN ISOLATION LEVEL READ COMMITTED"

// genericPlansSQL puts the statements of the transaction that runs it on
// generic plans. genericPlansImplicitSQL does the same in the implicit
// transaction of a pipeline sent outside one (SET LOCAL would warn there
// and do nothing).
const (
	genericPlansSQL         = "SET LOCAL plan_cache_mode = force_generic_plan"
	genericPlansImplicitSQL = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"
)

// rcPool is a dbtx on the pool whose every call is one READ COMMITTED
// transaction, sent in one pipeline. PostgreSQL runs the statements of a
// pipeline (up to its Sync) as one implicit transaction, committed at its
// end and rolled back whole when a statement fails, at the session's
// default isolation: where that is READ COMMITTED (implicit) the pipeline
// is the statements alone; elsewhere BEGIN ISOLATION LEVEL READ COMMITTED
// and COMMIT enclose them, in the same round trip. Only single reads, for
// which the isolation level makes no difference, use the pool directly.
type rcPool struct {
	pool *pgxpool.Pool
	// generic tells whether the transactions run on generic plans
	// (genericPlansSQL): the store's statements.generic.
	generic func() bool
	// implicit tells whether the pool's sessions default to READ
	// COMMITTED (Store.implicit).
	implicit func() bool
}

// readIsolation reads whether the pool's sessions begin their
// transactions at READ COMMITTED (Store.implicit). A server, database or
// role setting applies to every connection of the pool alike.
func (s *Store) readIsolation(ctx context.Context) error {
	var rc bool
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('default_transaction_isolation') = 'read committed'`).Scan(&rc); err != nil {
		return failf(err, "read default_transaction_isolation")
	}
	s.implicit.Store(rc)
	return nil
}

var _ dbtx = rcPool{}

// SendBatch implements dbtx: b runs in one READ COMMITTED transaction,
// which commits when the results are closed.
func (p rcPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return &rcBatchResults{err: err}
	}
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+3)}
	implicit, prefix := p.implicit(), 0
	switch {
	case implicit && p.generic():
		full.Queue(genericPlansImplicitSQL)
		prefix++
	case !implicit:
		full.Queue(beginReadCommitted)
		prefix++
		if p.generic() {
			full.Queue(genericPlansSQL)
			prefix++
		}
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	if !implicit {
		full.Queue("COMMIT")
	}
	return &rcBatchResults{ctx: ctx, conn: conn, br: conn.SendBatch(ctx, full), prefix: prefix}
}

// Exec implements dbtx.
func (p rcPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := p.SendBatch(ctx, b)
	tag, err := br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return tag, err
}

// QueryRow implements dbtx; the statement runs when the row is scanned.
func (p rcPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return rcRow{p: p, ctx: ctx, sql: sql, args: args}
}

// Query implements dbtx; the transaction commits when the rows are closed.
func (p rcPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := p.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		// The query's error is the one to report; Close only ends the
		// batch and gives the connection back.
		_ = br.Close()
		return nil, err
	}
	return &rcRows{Rows: rows, br: br}, nil
}

type rcRow struct {
	p    rcPool
	ctx  context.Context
	sql  string
	args []any
}

// Scan runs the statement and scans its first row.
func (r rcRow) Scan(dest ...any) error {
	b := &pgx.Batch{}
	b.Queue(r.sql, r.args...)
	br := r.p.SendBatch(r.ctx, b)
	err := br.QueryRow().Scan(dest...)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// rcBatchResults are the results of the caller's statements of an
// rcPool pipeline; Close reads the rest, ends the transaction and
// releases the connection, rolling back what a failed statement left
// open (an explicit transaction; the server ends an implicit one).
type rcBatchResults struct {
	ctx  context.Context
	conn *pgxpool.Conn
	br   pgx.BatchResults
	// prefix is how many statements come before the caller's: BEGIN
	// and genericPlansSQL, or genericPlansImplicitSQL, where sent.
	prefix int
	begun  bool
	closed bool
	err    error
}

// begin reads the results of the prefix before the first statement's.
func (r *rcBatchResults) begin() error {
	if r.err == nil && !r.begun {
		r.begun = true
		for range r.prefix {
			if _, r.err = r.br.Exec(); r.err != nil {
				break
			}
		}
	}
	return r.err
}

func (r *rcBatchResults) Exec() (pgconn.CommandTag, error) {
	if err := r.begin(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.br.Exec()
}

func (r *rcBatchResults) Query() (pgx.Rows, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	return r.br.Query()
}

func (r *rcBatchResults) QueryRow() pgx.Row {
	if err := r.begin(); err != nil {
		return errRow{err}
	}
	return r.br.QueryRow()
}

func (r *rcBatchResults) Close() error {
	if r.closed || r.conn == nil {
		return r.err
	}
	r.closed = true
	err := r.br.Close()
	if r.err != nil {
		err = r.err
	}
	if pc := r.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		// A statement failed: the server skipped the COMMIT.
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), rollbackTimeout)
		// The statement's error is returned; should the ROLLBACK fail too,
		// Release destroys a connection left inside a transaction.
		_, _ = r.conn.Exec(rbCtx, "ROLLBACK")
		cancel()
	}
	r.conn.Release()
	return err
}

// Tx implements pgx.BatchResults: the transaction is not the caller's.
func (r *rcBatchResults) Tx() pgx.Tx { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// rcRows ends the transaction of rcPool.Query when closed.
type rcRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
	end bool
}

func (r *rcRows) Close() {
	r.Rows.Close()
	if !r.end {
		r.end = true
		r.err = r.br.Close()
	}
}

func (r *rcRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *rcRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}
