package providertest

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// The pools the generators draw from: few values, so that records share
// them and queries hit; each pool has the values stores get wrong (byte
// order against collation, int64 against float64, microseconds, LIKE and
// regular-expression characters).
var (
	genKeywords = []string{"", "a", "A", "B", "Z", "ab", "a b", "b", "é", "z", "O'Brien", "100%", "a_c", "$x", ".*"}
	genPrefixes = []string{"a", "A", "é", "O'", "100%", "a_", "$", ".", "B", "wa", "C-", "z", "ab"}
	genInts     = []int64{math.MinInt64, -7, -1, 0, 1, 3, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64}
	genFloats   = []float64{-2.25, -1, 0, 0.5, 2, 3.75, 1e15}
	genTimes    = []time.Time{
		base.Add(-24 * time.Hour), base, base.Add(time.Microsecond), base.Add(time.Hour), base.Add(999999 * time.Microsecond),
	}
	genDates        = []string{"2026-11-22", "2026-11-23", "2026-11-21"}
	genListElements = []string{"", "a", "b", "a b", "é", "B", "c"}
	genWorkflows    = []string{"order", "invoice", "Order"}
	genStatuses     = []provider.Status{provider.StatusRunning, provider.StatusSuspended, provider.StatusCompleted, provider.StatusFailed, provider.StatusTerminated}
	genCustom       = []string{"", "waiting", "wait", "Waiting"}
	genKeys         = []string{"", "C-1", "C-2", "c-1"}
	genVersions     = []string{"v1", "v2"}
	genParents      = []string{"", "p-1", "p-2"}
)

// SearchRecords generates min to max instance records for the search
// property, with ids prefix followed by two digits, in id order: built-in
// fields and each attribute of SearchSchema drawn from small pools, each
// attribute present or not, times in UTC to the microsecond.
func SearchRecords(prefix string, min, max int) *rapid.Generator[[]*provider.InstanceRecord] {
	return rapid.Custom(func(t *rapid.T) []*provider.InstanceRecord {
		n := rapid.IntRange(min, max).Draw(t, "records")
		out := make([]*provider.InstanceRecord, n)
		for i := range n {
			out[i] = searchRecordGen(fmt.Sprintf("%s%02d", prefix, i)).Draw(t, "record")
		}
		return out
	})
}

func searchRecordGen(id string) *rapid.Generator[*provider.InstanceRecord] {
	return rapid.Custom(func(t *rapid.T) *provider.InstanceRecord {
		r := record(id, 5, id)
		r.Name = rapid.SampledFrom(genWorkflows).Draw(t, "workflow")
		r.Status = rapid.SampledFrom(genStatuses).Draw(t, "status")
		r.CustomStatusText = rapid.SampledFrom(genCustom).Draw(t, "custom_status")
		r.BusinessKey = rapid.SampledFrom(genKeys).Draw(t, "business_key")
		r.Version = rapid.SampledFrom(genVersions).Draw(t, "version")
		r.ParentID = rapid.SampledFrom(genParents).Draw(t, "parent_id")
		r.CreatedAt = rapid.SampledFrom(genTimes).Draw(t, "created_at")
		r.UpdatedAt = rapid.SampledFrom(genTimes).Draw(t, "updated_at")
		r.CompletedAt = time.Time{}
		if r.Status.Terminal() {
			r.CompletedAt = rapid.SampledFrom(genTimes).Draw(t, "completed_at")
		}
		a := map[string]query.Value{}
		for _, name := range slices.Sorted(maps.Keys(SearchSchema)) {
			if !rapid.Bool().Draw(t, name+" set") {
				continue
			}
			switch typ := SearchSchema[name]; typ {
			case query.Keyword:
				a[name] = kw(rapid.SampledFrom(genKeywords).Draw(t, name))
			case query.Int:
				a[name] = num(rapid.SampledFrom(genInts).Draw(t, name))
			case query.Float:
				a[name] = flt(rapid.SampledFrom(genFloats).Draw(t, name))
			case query.Bool:
				a[name] = boolean(rapid.Bool().Draw(t, name))
			case query.Time:
				a[name] = instantOf(rapid.SampledFrom(genTimes).Draw(t, name))
			case query.KeywordList:
				a[name] = keywords(rapid.SliceOfN(rapid.SampledFrom(genListElements), 1, 3).Draw(t, name)...)
			}
		}
		if len(a) > 0 {
			r.Attributes = a
		}
		return r
	})
}

