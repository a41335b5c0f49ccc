package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// planArgs are the EXECUTE arguments of the statements of
// postgres.QueueStatements, as SQL literals: now is 2026-01-01, a claim
// of 8 tasks of the default queue without rate limits, partition 0.
var planArgs = map[string]string{
	"dequeueLock":       `'2026-01-01T00:00:00Z', '{}', 0`,
	"dequeuePick":       `'2026-01-01T00:00:00Z', '{}', 0`,
	"claimActivity":     `'', '2026-01-01T00:00:00Z', 'node', '2026-01-01T00:05:00Z', 8, '{}', '{}', 0`,
	"claimCandidate":    `'', '2026-01-01T00:00:00Z', '{k-1}', '{}', '{}', '{}', 0`,
	"claimOrder":        `'{"", x}', '2026-01-01T00:00:00Z', 0`,
	"countClaims":       `'k-1', '2026-01-01T00:00:00Z'`,
	"nextOrchestration": `'{}', '9999-12-31T00:00:00Z', 0`,
	"nextActivity":      `'{"", x}', 0`,
	"anyMessages":       `'{i-1, i-2}', '{0, 0}'`,
}

// planUses names an index each statement's plan must walk.
var planUses = map[string][]string{
	"dequeueLock":    {"messages_order", "messages_late", "instances_pkey"},
	"dequeuePick":    {"messages_order", "messages_late", "instances_pkey"},
	"claimActivity":  {"activity_tasks_order", "activity_tasks_late"},
	"claimCandidate": {"activity_tasks_order", "activity_tasks_late"},
	"claimOrder":     {"activity_tasks_order", "activity_tasks_late"},
	"countClaims":    {"activity_tasks_key"},
	"anyMessages":    {"messages_instance"},
}

// TestQueuePlans checks the generic plans (plan_cache_mode =
// force_generic_plan, as pgx's cached statements may settle on) of the
// statements that pick queued work: each is an ordered index scan of the
// queue's order index, never a sequential scan, a bitmap scan or a sort
// of a queue table (the count of a key's claims reads the key's index
// entries, in any order), whether planned on empty tables, on full tables
// without statistics, or after ANALYZE. The full tables hold what makes
// a wrong plan costly: many timers and retries not yet visible, many
// live claims, and some visible work of every priority sign.
func TestQueuePlans(t *testing.T) {
	t.Parallel()
	ctx, s, conn := planStore(t)
	inStates(ctx, t, conn, s, func(t *testing.T, state string) {
		for name, sql := range postgres.QueueStatements(s) {
			lines := explainGeneric(ctx, t, conn, "plan_"+strings.ToLower(name)+"_"+state, sql, planArgs[name])
			plan := strings.Join(lines, "\n")
			bad := []string{"Seq Scan on messages", "Seq Scan on activity_tasks", "Seq Scan on instances"}
			if name != "countClaims" {
				// The others want their rows in order; a count does not.
				bad = append(bad, "Bitmap Heap Scan on messages", "Bitmap Heap Scan on activity_tasks")
			}
			for i, line := range lines {
				for _, b := range bad {
					if !strings.Contains(line, b) {
						continue
					}
					// A bitmap scan of one instance's messages (a probe
					// by instance id) reads that instance's rows only.
					if strings.HasPrefix(b, "Bitmap") && i+1 < len(lines) && strings.Contains(lines[i+1], "Recheck Cond: (instance_id = ") {
						continue
					}
					require.Fail(t, "bad plan", "%s, %s: %s:\n%s", name, state, b, plan)
				}
			}
			for i, line := range lines {
				// A sort may order what the LIMITed scans returned, never
				// a table's rows.
				if strings.Contains(line, "->  Sort") && i+2 < len(lines) {
					require.NotRegexp(t, `Scan (using \w+ )?on (messages|activity_tasks)`, lines[i+2], "%s, %s:\n%s", name, state, plan)
				}
			}
			for _, index := range planUses[name] {
				require.Regexp(t, `(using|on) `+index+` `, plan, "%s, %s:\n%s", name, state, plan)
			}
			t.Logf("%s, %s:\n%s", name, state, plan)
		}
	})
}

