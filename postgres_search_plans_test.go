package chronicle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestPostgresSearchPlans checks the plans of the search queries
// on a store preloaded with instances that carry search attributes: one
// customer's completed orders in a range of creation times is found
// through the attributes' GIN index, never by reading every instance,
// on generic plans (plan_cache_mode = force_generic_plan) with and
// without statistics; and both queries give their answers.
func TestPostgresSearchPlans(t *testing.T) {
	t.Parallel()
	for _, analyze := range []bool{false, true} {
		name := "NoStatistics"
		if analyze {
			name = "Analyzed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			store := pgtest.NewStore(t, postgres.Options{})
			table := pgx.Identifier{store.Schema(), "instances"}.Sanitize()
			if !analyze {
				_, err := store.Pool().Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = off)")
				require.NoError(t, err)
			}
			_, err := bench.PreloadPostgresWith(ctx, store, scanPreload, bench.PreloadOptions{Attributes: true})
			require.NoError(t, err)
			if analyze {
				_, err := store.Pool().Exec(ctx, "VACUUM (ANALYZE) "+table)
				require.NoError(t, err)
			}
			res, err := bench.QueryBench(ctx, store, bench.QueryConfig{Runs: 3, Explain: true})
			require.NoError(t, err)
			require.EqualValues(t, scanPreload+1, res.Instances, "the preload and its template")
			for _, tm := range res.Timings {
				t.Logf("%-40s %-8s median %v, %d rows", tm.Query, tm.Mode, tm.Median, tm.Rows)
				if tm.Query == bench.QueryCountByStatus {
					require.Equal(t, 4, tm.Rows, "completed, running, failed, terminated")
				} else {
					// 3 orders per customer, half of them in the middle
					// half of the span, three quarters of those completed.
					require.LessOrEqual(t, tm.Rows, 3)
				}
			}
			plan := res.Plans[bench.QuerySelective]
			t.Logf("generic plan of %s:\n%s", bench.QuerySelective, plan)
			require.Contains(t, plan, "instances_attrs")
			require.NotContains(t, plan, "Seq Scan")
			require.False(t, strings.Contains(plan, "Index Scan using instances_pkey"), "walks the primary key")
		})
	}
}
