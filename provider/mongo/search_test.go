package mongo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/query"
)

// Fields and values of the search tests.
var (
	fCustomer = query.Field{Name: "customer", Type: query.Keyword}
	fAmount   = query.Field{Name: "amount", Type: query.Float}
	fCount    = query.Field{Name: "count", Type: query.Int}
	fVIP      = query.Field{Name: "vip", Type: query.Bool}
	fDue      = query.Field{Name: "due", Type: query.Time}
	fTags     = query.Field{Name: "tags", Type: query.KeywordList}
	fStatus   = query.Field{Name: "status", Builtin: query.FieldStatus, Type: query.Keyword}
	fParent   = query.Field{Name: "parent_id", Builtin: query.FieldParentID, Type: query.Keyword}
	fCreated  = query.Field{Name: "created_at", Builtin: query.FieldCreatedAt, Type: query.Time}
	fDone     = query.Field{Name: "completed_at", Builtin: query.FieldCompletedAt, Type: query.Time}
	fCStatus  = query.Field{Name: "custom_status", Builtin: query.FieldCustomStatus, Type: query.Keyword}
	fID       = query.Field{Name: "id", Builtin: query.FieldID, Type: query.Keyword}
)

func kw(s string) query.Value      { return query.Value{Type: query.Keyword, Str: s} }
func fl(f float64) query.Value     { return query.Value{Type: query.Float, Float: f} }
func in64(n int64) query.Value     { return query.Value{Type: query.Int, Int: n} }
func bl(b bool) query.Value        { return query.Value{Type: query.Bool, Bool: b} }
func tm(t time.Time) query.Value   { return query.Value{Type: query.Time, Time: t} }
func list(s ...string) query.Value { return query.Value{Type: query.KeywordList, List: s} }
func cmpT(f query.Field, op query.Op, v query.Value) query.Expr {
	return &query.Cmp{Field: f, Op: op, Value: v}
}
func not(e query.Expr) query.Expr { return &query.Not{X: e} }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// searchRecords are the instance records of the search tests: every
// attribute type, missing attributes, keyword byte order (é after z),
// times a microsecond apart.
func searchRecords() []provider.InstanceRecord {
	rec := func(id string, st provider.Status, created time.Time, attrs map[string]query.Value) provider.InstanceRecord {
		r := provider.InstanceRecord{InstanceID: id, ExecutionID: "e-" + id, Name: "order", Version: "v1", Status: st, CreatedAt: created, UpdatedAt: created.Add(time.Minute), Attributes: attrs}
		if st.Terminal() {
			r.CompletedAt = created.Add(time.Hour)
		}
		return r
	}
	recs := []provider.InstanceRecord{
		rec("i1", provider.StatusRunning, t0, map[string]query.Value{"customer": kw("acme"), "amount": fl(12.5), "count": in64(3), "vip": bl(true), "due": tm(t0.Add(time.Microsecond)), "tags": list("red", "blue")}),
		rec("i2", provider.StatusCompleted, t0.Add(time.Hour), map[string]query.Value{"customer": kw("acme"), "amount": fl(-1), "count": in64(-7), "vip": bl(false), "tags": list("green")}),
		rec("i3", provider.StatusRunning, t0.Add(2*time.Hour), map[string]query.Value{"customer": kw("zeta"), "amount": fl(100), "due": tm(t0)}),
		rec("i4", provider.StatusFailed, t0.Add(3*time.Hour), map[string]query.Value{"customer": kw("\u00e9clair"), "count": in64(1 << 60)}),
		rec("i5", provider.StatusRunning, t0.Add(4*time.Hour), nil),
	}
	recs[0].CustomStatusText = "waiting for payment"
	recs[1].ParentID = "i1"
	return recs
}

func saveRecords(t *testing.T, s *chmongo.Store, recs []provider.InstanceRecord) {
	t.Helper()
	for i := range recs {
		r := recs[i]
		require.NoError(t, s.SaveProjections(context.Background(), &provider.Projections{InstanceID: r.InstanceID, Seq: 5, Instance: &r}))
	}
}

func ids(recs []provider.InstanceRecord) string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.InstanceID
	}
	return strings.Join(out, ",")
}

