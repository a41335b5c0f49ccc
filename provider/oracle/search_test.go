package oracle

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

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
	fID       = query.Field{Name: "id", Builtin: query.FieldID, Type: query.Keyword}
	t0        = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func kw(s string) query.Value { return query.Value{Type: query.Keyword, Str: s} }
func cmpT(f query.Field, op query.Op, v query.Value) query.Expr {
	return &query.Cmp{Field: f, Op: op, Value: v}
}

// bindValues returns the values of named args by name.
func bindValues(args []any) map[string]any {
	out := map[string]any{}
	for _, a := range args {
		n := a.(sql.NamedArg)
		out[n.Name] = n.Value
	}
	return out
}

// TestCompileWhereGolden pins the SQL of a few filters: every value is a
// bind, NOT wraps two-valued terms, attributes are EXISTS on their rows.
func TestCompileWhereGolden(t *testing.T) {
	cases := []struct {
		e     query.Expr
		sql   string
		binds map[string]any
	}{
		{nil, "1 = 1", map[string]any{}},
		{
			&query.And{Terms: []query.Expr{cmpT(fCustomer, query.Eq, kw("acme")), cmpT(fStatus, query.Eq, kw("running")), cmpT(fCreated, query.Ge, query.Value{Type: query.Time, Time: t0})}},
			"(EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w0 AND a.vtype = :w1 AND a.str = :w2)" +
				" AND (i.status IS NOT NULL AND i.status = :w3) AND (i.created_at IS NOT NULL AND i.created_at >= :w4))",
			map[string]any{"w0": "customer", "w1": int64(query.Keyword), "w2": "kacme", "w3": "running", "w4": t0.UnixNano()},
		},
		{
			&query.Not{X: cmpT(fAmount, query.Gt, query.Value{Type: query.Float, Float: 5})},
			"NOT (EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w0 AND a.vtype = :w1 AND a.dbl > :w2))",
			map[string]any{"w0": "amount", "w1": int64(query.Float), "w2": 5.0},
		},
		{
			cmpT(fTags, query.Ne, kw("x")),
			"(EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w0 AND a.vtype = :w1) AND NOT " +
				"EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w2 AND a.vtype = :w3 AND a.str = :w4))",
			map[string]any{"w0": "tags", "w1": int64(query.KeywordList), "w2": "tags", "w3": int64(query.KeywordList), "w4": "kx"},
		},
		{
			&query.Prefix{Field: fParent, Prefix: "ab"},
			"(i.parent_id IS NOT NULL AND i.parent_id >= :w0 AND i.parent_id < :w1)",
			map[string]any{"w0": "ab", "w1": "ac"},
		},
		{cmpT(fParent, query.Eq, kw("")), "1 = 0", map[string]any{}},
		{cmpT(fParent, query.Ne, kw("")), "i.parent_id IS NOT NULL", map[string]any{}},
		{
			// A time between two microseconds: = matches nothing, >= rounds up.
			&query.Or{Terms: []query.Expr{cmpT(fDue, query.Eq, query.Value{Type: query.Time, Time: t0.Add(time.Nanosecond)}), cmpT(fDue, query.Ge, query.Value{Type: query.Time, Time: t0.Add(time.Nanosecond)})}},
			"(1 = 0 OR EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w0 AND a.vtype = :w1 AND a.num >= :w2))",
			map[string]any{"w0": "due", "w1": int64(query.Time), "w2": t0.UnixMicro() + 1},
		},
		{
			&query.In{Field: fVIP, Values: []query.Value{{Type: query.Bool, Bool: true}}},
			"EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = :w0 AND a.vtype = :w1 AND (a.num IN (:w2)))",
			map[string]any{"w0": "vip", "w1": int64(query.Bool), "w2": int64(1)},
		},
		{
			cmpT(fCreated, query.Lt, query.Value{Type: query.Time, Time: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}),
			"(i.created_at IS NOT NULL AND i.created_at < :w0)",
			map[string]any{"w0": int64(math.MaxInt64)},
		},
	}
	for _, c := range cases {
		sqlText, args, err := compileWhere(c.e)
		if err != nil {
			t.Fatalf("%v: %v", c.e, err)
		}
		if sqlText != c.sql {
			t.Errorf("%v:\n got %s\nwant %s", c.e, sqlText, c.sql)
		}
		if got := bindValues(args); !reflect.DeepEqual(got, c.binds) {
			t.Errorf("%v: binds %v, want %v", c.e, got, c.binds)
		}
	}
}

// adversarial are values a user may type that must stay values.
var adversarial = []string{
	"x' OR '1'='1", "'; DROP TABLE t; --", ":w0", "a.str", "EXISTS (SELECT 1 FROM dual)", "{{obj:INSTANCES}}", "\u00e9t\u00e9", "%_", "1 = 1",
}

