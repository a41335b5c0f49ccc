package chronicle_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestPostgresStatementsPlannedOnce runs W1 on PostgreSQL with the
// server's default plan_cache_mode and reads, on every connection of the
// store's pool, how the statements it prepared were planned
// (pg_prepared_statements): none of the store's statements is planned
// anew at each call. Left to choose, PostgreSQL kept planning the
// statements that take arrays at every execution (a plan for the
// arrays' lengths looked cheaper than the generic one), which cost more
// than a third of the database's time per workflow.
func TestPostgresStatementsPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := pgtest.Schema(t)
	pool, store := storeOnPool(ctx, t, schema, postgres.Options{}, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "auto"
	})
	res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 100})
	require.NoError(t, err)
	require.Equal(t, 100, res.Workflows)

	space := regexp.MustCompile(`\s+`)
	var checked int
	var replanned []string
	for _, conn := range pool.AcquireAllIdle(ctx) {
		// The store sets generic plans for its own transactions only:
		// the session keeps the server's setting.
		var mode string
		require.NoError(t, conn.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
		require.Equal(t, "auto", mode)
		rows, err := conn.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`, schema)
		require.NoError(t, err)
		for rows.Next() {
			var (
				sql             string
				generic, custom int64
			)
			require.NoError(t, rows.Scan(&sql, &generic, &custom))
			checked++
			// PostgreSQL tries five plans for the values before it
			// compares them with the generic one.
			if custom > 5 {
				replanned = append(replanned, fmt.Sprintf("%d custom plans, %d executions of the generic one: %.120s",
					custom, generic, space.ReplaceAllString(sql, " ")))
			}
		}
		require.NoError(t, rows.Err())
		conn.Release()
	}
	require.Greater(t, checked, 10, "the store's statements were found")
	require.Empty(t, replanned, "statements planned at every call")
}