// TestSearchAttributesRoundTrip: attributes of every type and the custom
// status text come back from GetInstance and ListInstances exactly (type
// and value, times in UTC to the microsecond); ResetProjections and a new
// record without them remove them.
func TestSearchAttributesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	recs := searchRecords()
	saveRecords(t, s, recs)
	for _, want := range recs {
		got, err := s.GetInstance(ctx, want.InstanceID)
		require.NoError(t, err)
		require.Equal(t, want.CustomStatusText, got.CustomStatusText)
		require.Equal(t, len(want.Attributes), len(got.Attributes), want.InstanceID)
		for name, v := range want.Attributes {
			g := got.Attributes[name]
			require.Equal(t, v.Type, g.Type, name)
			if v.Type == query.Time {
				require.True(t, v.Time.Equal(g.Time), name)
				require.Equal(t, time.UTC, g.Time.Location(), name)
			} else {
				require.Equal(t, v, g, name)
			}
		}
	}
	listed, err := s.ListInstances(ctx, &provider.ListInstancesParams{})
	require.NoError(t, err)
	require.Equal(t, "i1,i2,i3,i4,i5", ids(listed))
	require.Equal(t, recs[0].Attributes["tags"], listed[0].Attributes["tags"])

	// A later record without attributes leaves none behind, in the record
	// or in the query fields.
	r := recs[0]
	r.Attributes, r.CustomStatusText = nil, ""
	require.NoError(t, s.SaveProjections(ctx, &provider.Projections{InstanceID: "i1", Seq: 6, Instance: &r}))
	got, err := s.GetInstance(ctx, "i1")
	require.NoError(t, err)
	require.Empty(t, got.Attributes)
	found, err := s.ListInstances(ctx, &provider.ListInstancesParams{Where: cmpT(fCustomer, query.Eq, kw("acme"))})
	require.NoError(t, err)
	require.Equal(t, "i2", ids(found))
	found, err = s.ListInstances(ctx, &provider.ListInstancesParams{Where: &query.Exists{Field: fCStatus}})
	require.NoError(t, err)
	require.Empty(t, found)
}