// TestCompileWhereKeepsUserTextOutOfSQL compiles filters over every kind
// of term with adversarial values: the SQL holds none of them, only
// binds, and every bind has a value.
func TestCompileWhereKeepsUserTextOutOfSQL(t *testing.T) {
	for _, v := range adversarial {
		terms := []query.Expr{
			cmpT(fCustomer, query.Eq, kw(v)), cmpT(fCustomer, query.Lt, kw(v)), cmpT(fStatus, query.Ne, kw(v)),
			cmpT(fTags, query.Eq, kw(v)), cmpT(fTags, query.Ne, kw(v)), cmpT(fID, query.Ge, kw(v)),
			&query.In{Field: fCustomer, Values: []query.Value{kw(v), kw("b")}}, &query.In{Field: fParent, Values: []query.Value{kw(v)}},
			&query.Prefix{Field: fCustomer, Prefix: v}, &query.Prefix{Field: fTags, Prefix: v}, &query.Prefix{Field: fStatus, Prefix: v},
			&query.Not{X: &query.Exists{Field: fCount}},
		}
		sqlText, args, err := compileWhere(&query.Or{Terms: []query.Expr{&query.And{Terms: terms}, &query.Not{X: &query.And{Terms: terms}}}})
		if err != nil {
			t.Fatal(err)
		}
		stripped := strings.ReplaceAll(sqlText, "{{obj:ATTRIBUTES}}", "")
		if v != "a.str" && v != "1 = 1" && v != ":w0" && strings.Contains(stripped, v) {
			t.Errorf("the SQL holds the value %q:\n%s", v, sqlText)
		}
		if strings.Contains(sqlText, "'") {
			t.Errorf("the SQL holds a string literal:\n%s", sqlText)
		}
		names := bindNames(testNames.render(sqlText))
		if len(names) != len(args) {
			t.Errorf("%d binds in the SQL, %d values", len(names), len(args))
		}
		vals := bindValues(args)
		for _, n := range names {
			if _, ok := vals[n]; !ok {
				t.Errorf("bind :%s has no value", n)
			}
		}
	}
	// A name that is not an identifier never reaches the SQL.
	_, _, err := compileWhere(cmpT(query.Field{Name: "x) OR (1=1", Type: query.Keyword}, query.Eq, kw("a")))
	if !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("a bad name: %v", err)
	}
	_, _, err = compileWhere(cmpT(fCount, query.Eq, kw("1")))
	if !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("a keyword for an int: %v", err)
	}
	// A long IN list is split into lists of at most maxInBinds binds.
	var vals []query.Value
	for i := range query.MaxInValues {
		vals = append(vals, query.Value{Type: query.Int, Int: int64(i)})
	}
	sqlText, args, err := compileWhere(&query.In{Field: fCount, Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(sqlText, " IN (") != 2 || len(args) != 2+query.MaxInValues {
		t.Fatalf("IN of %d values: %d lists, %d binds", len(vals), strings.Count(sqlText, " IN ("), len(args))
	}
}

// TestSearchStatementsBind runs the search methods on the fake driver,
// which checks every statement's binds as Oracle would, and reads back
// what the fake answers.
func TestSearchStatementsBind(t *testing.T) {
	ctx := t.Context()
	due := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
	attrs := map[string]query.Value{
		"customer": kw(""), "amount": {Type: query.Float, Float: -2.5}, "count": {Type: query.Int, Int: math.MinInt64},
		"vip": {Type: query.Bool, Bool: true}, "due": {Type: query.Time, Time: due}, "tags": {Type: query.KeywordList, List: []string{"b", "a", "b"}},
	}
	var attrAnswer [][]driver.Value
	for _, r := range attrRows(attrs) {
		attrAnswer = append(attrAnswer, []driver.Value{"inst-1", r.name, r.pos, int64(r.typ), r.str, r.num, r.dbl})
	}
	record := []driver.Value{"inst-1", int64(3), "e-1", "order", "v1", "running", nil, nil, nil, nil, t0.UnixNano(), t0.UnixNano(), nil, nil, nil, nil, nil, "waiting"}
	s, f := fakeStore(t,
		fakeRows{match: "CHRONICLE_ATTRIBUTES\"\nWHERE instance_id IN", cols: cols(7), rows: attrAnswer},
		fakeRows{match: "incident, custom_status_text", cols: cols(18), rows: [][]driver.Value{record}},
		fakeRows{match: "GROUP BY g.str", cols: cols(2), rows: [][]driver.Value{{"kzeta", int64(2)}, {nil, int64(4)}, {"kacme", int64(1)}, {"k", int64(3)}}},
		fakeRows{match: "GROUP BY i.status", cols: cols(2), rows: [][]driver.Value{{"running", int64(2)}, {"completed", int64(5)}}},
		fakeRows{match: "GROUP BY g.dbl", cols: cols(2), rows: [][]driver.Value{{2.5, int64(2)}, {nil, int64(1)}, {-1.0, int64(1)}}},
		fakeRows{match: "SELECT 0, COUNT(*)", cols: cols(2), rows: [][]driver.Value{{int64(0), int64(7)}}},
		fakeRows{match: "SELECT c.instance_id, c.version", cols: cols(4), rows: [][]driver.Value{{"inst-1", int64(2), int64(9), []byte("d")}}},
	)
	rec := provider.InstanceRecord{InstanceID: "inst-1", Name: "order", Status: provider.StatusRunning, CreatedAt: t0, UpdatedAt: t0, Attributes: attrs, CustomStatusText: "waiting"}
	if err := s.saveProjections(ctx, s.db, &provider.Projections{InstanceID: "inst-1", Seq: 3, Instance: &rec}, true); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetInstance(ctx, "inst-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.CustomStatusText != "waiting" {
		t.Errorf("custom status text %q", got.CustomStatusText)
	}
	if !reflect.DeepEqual(got.Attributes, attrs) {
		t.Errorf("attributes\n got %v\nwant %v", got.Attributes, attrs)
	}
	where := &query.And{Terms: []query.Expr{cmpT(fCustomer, query.Eq, kw("acme")), &query.Not{X: cmpT(fStatus, query.Eq, kw("failed"))}}}
	list, err := s.ListInstances(ctx, &provider.ListInstancesParams{Status: provider.StatusRunning, Where: where, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !reflect.DeepEqual(list[0].Attributes, attrs) {
		t.Errorf("listed %+v", list)
	}
	groups, err := s.CountInstances(ctx, &provider.CountInstancesParams{Where: where, By: &fCustomer})
	if err != nil {
		t.Fatal(err)
	}
	if want := "NULL=4 ''=3 'acme'=1 'zeta'=2"; showGroups(groups) != want {
		t.Errorf("groups by customer %s, want %s", showGroups(groups), want)
	}
	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &fStatus})
	if err != nil {
		t.Fatal(err)
	}
	if want := "'completed'=5 'running'=2"; showGroups(groups) != want {
		t.Errorf("groups by status %s, want %s", showGroups(groups), want)
	}
	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{By: &fAmount})
	if err != nil {
		t.Fatal(err)
	}
	if want := "NULL=1 -1=1 2.5=2"; showGroups(groups) != want {
		t.Errorf("groups by amount %s, want %s", showGroups(groups), want)
	}
	groups, err = s.CountInstances(ctx, &provider.CountInstancesParams{Where: where})
	if err != nil {
		t.Fatal(err)
	}
	if want := "NULL=7"; showGroups(groups) != want {
		t.Errorf("one group %s, want %s", showGroups(groups), want)
	}
	if _, err := s.CountInstances(ctx, &provider.CountInstancesParams{By: &fTags}); !errors.Is(err, ErrInvalidFilter) {
		t.Errorf("a count by a list: %v", err)
	}
	recs, err := s.ListCustomProjections(ctx, &provider.ListCustomProjectionsParams{Name: "totals", Where: where, AfterID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].InstanceID != "inst-1" || recs[0].Version != 2 || recs[0].Seq != 9 || recs[0].Name != "totals" {
		t.Errorf("records %+v", recs)
	}
	if err := s.resetProjections(ctx, s.db, &provider.ResetProjectionsParams{InstanceID: "inst-1"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatalf("%d statements bound wrongly: %v", len(f.errs), errors.Join(f.errs...))
	}
	var inserts, deletes int
	for _, q := range f.seen {
		if strings.Contains(q, "{{") {
			t.Errorf("a statement keeps a marker:\n%s", q)
		}
		if strings.Contains(q, "INTO \"APP\".\"CHRONICLE_ATTRIBUTES\"") {
			inserts++
		}
		if strings.HasPrefix(strings.TrimSpace(q), "DELETE FROM \"APP\".\"CHRONICLE_ATTRIBUTES\"") {
			deletes++
		}
	}
	if inserts != 1 || deletes != 2 {
		t.Errorf("%d attribute inserts and %d deletes, want 1 (the save) and 2 (the save, the reset)", inserts, deletes)
	}
}

func showGroups(gs []provider.GroupCount) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%s=%d", g.Value, g.Count))
	}
	return strings.Join(parts, " ")
}

// TestAttributeRows: a list is a row per element, in order; keywords
// carry the tag; unset values and bad names have no row.
func TestAttributeRows(t *testing.T) {
	rows := attrRows(map[string]query.Value{"tags": {Type: query.KeywordList, List: []string{"x", ""}}, "gone": {}, "a.b": kw("x"), "k": kw("")})
	want := []attrRow{{name: "k", typ: query.Keyword, str: "k"}, {name: "tags", typ: query.KeywordList, str: "kx"}, {name: "tags", pos: 1, typ: query.KeywordList, str: "k"}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
}
