package oracle

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/query"
)

// No Oracle server runs in CI, so TestCompileWhereMeansQueryMatch runs the
// SQL compileWhere writes on PostgreSQL instead, over tables laid out as
// the Oracle migration lays them out (text in byte order, '' stored as
// NULL as Oracle does), and checks that it selects exactly the records
// query.Match selects, for random filters. The fragments compileWhere
// writes (EXISTS, IS NOT NULL, IN, NOT, comparisons, binds) mean the same
// in both; what it cannot check is Oracle's own behaviour (its binds of
// '' as NULL are checked instead: no bind may be "").

// searchPGRecords are the records of the test: every attribute type, with
// values missing, empty, at the limits and a microsecond apart.
func searchPGRecords() []provider.InstanceRecord {
	customers := []string{"", "acme", "zeta", "\u00e9clair", "ac", "-"}
	amounts := []float64{-1.5, 0, 2.5, 1e300, math.Copysign(0, -1), -1}
	counts := []int64{math.MinInt64, -7, 0, 3, 1 << 60, math.MaxInt64}
	dues := []time.Time{t0, t0.Add(time.Microsecond), t0.Add(-time.Microsecond), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), t0}
	tags := [][]string{{"a", "b"}, {""}, {"x.y", "a"}, {"b"}, {"\U0010FFFF"}, nil}
	statuses := []provider.Status{provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusSuspended, provider.StatusTerminated}
	var out []provider.InstanceRecord
	for i := range 18 {
		r := provider.InstanceRecord{
			InstanceID: fmt.Sprintf("i%02d", i), Name: []string{"order", "refund"}[i%2], Status: statuses[i%5],
			Version: []string{"", "v1"}[i%2], CreatedAt: t0.Add(time.Duration(i) * time.Hour).Add(time.Duration(i%3) * time.Nanosecond),
			UpdatedAt: t0.Add(48 * time.Hour), BusinessKey: []string{"", "k-1", "k-2"}[i%3], CustomStatusText: []string{"", "waiting", "wait"}[i%3],
			Attributes: map[string]query.Value{},
		}
		if r.Status.Terminal() {
			r.CompletedAt = t0.Add(time.Duration(i) * 2 * time.Hour)
		}
		if i%4 == 1 {
			r.ParentID = "i00"
		}
		if i%7 != 6 {
			r.Attributes["customer"] = kw(customers[i%len(customers)])
		}
		if i%5 != 4 {
			r.Attributes["amount"] = query.Value{Type: query.Float, Float: amounts[i%len(amounts)]}
		}
		if i%3 != 2 {
			r.Attributes["count"] = query.Value{Type: query.Int, Int: counts[i%len(counts)]}
		}
		if i%4 != 3 {
			r.Attributes["vip"] = query.Value{Type: query.Bool, Bool: i%2 == 0}
		}
		if i%6 != 5 {
			r.Attributes["due"] = query.Value{Type: query.Time, Time: dues[i%len(dues)]}
		}
		if l := tags[i%len(tags)]; l != nil {
			r.Attributes["tags"] = query.Value{Type: query.KeywordList, List: l}
		}
		out = append(out, r)
	}
	return out
}

