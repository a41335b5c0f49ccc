package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider/postgres"
)

// TestWritesOutsideRoundsReadCommitted checks the transaction of a write
// outside a round (rcPool), on sessions that default to READ COMMITTED
// and on sessions that default to REPEATABLE READ: it runs at READ
// COMMITTED and on generic plans, commits what it wrote, and writes
// nothing when one of its statements fails. On the first it is the
// pipeline's implicit transaction, without BEGIN and COMMIT.
func TestWritesOutsideRoundsReadCommitted(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"read committed", "repeatable read"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			log := &sentLog{}
			pool, s := tracedStore(t, log, map[string]string{"default_transaction_isolation": level})
			table := pgx.Identifier{s.Schema(), "scratch"}.Sanitize()
			_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (x int)")
			require.NoError(t, err)

			log.reset()
			var iso, plans string
			require.NoError(t, postgres.RCBatch(ctx, s, "INSERT INTO "+table+" VALUES (1)",
				"SELECT current_setting('transaction_isolation'), current_setting('plan_cache_mode')").Scan(&iso, &plans))
			require.Equal(t, "read committed", iso)
			require.Equal(t, "force_generic_plan", plans)
			sent := log.reset()
			if level == "read committed" {
				require.NotContains(t, sent, "BEGIN ISOLATION LEVEL READ COMMITTED")
				require.NotContains(t, sent, "COMMIT")
			} else {
				require.Contains(t, sent, "BEGIN ISOLATION LEVEL READ COMMITTED")
				require.Contains(t, sent, "COMMIT")
			}

			err = postgres.RCBatch(ctx, s, "INSERT INTO "+table+" VALUES (2)", "SELECT 1/0").Scan(new(int))
			require.ErrorContains(t, err, "division by zero")
			var rows []int32
			r, err := pool.Query(ctx, "SELECT x FROM "+table+" ORDER BY x")
			require.NoError(t, err)
			rows, err = pgx.CollectRows(r, pgx.RowTo[int32])
			require.NoError(t, err)
			require.Equal(t, []int32{1}, rows, "the committed write, not the failed one's")
			// The connection is back in the pool outside any transaction.
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus())
			conn.Release()
		})
	}
}

// sentLog records the statements a pool sends.
type sentLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *sentLog) add(sql string) {
	l.mu.Lock()
	l.sent = append(l.sent, strings.TrimSpace(sql))
	l.mu.Unlock()
}

// reset returns the statements sent since the last reset.
func (l *sentLog) reset() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent := l.sent
	l.sent = nil
	return sent
}

func (l *sentLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL)
	return ctx
}

func (l *sentLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *sentLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *sentLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(d.SQL)
}

func (l *sentLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