// TestSearchWhere checks the translation of each kind of term, with the
// two-valued logic of the spec: a term on a missing field is false, NOT
// of it true.
func TestSearchWhere(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	saveRecords(t, s, searchRecords())
	cases := []struct {
		name string
		e    query.Expr
		want string
	}{
		{"keyword =", cmpT(fCustomer, query.Eq, kw("acme")), "i1,i2"},
		{"keyword != skips missing", cmpT(fCustomer, query.Ne, kw("acme")), "i3,i4"},
		{"NOT keyword = keeps missing", not(cmpT(fCustomer, query.Eq, kw("acme"))), "i3,i4,i5"},
		{"keyword byte order", cmpT(fCustomer, query.Gt, kw("z")), "i3,i4"},
		{"keyword byte order 2", cmpT(fCustomer, query.Gt, kw("zzz")), "i4"},
		{"keyword <", cmpT(fCustomer, query.Lt, kw("b")), "i1,i2"},
		{"float >", cmpT(fAmount, query.Gt, fl(0)), "i1,i3"},
		{"float <=", cmpT(fAmount, query.Le, fl(12.5)), "i1,i2"},
		{"NOT float > is true on missing", not(cmpT(fAmount, query.Gt, fl(0))), "i2,i4,i5"},
		{"int = 2^60 exactly", cmpT(fCount, query.Eq, in64(1<<60)), "i4"},
		{"int > 2^60 - 1", cmpT(fCount, query.Gt, in64(1<<60-1)), "i4"},
		{"int < 0", cmpT(fCount, query.Lt, in64(0)), "i2"},
		{"int IN", &query.In{Field: fCount, Values: []query.Value{in64(3), in64(-7), in64(99)}}, "i1,i2"},
		{"NOT IN keeps missing", not(&query.In{Field: fCount, Values: []query.Value{in64(3)}}), "i2,i3,i4,i5"},
		{"bool = false", cmpT(fVIP, query.Eq, bl(false)), "i2"},
		{"bool != true", cmpT(fVIP, query.Ne, bl(true)), "i2"},
		{"time =", cmpT(fDue, query.Eq, tm(t0)), "i3"},
		{"time > to the microsecond", cmpT(fDue, query.Gt, tm(t0)), "i1"},
		{"time >= between microseconds", cmpT(fDue, query.Ge, tm(t0.Add(time.Nanosecond))), "i1"},
		{"time = between microseconds", cmpT(fDue, query.Eq, tm(t0.Add(time.Nanosecond))), ""},
		{"time <= between microseconds", cmpT(fDue, query.Le, tm(t0.Add(time.Nanosecond))), "i3"},
		{"list holds", cmpT(fTags, query.Eq, kw("blue")), "i1"},
		{"list does not hold (and is set)", cmpT(fTags, query.Ne, kw("blue")), "i2"},
		{"list IN", &query.In{Field: fTags, Values: []query.Value{kw("green"), kw("red")}}, "i1,i2"},
		{"list STARTS_WITH", &query.Prefix{Field: fTags, Prefix: "gr"}, "i2"},
		{"list STARTS_WITH a regexp character", &query.Prefix{Field: fTags, Prefix: "r.d"}, ""},
		{"keyword STARTS_WITH", &query.Prefix{Field: fCustomer, Prefix: "ac"}, "i1,i2"},
		{"keyword STARTS_WITH non-ASCII", &query.Prefix{Field: fCustomer, Prefix: "\u00e9"}, "i4"},
		{"exists", &query.Exists{Field: fTags}, "i1,i2"},
		{"IS NULL", not(&query.Exists{Field: fAmount}), "i4,i5"},
		{"status", cmpT(fStatus, query.Eq, kw("running")), "i1,i3,i5"},
		{"status !=", cmpT(fStatus, query.Ne, kw("running")), "i2,i4"},
		{"parent_id empty is no value", &query.Exists{Field: fParent}, "i2"},
		{"parent_id != skips no value", cmpT(fParent, query.Ne, kw("x")), "i2"},
		{"parent_id < skips no value", cmpT(fParent, query.Lt, kw("z")), "i2"},
		{"custom_status STARTS_WITH", &query.Prefix{Field: fCStatus, Prefix: "wait"}, "i1"},
		{"completed_at missing while running", not(&query.Exists{Field: fDone}), "i1,i3,i5"},
		{"completed_at >", cmpT(fDone, query.Gt, tm(t0.Add(90*time.Minute))), "i2,i4"},
		{"created_at range", &query.And{Terms: []query.Expr{cmpT(fCreated, query.Ge, tm(t0.Add(time.Hour))), cmpT(fCreated, query.Le, tm(t0.Add(3*time.Hour)))}}, "i2,i3,i4"},
		{"created_at beyond int64 nanoseconds", cmpT(fCreated, query.Lt, tm(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))), "i1,i2,i3,i4,i5"},
		{"id", &query.In{Field: fID, Values: []query.Value{kw("i2"), kw("i9")}}, "i2"},
		{"OR", &query.Or{Terms: []query.Expr{cmpT(fCustomer, query.Eq, kw("zeta")), cmpT(fStatus, query.Eq, kw("failed"))}}, "i3,i4"},
		{"NOT NOT", not(not(cmpT(fCustomer, query.Eq, kw("zeta")))), "i3"},
		{"NOT (a AND b)", not(&query.And{Terms: []query.Expr{cmpT(fCustomer, query.Eq, kw("acme")), cmpT(fStatus, query.Eq, kw("running"))}}), "i2,i3,i4,i5"},
		{"a user's text stays a value", cmpT(fCustomer, query.Eq, kw(`{"$gt": ""}`)), ""},
		{"a user's text stays a value 2", cmpT(fCustomer, query.Eq, kw("acme' || '1'=='1")), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.ListInstances(ctx, &provider.ListInstancesParams{Where: c.e})
			require.NoError(t, err)
			require.Equal(t, c.want, ids(got))
		})
	}
	// Where narrows the params' own fields, and pages.
	got, err := s.ListInstances(ctx, &provider.ListInstancesParams{Status: provider.StatusRunning, Where: cmpT(fCustomer, query.Eq, kw("acme"))})
	require.NoError(t, err)
	require.Equal(t, "i1", ids(got))
	got, err = s.ListInstances(ctx, &provider.ListInstancesParams{Terminal: true, Where: &query.Exists{Field: fCustomer}, AfterID: "i2", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "i4", ids(got))

	// A name that is not an identifier is refused, not sent.
	_, err = s.ListInstances(ctx, &provider.ListInstancesParams{Where: cmpT(query.Field{Name: "a.$where", Type: query.Keyword}, query.Eq, kw("x"))})
	require.ErrorIs(t, err, chmongo.ErrInvalidFilter)
}

// TestSearchCount: a count without grouping is one group; grouped by a
// built-in or an attribute, the no-value group comes first, then the
// values in order.
func TestSearchCount(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	saveRecords(t, s, searchRecords())
	show := func(gs []provider.GroupCount) string {
		var b strings.Builder
		for _, g := range gs {
			fmt.Fprintf(&b, "%s=%d ", g.Value.String(), g.Count)
		}
		return strings.TrimSpace(b.String())
	}
	count := func(where query.Expr, by *query.Field) string {
		gs, err := s.CountInstances(ctx, &provider.CountInstancesParams{Where: where, By: by})
		require.NoError(t, err)
		return show(gs)
	}
	zero := query.Value{}.String()
	require.Equal(t, zero+"=5", count(nil, nil))
	require.Equal(t, zero+"=2", count(cmpT(fCustomer, query.Eq, kw("acme")), nil))
	require.Equal(t, zero+"=0", count(cmpT(fCustomer, query.Eq, kw("nobody")), nil))
	require.Equal(t, "'completed'=1 'failed'=1 'running'=3", count(nil, &fStatus))
	require.Equal(t, "'completed'=1 'running'=1", count(cmpT(fCustomer, query.Eq, kw("acme")), &fStatus))
	require.Equal(t, zero+"=1 'acme'=2 'zeta'=1 '\u00e9clair'=1", count(nil, &fCustomer))
	require.Equal(t, zero+"=2 -7=1 3=1 1152921504606846976=1", count(nil, &fCount))
	require.Equal(t, zero+"=3 false=1 true=1", count(nil, &fVIP))
	require.Equal(t, zero+"=4 'i1'=1", count(nil, &fParent))
	gs, err := s.CountInstances(ctx, &provider.CountInstancesParams{By: &fDue})
	require.NoError(t, err)
	require.Len(t, gs, 3)
	require.True(t, gs[1].Value.Time.Equal(t0) && gs[2].Value.Time.Equal(t0.Add(time.Microsecond)), show(gs))
	_, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &fTags})
	require.ErrorIs(t, err, chmongo.ErrInvalidFilter)
}

