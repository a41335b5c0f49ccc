package query

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"math"
	"reflect"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// rec is a Record of named values; a missing or zero Value is no value.
type rec map[string]Value

func (r rec) Field(f Field) (Value, bool) {
	v, ok := r[f.Name]
	return v, ok && !v.IsZero()
}

func TestMatch(t *testing.T) {
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	full := rec{
		"amount":     f64(12.5),
		"n":          i64(3),
		"customer":   kw("acme"),
		"tags":       {Type: KeywordList, List: []string{"red", "blue"}},
		"ok":         bl(true),
		"due":        tm(day.Add(time.Hour)),
		"status":     kw("running"),
		"created_at": tm(day),
	}
	empty := rec{}
	cases := []struct {
		src         string
		full, empty bool
	}{
		{"", true, true},
		{"amount = 12.5", true, false},
		{"amount != 12.5", false, false},
		{"amount != 1", true, false}, // != on a missing field is false
		{"NOT amount = 1", true, true},
		{"NOT amount > 5", false, true}, // NOT inverts the whole term
		{"amount > 5", true, false},
		{"amount >= 12.5", true, false},
		{"amount < 12.5", false, false},
		{"amount <= 12.5", true, false},
		{"amount BETWEEN 12.5 AND 13", true, false},
		{"amount BETWEEN 1 AND 12.5", true, false},
		{"amount BETWEEN 13 AND 20", false, false},
		{"amount NOT BETWEEN 13 AND 20", true, true},
		{"n IN (1, 2, 3)", true, false},
		{"n NOT IN (1, 2)", true, true},
		{"n NOT IN (3)", false, true},
		{"customer STARTS_WITH 'ac'", true, false},
		{"customer STARTS_WITH ''", true, false},
		{"customer STARTS_WITH 'AC'", false, false},
		{"customer > 'Z'", true, false}, // byte order: lower case after upper case
		{"customer < 'acmf'", true, false},
		{"tags = 'red'", true, false},
		{"tags = 'green'", false, false},
		{"tags != 'green'", true, false},
		{"tags != 'red'", false, false},
		{"tags IN ('green', 'blue')", true, false},
		{"tags IN ('green')", false, false},
		{"tags STARTS_WITH 'bl'", true, false},
		{"tags STARTS_WITH 'x'", false, false},
		{"tags IS NULL", false, true},
		{"tags IS NOT NULL", true, false},
		{"ok = true", true, false},
		{"ok != true", false, false},
		{"ok = false", false, false},
		{"ok IS NULL", false, true},
		{"due > '2026-01-02'", true, false},
		{"due = '2026-01-02T02:00:00+01:00'", true, false}, // by instant
		{"status = 'running'", true, false},
		{"status IN ('failed', 'completed')", false, false},
		{"created_at BETWEEN '2026-01-02' AND '2026-01-02'", true, false},
		{"completed_at IS NULL", true, true},
		{"completed_at < '2030-01-01'", false, false},
		{"amount > 5 AND customer = 'acme'", true, false},
		{"amount > 50 OR customer = 'acme'", true, false},
		{"amount > 50 OR customer IS NULL", false, true},
		{"NOT (amount > 50 OR customer = 'x')", true, true},
		{"NOT NOT amount > 5", true, false},
	}
	for _, c := range cases {
		e, err := Parse(c.src, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.src, err)
		}
		if got := Match(e, full); got != c.full {
			t.Errorf("Match(%q, full) = %v, want %v", c.src, got, c.full)
		}
		if got := Match(e, empty); got != c.empty {
			t.Errorf("Match(%q, empty) = %v, want %v", c.src, got, c.empty)
		}
	}
}

func TestMatchTypeMismatch(t *testing.T) {
	// A record whose value has another type than the literal never
	// matches a comparison (an attribute declared anew with another type).
	r := rec{"n": f64(3)}
	for _, e := range []Expr{
		cmp(fN, Eq, i64(3)),
		cmp(fN, Ne, i64(4)),
		&In{Field: fN, Values: []Value{i64(3)}},
		&Prefix{Field: fN, Prefix: "3"},
	} {
		if Match(e, r) {
			t.Fatalf("%v matched a float value", e)
		}
	}
	if !Match(&Exists{Field: fN}, r) {
		t.Fatal("IS NOT NULL did not match a value of another type")
	}
	if Match(&And{}, r) != true || Match(&Or{}, r) != false {
		t.Fatal("an empty AND must match and an empty OR must not")
	}
}

// A reference model of the language for the property test: each node
// prints its query text and evaluates itself over Go values directly.
type node struct {
	text string
	eval func(r map[string]any) bool
}

var (
	propInts     = []int64{-3, -1, 0, 1, 2, 3}
	propFloats   = []float64{-1.5, 0, 0.5, 2, 1e10}
	propKeywords = []string{"", "a", "ab", "B", "é", "it's", "a b"}
	propTags     = []string{"a", "ab", "b"}
	propDays     = []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 12, 0, 0, 1000, time.UTC),
		time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	}
)