// searchField is a field the query generator names, with its type.
type searchField struct {
	name string
	typ  query.Type
}

var genFields = func() []searchField {
	fs := []searchField{
		{"id", query.Keyword}, {"workflow", query.Keyword}, {"status", query.Keyword}, {"custom_status", query.Keyword},
		{"business_key", query.Keyword}, {"version", query.Keyword}, {"parent_id", query.Keyword},
		{"created_at", query.Time}, {"updated_at", query.Time}, {"completed_at", query.Time},
	}
	for _, name := range []string{"customer", "region", "amount", "qty", "vip", "due", "tags"} {
		fs = append(fs, searchField{name, SearchSchema[name]})
	}
	return fs
}()

// SearchQuery generates filters in the query language over SearchSchema
// and the built-in fields: every operator of every type, AND, OR and NOT
// nested up to three levels, literals from the pools of [SearchRecords].
// Every text it generates parses.
func SearchQuery() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string { return genExpr(t, 3) })
}

func genExpr(t *rapid.T, depth int) string {
	kind := 0
	if depth > 0 {
		kind = rapid.IntRange(0, 4).Draw(t, "kind")
	}
	switch kind {
	case 1, 2:
		op := " AND "
		if kind == 2 {
			op = " OR "
		}
		n := rapid.IntRange(2, 3).Draw(t, "terms")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "(" + genExpr(t, depth-1) + ")"
		}
		return strings.Join(parts, op)
	case 3:
		return "NOT (" + genExpr(t, depth-1) + ")"
	}
	return genTerm(t)
}

func genTerm(t *rapid.T) string {
	f := rapid.SampledFrom(genFields).Draw(t, "field")
	lit := func() string { return genLiteral(t, f) }
	var ops []string
	switch f.typ {
	case query.Keyword:
		ops = []string{"=", "!=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN", "BETWEEN", "NOT BETWEEN", "STARTS_WITH", "IS NULL", "IS NOT NULL"}
	case query.Int, query.Float, query.Time:
		ops = []string{"=", "!=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN", "BETWEEN", "NOT BETWEEN", "IS NULL", "IS NOT NULL"}
	case query.Bool:
		ops = []string{"=", "!=", "IS NULL", "IS NOT NULL"}
	case query.KeywordList:
		ops = []string{"=", "!=", "IN", "NOT IN", "STARTS_WITH", "IS NULL", "IS NOT NULL"}
	}
	switch op := rapid.SampledFrom(ops).Draw(t, "op"); op {
	case "IN", "NOT IN":
		n := rapid.IntRange(1, 4).Draw(t, "values")
		vals := make([]string, n)
		for i := range vals {
			vals[i] = lit()
		}
		return f.name + " " + op + " (" + strings.Join(vals, ", ") + ")"
	case "BETWEEN", "NOT BETWEEN":
		return f.name + " " + op + " " + lit() + " AND " + lit()
	case "STARTS_WITH":
		return f.name + " STARTS_WITH " + quote(rapid.SampledFrom(genPrefixes).Draw(t, "prefix"))
	case "IS NULL", "IS NOT NULL":
		return f.name + " " + op
	default:
		return f.name + " " + op + " " + lit()
	}
}