// TestSearchCustomProjections: the records of one projection whose
// instance matches, in instance order, paged; instances without a record
// are skipped, and a record without an instance record is not listed.
func TestSearchCustomProjections(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	var recs []provider.InstanceRecord
	for i := range 30 {
		id := fmt.Sprintf("o%02d", i)
		r := provider.InstanceRecord{InstanceID: id, Name: "order", Status: provider.StatusRunning, CreatedAt: t0, UpdatedAt: t0,
			Attributes: map[string]query.Value{"customer": kw([]string{"acme", "zeta"}[i%2])}}
		recs = append(recs, r)
	}
	saveRecords(t, s, recs)
	for i := range 30 {
		if i%3 == 0 {
			continue // no record of the projection
		}
		id := fmt.Sprintf("o%02d", i)
		require.NoError(t, s.SaveProjections(ctx, &provider.Projections{InstanceID: id, Seq: 6, Custom: []provider.CustomRecord{
			{Name: "totals", Version: 1, InstanceID: id, Seq: 6, Data: []byte(id)},
			{Name: "other", Version: 1, InstanceID: id, Seq: 6, Data: []byte("x")},
		}}))
	}
	// A record whose instance has no record.
	require.NoError(t, s.SaveProjections(ctx, &provider.Projections{InstanceID: "o99", Seq: 6, Custom: []provider.CustomRecord{{Name: "totals", Version: 1, InstanceID: "o99", Seq: 6, Data: []byte("orphan")}}}))

	list := func(where query.Expr, after string, limit int) string {
		got, err := s.ListCustomProjections(ctx, &provider.ListCustomProjectionsParams{Name: "totals", Where: where, AfterID: after, Limit: limit})
		require.NoError(t, err)
		out := make([]string, len(got))
		for i, r := range got {
			require.Equal(t, "totals", r.Name)
			require.Equal(t, r.InstanceID, string(r.Data))
			out[i] = r.InstanceID
		}
		return strings.Join(out, ",")
	}
	acme := cmpT(fCustomer, query.Eq, kw("acme"))
	require.Equal(t, "o02,o04,o08,o10", list(acme, "", 4))
	require.Equal(t, "o14,o16,o20,o22,o26,o28", list(acme, "o10", 0))
	require.Equal(t, "o01,o02,o04", list(nil, "", 3))
	require.Equal(t, "o28,o29", list(nil, "o27", 10))
	require.Equal(t, "", list(cmpT(fCustomer, query.Eq, kw("nobody")), "", 10))
}

// TestSearchMigrationBackfills: documents written before migration 4
// have no search fields; the migration adds them from the record, so
// queries on attributes and on the new built-ins find those instances.
func TestSearchMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	saveRecords(t, s, searchRecords())
	require.NoError(t, chmongo.AsBeforeSearch(ctx, s))
	where := &query.And{Terms: []query.Expr{cmpT(fCustomer, query.Eq, kw("acme")), &query.Exists{Field: fParent}}}
	got, err := s.ListInstances(ctx, &provider.ListInstancesParams{Where: where})
	require.NoError(t, err)
	require.Empty(t, got, "the fields are gone")
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)

	require.NoError(t, s.Migrate(ctx))
	got, err = s.ListInstances(ctx, &provider.ListInstancesParams{Where: where})
	require.NoError(t, err)
	require.Equal(t, "i2", ids(got))
	got, err = s.ListInstances(ctx, &provider.ListInstancesParams{Where: &query.Prefix{Field: fTags, Prefix: "bl"}})
	require.NoError(t, err)
	require.Equal(t, "i1", ids(got))
	got, err = s.ListInstances(ctx, &provider.ListInstancesParams{Where: &query.Exists{Field: fDone}})
	require.NoError(t, err)
	require.Equal(t, "i2,i4", ids(got))
	v, err = s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, chmongo.LatestSchemaVersion(), v)
}
