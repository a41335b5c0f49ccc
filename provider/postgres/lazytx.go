package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is the transaction of a round on one pooled connection. Its
// BEGIN (and the setting of generic plans) is sent with its first
// statement, in the same round trip, and commitWith sends its COMMIT
// with its last statements: a round costs no round trip for either.
type lazyTx struct {
	conn *pgxpool.Conn
	// prefix are the statements that begin the transaction, sent before
	// the first of the round's; begun is set once they are.
	prefix []string
	begun  bool
}

var _ dbtx = (*lazyTx)(nil)

// Conn returns the connection (its transaction status, say).
func (x *lazyTx) Conn() *pgx.Conn { return x.conn.Conn() }

// withBegin returns b preceded by the prefix when the transaction has not
// begun, and how many statements precede b's.
func (x *lazyTx) withBegin(b *pgx.Batch) (*pgx.Batch, int) {
	if x.begun {
		return b, 0
	}
	x.begun = true
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(x.prefix)+len(b.QueuedQueries))}
	for _, sql := range x.prefix {
		full.Queue(sql)
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	return full, len(x.prefix)
}

// SendBatch implements dbtx.
func (x *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	full, n := x.withBegin(b)
	br := x.conn.SendBatch(ctx, full)
	if n == 0 {
		return br
	}
	return &prefixedResults{BatchResults: br, prefix: n}
}

// Exec implements dbtx.
func (x *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if x.begun {
		return x.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := x.SendBatch(ctx, b)
	tag, err := br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return tag, err
}

// Query implements dbtx.
func (x *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if x.begun {
		return x.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := x.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &rcRows{Rows: rows, br: br}, nil
}

// QueryRow implements dbtx.
func (x *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if x.begun {
		return x.conn.QueryRow(ctx, sql, args...)
	}
	return lazyRow{x: x, ctx: ctx, sql: sql, args: args}
}

type lazyRow struct {
	x    *lazyTx
	ctx  context.Context
	sql  string
	args []any
}

func (r lazyRow) Scan(dest ...any) error {
	b := &pgx.Batch{}
	b.Queue(r.sql, r.args...)
	br := r.x.SendBatch(r.ctx, b)
	err := br.QueryRow().Scan(dest...)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// errCommitRolledBack: the server ended the transaction with a rollback
// where a COMMIT was sent (a statement before it had failed).
var errCommitRolledBack = errors.New("postgres: commit: the transaction was rolled back")

// commitWith sends the statements of b, whose callbacks cannot fail
// (nothing they read vetoes the commit), and COMMIT, in one round trip.
// committed tells whether the server committed; err is the first error
// of the statements or of the commit.
func (x *lazyTx) commitWith(ctx context.Context, b *pgx.Batch) (committed bool, err error) {
	if !x.begun && (b == nil || b.Len() == 0) {
		return true, nil // nothing was sent: nothing to commit
	}
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		committed = tag.String() == "COMMIT"
		if !committed {
			return errCommitRolledBack
		}
		return nil
	})
	err = x.SendBatch(ctx, b).Close()
	return committed, err
}

// rollback ends a transaction that began; the caller releases the
// connection, which the pool destroys if it is still in a transaction.
func (x *lazyTx) rollback(ctx context.Context) error {
	if !x.begun || x.conn.Conn().PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := x.conn.Exec(ctx, "ROLLBACK")
	return err
}

// prefixedResults are the results of a batch sent after the statements
// that begin the transaction, which reads pass over.
type prefixedResults struct {
	pgx.BatchResults
	prefix int
	err    error
}

func (r *prefixedResults) skip() error {
	for ; r.prefix > 0 && r.err == nil; r.prefix-- {
		_, r.err = r.BatchResults.Exec()
	}
	return r.err
}

func (r *prefixedResults) Exec() (pgconn.CommandTag, error) {
	if err := r.skip(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *prefixedResults) Query() (pgx.Rows, error) {
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.BatchResults.Query()
}

func (r *prefixedResults) QueryRow() pgx.Row {
	if err := r.skip(); err != nil {
		return errRow{err}
	}
	return r.BatchResults.QueryRow()
}

func (r *prefixedResults) Close() error {
	err := r.BatchResults.Close()
	if r.err != nil {
		return r.err
	}
	return err
}
