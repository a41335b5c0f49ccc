package query

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testSchema = SchemaOf(map[string]Type{
	"amount":   Float,
	"n":        Int,
	"customer": Keyword,
	"tags":     KeywordList,
	"ok":       Bool,
	"due":      Time,
})

var (
	fAmount   = Field{Name: "amount", Type: Float}
	fN        = Field{Name: "n", Type: Int}
	fCustomer = Field{Name: "customer", Type: Keyword}
	fTags     = Field{Name: "tags", Type: KeywordList}
	fOK       = Field{Name: "ok", Type: Bool}
	fDue      = Field{Name: "due", Type: Time}
	fStatus   = Field{Name: "status", Builtin: FieldStatus, Type: Keyword}
	fID       = Field{Name: "id", Builtin: FieldID, Type: Keyword}
	fCreated  = Field{Name: "created_at", Builtin: FieldCreatedAt, Type: Time}
)

func kw(s string) Value                { return Value{Type: Keyword, Str: s} }
func i64(n int64) Value                { return Value{Type: Int, Int: n} }
func f64(f float64) Value              { return Value{Type: Float, Float: f} }
func tm(t time.Time) Value             { return Value{Type: Time, Time: t} }
func bl(b bool) Value                  { return Value{Type: Bool, Bool: b} }
func cmp(f Field, op Op, v Value) *Cmp { return &Cmp{Field: f, Op: op, Value: v} }