func genRecord(t *rapid.T) (rec, map[string]any) {
	r, m := rec{}, map[string]any{}
	if rapid.Bool().Draw(t, "has n") {
		n := rapid.SampledFrom(propInts).Draw(t, "n")
		r["n"], m["n"] = i64(n), n
	}
	if rapid.Bool().Draw(t, "has amount") {
		f := rapid.SampledFrom(propFloats).Draw(t, "amount")
		r["amount"], m["amount"] = f64(f), f
	}
	if rapid.Bool().Draw(t, "has customer") {
		s := rapid.SampledFrom(propKeywords).Draw(t, "customer")
		r["customer"], m["customer"] = kw(s), s
	}
	if tags := rapid.SliceOfDistinct(rapid.SampledFrom(propTags), rapid.ID[string]).Draw(t, "tags"); len(tags) > 0 {
		r["tags"], m["tags"] = Value{Type: KeywordList, List: tags}, tags
	}
	if rapid.Bool().Draw(t, "has ok") {
		b := rapid.Bool().Draw(t, "ok")
		r["ok"], m["ok"] = bl(b), b
	}
	if rapid.Bool().Draw(t, "has due") {
		d := rapid.SampledFrom(propDays).Draw(t, "due")
		r["due"], m["due"] = tm(d), d
	}
	return r, m
}

func lit(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return "'" + x.Format(time.RFC3339Nano) + "'"
	}
	panic(fmt.Sprintf("lit %T", v))
}

// order compares two Go values of one type.
func order(a, b any) int {
	switch x := a.(type) {
	case int64:
		return sign(float64(x) - float64(b.(int64)))
	case float64:
		return sign(x - b.(float64))
	case string:
		return strings.Compare(x, b.(string))
	case time.Time:
		return x.Compare(b.(time.Time))
	case bool:
		if x == b.(bool) {
			return 0
		}
		return 1
	}
	panic("order")
}

func sign(d float64) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

func genTerm(t *rapid.T) node {
	field := rapid.SampledFrom([]string{"n", "amount", "customer", "tags", "ok", "due"}).Draw(t, "field")
	var pick func(string) any
	switch field {
	case "n":
		pick = func(l string) any { return rapid.SampledFrom(propInts).Draw(t, l) }
	case "amount":
		pick = func(l string) any { return rapid.SampledFrom(propFloats).Draw(t, l) }
	case "customer":
		pick = func(l string) any { return rapid.SampledFrom(propKeywords).Draw(t, l) }
	case "tags":
		pick = func(l string) any { return rapid.SampledFrom(propTags).Draw(t, l) }
	case "ok":
		pick = func(l string) any { return rapid.Bool().Draw(t, l) }
	case "due":
		pick = func(l string) any { return rapid.SampledFrom(propDays).Draw(t, l) }
	}
	kinds := []string{"cmp", "in", "notin", "isnull", "isnotnull"}
	switch field {
	case "customer":
		kinds = append(kinds, "between", "notbetween", "prefix")
	case "tags":
		kinds = append(kinds, "prefix")
	case "n", "amount", "due":
		kinds = append(kinds, "between", "notbetween")
	case "ok":
		kinds = []string{"cmp", "isnull", "isnotnull"}
	}
	kind := rapid.SampledFrom(kinds).Draw(t, "kind")
	has := func(r map[string]any) (any, bool) { v, ok := r[field]; return v, ok }
	switch kind {
	case "cmp":
		ops := []string{"=", "!=", "<>", "<", "<=", ">", ">="}
		if field == "ok" || field == "tags" {
			ops = []string{"=", "!=", "<>"}
		}
		op := rapid.SampledFrom(ops).Draw(t, "op")
		v := pick("value")
		return node{field + " " + op + " " + lit(v), func(r map[string]any) bool {
			x, ok := has(r)
			if !ok {
				return false
			}
			if list, isList := x.([]string); isList {
				if op == "=" {
					return slices.Contains(list, v.(string))
				}
				return !slices.Contains(list, v.(string))
			}
			c := order(x, v)
			switch op {
			case "=":
				return c == 0
			case "!=", "<>":
				return c != 0
			case "<":
				return c < 0
			case "<=":
				return c <= 0
			case ">":
				return c > 0
			}
			return c >= 0
		}}
	case "in", "notin":
		vals := rapid.SliceOfN(rapid.Just(0), 1, 4).Draw(t, "in count")
		lits := make([]any, len(vals))
		texts := make([]string, len(vals))
		for i := range vals {
			lits[i] = pick("in value")
			texts[i] = lit(lits[i])
		}
		in := func(r map[string]any) bool {
			x, ok := has(r)
			if !ok {
				return false
			}
			for _, v := range lits {
				if list, isList := x.([]string); isList {
					if slices.Contains(list, v.(string)) {
						return true
					}
				} else if order(x, v) == 0 {
					return true
				}
			}
			return false
		}
		if kind == "notin" {
			return node{field + " NOT IN (" + strings.Join(texts, ", ") + ")", func(r map[string]any) bool { return !in(r) }}
		}
		return node{field + " IN (" + strings.Join(texts, ", ") + ")", in}
	case "between", "notbetween":
		lo, hi := pick("lo"), pick("hi")
		between := func(r map[string]any) bool {
			x, ok := has(r)
			return ok && order(x, lo) >= 0 && order(x, hi) <= 0
		}
		if kind == "notbetween" {
			return node{field + " NOT BETWEEN " + lit(lo) + " AND " + lit(hi), func(r map[string]any) bool { return !between(r) }}
		}
		return node{field + " BETWEEN " + lit(lo) + " AND " + lit(hi), between}
	case "prefix":
		p := rapid.SampledFrom([]string{"", "a", "ab", "b", "B", "é"}).Draw(t, "prefix")
		return node{field + " STARTS_WITH " + lit(p), func(r map[string]any) bool {
			x, ok := has(r)
			if !ok {
				return false
			}
			if list, isList := x.([]string); isList {
				for _, s := range list {
					if strings.HasPrefix(s, p) {
						return true
					}
				}
				return false
			}
			return strings.HasPrefix(x.(string), p)
		}}
	case "isnull":
		return node{field + " IS NULL", func(r map[string]any) bool { _, ok := has(r); return !ok }}
	}
	return node{field + " IS NOT NULL", func(r map[string]any) bool { _, ok := has(r); return ok }}
}

