package chronicle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// scanPreload is how many ended instances the store holds before the
// measured run: enough that a sequential scan of a growing table costs
// far more than an index scan, so a cost-based plan that picks one is
// wrong, not close.
const scanPreload = 30_000

// TestPostgresNoSequentialScans runs W1 in steady state on a store that
// already holds many ended instances, with every statement of the
// engine's sessions on a generic plan (plan_cache_mode =
// force_generic_plan, the plan pgx's cached prepared statements may
// settle on), and asserts from pg_stat_user_tables that no table that
// grows with the store was read by a sequential scan: a store with a
// month of history must cost per round what an empty one does. It runs
// on the tables as a server without autovacuum leaves them (no
// statistics, ever, and the dead rows of the queue tables never removed)
// and after VACUUM (ANALYZE) (as autovacuum would), with plans made while
// the tables were empty (a process that started with the store) and while
// they were full.
func TestPostgresNoSequentialScans(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                  string
		plannedEmpty, analyze bool
	}{
		{"PlannedEmptyNoStatistics", true, false},
		{"PlannedFullNoStatistics", false, false},
		{"PlannedFullAnalyzed", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			schema := pgtest.Schema(t)
			pool, store := storeOnPool(ctx, t, schema, postgres.Options{}, func(cfg *pgxpool.Config) {
				cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
				// bench.FlushStats waits for the statistics of connections
				// the run closed, found by this name.
				cfg.ConnConfig.RuntimeParams["application_name"] = "scans:" + schema
			})
			var mode string
			require.NoError(t, pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
			require.Equal(t, "force_generic_plan", mode)
			if !c.analyze {
				// As on a server without autovacuum, whatever this one's
				// setting: no statistics arrive during the run.
				for _, table := range append(slices.Clone(bench.StoreTables), bench.QueueTables...) {
					_, err := pool.Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema, table}.Sanitize()+" SET (autovacuum_enabled = off)")
					require.NoError(t, err)
				}
			}

			if c.plannedEmpty {
				// The engine's connections plan its statements on empty
				// tables, and keep those plans as the tables fill.
				res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 20})
				require.NoError(t, err)
				require.Equal(t, 20, res.Workflows)
			}
			_, err := bench.PreloadPostgres(ctx, store, scanPreload, nil)
			require.NoError(t, err)
			if c.analyze {
				// What autovacuum leaves: every table vacuumed and
				// analyzed, the empty queue tables known to be empty.
				var tables []string
				for _, table := range append(slices.Clone(bench.StoreTables), bench.QueueTables...) {
					tables = append(tables, pgx.Identifier{schema, table}.Sanitize())
				}
				_, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+strings.Join(tables, ", "))
				require.NoError(t, err)
			}
			if !c.plannedEmpty {
				// Plans are made per connection when a statement first
				// runs: start from connections that have made none.
				pool.Reset()
			}

			require.NoError(t, bench.FlushStats(ctx, pool))
			before, err := bench.ReadDBWork(ctx, pool, schema)
			require.NoError(t, err)
			res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 300})
			require.NoError(t, err)
			require.Equal(t, 300, res.Workflows)
			require.NoError(t, bench.FlushStats(ctx, pool))
			after, err := bench.ReadDBWork(ctx, pool, schema)
			require.NoError(t, err)
			work := after.Sub(before)

			// Unvacuumed, the queue tables keep the dead rows of every
			// message and task: they grow with the store too. Vacuumed,
			// they hold the work in flight, and a plan made while
			// vacuum's statistics said they were empty may scan them
			// until the next analyze replans it (docs/benchmarks.md).
			growing := bench.StoreTables
			if !c.analyze {
				growing = append(slices.Clone(growing), bench.QueueTables...)
			}
			var scanned []string
			for _, table := range append(slices.Clone(bench.StoreTables), bench.QueueTables...) {
				tw, ok := work.Table(table)
				require.True(t, ok, "table %s is not in the schema's statistics", table)
				t.Logf("%-18s seq scans %6d (rows read %9d), index scans %6d", table, tw.SeqScans, tw.SeqTuples, tw.IndexScans)
				if tw.SeqScans != 0 && slices.Contains(growing, table) {
					scanned = append(scanned, table)
				}
			}
			for _, table := range scanned {
				tw, _ := work.Table(table)
				t.Errorf("%s: %d sequential scans reading %d rows during 300 W1 workflows on %d ended instances; want none",
					table, tw.SeqScans, tw.SeqTuples, scanPreload)
			}
			ins, ok := work.Table("instances")
			require.True(t, ok)
			require.Positive(t, ins.IndexScans, "the run read instances by index: the counters moved")
		})
	}
}