func TestParse(t *testing.T) {
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		src  string
		want Expr
	}{
		// Operators.
		{"amount = 1.5", cmp(fAmount, Eq, f64(1.5))},
		{"amount != 1", cmp(fAmount, Ne, f64(1))},
		{"amount <> 1", cmp(fAmount, Ne, f64(1))},
		{"amount < -2", cmp(fAmount, Lt, f64(-2))},
		{"amount <= 1e3", cmp(fAmount, Le, f64(1000))},
		{"amount > 1.5E-2", cmp(fAmount, Gt, f64(0.015))},
		{"amount >= 2e+1", cmp(fAmount, Ge, f64(20))},
		{"amount>=2", cmp(fAmount, Ge, f64(2))},
		{"n = -9223372036854775808", cmp(fN, Eq, i64(math.MinInt64))},
		{"n = 9223372036854775807", cmp(fN, Eq, i64(math.MaxInt64))},
		{"customer = 'it''s'", cmp(fCustomer, Eq, kw("it's"))},
		{"customer = ''", cmp(fCustomer, Eq, kw(""))},
		{"customer = 'é ü 中'", cmp(fCustomer, Eq, kw("é ü 中"))},
		{"customer < 'b'", cmp(fCustomer, Lt, kw("b"))},
		{"ok = true", cmp(fOK, Eq, bl(true))},
		{"ok != FALSE", cmp(fOK, Ne, bl(false))},
		{"tags = 'a'", cmp(fTags, Eq, kw("a"))},
		{"tags != 'a'", cmp(fTags, Ne, kw("a"))},
		{"due = '2026-01-02'", cmp(fDue, Eq, tm(day))},
		{"due > '2026-01-02T03:04:05Z'", cmp(fDue, Gt, tm(day.Add(3*time.Hour+4*time.Minute+5*time.Second)))},
		{"due > '2026-01-02T03:04:05.123456789+02:00'", cmp(fDue, Gt, tm(time.Date(2026, 1, 2, 1, 4, 5, 123456000, time.UTC)))},
		{"created_at < '2026-01-02'", cmp(fCreated, Lt, tm(day))},
		// Built-ins, case-insensitive keywords and names.
		{"STATUS = 'running'", cmp(fStatus, Eq, kw("running"))},
		{"Id = 'x'", cmp(fID, Eq, kw("x"))},
		{"status in ('failed', 'terminated')", &In{Field: fStatus, Values: []Value{kw("failed"), kw("terminated")}}},
		{"status STARTS_WITH 'fa'", &Prefix{Field: fStatus, Prefix: "fa"}},
		// IN, NOT IN.
		{"n IN (1)", &In{Field: fN, Values: []Value{i64(1)}}},
		{"n IN (1, 2,3)", &In{Field: fN, Values: []Value{i64(1), i64(2), i64(3)}}},
		{"n NOT IN (1, 2)", &Not{X: &In{Field: fN, Values: []Value{i64(1), i64(2)}}}},
		{"tags in ('a','b')", &In{Field: fTags, Values: []Value{kw("a"), kw("b")}}},
		// BETWEEN, NOT BETWEEN.
		{"n BETWEEN 1 AND 5", &And{Terms: []Expr{cmp(fN, Ge, i64(1)), cmp(fN, Le, i64(5))}}},
		{"n not between 1 and 5", &Not{X: &And{Terms: []Expr{cmp(fN, Ge, i64(1)), cmp(fN, Le, i64(5))}}}},
		{"due BETWEEN '2026-01-02' AND '2026-01-03'", &And{Terms: []Expr{cmp(fDue, Ge, tm(day)), cmp(fDue, Le, tm(day.AddDate(0, 0, 1)))}}},
		// STARTS_WITH.
		{"customer STARTS_WITH 'ac'", &Prefix{Field: fCustomer, Prefix: "ac"}},
		{"tags starts_with ''", &Prefix{Field: fTags, Prefix: ""}},
		// IS [NOT] NULL.
		{"amount IS NULL", &Not{X: &Exists{Field: fAmount}}},
		{"amount is not null", &Exists{Field: fAmount}},
		{"ok IS NOT NULL", &Exists{Field: fOK}},
		{"tags IS NULL", &Not{X: &Exists{Field: fTags}}},
		// AND, OR, NOT, precedence, parentheses, flattening.
		{"n = 1 AND n = 2", &And{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2))}}},
		{"n = 1 OR n = 2", &Or{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2))}}},
		{"n = 1 OR n = 2 AND n = 3", &Or{Terms: []Expr{cmp(fN, Eq, i64(1)), &And{Terms: []Expr{cmp(fN, Eq, i64(2)), cmp(fN, Eq, i64(3))}}}}},
		{"(n = 1 OR n = 2) AND n = 3", &And{Terms: []Expr{&Or{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2))}}, cmp(fN, Eq, i64(3))}}},
		{"n = 1 AND (n = 2 AND n = 3)", &And{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2)), cmp(fN, Eq, i64(3))}}},
		{"(n = 1 OR n = 2) OR (n = 3 OR n = 4)", &Or{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2)), cmp(fN, Eq, i64(3)), cmp(fN, Eq, i64(4))}}},
		{"n = 1 AND n BETWEEN 2 AND 3", &And{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Ge, i64(2)), cmp(fN, Le, i64(3))}}},
		{"NOT n = 1", &Not{X: cmp(fN, Eq, i64(1))}},
		{"NOT n = 1 AND n = 2", &And{Terms: []Expr{&Not{X: cmp(fN, Eq, i64(1))}, cmp(fN, Eq, i64(2))}}},
		{"NOT (n = 1 OR n = 2)", &Not{X: &Or{Terms: []Expr{cmp(fN, Eq, i64(1)), cmp(fN, Eq, i64(2))}}}},
		{"not not n = 1", &Not{X: &Not{X: cmp(fN, Eq, i64(1))}}},
		{"((((n = 1))))", cmp(fN, Eq, i64(1))},
		{"  \t\nn\n=\n1  ", cmp(fN, Eq, i64(1))},
		// Literals stay literal.
		{"customer = 'x'' OR ''1''=''1'", cmp(fCustomer, Eq, kw("x' OR '1'='1"))},
		{"customer = '''; DROP TABLE instances; --'", cmp(fCustomer, Eq, kw("'; DROP TABLE instances; --"))},
		{"customer = 'a\nb\\'", cmp(fCustomer, Eq, kw("a\nb\\"))},
		{"customer = '\"$where\": {}'", cmp(fCustomer, Eq, kw("\"$where\": {}"))},
		// Empty.
		{"", nil},
		{"   \n", nil},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			got, err := Parse(c.src, testSchema)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.src, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse(%q) =\n  %#v\nwant\n  %#v", c.src, got, c.want)
			}
			if got == nil {
				return
			}
			back, err := Parse(got.String(), testSchema)
			if err != nil {
				t.Fatalf("Parse(%q) (printed from %q): %v", got.String(), c.src, err)
			}
			if !reflect.DeepEqual(back, got) {
				t.Fatalf("%q printed %q, which parses to %#v", c.src, got.String(), back)
			}
		})
	}
}

