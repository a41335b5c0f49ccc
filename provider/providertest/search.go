package providertest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// SearchSchema declares the search attributes of the Search cases, one of
// each type: stores get nothing but the parsed AST, so the declarations
// matter only to query.Parse.
var SearchSchema = map[string]query.Type{
	"customer": query.Keyword,
	"region":   query.Keyword,
	"amount":   query.Float,
	"qty":      query.Int,
	"vip":      query.Bool,
	"due":      query.Time,
	"tags":     query.KeywordList,
}

// Values of each type, built without query.Of so that the cases check the
// stores, not the conversions.
func kw(s string) query.Value           { return query.Value{Type: query.Keyword, Str: s} }
func num(i int64) query.Value           { return query.Value{Type: query.Int, Int: i} }
func flt(f float64) query.Value         { return query.Value{Type: query.Float, Float: f} }
func boolean(v bool) query.Value        { return query.Value{Type: query.Bool, Bool: v} }
func instantOf(t time.Time) query.Value { return query.Value{Type: query.Time, Time: t} }
func keywords(s ...string) query.Value  { return query.Value{Type: query.KeywordList, List: s} }
func attrs(kv ...any) map[string]query.Value {
	m := map[string]query.Value{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(query.Value)
	}
	return m
}

// The due dates of the fixture: microseconds apart around midnight and
// 09:00, so that a store keeping milliseconds, or local time, fails.
var (
	due1 = time.Date(2026, 11, 23, 9, 0, 0, 1000, time.UTC)      // s-01, s-07
	due2 = time.Date(2026, 11, 24, 9, 0, 0, 999999000, time.UTC) // s-02
	due3 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)         // s-03
	due4 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)         // s-05
)

// searchRecord builds an instance record for the Search cases: every
// built-in field set as given (an empty string or a zero offset means no
// value), created, updated and completed after base.
func searchRecord(id, workflow string, status provider.Status, customStatus, key, version, parent string, created, updated, completed time.Duration, attributes map[string]query.Value) *provider.InstanceRecord {
	r := record(id, 5, id)
	r.Name, r.Status, r.CustomStatusText, r.BusinessKey, r.Version, r.ParentID = workflow, status, customStatus, key, version, parent
	r.CreatedAt, r.UpdatedAt, r.CompletedAt = at(created), at(updated), time.Time{}
	if completed != 0 {
		r.CompletedAt = at(completed)
	}
	if len(attributes) > 0 {
		r.Attributes = attributes
	}
	return r
}

// searchFixture is the set of records most Search cases query: every type
// of attribute, values missing here and there, keywords differing in case
// and beyond ASCII, integers at both ends of int64.
//
//	id    workflow status     custom    key  ver parent customer amount qty       vip   due  tags      region
//	s-01  order    running    waiting   C-1  v1  -      acme     10.5   3         true  due1 a,b       north
//	s-02  order    completed  -         C-2  v2  s-01   Acme     -2.25  -7        false due2 b         south
//	s-03  invoice  failed     retrying  C-1  v1  -      beta     0      0         false due3 c,"a b"   north
//	s-04  invoice  suspended  -         -    v1  -      (no attributes)
//	s-05  order    terminated done      C-3  v2  s-03   é        1e15   MaxInt64  true  due4 é         -
//	s-06  order    running    waiting   C-3  v1  -      z        2      MaxInt64-1 -    -    -         south
//	s-07  refund   completed  -         C-4  v1  -      B        3.75   MinInt64  false due1 a         north
//
// created_at is 1h…7h after base; updated_at is 1h after created_at except
// s-01 (1m after) and s-06 (1s after); completed_at equals updated_at for
// ended instances.
func searchFixture() []*provider.InstanceRecord {
	h := time.Hour
	return []*provider.InstanceRecord{
		searchRecord("s-01", "order", provider.StatusRunning, "waiting", "C-1", "v1", "", h, h+time.Minute, 0,
			attrs("customer", kw("acme"), "amount", flt(10.5), "qty", num(3), "vip", boolean(true), "due", instantOf(due1), "tags", keywords("a", "b"), "region", kw("north"))),
		searchRecord("s-02", "order", provider.StatusCompleted, "", "C-2", "v2", "s-01", 2*h, 3*h, 3*h,
			attrs("customer", kw("Acme"), "amount", flt(-2.25), "qty", num(-7), "vip", boolean(false), "due", instantOf(due2), "tags", keywords("b"), "region", kw("south"))),
		searchRecord("s-03", "invoice", provider.StatusFailed, "retrying", "C-1", "v1", "", 3*h, 4*h, 4*h,
			attrs("customer", kw("beta"), "amount", flt(0), "qty", num(0), "vip", boolean(false), "due", instantOf(due3), "tags", keywords("c", "a b"), "region", kw("north"))),
		searchRecord("s-04", "invoice", provider.StatusSuspended, "", "", "v1", "", 4*h, 5*h, 0, nil),
		searchRecord("s-05", "order", provider.StatusTerminated, "done", "C-3", "v2", "s-03", 5*h, 6*h, 6*h,
			attrs("customer", kw("é"), "amount", flt(1e15), "qty", num(math.MaxInt64), "vip", boolean(true), "due", instantOf(due4), "tags", keywords("é"))),
		searchRecord("s-06", "order", provider.StatusRunning, "waiting", "C-3", "v1", "", 6*h, 6*h+time.Second, 0,
			attrs("customer", kw("z"), "amount", flt(2), "qty", num(math.MaxInt64-1), "region", kw("south"))),
		searchRecord("s-07", "refund", provider.StatusCompleted, "", "C-4", "v1", "", 7*h, 8*h, 8*h,
			attrs("customer", kw("B"), "amount", flt(3.75), "qty", num(math.MinInt64), "vip", boolean(false), "due", instantOf(due1), "tags", keywords("a"), "region", kw("north"))),
	}
}

// searcher runs the Search cases' queries against one store.
type searcher struct {
	b *bundle
	q provider.QueryStore
}

// newSearcher makes a fresh store for a Search case; the case is skipped
// when the store has no provider.QueryStore.
func newSearcher(t *testing.T, factory Factory) *searcher {
	t.Helper()
	b := setup(t, factory)
	return &searcher{b: b, q: b.queries(t)}
}

// saveRecord writes r as the instance record of its instance (its
// LastSeq the projections' Seq), with a snapshot and the custom records
// given.
func (s *searcher) saveRecord(t *testing.T, r *provider.InstanceRecord, custom ...provider.CustomRecord) {
	t.Helper()
	p := projections(t, r.InstanceID, r.LastSeq, r.InstanceID, false)
	p.Tasks, p.TaskEvents, p.Custom = nil, nil, custom
	p.Instance = r
	s.b.save(t, p)
}

// parse parses src against SearchSchema; it must parse.
func parse(t testing.TB, src string) query.Expr {
	t.Helper()
	e, err := query.Parse(src, query.SchemaOf(SearchSchema))
	require.NoError(t, err, "query %q does not parse", src)
	return e
}

// list returns the ids ListInstances(p) returns, with Where parsed from
// src (no Where when src is empty), in one call.
func (s *searcher) list(t *testing.T, src string, p provider.ListInstancesParams) []string {
	t.Helper()
	if src != "" {
		p.Where = parse(t, src)
	}
	recs, err := s.q.ListInstances(t.Context(), &p)
	require.NoError(t, err, "ListInstances where %q", src)
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		ids = append(ids, r.InstanceID)
	}
	return ids
}

// expect checks that ListInstances under src lists exactly want, in id
// order.
func (s *searcher) expect(t *testing.T, src string, want ...string) {
	t.Helper()
	s.expectWith(t, src, provider.ListInstancesParams{}, want...)
}