// planStore returns a new store whose queue tables autovacuum leaves
// alone, and a connection of its own on generic plans
// (plan_cache_mode = force_generic_plan, as pgx's cached statements may
// settle on), for the plan tests.
func planStore(t *testing.T) (context.Context, *postgres.Store, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := pgtest.NewStore(t, postgres.Options{})
	conn := adminConn(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	for _, table := range []string{"messages", "activity_tasks", "instances"} {
		_, err := conn.Exec(ctx, "ALTER TABLE "+schema+"."+table+" SET (autovacuum_enabled = off)")
		require.NoError(t, err)
	}
	_, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	return ctx, s, conn
}

// inStates runs check on the store's tables empty, full without
// statistics (fillQueues) and full after ANALYZE, each a subtest; state
// names the state.
func inStates(ctx context.Context, t *testing.T, conn *pgx.Conn, s *postgres.Store, check func(t *testing.T, state string)) {
	t.Helper()
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	t.Run("Empty", func(t *testing.T) { check(t, "empty") })
	fillQueues(ctx, t, conn, schema)
	t.Run("FullNoStatistics", func(t *testing.T) { check(t, "full") })
	_, err := conn.Exec(ctx, "ANALYZE "+schema+".messages, "+schema+".activity_tasks, "+schema+".instances")
	require.NoError(t, err)
	t.Run("FullAnalyzed", func(t *testing.T) { check(t, "analyzed") })
}

// explainGeneric prepares sql as stmt and returns the lines of the
// generic plan of its execution with args (SQL literals; with none, NULL
// for every parameter, which a generic plan does not depend on).
func explainGeneric(ctx context.Context, t *testing.T, conn *pgx.Conn, stmt, sql, args string) []string {
	t.Helper()
	_, err := conn.Exec(ctx, "PREPARE "+stmt+" AS "+sql)
	require.NoError(t, err, stmt)
	if args == "" {
		var n int
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = $1", stmt).Scan(&n))
		args = strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
	}
	explain := "EXPLAIN EXECUTE " + stmt
	if args != "" {
		explain += "(" + args + ")"
	}
	rows, err := conn.Query(ctx, explain)
	require.NoError(t, err, stmt)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, stmt)
	return lines
}

// fillQueues fills the queue tables of schema (a quoted identifier) with
// what makes a wrong plan costly, for the plan tests:
// 20,000 instances; messages: 20,000 timers due later, 200 visible of
// priority 0, 20 of priority 3 and 20 of priority -2; tasks: 20,000
// claimed until later (half with a concurrency key), 20,000 retries
// due later, 200 claimable of priority 0 and 20 of priority -2.
func fillQueues(ctx context.Context, t *testing.T, conn *pgx.Conn, schema string) {
	t.Helper()
	fill := fmt.Sprintf(`
INSERT INTO %[1]s.instances (instance_id) SELECT 'i-' || k FROM generate_series(1, 20000) k;
INSERT INTO %[1]s.messages (id, instance_id, visible_at, order_at, envelope)
SELECT 'timer-' || k, 'i-' || k, t, t, '\x00'
FROM generate_series(1, 20000) k, LATERAL (SELECT '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => k) AS t) x;
INSERT INTO %[1]s.messages (id, instance_id, visible_at, order_at, envelope)
SELECT 'now-' || k, 'i-' || k, v, v - make_interval(mins => p), '\x00'
FROM generate_series(1, 240) k,
    LATERAL (SELECT '2025-12-31T23:00:00Z'::timestamptz + make_interval(secs => k) AS v,
                    CASE WHEN k <= 200 THEN 0 WHEN k <= 220 THEN 3 ELSE -2 END AS p) x;
INSERT INTO %[1]s.activity_tasks (id, instance_id, execution_id, queue, ready_at, order_at, priority, token, owner,
    locked_until, concurrency_key, concurrency_limit, envelope)
SELECT 'claimed-' || k, 'i-' || k, 'e', '', u, u, 0, 't-' || k, 'node', u,
    CASE WHEN k %% 2 = 0 THEN 'k-' || (k %% 50) END, CASE WHEN k %% 2 = 0 THEN 5 END, '\x00'
FROM generate_series(1, 20000) k, LATERAL (SELECT '2026-01-01T00:05:00Z'::timestamptz - make_interval(secs => k %% 60) AS u) x;
INSERT INTO %[1]s.activity_tasks (id, instance_id, execution_id, queue, ready_at, order_at, envelope)
SELECT 'retry-' || k, 'i-' || k, 'e', '', r, r, '\x00'
FROM generate_series(1, 20000) k, LATERAL (SELECT '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => k) AS r) x;
INSERT INTO %[1]s.activity_tasks (id, instance_id, execution_id, queue, ready_at, order_at, priority, envelope)
SELECT 'ready-' || k, 'i-' || k, 'e', '', v, v - make_interval(mins => p), p, '\x00'
FROM generate_series(1, 220) k,
    LATERAL (SELECT '2025-12-31T23:00:00Z'::timestamptz + make_interval(secs => k) AS v,
                    CASE WHEN k <= 200 THEN 0 ELSE -2 END AS p) x;`, schema)
	_, err := conn.Exec(ctx, fill)
	require.NoError(t, err)
}