// genLiteral draws a literal of f's type from f's pool.
func genLiteral(t *rapid.T, f searchField) string {
	switch f.typ {
	case query.Keyword, query.KeywordList:
		pool := genKeywords
		switch f.name {
		case "id":
			pool = []string{"q-", "q-1", "q-05", "q-2", "r"}
		case "workflow":
			pool = genWorkflows
		case "status":
			pool = make([]string, len(genStatuses))
			for i, s := range genStatuses {
				pool[i] = string(s)
			}
		case "custom_status":
			pool = genCustom
		case "business_key":
			pool = genKeys
		case "version":
			pool = genVersions
		case "parent_id":
			pool = []string{"", "p-1", "p-2", "p-3"}
		case "tags":
			pool = genListElements
		}
		return quote(rapid.SampledFrom(pool).Draw(t, "keyword"))
	case query.Int:
		return strconv.FormatInt(rapid.SampledFrom(slices.Concat(genInts, []int64{2, -8})).Draw(t, "int"), 10)
	case query.Float:
		return strconv.FormatFloat(rapid.SampledFrom(slices.Concat(genFloats, []float64{1, -3, 0.25})).Draw(t, "float"), 'f', -1, 64)
	case query.Bool:
		return strconv.FormatBool(rapid.Bool().Draw(t, "bool"))
	case query.Time:
		if rapid.IntRange(0, 4).Draw(t, "date") == 0 {
			return quote(rapid.SampledFrom(genDates).Draw(t, "date"))
		}
		return quote(rapid.SampledFrom(genTimes).Draw(t, "time").Format(time.RFC3339Nano))
	}
	panic(fmt.Sprintf("providertest: no literal of type %d", f.typ))
}

// quote writes s as a string literal of the query language.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// genGroupBy are the fields the property groups counts by ("" for none).
var genGroupBy = []string{"", "status", "workflow", "custom_status", "completed_at", "customer", "region", "qty", "amount", "vip", "due"}

// compareValues orders two values of one type as CountInstances orders
// its groups; the zero Value (no value) first.
func compareValues(a, b query.Value) int {
	switch {
	case a.Type == query.Invalid || b.Type == query.Invalid:
		return cmp.Compare(a.Type, b.Type)
	case a.Type != b.Type:
		panic(fmt.Sprintf("providertest: comparing values of types %d and %d", a.Type, b.Type))
	}
	switch a.Type {
	case query.Keyword:
		return strings.Compare(a.Str, b.Str)
	case query.Int:
		return cmp.Compare(a.Int, b.Int)
	case query.Float:
		return cmp.Compare(a.Float, b.Float)
	case query.Bool:
		switch {
		case a.Bool == b.Bool:
			return 0
		case b.Bool:
			return -1
		}
		return 1
	case query.Time:
		return a.Time.Compare(b.Time)
	}
	panic(fmt.Sprintf("providertest: values of type %d do not group", a.Type))
}

// modelCount counts recs matching e grouped by the field by, as
// CountInstances must.
func modelCount(recs []*provider.InstanceRecord, e query.Expr, by *query.Field) []provider.GroupCount {
	if by == nil {
		n := int64(0)
		for _, r := range recs {
			if query.Match(e, r) {
				n++
			}
		}
		return []provider.GroupCount{{Count: n}}
	}
	var values []query.Value
	for _, r := range recs {
		if !query.Match(e, r) {
			continue
		}
		v, ok := r.Field(*by)
		if !ok {
			v = query.Value{}
		}
		values = append(values, v)
	}
	slices.SortStableFunc(values, compareValues)
	var out []provider.GroupCount
	for _, v := range values {
		if n := len(out); n > 0 && compareValues(out[n-1].Value, v) == 0 {
			out[n-1].Count++
			continue
		}
		out = append(out, provider.GroupCount{Value: v, Count: 1})
	}
	return out
}

// SearchSeedEnv names the environment variable that sets the seed of the
// records of the search property (a random one by default); a failure
// prints the seed it ran with.
const SearchSeedEnv = "CHRONICLE_SEARCH_SEED"