func TestString(t *testing.T) {
	cases := map[string]string{
		"amount = 1.5":                        "amount = 1.5",
		"amount = 1e21":                       "amount = 1e+21",
		"amount = 0.1":                        "amount = 0.1",
		"n <> 3":                              "n != 3",
		"customer = 'it''s'":                  "customer = 'it''s'",
		"STATUS = 'running'":                  "status = 'running'",
		"due = '2026-01-02'":                  "due = '2026-01-02T00:00:00Z'",
		"due = '2026-01-02T03:04:05.1+01:00'": "due = '2026-01-02T02:04:05.1Z'",
		"n not in (1, 2)":                     "n NOT IN (1, 2)",
		"n between 1 and 2":                   "n >= 1 AND n <= 2",
		"n not between 1 and 2":               "n NOT BETWEEN 1 AND 2",
		"NOT (n >= 1 AND n <= 2)":             "n NOT BETWEEN 1 AND 2",
		"NOT (n >= 1 AND n < 2)":              "NOT (n >= 1 AND n < 2)",
		"amount is null":                      "amount IS NULL",
		"amount is not null":                  "amount IS NOT NULL",
		"not amount is not null":              "amount IS NULL",
		"tags starts_with 'a'":                "tags STARTS_WITH 'a'",
		"ok = true and (n = 1 or n = 2)":      "ok = true AND (n = 1 OR n = 2)",
		"ok = true or n = 1 and n = 2":        "ok = true OR n = 1 AND n = 2",
		"not (ok = true or n = 1)":            "NOT (ok = true OR n = 1)",
		"not n = 1":                           "NOT n = 1",
		"customer in ('a', 'b''c')":           "customer IN ('a', 'b''c')",
		"created_at > '2026-01-01T00:00:00Z'": "created_at > '2026-01-01T00:00:00Z'",
	}
	for src, want := range cases {
		e, err := Parse(src, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if got := e.String(); got != want {
			t.Fatalf("Parse(%q).String() = %q, want %q", src, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src  string
		pos  int
		want string // a part of the message
	}{
		{"amount", 6, "want an operator"},
		{"amount =", 8, "want a number for amount"},
		{"amount = 'x'", 9, "want a number for amount, a float field"},
		{"amount = 1e999", 9, "out of range"},
		{"n = 1.5", 4, "want an integer for n, an int field"},
		{"n = 1e3", 4, "want an integer"},
		{"n = 9223372036854775808", 4, "out of range"},
		{"n = '1'", 4, "want an integer"},
		{"n = 1x", 4, "malformed number"},
		{"n = 1.", 4, "malformed number"},
		{"n = -", 4, "malformed number"},
		{"n = 1e", 4, "malformed number"},
		{"customer = 1", 11, "want a string for customer"},
		{"customer = x", 11, "want a string"},
		{"customer = true", 11, "want a string"},
		{"ok = 'true'", 5, "want true or false"},
		{"ok < true", 3, "operator < does not apply to ok, a bool field"},
		{"ok IN (true)", 3, "IN does not apply to ok"},
		{"ok BETWEEN false AND true", 3, "BETWEEN does not apply to ok"},
		{"ok STARTS_WITH 't'", 3, "STARTS_WITH does not apply to ok"},
		{"tags > 'a'", 5, "operator > does not apply to tags, a keyword_list field"},
		{"tags BETWEEN 'a' AND 'b'", 5, "BETWEEN does not apply to tags"},
		{"n STARTS_WITH '1'", 2, "STARTS_WITH does not apply to n"},
		{"due STARTS_WITH '2026'", 4, "STARTS_WITH does not apply"},
		{"customer STARTS_WITH 1", 21, "want a string after STARTS_WITH"},
		{"due = 'yesterday'", 6, "is not a time"},
		{"due = '2026-13-01'", 6, "is not a time"},
		{"due = '0000-01-01'", 6, "is not a time"},
		{"due = 1", 6, "want a time"},
		{"status = 'done'", 9, `unknown status 'done': want one of running, suspended, completed, failed, terminated`},
		{"status = 'Running'", 9, "unknown status"},
		{"status IN ('running', 'paused')", 22, "unknown status 'paused'"},
		{"amount2 = 1", 0, `unknown field "amount2" (declare it as a search attribute)`},
		{"n = 1 AND Amount = 1", 10, `unknown field "Amount"`},
		{"customer = 'abc", 11, "unterminated string"},
		{"customer = 'it''s", 11, "unterminated string"},
		{"'x' = customer", 0, "want a field name"},
		{"= 1", 0, "want a field name"},
		{"AND n = 1", 0, "want a field name"},
		{"n = 1 AND", 9, "want a field name"},
		{"n = 1 OR OR n = 2", 9, "want a field name"},
		{"n = 1 n = 2", 6, "want AND, OR or the end of the query"},
		{"n = 1)", 5, `unexpected ")": want AND, OR or the end`},
		{"(n = 1", 6, `want ")" to close the "(" at position 0`},
		{"()", 1, "want a field name"},
		{"n IN ()", 6, "want an integer"},
		{"n IN 1", 5, `want "(" after IN`},
		{"n IN (1 2)", 8, `want "," or ")"`},
		{"n IN (1,)", 8, "want an integer"},
		{"n IN (1", 7, `want "," or ")"`},
		{"n NOT = 1", 6, "want IN or BETWEEN"},
		{"n BETWEEN 1", 11, "want AND between the bounds"},
		{"n BETWEEN 1 OR 2", 12, "want AND between the bounds"},
		{"n IS 1", 5, "want NULL after IS"},
		{"n IS NOT", 8, "want NULL after IS"},
		{"n == 1", 3, "want an integer"},
		{"n ! 1", 2, `unexpected "!"`},
		{"n = 1 && n = 2", 6, "unexpected character '&'"},
		{"n = 1; n = 2", 5, "unexpected character ';'"},
		{"n = \"1\"", 4, "unexpected character '\"'"},
		{"n = 1 -- comment", 6, "malformed number"},
		{"customer = 'a\x00b'", 11, "NUL"},
		{"customer = '" + strings.Repeat("x", MaxKeywordBytes+1) + "'", 11, "a keyword of 1025 bytes"},
		{"NOT", 3, "want a field name"},
		{"not = 1", 4, "want a field name"},
		{"in = 1", 0, "want a field name"},
		{"é = 1", 0, "unexpected character 'é'"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			e, err := Parse(c.src, testSchema)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", c.src, e)
			}
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalidQuery", c.src, err)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %T is not a *SyntaxError", c.src, err)
			}
			if se.Pos != c.pos || !strings.Contains(se.Msg, c.want) {
				t.Fatalf("Parse(%q) = %q at %d; want %q at %d", c.src, se.Msg, se.Pos, c.want, c.pos)
			}
			if !strings.Contains(err.Error(), "position") {
				t.Fatalf("error %q does not name the position", err)
			}
		})
	}
}

