package mongo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/query"
)

// ordersQuery is "one customer's orders with a status and a created_at
// range", the first page of 50.
func ordersQuery() *provider.ListInstancesParams {
	return &provider.ListInstancesParams{Limit: 50, Where: &query.And{Terms: []query.Expr{
		cmpT(fCustomer, query.Eq, kw("acme")),
		cmpT(fStatus, query.Eq, kw("running")),
		cmpT(fCreated, query.Ge, tm(t0)),
		cmpT(fCreated, query.Lt, tm(t0.Add(24*time.Hour))),
	}}}
}

// bound returns the fields of a filter's top-level conjunction that an
// index scan can bound: an equality (a plain value) or a range ($gt,
// $gte, $lt, $lte, $in), in the filter or in a member of its $and.
func bound(f bson.D) map[string]bool {
	out := map[string]bool{}
	for _, e := range f {
		if e.Key == "$and" {
			for _, m := range e.Value.(bson.A) {
				for k := range bound(m.(bson.D)) {
					out[k] = true
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		d, ok := e.Value.(bson.D)
		if !ok {
			out[e.Key] = true
			continue
		}
		for _, op := range d {
			if slices.Contains([]string{"$gt", "$gte", "$lt", "$lte", "$in", "$eq"}, op.Key) {
				out[e.Key] = true
			}
		}
	}
	return out
}

// TestSearchFiltersFitTheIndexes checks, without a server, that the
// filter of the orders query bounds every key of the {ax, st, ca} index
// (so MongoDB scans only the matching index entries), and that a count
// by status sorts by st before it groups (so MongoDB reads the st index,
// not the collection).
func TestSearchFiltersFitTheIndexes(t *testing.T) {
	f, err := chmongo.InstanceFilter(ordersQuery())
	require.NoError(t, err)
	b := bound(f)
	for _, k := range []string{"ax", "st", "ca"} {
		require.True(t, b[k], "the orders filter does not bound %s: %v", k, f)
	}
	p, err := chmongo.CountPipeline(&provider.CountInstancesParams{By: &fStatus})
	require.NoError(t, err)
	require.Len(t, p, 3)
	require.Equal(t, "$sort", p[1].(bson.D)[0].Key, "%v", p)
	require.Equal(t, bson.D{{Key: "st", Value: 1}}, p[1].(bson.D)[0].Value)
}

// planStages collects the stage names of an explain's winning plan.
func planStages(v any, out *[]string) {
	switch x := v.(type) {
	case bson.M:
		if st, ok := x["stage"].(string); ok {
			*out = append(*out, st)
		}
		for _, c := range x {
			planStages(c, out)
		}
	case bson.D:
		for _, e := range x {
			if e.Key == "stage" {
				if st, ok := e.Value.(string); ok {
					*out = append(*out, st)
				}
			}
			planStages(e.Value, out)
		}
	case bson.A:
		for _, c := range x {
			planStages(c, out)
		}
	}
}

// TestSearchExplain runs explain on the orders query and on the count by
// status. On MongoDB neither may scan the collection (no COLLSCAN stage
// in the winning plan). FerretDB 1.x cannot use a secondary index for any
// query (its SQLite backend pushes down only a filter on _id alone), so
// there the test checks what it reports instead (a scan, no filter
// pushed down), that the indexes exist for the day the store runs on
// MongoDB, and says so loudly.
func TestSearchExplain(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	var recs []provider.InstanceRecord
	for i := range 200 {
		st := []provider.Status{provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed}[i%3]
		recs = append(recs, provider.InstanceRecord{InstanceID: fmt.Sprintf("x%03d", i), Name: "order", Status: st, CreatedAt: t0.Add(time.Duration(i) * time.Minute), UpdatedAt: t0,
			Attributes: map[string]query.Value{"customer": kw(fmt.Sprintf("c%d", i%20)), "amount": fl(float64(i))}})
	}
	saveRecords(t, s, recs)
	db := mongotest.Client(t, mongotest.URL(t)).Database(s.Database())

	f, err := chmongo.InstanceFilter(ordersQuery())
	require.NoError(t, err)
	var find bson.M
	require.NoError(t, db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "instances"}, {Key: "filter", Value: f}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 50}}}}).Decode(&find))
	pl, err := chmongo.CountPipeline(&provider.CountInstancesParams{By: &fStatus})
	require.NoError(t, err)
	var agg bson.M
	require.NoError(t, db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "aggregate", Value: "instances"}, {Key: "pipeline", Value: pl}, {Key: "cursor", Value: bson.D{}}}}}).Decode(&agg))

	ferret, err := chmongo.IsFerretDB(ctx, s)
	require.NoError(t, err)
	if !ferret {
		for name, ex := range map[string]bson.M{"orders query": find, "count by status": agg} {
			var stages []string
			planStages(ex, &stages)
			require.NotEmpty(t, stages, "%s: no plan in %v", name, ex)
			require.NotContains(t, stages, "COLLSCAN", "%s scans the collection: %v", name, ex)
			require.True(t, slices.ContainsFunc(stages, func(s string) bool { return strings.Contains(s, "IXSCAN") || s == "COUNT_SCAN" || s == "DISTINCT_SCAN" }), "%s: %v", name, stages)
		}
		return
	}

	t.Log("!!! FerretDB 1.x uses no secondary index: the orders query and the count by status are table scans there; the index assertions run on MongoDB only")
	for name, ex := range map[string]bson.M{"orders query": find, "count by status": agg} {
		require.Equal(t, false, ex["filterPushdown"], "%s: FerretDB now pushes the filter down; make this test assert the index use: %v", name, ex)
		plan := fmt.Sprint(ex["queryPlanner"])
		require.Contains(t, plan, "SCAN", "%s: %v", name, ex)
		t.Logf("FerretDB's plan of the %s: %s", name, plan)
	}
	cur, err := db.Collection("instances").Indexes().List(ctx)
	require.NoError(t, err)
	var idx []bson.M
	require.NoError(t, cur.All(ctx, &idx))
	names := map[string]bool{}
	for _, ix := range idx {
		names[fmt.Sprint(ix["name"])] = true
	}
	require.True(t, names["ax_1_st_1_ca_1"], "indexes: %v", names)
	require.True(t, names["st_1"], "indexes: %v", names)
}
