package postgres_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/query"
)

// save writes records (and custom records) in one round.
func save(t *testing.T, s *postgres.Store, seq int64, recs []provider.InstanceRecord, custom ...provider.CustomRecord) {
	t.Helper()
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		for i := range recs {
			if err := tx.SaveProjections(ctx, &provider.Projections{InstanceID: recs[i].InstanceID, Seq: seq, Instance: &recs[i]}); err != nil {
				return err
			}
		}
		for _, c := range custom {
			if err := tx.SaveProjections(ctx, &provider.Projections{InstanceID: c.InstanceID, Seq: c.Seq, Custom: []provider.CustomRecord{c}}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestSearchAttributesRoundTrip writes values of every type at the edges
// of their ranges and reads them back exactly, by GetInstance and
// ListInstances; a record written again without attributes has none.
func TestSearchAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	ctx := t.Context()
	attrs := map[string]query.Value{
		"kw":      {Type: query.Keyword, Str: `quote ' double " back \ percent % under _ é 日本 <&>`},
		"intMax":  {Type: query.Int, Int: math.MaxInt64},
		"intMin":  {Type: query.Int, Int: math.MinInt64},
		"floatA":  {Type: query.Float, Float: 0.1},
		"floatB":  {Type: query.Float, Float: math.MaxFloat64},
		"floatC":  {Type: query.Float, Float: math.SmallestNonzeroFloat64},
		"floatD":  {Type: query.Float, Float: -1e21},
		"floatE":  {Type: query.Float, Float: 12},
		"yes":     {Type: query.Bool, Bool: true},
		"no":      {Type: query.Bool},
		"early":   {Type: query.Time, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"before":  {Type: query.Time, Time: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		"late":    {Type: query.Time, Time: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		"tags":    {Type: query.KeywordList, List: []string{"b", "a", "b", ""}},
		"unset":   {},
		"emptyKw": {Type: query.Keyword},
	}
	rec := provider.InstanceRecord{InstanceID: "i-1", ExecutionID: "e-1", Name: "order", Status: provider.StatusRunning,
		CreatedAt: base, UpdatedAt: base, Attributes: attrs, CustomStatusText: "packing"}
	save(t, s, 1, []provider.InstanceRecord{rec})

	want := map[string]query.Value{}
	for name, v := range attrs {
		if name != "unset" {
			want[name] = v
		}
	}
	check := func(got map[string]query.Value) {
		t.Helper()
		require.Len(t, got, len(want))
		for name, v := range want {
			require.Equal(t, v.Type, got[name].Type, name)
			require.Zero(t, query.Compare(v, got[name]), "%s: want %v, got %v", name, v, got[name])
			if v.Type == query.Float {
				require.Equal(t, math.Float64bits(v.Float), math.Float64bits(got[name].Float), name)
			}
			if v.Type == query.Time {
				require.Equal(t, time.UTC, got[name].Time.Location(), name)
			}
		}
	}
	got, err := s.GetInstance(ctx, "i-1")
	require.NoError(t, err)
	check(got.Attributes)
	require.Equal(t, "packing", got.CustomStatusText)
	list, err := s.ListInstances(ctx, &provider.ListInstancesParams{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	check(list[0].Attributes)
	require.Equal(t, "packing", list[0].CustomStatusText)

	rec.Attributes, rec.CustomStatusText = map[string]query.Value{"unset": {}}, ""
	save(t, s, 2, []provider.InstanceRecord{rec})
	got, err = s.GetInstance(ctx, "i-1")
	require.NoError(t, err)
	require.Nil(t, got.Attributes)
	require.Empty(t, got.CustomStatusText)
}

// TestCountAndProjectionsWithoutWhere counts by nothing, by a built-in
// field and by attributes of each groupable type, and pages through a
// custom projection's records joined with their instances.
func TestCountAndProjectionsWithoutWhere(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	ctx := t.Context()
	kw := func(s string) query.Value { return query.Value{Type: query.Keyword, Str: s} }
	num := func(n int64) query.Value { return query.Value{Type: query.Int, Int: n} }
	recs := []provider.InstanceRecord{
		{InstanceID: "a", Name: "order", Status: provider.StatusRunning, Attributes: map[string]query.Value{"customer": kw("b"), "n": num(10)}},
		{InstanceID: "b", Name: "order", Status: provider.StatusCompleted, Attributes: map[string]query.Value{"customer": kw("a"), "n": num(-2)}},
		{InstanceID: "c", Name: "order", Status: provider.StatusRunning, Attributes: map[string]query.Value{"customer": kw("b")}},
		{InstanceID: "d", Name: "order", Status: provider.StatusFailed, Attributes: map[string]query.Value{"customer": num(3)}},
		{InstanceID: "e", Name: "order"},
	}
	save(t, s, 1, recs,
		provider.CustomRecord{Name: "totals", Version: 1, InstanceID: "a", Seq: 1, Data: []byte("A")},
		provider.CustomRecord{Name: "totals", Version: 2, InstanceID: "c", Seq: 1, Data: []byte("C")},
		provider.CustomRecord{Name: "totals", Version: 1, InstanceID: "orphan", Seq: 1, Data: []byte("O")},
		provider.CustomRecord{Name: "other", Version: 1, InstanceID: "b", Seq: 1, Data: []byte("B")},
	)

	groups, err := s.CountInstances(ctx, &provider.CountInstancesParams{})
	require.NoError(t, err)
	require.Equal(t, []provider.GroupCount{{Count: 5}}, groups)

	status, _ := query.LookupBuiltin("status")
	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &status})
	require.NoError(t, err)
	require.Equal(t, []provider.GroupCount{{Count: 1}, {Value: kw("completed"), Count: 1}, {Value: kw("failed"), Count: 1}, {Value: kw("running"), Count: 2}}, groups)

	// d's customer is an int, not a keyword: it counts as no value.
	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &query.Field{Name: "customer", Type: query.Keyword}})
	require.NoError(t, err)
	require.Equal(t, []provider.GroupCount{{Count: 2}, {Value: kw("a"), Count: 1}, {Value: kw("b"), Count: 2}}, groups)

	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &query.Field{Name: "n", Type: query.Int}})
	require.NoError(t, err)
	require.Equal(t, []provider.GroupCount{{Count: 3}, {Value: num(-2), Count: 1}, {Value: num(10), Count: 1}}, groups)

	_, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &query.Field{Name: "tags", Type: query.KeywordList}})
	require.ErrorIs(t, err, query.ErrInvalidQuery)

	got, err := s.ListCustomProjections(ctx, &provider.ListCustomProjectionsParams{Name: "totals", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []provider.CustomRecord{{Name: "totals", Version: 1, InstanceID: "a", Seq: 1, Data: []byte("A")}}, got)
	got, err = s.ListCustomProjections(ctx, &provider.ListCustomProjectionsParams{Name: "totals", AfterID: "a"})
	require.NoError(t, err)
	// The orphan record has no instance record: it is not listed.
	require.Equal(t, []provider.CustomRecord{{Name: "totals", Version: 2, InstanceID: "c", Seq: 1, Data: []byte("C")}}, got)
}