// expectWith checks that ListInstances(p) under src lists exactly want.
func (s *searcher) expectWith(t *testing.T, src string, p provider.ListInstancesParams, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	require.Equal(t, want, s.list(t, src, p), "ListInstances where %s (params %+v)", src, p)
}

// refused checks that query.Parse refuses src, as every store relies on.
func refused(t *testing.T, src string) {
	t.Helper()
	_, err := query.Parse(src, query.SchemaOf(SearchSchema))
	require.ErrorIs(t, err, query.ErrInvalidQuery, "query %q parses, but the language refuses it", src)
}

// count returns CountInstances under src grouped by the field named by.
func (s *searcher) count(t *testing.T, src, by string) []provider.GroupCount {
	t.Helper()
	p := provider.CountInstancesParams{}
	if src != "" {
		p.Where = parse(t, src)
	}
	if by != "" {
		f, err := query.ParseField(by, query.SchemaOf(SearchSchema))
		require.NoError(t, err, "group-by field %q", by)
		p.By = &f
	}
	groups, err := s.q.CountInstances(t.Context(), &p)
	require.NoError(t, err, "CountInstances where %q by %q", src, by)
	return groups
}

// requireGroups checks that groups are want, value by value.
func requireGroups(t require.TestingT, want, got []provider.GroupCount, what string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Len(t, got, len(want), "%s: groups %s, want %s", what, formatGroups(got), formatGroups(want))
	for i := range want {
		require.Equal(t, want[i].Count, got[i].Count, "%s: group %d: groups %s, want %s", what, i, formatGroups(got), formatGroups(want))
		requireValue(t, want[i].Value, got[i].Value, fmt.Sprintf("%s: value of group %d (groups %s)", what, i, formatGroups(got)))
	}
}

func formatGroups(gs []provider.GroupCount) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, g := range gs {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s:%d", formatValue(g.Value), g.Count)
	}
	sb.WriteByte(']')
	return sb.String()
}

func formatValue(v query.Value) string {
	switch v.Type {
	case query.Invalid:
		return "<none>"
	case query.Keyword:
		return fmt.Sprintf("keyword %q", v.Str)
	case query.Int:
		return fmt.Sprintf("int %d", v.Int)
	case query.Float:
		return fmt.Sprintf("float %v", v.Float)
	case query.Bool:
		return fmt.Sprintf("bool %v", v.Bool)
	case query.Time:
		return fmt.Sprintf("time %s (%s)", v.Time.Format(time.RFC3339Nano), v.Time.Location())
	case query.KeywordList:
		return fmt.Sprintf("keyword_list %q", v.List)
	}
	return fmt.Sprintf("type %d", v.Type)
}

// requireValue checks that got is want exactly: the same type, the same
// value, times at the same instant and in UTC.
func requireValue(t require.TestingT, want, got query.Value, what string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	same := want.Type == got.Type
	if same {
		switch want.Type {
		case query.Keyword:
			same = want.Str == got.Str
		case query.Int:
			same = want.Int == got.Int
		case query.Float:
			same = math.Float64bits(want.Float) == math.Float64bits(got.Float)
		case query.Bool:
			same = want.Bool == got.Bool
		case query.Time:
			same = want.Time.Equal(got.Time) && got.Time.Location() == time.UTC
		case query.KeywordList:
			same = slices.Equal(want.List, got.List)
		}
	}
	require.True(t, same, "%s: got %s, want %s", what, formatValue(got), formatValue(want))
}

// requireAttributes checks that a stored record's attributes and custom
// status text are those written, exactly.
func requireAttributes(t require.TestingT, want, got *provider.InstanceRecord) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Equal(t, want.CustomStatusText, got.CustomStatusText, "CustomStatusText of %s", want.InstanceID)
	names := func(m map[string]query.Value) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, names(want.Attributes), names(got.Attributes), "attribute names of %s", want.InstanceID)
	for name, v := range want.Attributes {
		requireValue(t, v, got.Attributes[name], fmt.Sprintf("attribute %s of %s", name, want.InstanceID))
	}
}