func TestParseNilSchema(t *testing.T) {
	e, err := Parse("status = 'running' AND created_at > '2026-01-01'", nil)
	if err != nil || e == nil {
		t.Fatalf("built-ins without a schema: %v, %v", e, err)
	}
	if _, err := Parse("amount = 1", nil); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("an attribute without a schema: %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	check := func(t *testing.T, src string, ok bool, want string) {
		t.Helper()
		e, err := Parse(src, testSchema)
		if ok {
			if err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if _, err := Parse(e.String(), testSchema); err != nil {
				t.Fatalf("printed at the limit: %v", err)
			}
			return
		}
		if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), want) {
			t.Fatalf("beyond the limit: %v, want %q", err, want)
		}
	}
	t.Run("length", func(t *testing.T) {
		src := "customer = '" + strings.Repeat("x", 1000) + "'"
		src += strings.Repeat(" ", MaxLength-len(src))
		check(t, src, true, "")
		check(t, src+" ", false, "at most 16384")
	})
	t.Run("1 MiB refused before lexing", func(t *testing.T) {
		// Not valid UTF-8 and unterminated: the length is what is reported.
		src := "customer = '\xff" + strings.Repeat("(", 1<<20)
		_, err := Parse(src, testSchema)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "bytes long") {
			t.Fatalf("1 MiB: %v", err)
		}
	})
	t.Run("depth of parentheses", func(t *testing.T) {
		src := func(n int) string { return strings.Repeat("(", n) + "n = 1" + strings.Repeat(")", n) }
		check(t, src(MaxDepth), true, "")
		check(t, src(MaxDepth+1), false, "more than 32 levels")
	})
	t.Run("depth of NOT", func(t *testing.T) {
		src := func(n int) string { return strings.Repeat("NOT ", n) + "n = 1" }
		check(t, src(MaxDepth), true, "")
		check(t, src(MaxDepth+1), false, "more than 32 levels")
	})
	t.Run("depth of both", func(t *testing.T) {
		src := func(n int) string { return strings.Repeat("NOT (", n) + "n = 1" + strings.Repeat(")", n) }
		check(t, src(MaxDepth/2), true, "")
		check(t, src(MaxDepth/2+1), false, "more than 32 levels")
	})
	t.Run("sibling parentheses do not add up", func(t *testing.T) {
		one := strings.Repeat("(", MaxDepth) + "n = 1" + strings.Repeat(")", MaxDepth)
		check(t, one+" AND "+one+" OR "+one, true, "")
	})
	t.Run("10000 nested parentheses", func(t *testing.T) {
		// Balanced, the text is beyond MaxLength; opening only, it is
		// not, and the depth is what refuses it. Neither recurses deep.
		for _, c := range []struct {
			src string
			pos int
		}{
			{strings.Repeat("(", 10000) + "n = 1" + strings.Repeat(")", 10000), MaxLength},
			{strings.Repeat("(", 10000) + "n = 1", MaxDepth},
			{strings.Repeat("NOT ", 4000) + "n = 1", 4 * MaxDepth},
		} {
			start := time.Now()
			_, err := Parse(c.src, testSchema)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos != c.pos {
				t.Fatalf("got %v, want an error at %d", err, c.pos)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v", d)
			}
		}
	})
	t.Run("IN values", func(t *testing.T) {
		src := func(n int) string {
			vals := make([]string, n)
			for i := range vals {
				vals[i] = "1"
			}
			return "n IN (" + strings.Join(vals, ",") + ")"
		}
		check(t, src(MaxInValues), true, "")
		check(t, src(MaxInValues+1), false, "more than 1000 values")
	})
	t.Run("terms", func(t *testing.T) {
		src := func(n int) string { return "n = 1" + strings.Repeat(" OR n = 1", n-1) }
		check(t, src(MaxTerms), true, "")
		check(t, src(MaxTerms+1), false, "more than 256 terms")
	})
	t.Run("BETWEEN counts two terms", func(t *testing.T) {
		src := func(n int) string { return "n BETWEEN 1 AND 2" + strings.Repeat(" OR n BETWEEN 1 AND 2", n-1) }
		check(t, src(MaxTerms/2), true, "")
		check(t, src(MaxTerms/2)+" OR n = 1", false, "more than 256 terms")
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		for _, src := range []string{"customer = '\xff'", "n = 1 \xc3", "\xed\xa0\x80 = 1"} {
			_, err := Parse(src, testSchema)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("Parse(%q): %v", src, err)
			}
		}
		var se *SyntaxError
		if _, err := Parse("n = 1 \xc3", testSchema); !errors.As(err, &se) || se.Pos != 6 {
			t.Fatalf("position of invalid UTF-8: %v", err)
		}
	})
}

