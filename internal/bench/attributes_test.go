package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/query"
)

// TestAttributesRunOnPostgres runs W1 with search attributes on
// PostgreSQL, one Start each and with StartMany: every record the rounds
// wrote carries the workflow's attributes, typed by their declarations,
// and a search finds a workflow by them.
func TestAttributesRunOnPostgres(t *testing.T) {
	t.Parallel()
	for _, many := range []bool{false, true} {
		t.Run(map[bool]string{false: "Start", true: "StartMany"}[many], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := pgtest.NewStore(t, postgres.Options{})
			res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 10, Attributes: true, StartMany: many})
			require.NoError(t, err)
			require.Equal(t, 10, res.Workflows)
			recs, err := store.ListInstances(ctx, &provider.ListInstancesParams{})
			require.NoError(t, err)
			require.Len(t, recs, 10)
			customers := map[string]bool{}
			for _, r := range recs {
				require.Equal(t, provider.StatusCompleted, r.Status)
				require.Len(t, r.Attributes, len(bench.PreloadAttributes), "instance %s", r.InstanceID)
				for name, typ := range bench.PreloadAttributes {
					require.Equal(t, typ, r.Attributes[name].Type, "%s of %s", name, r.InstanceID)
				}
				customers[r.Attributes["customer"].Str] = true
			}
			for i := range 10 {
				require.True(t, customers[bench.StartAttributes(i)["customer"].(string)], "workflow %d", i)
			}
			where, err := query.Parse("customer = 'customer-07919' AND status = 'completed'", query.SchemaOf(bench.PreloadAttributes))
			require.NoError(t, err)
			found, err := store.ListInstances(ctx, &provider.ListInstancesParams{Where: where})
			require.NoError(t, err)
			require.Len(t, found, 1, "workflow 1's customer")
			require.Equal(t, "customer-07919", found[0].Attributes["customer"].Str)
		})
	}
}