// testSearch covers search attributes and queries: what SaveProjections
// keeps of them, and ListInstances, CountInstances and
// ListCustomProjections under a parsed Where, with the semantics of
// docs/search.md that every store must give alike. Queries are parsed by
// query.Parse against SearchSchema, as the engine parses them, so the
// cases also hold the parser and the stores to one meaning.
func testSearch(t *testing.T, factory Factory) {
	t.Run("AttributesRoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		long := strings.Repeat("k", 1024)
		longUnicode := strings.Repeat("é", 512) // 1024 bytes
		r := searchRecord("rt-1", "order", provider.StatusRunning, "waiting for «approval» ✓", "C-1", "v1", "", time.Hour, 2*time.Hour, 0,
			attrs(
				"customer", kw(long),
				"region", kw("Zürich — 東京 🚀"),
				"amount", flt(-1234.5678e-3),
				"qty", num(math.MinInt64),
				"vip", boolean(false),
				"due", instantOf(time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)),
				"tags", keywords("b", "a", "b", longUnicode, "ünï"),
			))
		other := searchRecord("rt-2", "order", provider.StatusCompleted, "", "C-2", "v1", "", time.Hour, 2*time.Hour, 3*time.Hour,
			attrs(
				"customer", kw(longUnicode),
				"amount", flt(math.MaxFloat64),
				"qty", num(math.MaxInt64),
				"vip", boolean(true),
				"due", instantOf(time.Date(2262, 4, 11, 23, 47, 16, 854775000, time.UTC)),
				"tags", keywords("x"),
			))
		plain := searchRecord("rt-3", "order", provider.StatusRunning, "", "C-3", "v1", "", time.Hour, 2*time.Hour, 0, nil)
		for _, r := range []*provider.InstanceRecord{r, other, plain} {
			s.saveRecord(t, r)
		}
		for _, want := range []*provider.InstanceRecord{r, other, plain} {
			got := s.b.instanceOf(t, want.InstanceID)
			require.True(t, want.Equal(got), "record %s does not round-trip: %v", want.InstanceID, want.Diff(got))
			requireAttributes(t, want, got)
		}
		require.Nil(t, s.b.instanceOf(t, "rt-3").Attributes, "a record without attributes comes back with nil Attributes")
		recs, err := s.q.ListInstances(t.Context(), &provider.ListInstancesParams{})
		require.NoError(t, err)
		require.Len(t, recs, 3)
		for i, want := range []*provider.InstanceRecord{r, other, plain} {
			require.True(t, want.Equal(&recs[i]), "listed record %s does not round-trip: %v", want.InstanceID, want.Diff(&recs[i]))
			requireAttributes(t, want, &recs[i])
		}
		// Values compare as they were written: the long keyword exactly,
		// the list's elements with duplicates and order kept.
		s.expect(t, "customer = '"+long+"'", "rt-1")
		s.expect(t, "customer = '"+longUnicode+"'", "rt-2")
		s.expect(t, "tags = '"+longUnicode+"'", "rt-1")
		s.expect(t, "custom_status = 'waiting for «approval» ✓'", "rt-1")
		s.expect(t, "due = '1999-12-31T23:59:59.999999Z'", "rt-1")
		s.expect(t, "amount = -1.2345678", "rt-1")

		// A newer record replaces the attributes as a whole: a name it
		// lacks is gone, and the returned map is not the one written.
		next := searchRecord("rt-1", "order", provider.StatusRunning, "", "C-1", "v1", "", time.Hour, 3*time.Hour, 0, attrs("region", kw("south")))
		next.LastSeq = 6
		s.saveRecord(t, next)
		next.Attributes["region"] = kw("mutated by the caller after the write")
		got := s.b.instanceOf(t, "rt-1")
		require.Equal(t, []string{"region"}, slices.Collect(maps.Keys(got.Attributes)))
		requireValue(t, kw("south"), got.Attributes["region"], "region of rt-1 after the newer record")
		require.Empty(t, got.CustomStatusText, "the newer record has no custom status text")
		got.Attributes["region"] = kw("mutated by the caller after the read")
		requireValue(t, kw("south"), s.b.instanceOf(t, "rt-1").Attributes["region"], "a record read back is the store's own copy")
		s.expect(t, "customer IS NULL", "rt-1", "rt-3")
		s.expect(t, "region = 'south'", "rt-1")

		// Nor are a list's elements shared, written or read.
		list := searchRecord("rt-4", "order", provider.StatusRunning, "", "C-4", "v1", "", time.Hour, time.Hour, 0, attrs("tags", keywords("x", "y")))
		s.saveRecord(t, list)
		list.Attributes["tags"].List[0] = "mutated"
		got = s.b.instanceOf(t, "rt-4")
		requireValue(t, keywords("x", "y"), got.Attributes["tags"], "tags of rt-4 after the caller changed its list")
		got.Attributes["tags"].List[1] = "mutated"
		requireValue(t, keywords("x", "y"), s.b.instanceOf(t, "rt-4").Attributes["tags"], "tags of rt-4 after the caller changed the list it read")
		s.expect(t, "tags = 'x'", "rt-2", "rt-4")
	})

	t.Run("OperatorsOnAttributes", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		// Keyword, in byte order: "Acme" < "B" < "acme" < "beta" < "z" < "é".
		s.expect(t, "customer = 'acme'", "s-01")
		s.expect(t, "customer != 'acme'", "s-02", "s-03", "s-05", "s-06", "s-07")
		s.expect(t, "customer <> 'acme'", "s-02", "s-03", "s-05", "s-06", "s-07")
		s.expect(t, "customer < 'a'", "s-02", "s-07")
		s.expect(t, "customer <= 'acme'", "s-01", "s-02", "s-07")
		s.expect(t, "customer > 'beta'", "s-05", "s-06")
		s.expect(t, "customer >= 'beta'", "s-03", "s-05", "s-06")
		s.expect(t, "customer IN ('acme', 'z', 'nobody')", "s-01", "s-06")
		s.expect(t, "customer NOT IN ('acme', 'z')", "s-02", "s-03", "s-04", "s-05", "s-07")
		s.expect(t, "customer BETWEEN 'B' AND 'acme'", "s-01", "s-07")
		s.expect(t, "customer NOT BETWEEN 'B' AND 'acme'", "s-02", "s-03", "s-04", "s-05", "s-06")
		s.expect(t, "customer STARTS_WITH 'ac'", "s-01")
		s.expect(t, "customer STARTS_WITH 'A'", "s-02")
		s.expect(t, "customer STARTS_WITH 'acme'", "s-01")
		s.expect(t, "customer STARTS_WITH 'acmex'")
		s.expect(t, "customer IS NULL", "s-04")
		s.expect(t, "customer IS NOT NULL", "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")

		// Float, compared numerically with integer and decimal literals.
		s.expect(t, "amount = 2", "s-06")
		s.expect(t, "amount = 2.0", "s-06")
		s.expect(t, "amount = 10.5", "s-01")
		s.expect(t, "amount != 0", "s-01", "s-02", "s-05", "s-06", "s-07")
		s.expect(t, "amount < 0", "s-02")
		s.expect(t, "amount <= 2", "s-02", "s-03", "s-06")
		s.expect(t, "amount > 3.75", "s-01", "s-05")
		s.expect(t, "amount >= -2.25", "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")
		s.expect(t, "amount >= 1000000000000000", "s-05")
		s.expect(t, "amount > 999999999999999.9", "s-05")
		s.expect(t, "amount IN (2, 3.75, 4)", "s-06", "s-07")
		s.expect(t, "amount NOT IN (2, 3.75)", "s-01", "s-02", "s-03", "s-04", "s-05")
		s.expect(t, "amount BETWEEN -3 AND 2", "s-02", "s-03", "s-06")
		s.expect(t, "amount IS NULL", "s-04")

		// Int, at both ends of int64, where a store going through float64
		// would confuse MaxInt64 with MaxInt64-1.
		s.expect(t, "qty = 3", "s-01")
		s.expect(t, "qty != 3", "s-02", "s-03", "s-05", "s-06", "s-07")
		s.expect(t, "qty < 0", "s-02", "s-07")
		s.expect(t, "qty <= 0", "s-02", "s-03", "s-07")
		s.expect(t, "qty > 3", "s-05", "s-06")
		s.expect(t, "qty >= 3", "s-01", "s-05", "s-06")
		s.expect(t, "qty IN (0, -7)", "s-02", "s-03")
		s.expect(t, "qty NOT IN (0, -7)", "s-01", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "qty BETWEEN -7 AND 3", "s-01", "s-02", "s-03")
		s.expect(t, "qty IS NULL", "s-04")
		s.expect(t, "qty IS NOT NULL", "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")

		// Bool: = and != only.
		s.expect(t, "vip = true", "s-01", "s-05")
		s.expect(t, "vip = false", "s-02", "s-03", "s-07")
		s.expect(t, "vip != true", "s-02", "s-03", "s-07")
		s.expect(t, "vip != false", "s-01", "s-05")
		s.expect(t, "vip = TRUE", "s-01", "s-05")
		s.expect(t, "vip IS NULL", "s-04", "s-06")
		refused(t, "vip > false")
		refused(t, "vip = 'true'")

		// Time, to the microsecond, with an offset and as a date.
		s.expect(t, "due = '2026-11-23T09:00:00.000001Z'", "s-01", "s-07")
		s.expect(t, "due != '2026-11-23T09:00:00.000001Z'", "s-02", "s-03", "s-05")
		s.expect(t, "due < '2026-11-23T09:00:00.000001Z'", "s-03", "s-05")
		s.expect(t, "due <= '2026-11-23T09:00:00.000001Z'", "s-01", "s-03", "s-05", "s-07")
		s.expect(t, "due > '2026-11-23T09:00:00Z'", "s-01", "s-02", "s-07")
		s.expect(t, "due >= '2026-11-23T09:00:00Z'", "s-01", "s-02", "s-05", "s-07")
		s.expect(t, "due = '2026-11-23T10:00:00+01:00'", "s-05")
		s.expect(t, "due < '2026-11-22'", "s-03")
		s.expect(t, "due IN ('2026-11-21T09:00:00Z', '2026-11-24T09:00:00.999999Z')", "s-02", "s-03")
		s.expect(t, "due BETWEEN '2026-11-23' AND '2026-11-24'", "s-01", "s-05", "s-07")
		s.expect(t, "due IS NULL", "s-04", "s-06")

		// KeywordList (see also the KeywordList case).
		s.expect(t, "tags = 'a'", "s-01", "s-07")
		s.expect(t, "tags != 'a'", "s-02", "s-03", "s-05")
		s.expect(t, "tags IN ('b', 'c')", "s-01", "s-02", "s-03")
		s.expect(t, "tags NOT IN ('b', 'c')", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "tags STARTS_WITH 'a'", "s-01", "s-03", "s-07")
		s.expect(t, "tags IS NULL", "s-04", "s-06")
		s.expect(t, "tags IS NOT NULL", "s-01", "s-02", "s-03", "s-05", "s-07")

		// Literals must have the field's type.
		refused(t, "qty > 2.5")
		refused(t, "qty = '3'")
		refused(t, "customer = 3")
		refused(t, "due > 5")
		refused(t, "tags < 'b'")
		refused(t, "tags BETWEEN 'a' AND 'b'")
		refused(t, "amount STARTS_WITH '1'")
		refused(t, "undeclared = 'x'")
	})

	t.Run("OperatorsOnBuiltinFields", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		s.expect(t, "id = 's-03'", "s-03")
		s.expect(t, "ID = 's-03'", "s-03")
		s.expect(t, "id != 's-03'", "s-01", "s-02", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "id IN ('s-01', 's-07', 's-99')", "s-01", "s-07")
		s.expect(t, "id > 's-05'", "s-06", "s-07")
		s.expect(t, "id BETWEEN 's-02' AND 's-04'", "s-02", "s-03", "s-04")
		s.expect(t, "id STARTS_WITH 's-0'", "s-01", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "id IS NULL")

		s.expect(t, "workflow = 'order'", "s-01", "s-02", "s-05", "s-06")
		s.expect(t, "Workflow != 'order'", "s-03", "s-04", "s-07")
		s.expect(t, "workflow < 'order'", "s-03", "s-04")
		s.expect(t, "workflow STARTS_WITH 'in'", "s-03", "s-04")
		s.expect(t, "workflow NOT IN ('order', 'refund')", "s-03", "s-04")

		s.expect(t, "status = 'running'", "s-01", "s-06")
		s.expect(t, "STATUS != 'running'", "s-02", "s-03", "s-04", "s-05", "s-07")
		s.expect(t, "status IN ('completed', 'failed')", "s-02", "s-03", "s-07")
		s.expect(t, "status > 'running'", "s-04", "s-05")
		s.expect(t, "status IS NOT NULL", "s-01", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
		refused(t, "status = 'bogus'")

		s.expect(t, "custom_status = 'waiting'", "s-01", "s-06")
		s.expect(t, "custom_status != 'waiting'", "s-03", "s-05")
		s.expect(t, "custom_status IS NULL", "s-02", "s-04", "s-07")
		s.expect(t, "custom_status STARTS_WITH 'ret'", "s-03")
		s.expect(t, "custom_status >= 'retrying'", "s-01", "s-03", "s-06")

		s.expect(t, "business_key = 'C-1'", "s-01", "s-03")
		s.expect(t, "business_key != 'C-1'", "s-02", "s-05", "s-06", "s-07")
		s.expect(t, "business_key > 'C-2'", "s-05", "s-06", "s-07")
		s.expect(t, "business_key IS NULL", "s-04")
		s.expect(t, "business_key STARTS_WITH 'C-'", "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")

		s.expect(t, "version = 'v2'", "s-02", "s-05")
		s.expect(t, "version IN ('v1')", "s-01", "s-03", "s-04", "s-06", "s-07")
		s.expect(t, "version IS NULL")

		s.expect(t, "parent_id = 's-01'", "s-02")
		s.expect(t, "parent_id != 's-01'", "s-05")
		s.expect(t, "parent_id IS NOT NULL", "s-02", "s-05")
		s.expect(t, "NOT parent_id = 's-01'", "s-01", "s-03", "s-04", "s-05", "s-06", "s-07")

		// base is 2026-11-22T09:00:00Z; created_at is base plus 1h…7h.
		s.expect(t, "created_at = '2026-11-22T12:00:00Z'", "s-03")
		s.expect(t, "created_at != '2026-11-22T12:00:00Z'", "s-01", "s-02", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "created_at >= '2026-11-22T12:00:00Z'", "s-03", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "created_at < '2026-11-22T11:00:00Z'", "s-01")
		s.expect(t, "created_at BETWEEN '2026-11-22T11:00:00Z' AND '2026-11-22T13:00:00Z'", "s-02", "s-03", "s-04")
		s.expect(t, "created_at > '2026-11-22'", "s-01", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "updated_at > '2026-11-22T15:00:00Z'", "s-06", "s-07")
		s.expect(t, "updated_at <= '2026-11-22T10:01:00Z'", "s-01")
		s.expect(t, "updated_at IN ('2026-11-22T15:00:01Z', '2026-11-22T17:00:00Z')", "s-06", "s-07")
		s.expect(t, "completed_at IS NULL", "s-01", "s-04", "s-06")
		s.expect(t, "completed_at IS NOT NULL", "s-02", "s-03", "s-05", "s-07")
		s.expect(t, "completed_at <= '2026-11-22T13:00:00Z'", "s-02", "s-03")
		s.expect(t, "completed_at != '2026-11-22T13:00:00Z'", "s-02", "s-05", "s-07")
		s.expect(t, "NOT completed_at > '2026-11-22T13:00:00Z'", "s-01", "s-02", "s-03", "s-04", "s-06")
	})

	t.Run("MissingValues", func(t *testing.T) {
		// A term on a field without a value is false, != included; NOT
		// inverts the whole term; IS NULL is NOT Exists.
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		// s-04 has no attributes; s-06 has neither vip, due nor tags.
		s.expect(t, "amount > 5", "s-01", "s-05")
		s.expect(t, "NOT amount > 5", "s-02", "s-03", "s-04", "s-06", "s-07")
		s.expect(t, "amount <= 5", "s-02", "s-03", "s-06", "s-07")
		s.expect(t, "NOT amount <= 5", "s-01", "s-04", "s-05")
		s.expect(t, "vip != true", "s-02", "s-03", "s-07")
		s.expect(t, "NOT vip = true", "s-02", "s-03", "s-04", "s-06", "s-07")
		s.expect(t, "NOT vip != true", "s-01", "s-04", "s-05", "s-06")
		s.expect(t, "due != '2026-11-21T09:00:00Z'", "s-01", "s-02", "s-05", "s-07")
		s.expect(t, "NOT due = '2026-11-21T09:00:00Z'", "s-01", "s-02", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "NOT region IN ('north', 'south')", "s-04", "s-05")
		s.expect(t, "NOT customer STARTS_WITH 'a'", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "NOT tags STARTS_WITH 'a'", "s-02", "s-04", "s-05", "s-06")
		s.expect(t, "NOT region IS NULL", "s-01", "s-02", "s-03", "s-06", "s-07")
		s.expect(t, "NOT region IS NOT NULL", "s-04", "s-05")
		s.expect(t, "vip = true OR NOT vip = true", "s-01", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
		s.expect(t, "vip = true OR vip = false", "s-01", "s-02", "s-03", "s-05", "s-07")
		s.expect(t, "NOT (vip = true OR vip = false)", "s-04", "s-06")
		s.expect(t, "NOT (vip IS NULL AND due IS NULL)", "s-01", "s-02", "s-03", "s-05", "s-07")
		// Empty built-in fields have no value either.
		s.expect(t, "NOT custom_status = 'waiting'", "s-02", "s-03", "s-04", "s-05", "s-07")
		s.expect(t, "NOT completed_at < '2026-11-23'", "s-01", "s-04", "s-06")
	})

	t.Run("KeywordList", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		lists := map[string][]string{
			"l-1": {"a", "b"},
			"l-2": {"b"},
			"l-3": {"a b", "c"},
			"l-4": {"ab"},
			"l-5": nil,
			"l-6": {"A", "é", "a"},
			"l-7": {"c", "c"},
		}
		for _, id := range slices.Sorted(maps.Keys(lists)) {
			var a map[string]query.Value
			if l := lists[id]; l != nil {
				a = attrs("tags", keywords(l...))
			}
			s.saveRecord(t, searchRecord(id, "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, a))
		}
		s.expect(t, "tags = 'a'", "l-1", "l-6")
		s.expect(t, "tags = 'A'", "l-6")
		s.expect(t, "tags = 'c'", "l-3", "l-7")
		s.expect(t, "tags != 'a'", "l-2", "l-3", "l-4", "l-7")
		s.expect(t, "NOT tags = 'a'", "l-2", "l-3", "l-4", "l-5", "l-7")
		s.expect(t, "tags <> 'c'", "l-1", "l-2", "l-4", "l-6")
		s.expect(t, "tags IN ('b', 'é')", "l-1", "l-2", "l-6")
		s.expect(t, "tags IN ('zzz')")
		s.expect(t, "tags NOT IN ('b', 'é')", "l-3", "l-4", "l-5", "l-7")
		s.expect(t, "tags STARTS_WITH 'a'", "l-1", "l-3", "l-4", "l-6")
		s.expect(t, "tags STARTS_WITH 'a '", "l-3")
		s.expect(t, "tags STARTS_WITH 'ab'", "l-4")
		s.expect(t, "NOT tags STARTS_WITH 'a'", "l-2", "l-5", "l-7")
		s.expect(t, "tags IS NULL", "l-5")
		s.expect(t, "tags = 'a' AND tags = 'b'", "l-1")
		s.expect(t, "tags = 'a' AND tags != 'b'", "l-6")
		s.expect(t, "tags = 'a b'", "l-3")
	})

	t.Run("EmptyList", func(t *testing.T) {
		// An empty keyword list is no value (docs/search.md, "Missing
		// values"), as an attribute never set: a record written with one
		// is found by IS NULL and by no term on the attribute.
		t.Parallel()
		s := newSearcher(t, factory)
		s.saveRecord(t, searchRecord("el-1", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
			attrs("tags", keywords(), "customer", kw("c"))))
		s.saveRecord(t, searchRecord("el-2", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
			attrs("tags", keywords("a"))))
		s.saveRecord(t, searchRecord("el-3", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, nil))
		s.expect(t, "tags IS NULL", "el-1", "el-3")
		s.expect(t, "tags IS NOT NULL", "el-2")
		s.expect(t, "tags != 'b'", "el-2")
		s.expect(t, "NOT tags = 'a'", "el-1", "el-3")
		s.expect(t, "tags STARTS_WITH ''", "el-2")
	})

	t.Run("EmptyKeyword", func(t *testing.T) {
		// An empty keyword is a value of an attribute (query.Of takes
		// it), unlike an empty built-in field, which has no value.
		t.Parallel()
		s := newSearcher(t, factory)
		e1 := searchRecord("e-1", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
			attrs("customer", kw(""), "tags", keywords("", "a")))
		e2 := searchRecord("e-2", "order", provider.StatusRunning, "x", "K", "v1", "", time.Hour, time.Hour, 0,
			attrs("customer", kw("a"), "tags", keywords("a")))
		e3 := searchRecord("e-3", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, nil)
		for _, r := range []*provider.InstanceRecord{e1, e2, e3} {
			s.saveRecord(t, r)
		}
		requireAttributes(t, e1, s.b.instanceOf(t, "e-1"))
		s.expect(t, "customer = ''", "e-1")
		s.expect(t, "customer != ''", "e-2")
		s.expect(t, "customer < 'a'", "e-1")
		s.expect(t, "customer IN ('', 'b')", "e-1")
		s.expect(t, "customer STARTS_WITH ''", "e-1", "e-2")
		s.expect(t, "customer IS NOT NULL", "e-1", "e-2")
		s.expect(t, "customer IS NULL", "e-3")
		s.expect(t, "NOT customer = ''", "e-2", "e-3")
		s.expect(t, "tags = ''", "e-1")
		s.expect(t, "tags != ''", "e-2")
		s.expect(t, "tags STARTS_WITH ''", "e-1", "e-2")
		s.expect(t, "custom_status = ''")
		s.expect(t, "custom_status STARTS_WITH ''", "e-2")
		s.expect(t, "business_key < 'K'")
		s.expect(t, "business_key IN ('', 'K')", "e-2")
		s.expect(t, "NOT business_key = ''", "e-1", "e-2", "e-3")
		requireGroups(t, []provider.GroupCount{{Count: 1}, {Value: kw(""), Count: 1}, {Value: kw("a"), Count: 1}}, s.count(t, "", "customer"), "count by customer")
		requireGroups(t, []provider.GroupCount{{Count: 2}, {Value: kw("x"), Count: 1}}, s.count(t, "", "custom_status"), "count by custom_status")
	})

	t.Run("KeywordByteOrder", func(t *testing.T) {
		// Keywords compare by their UTF-8 bytes, as Go strings do: upper
		// case before lower case, every non-ASCII letter after 'z'.
		t.Parallel()
		s := newSearcher(t, factory)
		values := []string{"B", "a", "Z", "é", "z", "ab", "a\u00a0", "~", "Ω", "e", "f", "a b", "ä"}
		for i, v := range values {
			s.saveRecord(t, searchRecord(fmt.Sprintf("k-%02d", i), "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("customer", kw(v))))
		}
		// Byte order: "B" "Z" "a" "a b" "ab" "a\u00a0" "e" "f" "z" "~" "ä" "é" "Ω".
		ids := func(vs ...string) []string {
			var out []string
			for i, v := range values {
				if slices.Contains(vs, v) {
					out = append(out, fmt.Sprintf("k-%02d", i))
				}
			}
			return out
		}
		s.expect(t, "customer < 'a'", ids("B", "Z")...)
		s.expect(t, "customer > 'z'", ids("~", "ä", "é", "Ω")...)
		s.expect(t, "customer > 'e' AND customer < 'é'", ids("f", "z", "~", "ä")...)
		s.expect(t, "customer BETWEEN 'Z' AND 'ab'", ids("Z", "a", "a b", "ab")...)
		s.expect(t, "customer >= 'ab'", ids("ab", "a\u00a0", "e", "f", "z", "~", "ä", "é", "Ω")...)
		s.expect(t, "customer < 'é'", ids("B", "Z", "a", "a b", "ab", "a\u00a0", "e", "f", "z", "~", "ä")...)
		s.expect(t, "customer >= 'Ω'", ids("Ω")...)
		s.expect(t, "customer = 'e'", ids("e")...)
		s.expect(t, "customer STARTS_WITH 'a'", ids("a", "ab", "a\u00a0", "a b")...)
		s.expect(t, "customer STARTS_WITH 'é'", ids("é")...)

		// Group order is byte order too.
		var want []provider.GroupCount
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		for _, v := range sorted {
			want = append(want, provider.GroupCount{Value: kw(v), Count: 1})
		}
		requireGroups(t, want, s.count(t, "", "customer"), "count by customer")
	})

	t.Run("NumberAndTimeRanges", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		ints := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 53, -1, 0, 1, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64}
		floats := []float64{-math.MaxFloat64, -1e300, -0.5, 0, 1e-300, 0.1, 0.30000000000000004, 9007199254740993, 1e300}
		times := []time.Time{
			time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
			time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 22, 9, 0, 0, 1000, time.UTC),
			time.Date(2026, 11, 22, 9, 0, 0, 2000, time.UTC),
			time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		}
		for i, v := range ints {
			s.saveRecord(t, searchRecord(fmt.Sprintf("n-%d", i), "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("qty", num(v))))
		}
		for i, v := range floats {
			s.saveRecord(t, searchRecord(fmt.Sprintf("f-%d", i), "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("amount", flt(v))))
		}
		for i, v := range times {
			s.saveRecord(t, searchRecord(fmt.Sprintf("t-%d", i), "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("due", instantOf(v))))
		}
		s.expect(t, "qty = 9223372036854775807", "n-8")
		s.expect(t, "qty = 9223372036854775806", "n-7")
		s.expect(t, "qty > 9223372036854775806", "n-8")
		s.expect(t, "qty >= 9223372036854775806", "n-7", "n-8")
		s.expect(t, "qty < 9223372036854775807", "n-0", "n-1", "n-2", "n-3", "n-4", "n-5", "n-6", "n-7")
		s.expect(t, "qty = -9223372036854775808", "n-0")
		s.expect(t, "qty < -9223372036854775807", "n-0")
		s.expect(t, "qty <= -9223372036854775807", "n-0", "n-1")
		s.expect(t, "qty = 9007199254740993", "n-6")
		s.expect(t, "qty > 9007199254740992", "n-6", "n-7", "n-8")
		s.expect(t, "qty BETWEEN -9007199254740992 AND 0", "n-2", "n-3", "n-4")
		s.expect(t, "qty IN (9223372036854775807, -9223372036854775808)", "n-0", "n-8")
		s.expect(t, "qty != 0 AND qty > -2 AND qty < 2", "n-3", "n-5")

		s.expect(t, "amount < -1000", "f-0", "f-1")
		s.expect(t, "amount > 0", "f-4", "f-5", "f-6", "f-7", "f-8")
		s.expect(t, "amount >= 0", "f-3", "f-4", "f-5", "f-6", "f-7", "f-8")
		s.expect(t, "amount < 0.0000001", "f-0", "f-1", "f-2", "f-3", "f-4")
		s.expect(t, "amount = 0.1", "f-5")
		s.expect(t, "amount > 0.3", "f-6", "f-7", "f-8")
		s.expect(t, "amount = 9007199254740992", "f-7") // 9007199254740993 is not a float64: it was stored as 2^53
		s.expect(t, "amount BETWEEN -0.5 AND 0.1", "f-2", "f-3", "f-4", "f-5")
		s.expect(t, "amount > 1000000000", "f-7", "f-8")

		s.expect(t, "due < '1970-01-01'", "t-1")
		s.expect(t, "due <= '1970-01-01T00:00:00Z'", "t-0", "t-1")
		s.expect(t, "due > '2026-11-22T09:00:00Z'", "t-3", "t-4", "t-5")
		s.expect(t, "due > '2026-11-22T09:00:00.000001Z'", "t-4", "t-5")
		s.expect(t, "due BETWEEN '2026-11-22T09:00:00.000001Z' AND '2026-11-22T09:00:00.000002Z'", "t-3", "t-4")
		s.expect(t, "due = '2026-11-22T10:00:00.000001+01:00'", "t-3")
		s.expect(t, "due < '2026-11-22T04:00:00.000001-05:00'", "t-0", "t-1", "t-2")
		s.expect(t, "due >= '2100-01-01'", "t-5")
	})

	t.Run("Nesting", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		// AND binds tighter than OR.
		s.expect(t, "customer = 'acme' OR qty < 0 AND vip = false", "s-01", "s-02", "s-07")
		s.expect(t, "(customer = 'acme' OR qty < 0) AND vip = false", "s-02", "s-07")
		s.expect(t, "vip = false AND qty < 0 OR customer = 'acme'", "s-01", "s-02", "s-07")
		s.expect(t, "NOT (status = 'running' OR tags = 'b')", "s-03", "s-04", "s-05", "s-07")
		s.expect(t, "NOT status = 'running' AND NOT tags = 'b'", "s-03", "s-04", "s-05", "s-07")
		s.expect(t, "NOT NOT customer = 'acme'", "s-01")
		s.expect(t, "NOT (amount > 1 AND NOT region = 'north')", "s-01", "s-02", "s-03", "s-04", "s-07")
		s.expect(t, "not customer = 'acme' and not qty > 0", "s-02", "s-03", "s-04", "s-07")
		s.expect(t, "((workflow = 'order' AND (region = 'south' OR region IS NULL)) OR (workflow = 'refund' AND NOT vip = true))",
			"s-02", "s-05", "s-06", "s-07")
		s.expect(t, "(region = 'north' OR region = 'south') AND (status IN ('running', 'completed') OR qty = 0) AND NOT (tags IS NULL)",
			"s-01", "s-02", "s-03", "s-07")
		s.expect(t, "customer = 'acme' AND customer = 'z'")
		s.expect(t, "customer = 'acme' OR NOT customer = 'acme'", "s-01", "s-02", "s-03", "s-04", "s-05", "s-06", "s-07")
	})

	t.Run("PagingUnderWhere", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		var evens []string
		for i := range 25 {
			id := fmt.Sprintf("p-%02d", i)
			c := "odd"
			if i%2 == 0 {
				c = "even"
				evens = append(evens, id)
			}
			s.saveRecord(t, searchRecord(id, "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("customer", kw(c), "qty", num(int64(i)))))
		}
		const where = "customer = 'even'"
		var got []string
		after := ""
		for range 10 {
			page := s.list(t, where, provider.ListInstancesParams{AfterID: after, Limit: 4})
			require.LessOrEqual(t, len(page), 4)
			got = append(got, page...)
			if len(page) < 4 {
				break
			}
			after = page[len(page)-1]
		}
		require.Equal(t, evens, got, "pages of 4 under a Where")
		s.expectWith(t, where, provider.ListInstancesParams{AfterID: "p-03", Limit: 4}, "p-04", "p-06", "p-08", "p-10")
		s.expectWith(t, where, provider.ListInstancesParams{AfterID: "p-24"})
		s.expectWith(t, where, provider.ListInstancesParams{AfterID: "p-23", Limit: 4}, "p-24")
		s.expectWith(t, "qty >= 20 OR qty < 2", provider.ListInstancesParams{AfterID: "p-00", Limit: 3}, "p-01", "p-20", "p-21")
		s.expectWith(t, where, provider.ListInstancesParams{}, evens...) // Limit 0 means 100
		s.expectWith(t, "customer = 'odd' AND qty > 18", provider.ListInstancesParams{Limit: 1}, "p-19")

		// Without a Where, Limit 0 means 100.
		for i := 25; i < 105; i++ {
			s.saveRecord(t, searchRecord(fmt.Sprintf("p-%03d", i), "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0,
				attrs("customer", kw("many"))))
		}
		require.Len(t, s.list(t, "customer = 'many'", provider.ListInstancesParams{}), 80)
		require.Len(t, s.list(t, "", provider.ListInstancesParams{}), 100)
		require.Len(t, s.list(t, "customer IS NOT NULL", provider.ListInstancesParams{}), 100)
	})

	t.Run("WhereWithParams", func(t *testing.T) {
		// Where narrows what the params' other fields select.
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		s.expectWith(t, "amount > 0", provider.ListInstancesParams{Name: "order"}, "s-01", "s-05", "s-06")
		s.expectWith(t, "tags = 'a'", provider.ListInstancesParams{Status: provider.StatusCompleted}, "s-07")
		s.expectWith(t, "NOT vip = true", provider.ListInstancesParams{BusinessKey: "C-1"}, "s-03")
		s.expectWith(t, "customer IS NOT NULL", provider.ListInstancesParams{CreatedFrom: at(2 * time.Hour), CreatedTo: at(6 * time.Hour)}, "s-02", "s-03", "s-05")
		s.expectWith(t, "qty < 0", provider.ListInstancesParams{Terminal: true}, "s-02", "s-07")
		s.expectWith(t, "region = 'north'", provider.ListInstancesParams{Terminal: true, UpdatedBefore: at(6 * time.Hour)}, "s-03")
		s.expectWith(t, "status = 'running'", provider.ListInstancesParams{Status: provider.StatusCompleted})
		s.expectWith(t, "workflow = 'order'", provider.ListInstancesParams{Name: "order", Status: provider.StatusRunning, AfterID: "s-01", Limit: 5}, "s-06")
	})

	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		none := query.Value{}
		requireGroups(t, []provider.GroupCount{{Value: none, Count: 7}}, s.count(t, "", ""), "count of all")
		requireGroups(t, []provider.GroupCount{{Value: none, Count: 0}}, s.count(t, "customer = 'nobody'", ""), "count of none")
		requireGroups(t, []provider.GroupCount{{Value: none, Count: 3}}, s.count(t, "tags STARTS_WITH 'a'", ""), "count where")
		requireGroups(t, []provider.GroupCount{
			{Value: kw("completed"), Count: 2},
			{Value: kw("failed"), Count: 1},
			{Value: kw("running"), Count: 2},
			{Value: kw("suspended"), Count: 1},
			{Value: kw("terminated"), Count: 1},
		}, s.count(t, "", "status"), "count by status")
		requireGroups(t, []provider.GroupCount{
			{Value: kw("completed"), Count: 2},
			{Value: kw("failed"), Count: 1},
			{Value: kw("suspended"), Count: 1},
		}, s.count(t, "NOT vip = true AND NOT workflow = 'order' OR status = 'completed' AND region = 'south'", "status"), "count by status where")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 2},
			{Value: kw("north"), Count: 3},
			{Value: kw("south"), Count: 2},
		}, s.count(t, "", "region"), "count by region")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 1},
			{Value: kw("north"), Count: 1},
			{Value: kw("south"), Count: 2},
		}, s.count(t, "workflow = 'order'", "region"), "count by region where")
		requireGroups(t, []provider.GroupCount{
			{Value: kw("north"), Count: 3},
		}, s.count(t, "region = 'north'", "region"), "no no-value group without members")
		requireGroups(t, nil, s.count(t, "region = 'nobody'", "region"), "no groups without matches")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 1},
			{Value: num(math.MinInt64), Count: 1},
			{Value: num(-7), Count: 1},
			{Value: num(0), Count: 1},
			{Value: num(3), Count: 1},
			{Value: num(math.MaxInt64 - 1), Count: 1},
			{Value: num(math.MaxInt64), Count: 1},
		}, s.count(t, "", "qty"), "count by qty")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 1},
			{Value: flt(-2.25), Count: 1},
			{Value: flt(0), Count: 1},
			{Value: flt(2), Count: 1},
			{Value: flt(3.75), Count: 1},
			{Value: flt(10.5), Count: 1},
			{Value: flt(1e15), Count: 1},
		}, s.count(t, "", "amount"), "count by amount (numeric order)")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 2},
			{Value: boolean(false), Count: 3},
			{Value: boolean(true), Count: 2},
		}, s.count(t, "", "vip"), "count by vip")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 2},
			{Value: instantOf(due3), Count: 1},
			{Value: instantOf(due4), Count: 1},
			{Value: instantOf(due1), Count: 2},
			{Value: instantOf(due2), Count: 1},
		}, s.count(t, "", "due"), "count by due")
		requireGroups(t, []provider.GroupCount{
			{Value: kw("Acme"), Count: 1},
			{Value: kw("B"), Count: 1},
			{Value: kw("acme"), Count: 1},
			{Value: kw("z"), Count: 1},
			{Value: kw("é"), Count: 1},
		}, s.count(t, "customer != 'beta'", "customer"), "count by customer where")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 3},
			{Value: kw("retrying"), Count: 1},
			{Value: kw("waiting"), Count: 2},
		}, s.count(t, "NOT status = 'terminated'", "custom_status"), "count by custom_status")
		requireGroups(t, []provider.GroupCount{
			{Value: none, Count: 3},
			{Value: instantOf(at(3 * time.Hour)), Count: 1},
			{Value: instantOf(at(4 * time.Hour)), Count: 1},
			{Value: instantOf(at(6 * time.Hour)), Count: 1},
			{Value: instantOf(at(8 * time.Hour)), Count: 1},
		}, s.count(t, "", "completed_at"), "count by completed_at")
		requireGroups(t, []provider.GroupCount{
			{Value: kw("invoice"), Count: 2},
			{Value: kw("order"), Count: 4},
			{Value: kw("refund"), Count: 1},
		}, s.count(t, "", "workflow"), "count by workflow")
	})

	t.Run("ListCustomProjections", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		custom := func(name, id string) provider.CustomRecord {
			return provider.CustomRecord{Name: name, Version: 2, InstanceID: id, Seq: 5, Data: []byte(name + " of " + id)}
		}
		for _, r := range searchFixture() {
			var cs []provider.CustomRecord
			if r.InstanceID != "s-04" {
				cs = append(cs, custom("totals", r.InstanceID))
			}
			if r.InstanceID == "s-02" || r.InstanceID == "s-03" {
				cs = append(cs, custom("other", r.InstanceID))
			}
			s.saveRecord(t, r, cs...)
		}
		// A projection record whose instance has no record is not listed.
		orphan := projections(t, "s-00", 5, "orphan", false)
		orphan.Tasks, orphan.TaskEvents, orphan.Custom = nil, nil, []provider.CustomRecord{custom("totals", "s-00")}
		s.b.save(t, orphan)
		orphan = projections(t, "s-99", 5, "orphan", false)
		orphan.Tasks, orphan.TaskEvents, orphan.Custom = nil, nil, []provider.CustomRecord{custom("totals", "s-99")}
		s.b.save(t, orphan)

		list := func(name, src, after string, limit int) []provider.CustomRecord {
			t.Helper()
			p := provider.ListCustomProjectionsParams{Name: name, AfterID: after, Limit: limit}
			if src != "" {
				p.Where = parse(t, src)
			}
			recs, err := s.q.ListCustomProjections(t.Context(), &p)
			require.NoError(t, err, "ListCustomProjections %s where %q", name, src)
			return recs
		}
		expect := func(name, src, after string, limit int, ids ...string) {
			t.Helper()
			want := []provider.CustomRecord{}
			for _, id := range ids {
				want = append(want, custom(name, id))
			}
			got := list(name, src, after, limit)
			if got == nil {
				got = []provider.CustomRecord{}
			}
			require.Equal(t, want, got, "ListCustomProjections %s where %q after %q limit %d", name, src, after, limit)
		}
		expect("totals", "", "", 0, "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")
		expect("totals", "region = 'north'", "", 0, "s-01", "s-03", "s-07")
		expect("totals", "region = 'north'", "", 2, "s-01", "s-03")
		expect("totals", "region = 'north'", "s-03", 2, "s-07")
		expect("totals", "region = 'north'", "s-07", 2)
		expect("totals", "NOT region = 'north'", "", 0, "s-02", "s-05", "s-06")
		expect("totals", "customer IS NULL", "", 0)
		expect("totals", "status = 'running' OR qty < 0", "s-01", 0, "s-02", "s-06", "s-07")
		expect("totals", "id >= 's-00'", "", 0, "s-01", "s-02", "s-03", "s-05", "s-06", "s-07")
		expect("other", "", "", 0, "s-02", "s-03")
		expect("other", "region = 'north'", "", 0, "s-03")
		expect("other", "tags = 'b'", "", 1, "s-02")
		expect("none", "", "", 0)
	})

	t.Run("PurgeRemovesAttributes", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		purges := s.b.purges(t)
		events := chain("gone", nil, startEvent(t, execID), markerEvent(t, "m"))
		require.NoError(t, s.b.appendEvents(t.Context(), "gone", events))
		r := searchRecord("gone", "order", provider.StatusCompleted, "finished", "C-9", "v1", "", time.Hour, 2*time.Hour, 2*time.Hour,
			attrs("customer", kw("purged"), "qty", num(9), "tags", keywords("x")))
		r.LastSeq = 2
		s.saveRecord(t, r, provider.CustomRecord{Name: "totals", Version: 1, InstanceID: "gone", Seq: 2, Data: []byte("t")})
		s.saveRecord(t, searchRecord("kept", "order", provider.StatusCompleted, "", "C-1", "v1", "", time.Hour, 2*time.Hour, 2*time.Hour,
			attrs("customer", kw("kept"))))
		s.expect(t, "customer = 'purged'", "gone")

		_, err := purges.PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "gone", By: "user:ops", Now: at(3 * time.Hour)})
		require.NoError(t, err)
		s.expect(t, "customer = 'purged'")
		s.expect(t, "qty = 9 OR tags = 'x' OR custom_status = 'finished'")
		s.expect(t, "NOT customer = 'purged'", "kept")
		requireGroups(t, []provider.GroupCount{{Value: kw("kept"), Count: 1}}, s.count(t, "", "customer"), "count after purge")
		recs, err := s.q.ListCustomProjections(t.Context(), &provider.ListCustomProjectionsParams{Name: "totals"})
		require.NoError(t, err)
		require.Empty(t, recs)

		// The id used again starts without the purged run's attributes.
		again := searchRecord("gone", "order", provider.StatusRunning, "", "C-9", "v1", "", 4*time.Hour, 4*time.Hour, 0, attrs("region", kw("east")))
		again.LastSeq = 1
		s.saveRecord(t, again)
		got := s.b.instanceOf(t, "gone")
		requireAttributes(t, again, got)
		s.expect(t, "customer IS NULL", "gone")
		s.expect(t, "region = 'east'", "gone")
		requireGroups(t, []provider.GroupCount{{Value: query.Value{}, Count: 1}, {Value: kw("kept"), Count: 1}}, s.count(t, "", "customer"), "count after reuse")
	})

	t.Run("AdversarialValues", func(t *testing.T) {
		// Values reach a store only as values: what looks like SQL, a
		// MongoDB operator, a regular expression or a LIKE pattern is
		// stored and matched literally.
		t.Parallel()
		s := newSearcher(t, factory)
		values := []string{
			"O'Brien",
			"'; DROP TABLE instances; --",
			"x' OR '1'='1",
			"$where",
			`{"$gt": ""}`,
			`a\b\\c`,
			`a\`,
			"100%",
			"100x",
			"a_c",
			"abc",
			".*",
			"a.c",
			"[x]",
			"^a",
			`"quoted"`,
			"%",
			"_",
			"line\nbreak\ttab",
		}
		ids := make([]string, len(values))
		for i, v := range values {
			ids[i] = fmt.Sprintf("a-%02d", i)
			r := searchRecord(ids[i], "order", provider.StatusRunning, v, v, "v1", "", time.Hour, time.Hour, 0,
				attrs("customer", kw(v), "tags", keywords(v, "plain")))
			s.saveRecord(t, r)
		}
		lit := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
		for i, v := range values {
			got := s.b.instanceOf(t, ids[i])
			requireValue(t, kw(v), got.Attributes["customer"], "customer of "+ids[i])
			require.Equal(t, v, got.CustomStatusText)
			require.Equal(t, v, got.BusinessKey)
			s.expect(t, "customer = "+lit(v), ids[i])
			s.expect(t, "tags = "+lit(v), ids[i])
			s.expect(t, "custom_status = "+lit(v), ids[i])
			s.expect(t, "business_key IN ("+lit(v)+", 'none')", ids[i])
		}
		idsOf := func(vs ...string) []string {
			var out []string
			for i, v := range values {
				if slices.Contains(vs, v) {
					out = append(out, ids[i])
				}
			}
			return out
		}
		// STARTS_WITH takes its prefix literally: no LIKE wildcard, no
		// regular expression, no escape.
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"100%", idsOf("100%")},
			{"100", idsOf("100%", "100x")},
			{"%", idsOf("%")},
			{"_", idsOf("_")},
			{"a_", idsOf("a_c")},
			{"a.", idsOf("a.c")},
			{".", idsOf(".*")},
			{"[", idsOf("[x]")},
			{"^", idsOf("^a")},
			{"$", idsOf("$where")},
			{`a\`, idsOf(`a\b\\c`, `a\`)},
			{`a\b\\`, idsOf(`a\b\\c`)},
			{"'", idsOf("'; DROP TABLE instances; --")},
			{"x' OR", idsOf("x' OR '1'='1")},
			{`{"$gt"`, idsOf(`{"$gt": ""}`)},
			{"line\n", idsOf("line\nbreak\ttab")},
		} {
			s.expect(t, "customer STARTS_WITH "+lit(c.prefix), c.want...)
			s.expect(t, "tags STARTS_WITH "+lit(c.prefix), c.want...)
			s.expect(t, "business_key STARTS_WITH "+lit(c.prefix), c.want...)
		}
		s.expect(t, "tags = 'plain' AND customer = '$where'", idsOf("$where")...)
		s.expect(t, "customer >= '\"' AND customer < '%'", idsOf(`"quoted"`, "$where")...)

		// NUL cannot be a keyword: query.Of refuses it, so no store sees it.
		_, err := query.Of(query.Keyword, "a\x00b")
		require.Error(t, err, "query.Of accepts a keyword with NUL")
	})

	t.Run("LongInList", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		s.saveRecord(t, searchRecord("in-1", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, attrs("customer", kw("v0500"), "qty", num(500))))
		s.saveRecord(t, searchRecord("in-2", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, attrs("customer", kw("w"), "qty", num(1000))))
		s.saveRecord(t, searchRecord("in-3", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, attrs("customer", kw("v0999"), "qty", num(-1))))
		s.saveRecord(t, searchRecord("in-4", "order", provider.StatusRunning, "", "", "v1", "", time.Hour, time.Hour, 0, nil))
		kws, ints := make([]string, 1000), make([]string, 1000)
		for i := range 1000 {
			kws[i] = fmt.Sprintf("'v%04d'", i)
			ints[i] = fmt.Sprint(i)
		}
		s.expect(t, "customer IN ("+strings.Join(kws, ", ")+")", "in-1", "in-3")
		s.expect(t, "customer NOT IN ("+strings.Join(kws, ", ")+")", "in-2", "in-4")
		s.expect(t, "qty IN ("+strings.Join(ints, ",")+")", "in-1")
		s.expect(t, "tags IN ("+strings.Join(kws, ",")+")")
		requireGroups(t, []provider.GroupCount{{Count: 2}}, s.count(t, "customer IN ("+strings.Join(kws, ", ")+")", ""), "count of a long IN")
	})

	t.Run("DeepNesting", func(t *testing.T) {
		t.Parallel()
		s := newSearcher(t, factory)
		for _, r := range searchFixture() {
			s.saveRecord(t, r)
		}
		// 30 levels: (qty = 1000 OR (qty != 1001 AND (qty = 1002 OR ( … customer = 'acme' … )))).
		const depth = 30
		var sb strings.Builder
		for i := range depth {
			if i%2 == 0 {
				fmt.Fprintf(&sb, "(qty = %d OR ", 1000+i)
			} else {
				fmt.Fprintf(&sb, "(qty != %d AND ", 1000+i)
			}
		}
		sb.WriteString("customer = 'acme'")
		sb.WriteString(strings.Repeat(")", depth))
		s.expect(t, sb.String(), "s-01")
		requireGroups(t, []provider.GroupCount{{Count: 1}}, s.count(t, sb.String(), ""), "count under deep nesting")

		// NOT and parentheses count alike towards query.MaxDepth: 30 NOTs,
		// and 15 NOTs each of a parenthesized expression.
		s.expect(t, strings.Repeat("NOT ", depth)+"region = 'north'", "s-01", "s-03", "s-07")
		s.expect(t, strings.Repeat("NOT ", depth-1)+"region = 'north'", "s-02", "s-04", "s-05", "s-06")
		s.expect(t, strings.Repeat("NOT (", depth/2)+"region = 'north'"+strings.Repeat(")", depth/2), "s-02", "s-04", "s-05", "s-06")
	})

	t.Run("MatchesQueryMatch", func(t *testing.T) {
		t.Parallel()
		testSearchProperty(t, factory)
	})
}