func TestParseField(t *testing.T) {
	for name, want := range map[string]Field{
		"status":        fStatus,
		"Created_At":    fCreated,
		" amount ":      fAmount,
		"tags":          fTags,
		"business_key":  {Name: "business_key", Builtin: FieldBusinessKey, Type: Keyword},
		"completed_at":  {Name: "completed_at", Builtin: FieldCompletedAt, Type: Time},
		"custom_status": {Name: "custom_status", Builtin: FieldCustomStatus, Type: Keyword},
	} {
		got, err := ParseField(name, testSchema)
		if err != nil || got != want {
			t.Fatalf("ParseField(%q) = %+v, %v; want %+v", name, got, err, want)
		}
	}
	for name, want := range map[string]string{
		"":          "want a field name",
		"amount2":   `unknown field "amount2" (declare it as a search attribute)`,
		"a b":       "is not a field name",
		"status; x": "is not a field name",
	} {
		_, err := ParseField(name, testSchema)
		if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), want) {
			t.Fatalf("ParseField(%q) = %v; want %q", name, err, want)
		}
	}
}

func TestSyntaxError(t *testing.T) {
	err := error(&SyntaxError{Pos: 7, Msg: "boom"})
	if got, want := err.Error(), "query: invalid query at position 7: boom"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalidQuery) {
		t.Fatal("does not wrap ErrInvalidQuery")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "amount = 1.5", "n = -3", "customer = 'it''s'", "tags IN ('a', 'b')",
		"status NOT IN ('running')", "n BETWEEN 1 AND 2", "n NOT BETWEEN 1 AND 2",
		"NOT (n >= 1 AND n <= 2)", "amount IS NULL", "amount IS NOT NULL",
		"customer STARTS_WITH 'ac'", "(n = 1 OR n = 2) AND NOT ok = true",
		"due > '2026-01-02T03:04:05.123456789+02:00'", "created_at < '2026-01-02'",
		"amount = 1e308", "amount = 5e-324", "amount = -0", "customer = '\"; DROP TABLE x; --'",
		"x' OR '1'='1", "NOT NOT NOT n = 1", "((n = 1))", "n IN (1,", "customer = 'abc",
		"n = 1 OR (n = 2 OR (n = 3 AND (ok != false)))", "tags != 'a' AND tags STARTS_WITH ''",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src, testSchema)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("Parse(%q): %v (%T)", src, err, err)
			}
			return
		}
		if e == nil {
			if strings.TrimSpace(src) != "" {
				t.Fatalf("Parse(%q) = nil", src)
			}
			return
		}
		printed := e.String()
		back, err := Parse(printed, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q: %v", src, printed, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("Parse(%q) printed %q, parsed back as %q", src, printed, back.String())
		}
	})
}