func genExpr(t *rapid.T, depth int) node {
	kind := "term"
	if depth < 4 {
		kind = rapid.SampledFrom([]string{"term", "term", "and", "or", "not", "paren"}).Draw(t, "node")
	}
	switch kind {
	case "and", "or":
		a, b := genExpr(t, depth+1), genExpr(t, depth+1)
		// Parenthesize the operands so that the text means the tree.
		text := "(" + a.text + ") " + strings.ToUpper(kind) + " (" + b.text + ")"
		if kind == "and" {
			return node{text, func(r map[string]any) bool { return a.eval(r) && b.eval(r) }}
		}
		return node{text, func(r map[string]any) bool { return a.eval(r) || b.eval(r) }}
	case "not":
		x := genExpr(t, depth+1)
		return node{"NOT (" + x.text + ")", func(r map[string]any) bool { return !x.eval(r) }}
	case "paren":
		x := genExpr(t, depth+1)
		return node{"(" + x.text + ")", x.eval}
	}
	return genTerm(t)
}

func TestMatchProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genExpr(t, 0)
		e, err := Parse(n.text, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", n.text, err)
		}
		printed, err := Parse(e.String(), testSchema)
		if err != nil {
			t.Fatalf("Parse(%q) (printed from %q): %v", e.String(), n.text, err)
		}
		if !reflect.DeepEqual(printed, e) {
			t.Fatalf("%q printed %q, which parses to %q", n.text, e.String(), printed.String())
		}
		for range 4 {
			r, m := genRecord(t)
			want := n.eval(m)
			if got := Match(e, r); got != want {
				t.Fatalf("Match(%q, %v) = %v, want %v", n.text, m, got, want)
			}
			if got := Match(printed, r); got != want {
				t.Fatalf("Match(%q, %v) = %v, want %v (printed form)", e.String(), m, got, want)
			}
		}
	})
}

// TestStringRoundTripLiterals prints and parses back random literals of
// every type: any finite float, any int64, any keyword within the limits,
// any time of the years 1 to 9999 with nanoseconds.
func TestStringRoundTripLiterals(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var src string
		switch rapid.IntRange(0, 3).Draw(t, "type") {
		case 0:
			f := rapid.Float64().Filter(func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }).Draw(t, "float")
			if rapid.Bool().Draw(t, "bits") {
				f = math.Float64frombits(rapid.Uint64().Draw(t, "raw"))
				if math.IsNaN(f) || math.IsInf(f, 0) {
					f = 0
				}
			}
			src = "amount = " + lit(f)
		case 1:
			src = "n = " + lit(rapid.Int64().Draw(t, "int"))
		case 2:
			s := rapid.StringOfN(rapid.Rune(), 0, 40, MaxKeywordBytes).Filter(func(s string) bool {
				return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
			}).Draw(t, "keyword")
			src = "customer = " + lit(s)
		case 3:
			sec := rapid.Int64Range(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()).Draw(t, "sec")
			ns := rapid.Int64Range(0, 999999999).Draw(t, "ns")
			src = "due = " + lit(time.Unix(sec, ns).UTC())
		}
		e, err := Parse(src, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		back, err := Parse(e.String(), testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", e.String(), err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("%q printed %q, which parses to %#v", src, e.String(), back)
		}
		c := e.(*Cmp)
		if c.Field.Type == Float {
			if want, _ := strconv.ParseFloat(src[len("amount = "):], 64); math.Float64bits(c.Value.Float) != math.Float64bits(want) {
				t.Fatalf("%q parsed as %v", src, c.Value.Float)
			}
		}
	})
}
