package query

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	type myInt int16
	type myString string
	tm := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600))
	cases := []struct {
		name string
		t    Type
		v    any
		want Value
	}{
		{"nil", Int, nil, Value{}},
		{"keyword", Keyword, "abc", Value{Type: Keyword, Str: "abc"}},
		{"empty keyword", Keyword, "", Value{Type: Keyword}},
		{"named string", Keyword, myString("x"), Value{Type: Keyword, Str: "x"}},
		{"int", Int, 42, Value{Type: Int, Int: 42}},
		{"int8", Int, int8(-3), Value{Type: Int, Int: -3}},
		{"named int", Int, myInt(7), Value{Type: Int, Int: 7}},
		{"uint64 max int64", Int, uint64(math.MaxInt64), Value{Type: Int, Int: math.MaxInt64}},
		{"min int64", Int, int64(math.MinInt64), Value{Type: Int, Int: math.MinInt64}},
		{"float", Float, 1.5, Value{Type: Float, Float: 1.5}},
		{"float32", Float, float32(0.5), Value{Type: Float, Float: 0.5}},
		{"float from int", Float, 3, Value{Type: Float, Float: 3}},
		{"float from uint", Float, uint(3), Value{Type: Float, Float: 3}},
		{"bool", Bool, true, Value{Type: Bool, Bool: true}},
		{"time in UTC to the µs", Time, tm, Value{Type: Time, Time: time.Date(2026, 3, 4, 4, 6, 7, 123456000, time.UTC)}},
		{"list", KeywordList, []string{"a", "b"}, Value{Type: KeywordList, List: []string{"a", "b"}}},
		{"empty list unsets", KeywordList, []string{}, Value{}},
		{"nil list unsets", KeywordList, []string(nil), Value{}},
		{"value of the type", Int, Value{Type: Int, Int: 5}, Value{Type: Int, Int: 5}},
		{"zero value", Int, Value{}, Value{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Of(c.t, c.v)
			if err != nil {
				t.Fatalf("Of(%s, %#v): %v", c.t, c.v, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Of(%s, %#v) = %#v, want %#v", c.t, c.v, got, c.want)
			}
		})
	}
}

func TestOfRefuses(t *testing.T) {
	cases := []struct {
		name string
		t    Type
		v    any
	}{
		{"int as keyword", Keyword, 1},
		{"string as int", Int, "1"},
		{"float as int", Int, 1.0},
		{"uint64 beyond int64", Int, uint64(math.MaxInt64) + 1},
		{"string as float", Float, "1"},
		{"NaN", Float, math.NaN()},
		{"+Inf", Float, math.Inf(1)},
		{"-Inf float32", Float, float32(math.Inf(-1))},
		{"int as bool", Bool, 1},
		{"string as time", Time, "2026-01-01"},
		{"time before year 1", Time, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"time after 9999", Time, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"string as list", KeywordList, "a"},
		{"ints as list", KeywordList, []int{1}},
		{"keyword too long", Keyword, strings.Repeat("x", MaxKeywordBytes+1)},
		{"keyword invalid UTF-8", Keyword, "a\xffb"},
		{"keyword with NUL", Keyword, "a\x00b"},
		{"list too long", KeywordList, make([]string, MaxListLen+1)},
		{"list element too long", KeywordList, []string{"a", strings.Repeat("x", MaxKeywordBytes+1)}},
		{"list element with NUL", KeywordList, []string{"\x00"}},
		{"value of another type", Int, Value{Type: Keyword, Str: "1"}},
		{"invalid type", Invalid, 1},
		{"unknown type", Type(99), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Of(c.t, c.v)
			if !errors.Is(err, ErrTypeMismatch) {
				t.Fatalf("Of(%s, …) = %#v, %v; want ErrTypeMismatch", c.t, v, err)
			}
		})
	}
	// The limits themselves are accepted.
	if _, err := Of(Keyword, strings.Repeat("é", MaxKeywordBytes/2)); err != nil {
		t.Fatalf("keyword of %d bytes: %v", MaxKeywordBytes, err)
	}
	if _, err := Of(KeywordList, make([]string, MaxListLen)); err != nil {
		t.Fatalf("list of %d: %v", MaxListLen, err)
	}
}