// testSearchProperty checks, on random records and random filters, that
// the store's ListInstances (paged under the filter) and CountInstances
// (grouped by a random field) give what query.Match gives over the
// records written.
//
// Writes and reads cost tens of milliseconds each on some servers
// (FerretDB), so the records are written once, before the checks, and
// every check draws one filter: about two reads a check, a few seconds
// for rapid's 100 checks. The records come from their own seed, printed
// on failure with rapid's (-rapid.seed and SearchSeedEnv repeat a run).
func testSearchProperty(t *testing.T, factory Factory) {
	s := newSearcher(t, factory)
	ctx := t.Context()
	schema := query.SchemaOf(SearchSchema)
	seed := time.Now().UnixNano()
	if v := os.Getenv(SearchSeedEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s", SearchSeedEnv)
		seed = n
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the records were drawn with %s=%d", SearchSeedEnv, seed)
		}
	})
	const prefix = "q-"
	recs := SearchRecords(prefix, 24, 40).Example(int(seed))
	for _, r := range recs {
		s.saveRecord(t, r)
	}
	rapid.Check(t, func(rt *rapid.T) {
		src := SearchQuery().Draw(rt, "query")
		e, err := query.Parse(src, schema)
		require.NoError(rt, err, "generated query %q does not parse", src)

		want := []string{}
		for _, r := range recs {
			if query.Match(e, r) {
				want = append(want, r.InstanceID)
			}
		}
		limit := rapid.SampledFrom([]int{0, 0, 0, 4, 16}).Draw(rt, "limit")
		got := []string{}
		after := prefix
		for range len(recs) + 2 {
			page, err := s.q.ListInstances(ctx, &provider.ListInstancesParams{Where: e, AfterID: after, Limit: limit})
			require.NoError(rt, err, "ListInstances where %s", src)
			require.LessOrEqual(rt, len(page), limitOr100(limit))
			for _, r := range page {
				got = append(got, r.InstanceID)
			}
			if len(page) < limitOr100(limit) {
				break
			}
			after = page[len(page)-1].InstanceID
		}
		if !slices.Equal(want, got) {
			rt.Fatalf("ListInstances where %s (Limit %d): got %v, want %v; the records that differ:\n%s", src, limit, got, want, describeDiff(recs, want, got))
		}

		if !rapid.Bool().Draw(rt, "count") {
			return
		}
		byName := rapid.SampledFrom(genGroupBy).Draw(rt, "by")
		var by *query.Field
		if byName != "" {
			f, err := query.ParseField(byName, schema)
			require.NoError(rt, err)
			by = &f
		}
		scoped, err := query.Parse("id STARTS_WITH "+quote(prefix)+" AND ("+src+")", schema)
		require.NoError(rt, err)
		groups, err := s.q.CountInstances(ctx, &provider.CountInstancesParams{Where: scoped, By: by})
		require.NoError(rt, err, "CountInstances where %s by %q", src, byName)
		requireGroups(rt, modelCount(recs, e, by), groups, fmt.Sprintf("CountInstances where %s by %q", src, byName))
	})
}

func limitOr100(n int) int {
	if n == 0 {
		return 100
	}
	return n
}

// describeDiff prints the records listed in only one of want and got.
func describeDiff(recs []*provider.InstanceRecord, want, got []string) string {
	var sb strings.Builder
	for _, r := range recs {
		w, g := slices.Contains(want, r.InstanceID), slices.Contains(got, r.InstanceID)
		if w == g {
			continue
		}
		fmt.Fprintf(&sb, "  %s (want listed %v): workflow=%q status=%q custom_status=%q business_key=%q version=%q parent_id=%q created_at=%s updated_at=%s completed_at=%s",
			r.InstanceID, w, r.Name, r.Status, r.CustomStatusText, r.BusinessKey, r.Version, r.ParentID,
			r.CreatedAt.Format(time.RFC3339Nano), r.UpdatedAt.Format(time.RFC3339Nano), r.CompletedAt.Format(time.RFC3339Nano))
		for _, name := range slices.Sorted(maps.Keys(r.Attributes)) {
			fmt.Fprintf(&sb, " %s=%s", name, formatValue(r.Attributes[name]))
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}
