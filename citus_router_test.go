package chronicle_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// txLog records every statement a pool's connections run, with the
// arguments of its first run, and the partitions whose rows each
// transaction touched.
type txLog struct {
	mu sync.Mutex
	// first holds the arguments of each statement text's first run.
	first map[string][]any
	runs  map[string]int
	// parts are the partitions whose rows the open transaction of each
	// connection touched so far; txs counts the transactions that ended,
	// multi those that touched more than one partition, and crossing the
	// statements that touched a partition other than their transaction's
	// first.
	parts    map[*pgx.Conn]map[int32]bool
	firstOf  map[*pgx.Conn]int32
	txs      int
	multi    int
	crossing map[string]int
}

func newTxLog() *txLog {
	return &txLog{first: map[string][]any{}, runs: map[string]int{}, parts: map[*pgx.Conn]map[int32]bool{},
		firstOf: map[*pgx.Conn]int32{}, crossing: map[string]int{}}
}

// partParam finds the parameter holding the partition a statement names:
// part = $n, or the first column of a VALUES row ($1::int).
var partParam = regexp.MustCompile(`\bpart = \$(\d+)|VALUES \(\$(\d+)::int`)

// add records a statement when it starts.
func (l *txLog) add(sql string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.first[sql]; !ok {
		l.first[sql] = args
	}
	l.runs[sql]++
}

// done notes a statement that ended: the start or end of a transaction,
// or a statement that touched rows (written, locked or read) of a
// partition, which the transaction of conn then names.
func (l *txLog) done(conn *pgx.Conn, sql string, args []any, tag pgconn.CommandTag, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	verb := strings.ToLower(strings.TrimSpace(sql))
	switch {
	case strings.HasPrefix(verb, "begin"):
		l.parts[conn] = map[int32]bool{}
		return
	case verb == "commit" || verb == "rollback":
		if parts, ok := l.parts[conn]; ok {
			l.txs++
			if len(parts) > 1 {
				l.multi++
			}
		}
		delete(l.parts, conn)
		delete(l.firstOf, conn)
		return
	}
	parts, inTx := l.parts[conn]
	if !inTx || err != nil || tag.RowsAffected() == 0 || !perInstanceTables.MatchString(sql) {
		return
	}
	m := partParam.FindStringSubmatch(sql)
	if m == nil {
		return
	}
	n, _ := strconv.Atoi(m[1] + m[2])
	if n < 1 || n > len(args) {
		return
	}
	part, ok := args[n-1].(int32)
	if !ok {
		return
	}
	if len(parts) == 0 {
		l.firstOf[conn] = part
	} else if part != l.firstOf[conn] {
		l.crossing[sql]++
	}
	parts[part] = true
}

// startedKey keys the start data of a statement in its context.
type startedKey struct{}

func (l *txLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL, d.Args)
	return context.WithValue(ctx, startedKey{}, d)
}

func (l *txLog) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	if start, ok := ctx.Value(startedKey{}).(pgx.TraceQueryStartData); ok {
		l.done(conn, start.SQL, start.Args, d.CommandTag, d.Err)
	}
}

func (l *txLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *txLog) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(d.SQL, d.Args)
	l.done(conn, d.SQL, d.Args, d.CommandTag, d.Err)
}

func (l *txLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// taskCount matches the task count of a Citus plan node.
var taskCount = regexp.MustCompile(`Task Count: (\d+)`)

// routerPlan reports whether an EXPLAIN of Citus is that of a router
// query: one distributed scan, of one task, with no subplan run first
// and no INSERT … SELECT through the coordinator.
func routerPlan(plan string) bool {
	counts := taskCount.FindAllStringSubmatch(plan, -1)
	return len(counts) == 1 && counts[0][1] == "1" &&
		!strings.Contains(plan, "Distributed Subplan") && !strings.Contains(plan, "INSERT/SELECT method")
}

// TestCitusRouterStatements runs W1 and signals between workflows on a
// store of 16 partitions distributed on the Citus cluster of
// CHRONICLE_TEST_CITUS_URL, records every statement through a pgx tracer,
// and EXPLAINs each distinct statement on a per-instance table, with the
// arguments of its first run, on the coordinator: each must be a router
// query of one task. The transactions that touch rows of more than one
// partition (a signal to another instance, its outcome sent back, a
// round that took instances of several partitions) are counted apart: on
// Citus they are multi-shard transactions when their partitions' shards
// differ.
func TestCitusRouterStatements(t *testing.T) {
	t.Parallel()
	url := pgtest.CitusURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	made := pgtest.NewCitusStore(t, postgres.Options{Partitions: 16})

	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	log := newTxLog()
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Opened without Options.Citus: the store finds its tables distributed.
	store, err := postgres.New(ctx, postgres.Options{Pool: pool, Schema: made.Schema()})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.True(t, store.Distributed())
	require.Equal(t, 16, store.Partitions())

	res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 40})
	require.NoError(t, err)
	require.Equal(t, 40, res.Workflows)
	log.mu.Lock()
	w1Txs, w1Multi := log.txs, log.multi
	log.mu.Unlock()

	// Signals between workflows: each is a write to another instance.
	b := setupOn(t, store)
	registerSignals(t, b.engine)
	const pairs = 10
	for i := range pairs {
		b.start(t, "listener", fmt.Sprintf("rcv-%d", i), "")
	}
	b.drain(t)
	for i := range pairs {
		b.start(t, "notifier", fmt.Sprintf("snd-%d", i), signalOrder{To: fmt.Sprintf("rcv-%d", i), Payload: "x"})
	}
	b.drain(t)
	for i := range pairs {
		require.Equal(t, "delivered", result[string](t, b, fmt.Sprintf("snd-%d", i)))
		require.Equal(t, "x", result[string](t, b, fmt.Sprintf("rcv-%d", i)))
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	var checked, runs int
	var notRouter []string
	for sql, args := range log.first {
		if !perInstanceTables.MatchString(sql) || isMigration(sql) || strings.Contains(sql, "pg_dist_") {
			continue
		}
		checked++
		runs += log.runs[sql]
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		var lines []string
		if err == nil {
			lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			notRouter = append(notRouter, fmt.Sprintf("%s\n-- EXPLAIN fails: %v", strings.TrimSpace(sql), err))
			continue
		}
		if plan := strings.Join(lines, "\n"); !routerPlan(plan) {
			notRouter = append(notRouter, fmt.Sprintf("%s\n-- plan:\n%s", strings.TrimSpace(sql), plan))
		}
	}
	sort.Strings(notRouter)
	require.Empty(t, notRouter, "statements on per-instance tables that are not router queries of one task")
	require.Greater(t, checked, 15, "statements checked")

	var crossing []string
	total := 0
	for sql, n := range log.crossing {
		crossing = append(crossing, fmt.Sprintf("%5d  %s", n, firstLine(sql)))
		total += n
	}
	sort.Strings(crossing)
	t.Logf("%d distinct statements on per-instance tables (%d runs), each a router query of one task", checked, runs)
	t.Logf("W1: %d of %d transactions touched more than one partition", w1Multi, w1Txs)
	t.Logf("W1 and %d signals: %d of %d transactions touched more than one partition; %d statements touched a partition other than their transaction's first:\n%s",
		pairs, log.multi, log.txs, total, strings.Join(crossing, "\n"))
	require.Positive(t, log.multi-w1Multi, "the signals' transactions touch the receiver's partition")
}

// firstLine returns the first non-empty line of a statement.
func firstLine(sql string) string {
	for _, l := range strings.Split(sql, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