// Literal pools of the generated filters.
var (
	pgKeywords = []string{"", "a", "ac", "acme", "zeta", "\u00e9clair", "x.y", "b", "-", "\U0010FFFF", "running", "completed", "i00", "i05", "k-1", "wait", "waiting", "order", "v1"}
	pgPrefixes = []string{"", "a", "ac", "\u00e9", "x.", "z", "wai", "i0", "k-", "\U0010FFFF", "run"}
	pgInts     = []int64{math.MinInt64, -8, -7, 0, 3, 4, 1 << 60, 1<<60 - 1, math.MaxInt64}
	pgFloats   = []float64{-1.5, -1, 0, 2.5, 2.4999999, 1e300, math.Copysign(0, -1)}
	pgTimes    = []time.Time{
		t0, t0.Add(time.Nanosecond), t0.Add(999 * time.Nanosecond), t0.Add(time.Microsecond), t0.Add(-time.Nanosecond), t0.Add(5 * time.Hour),
		t0.Add(5*time.Hour + time.Nanosecond), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	pgFields = []query.Field{
		fCustomer, fAmount, fCount, fVIP, fDue, fTags, fStatus, fParent, fCreated, fID,
		{Name: "completed_at", Builtin: query.FieldCompletedAt, Type: query.Time},
		{Name: "business_key", Builtin: query.FieldBusinessKey, Type: query.Keyword},
		{Name: "custom_status", Builtin: query.FieldCustomStatus, Type: query.Keyword},
		{Name: "version", Builtin: query.FieldVersion, Type: query.Keyword},
		{Name: "workflow", Builtin: query.FieldWorkflow, Type: query.Keyword},
	}
)

func genLiteral(t *rapid.T, typ query.Type) query.Value {
	switch typ {
	case query.Keyword, query.KeywordList:
		return kw(rapid.SampledFrom(pgKeywords).Draw(t, "keyword"))
	case query.Int:
		return query.Value{Type: query.Int, Int: rapid.SampledFrom(pgInts).Draw(t, "int")}
	case query.Float:
		return query.Value{Type: query.Float, Float: rapid.SampledFrom(pgFloats).Draw(t, "float")}
	case query.Bool:
		return query.Value{Type: query.Bool, Bool: rapid.Bool().Draw(t, "bool")}
	case query.Time:
		return query.Value{Type: query.Time, Time: rapid.SampledFrom(pgTimes).Draw(t, "time")}
	}
	return query.Value{}
}

func genExpr(t *rapid.T, depth int) query.Expr {
	kind := rapid.IntRange(0, 7).Draw(t, "kind")
	if depth >= 3 {
		kind = rapid.IntRange(0, 3).Draw(t, "leaf")
	}
	f := rapid.SampledFrom(pgFields).Draw(t, "field")
	switch kind {
	case 0, 1:
		ops := []query.Op{query.Eq, query.Ne, query.Lt, query.Le, query.Gt, query.Ge}
		if f.Type == query.KeywordList || f.Type == query.Bool {
			ops = ops[:2]
		}
		return &query.Cmp{Field: f, Op: rapid.SampledFrom(ops).Draw(t, "op"), Value: genLiteral(t, f.Type)}
	case 2:
		if f.Type == query.Keyword || f.Type == query.KeywordList {
			return &query.Prefix{Field: f, Prefix: rapid.SampledFrom(pgPrefixes).Draw(t, "prefix")}
		}
		return &query.Exists{Field: f}
	case 3:
		if f.Type == query.Bool {
			return &query.Exists{Field: f}
		}
		n := rapid.IntRange(1, 4).Draw(t, "n")
		vals := make([]query.Value, n)
		for i := range vals {
			vals[i] = genLiteral(t, f.Type)
		}
		return &query.In{Field: f, Values: vals}
	case 4, 5:
		return &query.Not{X: genExpr(t, depth+1)}
	case 6:
		return &query.And{Terms: []query.Expr{genExpr(t, depth+1), genExpr(t, depth+1)}}
	}
	return &query.Or{Terms: []query.Expr{genExpr(t, depth+1), genExpr(t, depth+1)}}
}

var whereBind = regexp.MustCompile(`:w([0-9]+)`)

func TestCompileWhereMeansQueryMatch(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.instances (instance_id text COLLATE "C" PRIMARY KEY, name text COLLATE "C", status text COLLATE "C",
			custom_status_key text COLLATE "C", business_key text COLLATE "C", version text COLLATE "C", parent_id text COLLATE "C",
			created_at bigint, updated_at bigint, completed_at bigint)`,
		`CREATE TABLE ` + q + `.attributes (instance_id text COLLATE "C", name text COLLATE "C", pos int, vtype int,
			str text COLLATE "C", num bigint, dbl double precision)`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// Oracle keeps '' as NULL.
	text := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	recs := searchPGRecords()
	for _, r := range recs {
		_, err := conn.Exec(ctx, `INSERT INTO `+q+`.instances VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			r.InstanceID, text(r.Name), text(string(r.Status)), statusKey(r.CustomStatusText), text(r.BusinessKey), text(r.Version),
			text(r.ParentID), timeArg(r.CreatedAt), timeArg(r.UpdatedAt), timeArg(r.CompletedAt))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attrRows(r.Attributes) {
			if _, err := conn.Exec(ctx, `INSERT INTO `+q+`.attributes VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				r.InstanceID, a.name, a.pos, int64(a.typ), a.str, a.num, a.dbl); err != nil {
				t.Fatal(err)
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		e := genExpr(rt, 0)
		cond, args, err := compileWhere(e)
		if err != nil {
			rt.Fatalf("%s: %v", e, err)
		}
		pos := make([]any, len(args))
		for i, a := range args {
			n := a.(sql.NamedArg)
			if n.Name != "w"+strconv.Itoa(i) {
				rt.Fatalf("bind %d is named %s", i, n.Name)
			}
			if s, ok := n.Value.(string); ok && s == "" {
				rt.Fatalf("%s binds '' (NULL in Oracle):\n%s", e, cond)
			}
			pos[i] = n.Value
		}
		pgSQL := whereBind.ReplaceAllStringFunc(cond, func(m string) string {
			n, _ := strconv.Atoi(m[2:])
			return "$" + strconv.Itoa(n+1)
		})
		pgSQL = strings.ReplaceAll(pgSQL, "{{obj:ATTRIBUTES}}", q+".attributes")
		rows, err := conn.Query(ctx, `SELECT i.instance_id FROM `+q+`.instances i WHERE `+pgSQL+` ORDER BY i.instance_id`, pos...)
		if err != nil {
			rt.Fatalf("%s: %v\n%s", e, err, pgSQL)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			rt.Fatalf("%s: %v", e, err)
		}
		var want []string
		for i := range recs {
			if query.Match(e, &recs[i]) {
				want = append(want, recs[i].InstanceID)
			}
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("%s\nselects %v\n  Match %v\nSQL: %s", e, got, want, cond)
		}
	})
}