func TestOfCopiesList(t *testing.T) {
	in := []string{"a"}
	v, err := Of(KeywordList, in)
	if err != nil {
		t.Fatal(err)
	}
	in[0] = "changed"
	if v.List[0] != "a" {
		t.Fatalf("Of kept the caller's slice: %v", v.List)
	}
	got := v.Any().([]string)
	got[0] = "changed"
	if v.List[0] != "a" {
		t.Fatalf("Any returned the value's slice: %v", v.List)
	}
}

func TestTypeNames(t *testing.T) {
	for typ := Keyword; typ <= KeywordList; typ++ {
		got, err := ParseType(typ.String())
		if err != nil || got != typ {
			t.Fatalf("ParseType(%q) = %v, %v", typ.String(), got, err)
		}
	}
	aliases := map[string]Type{
		"string": Keyword, "KEYWORD": Keyword, "integer": Int, "double": Float,
		"boolean": Bool, "datetime": Time, "keywords": KeywordList, " Int ": Int,
	}
	for s, want := range aliases {
		if got, err := ParseType(s); err != nil || got != want {
			t.Fatalf("ParseType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "invalid", "text", "list"} {
		if _, err := ParseType(s); !errors.Is(err, ErrInvalidDeclaration) {
			t.Fatalf("ParseType(%q) = %v; want ErrInvalidDeclaration", s, err)
		}
	}
	if got := Type(42).String(); got != "Type(42)" {
		t.Fatalf("Type(42).String() = %q", got)
	}
}

func TestAnyAndIsZero(t *testing.T) {
	tm := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	cases := []struct {
		v    Value
		want any
	}{
		{Value{}, nil},
		{Value{Type: Keyword, Str: "a"}, "a"},
		{Value{Type: Int, Int: 3}, int64(3)},
		{Value{Type: Float, Float: 2.5}, 2.5},
		{Value{Type: Bool, Bool: true}, true},
		{Value{Type: Time, Time: tm}, tm},
		{Value{Type: KeywordList, List: []string{"x"}}, []string{"x"}},
	}
	for _, c := range cases {
		if got := c.v.Any(); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%#v.Any() = %#v, want %#v", c.v, got, c.want)
		}
		if c.v.IsZero() != (c.want == nil) {
			t.Fatalf("%#v.IsZero() = %v", c.v, c.v.IsZero())
		}
	}
}

func TestCompare(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		a, b Value
		want int
	}{
		{Value{Type: Keyword, Str: "B"}, Value{Type: Keyword, Str: "a"}, -1}, // byte order: upper case first
		{Value{Type: Keyword, Str: "a"}, Value{Type: Keyword, Str: "a"}, 0},
		{Value{Type: Keyword, Str: "é"}, Value{Type: Keyword, Str: "z"}, 1},
		{Value{Type: Keyword, Str: "ab"}, Value{Type: Keyword, Str: "a"}, 1},
		{Value{Type: Int, Int: -5}, Value{Type: Int, Int: 3}, -1},
		{Value{Type: Int, Int: 3}, Value{Type: Int, Int: 3}, 0},
		{Value{Type: Float, Float: 2.5}, Value{Type: Float, Float: 2.25}, 1},
		{Value{Type: Float, Float: math.Copysign(0, -1)}, Value{Type: Float, Float: 0}, 0},
		{Value{Type: Bool, Bool: false}, Value{Type: Bool, Bool: true}, -1},
		{Value{Type: Bool, Bool: true}, Value{Type: Bool, Bool: false}, 1},
		{Value{Type: Bool, Bool: true}, Value{Type: Bool, Bool: true}, 0},
		{Value{Type: Time, Time: t1}, Value{Type: Time, Time: t1.Add(time.Microsecond)}, -1},
		{Value{Type: Time, Time: t1}, Value{Type: Time, Time: t1.In(time.FixedZone("Y", 7200))}, 0},
		{Value{Type: KeywordList, List: []string{"a"}}, Value{Type: KeywordList, List: []string{"a", "b"}}, -1},
		{Value{}, Value{Type: Keyword}, -1},
		{Value{Type: Float, Float: 1}, Value{Type: Int, Int: 5}, 1}, // by type
		{Value{}, Value{}, 0},
	}
	for _, c := range cases {
		if got := Compare(c.a, c.b); got != c.want {
			t.Fatalf("Compare(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Fatalf("Compare(%v, %v) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestValueJSON(t *testing.T) {
	cases := []struct {
		v    Value
		json string
	}{
		{Value{}, `null`},
		{Value{Type: Keyword, Str: "a\"'é"}, `{"type":"keyword","value":"a\"'é"}`},
		{Value{Type: Keyword}, `{"type":"keyword","value":""}`},
		{Value{Type: Int, Int: 12}, `{"type":"int","value":12}`},
		{Value{Type: Int, Int: math.MaxInt64}, `{"type":"int","value":9223372036854775807}`},
		{Value{Type: Int, Int: math.MinInt64}, `{"type":"int","value":-9223372036854775808}`},
		{Value{Type: Float, Float: 0.1}, `{"type":"float","value":0.1}`},
		{Value{Type: Float, Float: 3}, `{"type":"float","value":3}`},
		{Value{Type: Float, Float: 1e300}, `{"type":"float","value":1e+300}`},
		{Value{Type: Float, Float: math.SmallestNonzeroFloat64}, `{"type":"float","value":5e-324}`},
		{Value{Type: Float, Float: math.Copysign(0, -1)}, `{"type":"float","value":-0}`},
		{Value{Type: Bool, Bool: false}, `{"type":"bool","value":false}`},
		{Value{Type: Time, Time: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)}, `{"type":"time","value":"2026-01-02T03:04:05.123456Z"}`},
		{Value{Type: Time, Time: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)}, `{"type":"time","value":"2026-01-02T03:04:05.123456789Z"}`},
		{Value{Type: Time, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}, `{"type":"time","value":"0001-01-01T00:00:00Z"}`},
		{Value{Type: KeywordList, List: []string{"a", "b"}}, `{"type":"keyword_list","value":["a","b"]}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", c.v, err)
		}
		if string(b) != c.json {
			t.Fatalf("Marshal(%#v) = %s, want %s", c.v, b, c.json)
		}
		var back Value
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if !reflect.DeepEqual(back, c.v) {
			t.Fatalf("Unmarshal(%s) = %#v, want %#v", b, back, c.v)
		}
		if c.v.Type == Float && math.Signbit(back.Float) != math.Signbit(c.v.Float) {
			t.Fatalf("Unmarshal(%s) lost the sign of zero", b)
		}
	}
	// A time in another zone is written in UTC.
	b, _ := json.Marshal(Value{Type: Time, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("Z2", 7200))})
	if want := `{"type":"time","value":"2026-01-02T01:04:05Z"}`; string(b) != want {
		t.Fatalf("time in a zone: %s, want %s", b, want)
	}
	// Inside a map, as the history export writes attributes.
	m := map[string]Value{"amount": {Type: Float, Float: 12.5}, "gone": {}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var mb map[string]Value
	if err := json.Unmarshal(b, &mb); err != nil || !reflect.DeepEqual(mb, m) {
		t.Fatalf("map round trip: %s → %#v, %v", b, mb, err)
	}
}

func TestValueJSONRefuses(t *testing.T) {
	for _, s := range []string{
		`{"type":"nope","value":1}`,
		`{"type":"int","value":1.5}`,
		`{"type":"int","value":"1"}`,
		`{"type":"int","value":9223372036854775808}`,
		`{"type":"float","value":1e999}`,
		`{"type":"bool","value":1}`,
		`{"type":"time","value":"yesterday"}`,
		`{"type":"time","value":"0000-12-31T23:00:00Z"}`,
		`{"type":"keyword","value":3}`,
		`{"type":"keyword_list","value":"a"}`,
		`{"type":"keyword","value":"a\u0000"}`,
		`[1]`,
	} {
		var v Value
		if err := json.Unmarshal([]byte(s), &v); err == nil {
			t.Fatalf("Unmarshal(%s) = %#v, want an error", s, v)
		}
	}
	if _, err := json.Marshal(Value{Type: Float, Float: math.NaN()}); err == nil {
		t.Fatal("Marshal(NaN) succeeded")
	}
	// Aliases of type names are read.
	var v Value
	if err := json.Unmarshal([]byte(`{"type":"string","value":"x"}`), &v); err != nil || !reflect.DeepEqual(v, Value{Type: Keyword, Str: "x"}) {
		t.Fatalf("alias: %#v, %v", v, err)
	}
}

func TestBuiltins(t *testing.T) {
	want := map[string]Type{
		"id": Keyword, "workflow": Keyword, "status": Keyword, "custom_status": Keyword,
		"business_key": Keyword, "version": Keyword, "parent_id": Keyword,
		"created_at": Time, "updated_at": Time, "completed_at": Time,
	}
	all := Builtins()
	if len(all) != len(want) {
		t.Fatalf("Builtins() has %d fields, want %d", len(all), len(want))
	}
	for _, f := range all {
		if want[f.Name] != f.Type || f.Builtin.String() != f.Name {
			t.Fatalf("built-in %+v", f)
		}
		upper := strings.ToUpper(f.Name)
		got, ok := LookupBuiltin(upper)
		if !ok || got != f {
			t.Fatalf("LookupBuiltin(%q) = %+v, %v; want %+v", upper, got, ok, f)
		}
	}
	for _, name := range []string{"", "amount", "createdat", "ids", "attribute"} {
		if f, ok := LookupBuiltin(name); ok {
			t.Fatalf("LookupBuiltin(%q) = %+v", name, f)
		}
	}
	if Attribute.String() != "attribute" || Builtin(99).String() != "Builtin(99)" {
		t.Fatalf("Builtin strings: %q %q", Attribute.String(), Builtin(99).String())
	}
}

func TestValidName(t *testing.T) {
	for _, name := range []string{"a", "amount", "Customer_ID2", "a" + strings.Repeat("b", 63), "statuses", "id_"} {
		if err := ValidName(name); err != nil {
			t.Fatalf("ValidName(%q): %v", name, err)
		}
	}
	for _, name := range []string{
		"", "1a", "_a", "a-b", "a b", "é", "a" + strings.Repeat("b", 64),
		"id", "STATUS", "Created_At", "and", "Or", "NOT", "in", "between", "starts_with", "is", "null", "true", "False",
	} {
		if err := ValidName(name); !errors.Is(err, ErrInvalidDeclaration) {
			t.Fatalf("ValidName(%q) = %v; want ErrInvalidDeclaration", name, err)
		}
	}
}

func TestParseDeclarations(t *testing.T) {
	got, err := ParseDeclarations(" amount:float, customer : keyword ,tags:keywords,n:integer,ok:boolean,at:datetime,")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Type{"amount": Float, "customer": Keyword, "tags": KeywordList, "n": Int, "ok": Bool, "at": Time}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, s := range []string{"", "  "} {
		if got, err := ParseDeclarations(s); err != nil || len(got) != 0 {
			t.Fatalf("ParseDeclarations(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"amount", "amount:money", "status:keyword", "a:int,a:float", "1x:int", ":int", "a:"} {
		if _, err := ParseDeclarations(s); !errors.Is(err, ErrInvalidDeclaration) {
			t.Fatalf("ParseDeclarations(%q) = %v; want ErrInvalidDeclaration", s, err)
		}
	}
}

func TestValueString(t *testing.T) {
	cases := map[string]Value{
		"NULL":                          {},
		"'it''s'":                       {Type: Keyword, Str: "it's"},
		"-3":                            {Type: Int, Int: -3},
		"1e+21":                         {Type: Float, Float: 1e21},
		"true":                          {Type: Bool, Bool: true},
		"'2026-01-02T03:04:05.000001Z'": {Type: Time, Time: time.Date(2026, 1, 2, 3, 4, 5, 1000, time.UTC)},
		"('a', 'b''c')":                 {Type: KeywordList, List: []string{"a", "b'c"}},
	}
	for want, v := range cases {
		if got := v.String(); got != want {
			t.Fatalf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}

// FuzzValueJSON reads arbitrary JSON as a Value: it never panics, and what
// it reads writes back and reads again as the same Value.
func FuzzValueJSON(f *testing.F) {
	for _, s := range []string{
		`null`, `{"type":"int","value":12}`, `{"type":"float","value":-0}`, `{"type":"float","value":1e-400}`,
		`{"type":"keyword","value":"a\u00e9"}`, `{"type":"time","value":"2026-01-02T03:04:05.123456789+02:00"}`,
		`{"type":"keyword_list","value":[]}`, `{"type":"keyword_list","value":["a","b"]}`, `{"type":"bool","value":true}`,
		`{"type":"int"}`, `{"type":"int","value":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v Value
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%#v) (read from %s): %v", v, data, err)
		}
		var back Value
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Fatalf("%s read as %#v, written %s, read back as %#v", data, v, b, back)
		}
	})
}