// TestParseLexErrorsEverywhere checks that a bad character is reported
// wherever the parser reads the next token.
func TestParseLexErrorsEverywhere(t *testing.T) {
	for _, src := range []string{
		"!", "NOT !", "( !", "(n = 1 !", "n !", "n = !", "n = 1 !", "n = 1 AND !", "n = 1 OR !",
		"n IN !", "n IN ( !", "n IN (1 !", "n IN (1, !", "n IN (1) !",
		"n NOT !", "n NOT IN !", "n NOT BETWEEN !", "n BETWEEN !", "n BETWEEN 1 !", "n BETWEEN 1 AND !", "n BETWEEN 1 AND 2 !",
		"customer STARTS_WITH !", "customer STARTS_WITH 'a' !", "n IS !", "n IS NOT !", "n IS NULL !", "n IS NOT NULL !",
		"ok = true !", "(n = 1) !",
	} {
		_, err := Parse(src, testSchema)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos != strings.IndexByte(src, '!') || !strings.Contains(se.Msg, `unexpected "!"`) {
			t.Fatalf("Parse(%q) = %v; want unexpected \"!\" at %d", src, err, strings.IndexByte(src, '!'))
		}
	}
	// A long literal is shortened in a message.
	_, err := Parse("n = '"+strings.Repeat("é", 100)+"'", testSchema)
	if err == nil || !strings.Contains(err.Error(), "…") || len(err.Error()) > 200 {
		t.Fatalf("long literal in a message: %v", err)
	}
}

func TestStringOfBuiltExprs(t *testing.T) {
	// A built-in named by its Builtin alone prints its name.
	e := &Or{Terms: []Expr{
		&Cmp{Field: Field{Builtin: FieldWorkflow, Type: Keyword}, Op: Eq, Value: kw("orders")},
		&Not{X: &Prefix{Field: fCustomer, Prefix: "a'b"}},
	}}
	want := "workflow = 'orders' OR NOT customer STARTS_WITH 'a''b'"
	if got := e.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for op, s := range map[Op]string{Eq: "=", Ne: "!=", Lt: "<", Le: "<=", Gt: ">", Ge: ">=", 0: "Op(0)", 9: "Op(9)"} {
		if op.String() != s {
			t.Fatalf("Op(%d).String() = %q, want %q", op, op.String(), s)
		}
	}
	if Attribute.Type() != Invalid || FieldVersion.Type() != Keyword || FieldUpdatedAt.Type() != Time || Builtin(99).Type() != Invalid {
		t.Fatal("Builtin.Type")
	}
}
