package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of values and declarations.
const (
	// MaxKeywordBytes is the longest keyword, and the longest element of
	// a keyword list, in bytes.
	MaxKeywordBytes = 1024
	// MaxListLen is the most elements a keyword list holds.
	MaxListLen = 64
	// MaxAttributes is the most search attributes one instance holds.
	MaxAttributes = 64
	// maxNameBytes is the longest attribute name.
	maxNameBytes = 64
)

// ErrInvalidDeclaration wraps the errors of [ValidName] and
// [ParseDeclarations]: a name that cannot be declared, an unknown type.
var ErrInvalidDeclaration = errors.New("query: invalid search attribute declaration")

var typeNames = [...]string{
	Invalid:     "invalid",
	Keyword:     "keyword",
	Int:         "int",
	Float:       "float",
	Bool:        "bool",
	Time:        "time",
	KeywordList: "keyword_list",
}

// String returns the type's name as Value JSON spells it: "keyword",
// "int", "float", "bool", "time" or "keyword_list".
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType reads a type name, case-insensitively: the names of
// [Type.String] and the aliases "string" (keyword), "boolean", "double",
// "integer", "datetime" and "keywords".
func ParseType(s string) (Type, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "keyword", "string":
		return Keyword, nil
	case "int", "integer":
		return Int, nil
	case "float", "double":
		return Float, nil
	case "bool", "boolean":
		return Bool, nil
	case "time", "datetime":
		return Time, nil
	case "keyword_list", "keywords":
		return KeywordList, nil
	}
	return Invalid, fmt.Errorf("%w: unknown type %q (want keyword, int, float, bool, time or keyword_list)", ErrInvalidDeclaration, s)
}

// Any returns the Go value of v: nil when v is unset, else a string, an
// int64, a float64, a bool, a time.Time or a []string (a copy).
func (v Value) Any() any {
	switch v.Type {
	case Keyword:
		return v.Str
	case Int:
		return v.Int
	case Float:
		return v.Float
	case Bool:
		return v.Bool
	case Time:
		return v.Time
	case KeywordList:
		return slices.Clone(v.List)
	}
	return nil
}

// IsZero reports whether v is the zero Value: no value, an attribute unset.
func (v Value) IsZero() bool { return v.Type == Invalid }

// String returns v as a query literal: a quoted string, a number, true or
// false, a quoted RFC 3339 time; a list as a parenthesized list; NULL when
// v is unset.
func (v Value) String() string {
	switch v.Type {
	case Keyword:
		return quote(v.Str)
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		return formatFloat(v.Float)
	case Bool:
		return strconv.FormatBool(v.Bool)
	case Time:
		return quote(formatTime(v.Time))
	case KeywordList:
		parts := make([]string, len(v.List))
		for i, s := range v.List {
			parts[i] = quote(s)
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return "NULL"
}

// Compare orders two values: -1 when a < b, 0 when equal, +1 when a > b.
// Values of one type compare by value (keywords in byte order, numbers
// numerically, times by instant, false before true, lists element by
// element); values of different types compare by their Type, the zero
// Value first.
func Compare(a, b Value) int {
	if a.Type != b.Type {
		if a.Type < b.Type {
			return -1
		}
		return 1
	}
	switch a.Type {
	case Keyword:
		return strings.Compare(a.Str, b.Str)
	case Int:
		switch {
		case a.Int < b.Int:
			return -1
		case a.Int > b.Int:
			return 1
		}
		return 0
	case Float:
		switch {
		case a.Float < b.Float:
			return -1
		case a.Float > b.Float:
			return 1
		}
		return 0
	case Bool:
		switch {
		case a.Bool == b.Bool:
			return 0
		case b.Bool:
			return -1
		}
		return 1
	case Time:
		return a.Time.Compare(b.Time)
	case KeywordList:
		return slices.Compare(a.List, b.List)
	}
	return 0
}

// Of converts a Go value to a Value of type t, wrapping ErrTypeMismatch
// when v is not of that type: Keyword takes a string, Int any integer
// type, Float a float or an integer, Bool a bool, Time a time.Time (kept
// in UTC, truncated to the microsecond), KeywordList a []string. A nil v
// gives the zero Value: the attribute is unset.
//
// Named types of those kinds are taken too, and so is a Value of type t
// (or the zero Value). A value beyond the limits (a keyword longer than
// [MaxKeywordBytes], not valid UTF-8 or holding NUL; a list longer than
// [MaxListLen]; a NaN or infinite float; a time outside the years 1 to
// 9999) is refused with an error wrapping ErrTypeMismatch too. An empty
// list gives the zero Value.
func Of(t Type, v any) (Value, error) {
	if v == nil {
		return Value{}, nil
	}
	if t == Invalid || t > KeywordList {
		return Value{}, fmt.Errorf("%w: no such type %s", ErrTypeMismatch, t)
	}
	if val, ok := v.(Value); ok {
		if val.Type == Invalid {
			return Value{}, nil
		}
		if val.Type != t {
			return Value{}, fmt.Errorf("%w: want %s, got %s value", ErrTypeMismatch, article(t), article(val.Type))
		}
		return Of(t, val.Any())
	}
	mismatch := func() (Value, error) {
		return Value{}, fmt.Errorf("%w: want %s, got %T", ErrTypeMismatch, article(t), v)
	}
	rv := reflect.ValueOf(v)
	switch t {
	case Keyword:
		if rv.Kind() != reflect.String {
			return mismatch()
		}
		s := rv.String()
		if err := checkKeyword(s); err != nil {
			return Value{}, fmt.Errorf("%w: %v", ErrTypeMismatch, err)
		}
		return Value{Type: Keyword, Str: s}, nil
	case Int:
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return Value{Type: Int, Int: rv.Int()}, nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			u := rv.Uint()
			if u > math.MaxInt64 {
				return Value{}, fmt.Errorf("%w: %d does not fit an int64", ErrTypeMismatch, u)
			}
			return Value{Type: Int, Int: int64(u)}, nil
		}
		return mismatch()
	case Float:
		var f float64
		switch rv.Kind() {
		case reflect.Float32, reflect.Float64:
			f = rv.Float()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f = float64(rv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			f = float64(rv.Uint())
		default:
			return mismatch()
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return Value{}, fmt.Errorf("%w: %v is not a finite number", ErrTypeMismatch, f)
		}
		return Value{Type: Float, Float: f}, nil
	case Bool:
		if rv.Kind() != reflect.Bool {
			return mismatch()
		}
		return Value{Type: Bool, Bool: rv.Bool()}, nil
	case Time:
		tm, ok := v.(time.Time)
		if !ok {
			return mismatch()
		}
		tm = tm.UTC().Truncate(time.Microsecond)
		if err := checkTime(tm); err != nil {
			return Value{}, fmt.Errorf("%w: %v", ErrTypeMismatch, err)
		}
		return Value{Type: Time, Time: tm}, nil
	case KeywordList:
		if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() != reflect.String {
			return mismatch()
		}
		n := rv.Len()
		if n == 0 {
			return Value{}, nil
		}
		if n > MaxListLen {
			return Value{}, fmt.Errorf("%w: a keyword list of %d elements (at most %d)", ErrTypeMismatch, n, MaxListLen)
		}
		list := make([]string, n)
		for i := range n {
			s := rv.Index(i).String()
			if err := checkKeyword(s); err != nil {
				return Value{}, fmt.Errorf("%w: element %d: %v", ErrTypeMismatch, i, err)
			}
			list[i] = s
		}
		return Value{Type: KeywordList, List: list}, nil
	}
	return mismatch()
}

// checkKeyword checks the limits of a keyword.
func checkKeyword(s string) error {
	if len(s) > MaxKeywordBytes {
		return fmt.Errorf("a keyword of %d bytes (at most %d)", len(s), MaxKeywordBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("a keyword that is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("a keyword holding a NUL byte")
	}
	return nil
}

// checkTime checks that a time can be written in RFC 3339.
func checkTime(t time.Time) error {
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("a time in the year %d (want 1 to 9999)", y)
	}
	return nil
}

// article writes a type's name after "a" or "an".
func article(t Type) string {
	if t == Int || t == Invalid {
		return "an " + t.String()
	}
	return "a " + t.String()
}

// formatFloat writes a float so that strconv.ParseFloat reads it back
// exactly.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// formatTime writes a time in RFC 3339 with nanoseconds, in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// quote writes a string literal, a quote inside doubled.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// valueJSON is the JSON form of a set Value.
type valueJSON struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// MarshalJSON writes null for the zero Value, else {"type":T,"value":V}
// with T the type's name ([Type.String]) and V a JSON string, number,
// boolean or array of strings; a time is an RFC 3339 string with
// nanoseconds, in UTC.
func (v Value) MarshalJSON() ([]byte, error) {
	var raw []byte
	var err error
	switch v.Type {
	case Invalid:
		return []byte("null"), nil
	case Keyword:
		raw, err = json.Marshal(v.Str)
	case Int:
		raw = strconv.AppendInt(nil, v.Int, 10)
	case Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return nil, fmt.Errorf("%w: %v is not a finite number", ErrTypeMismatch, v.Float)
		}
		raw, err = json.Marshal(v.Float)
	case Bool:
		raw = strconv.AppendBool(nil, v.Bool)
	case Time:
		raw, err = json.Marshal(formatTime(v.Time))
	case KeywordList:
		list := v.List
		if list == nil {
			list = []string{}
		}
		raw, err = json.Marshal(list)
	default:
		return nil, fmt.Errorf("query: cannot marshal a value of %s", v.Type)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(valueJSON{Type: v.Type.String(), Value: raw})
}

// UnmarshalJSON reads what MarshalJSON writes (null gives the zero Value);
// the type name may be any that [ParseType] reads.
func (v *Value) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*v = Value{}
		return nil
	}
	var j valueJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("query: value: %w", err)
	}
	t, err := ParseType(j.Type)
	if err != nil {
		return fmt.Errorf("query: value: %w", err)
	}
	if len(j.Value) == 0 || bytes.Equal(bytes.TrimSpace(j.Value), []byte("null")) {
		*v = Value{}
		return nil
	}
	dec := func(dst any) error {
		if err := json.Unmarshal(j.Value, dst); err != nil {
			return fmt.Errorf("query: %s value: %w", t, err)
		}
		return nil
	}
	number := func() (string, error) {
		n := strings.TrimSpace(string(j.Value))
		if n == "" || !(n[0] == '-' || isDigit(n[0])) {
			return "", fmt.Errorf("%w: %s value %s is not a number", ErrTypeMismatch, t, n)
		}
		return n, nil
	}
	var out Value
	switch t {
	case Keyword:
		var s string
		if err := dec(&s); err != nil {
			return err
		}
		out, err = Of(Keyword, s)
	case Int:
		n, err := number()
		if err != nil {
			return err
		}
		i, perr := strconv.ParseInt(n, 10, 64)
		if perr != nil {
			return fmt.Errorf("%w: int value %s", ErrTypeMismatch, n)
		}
		out = Value{Type: Int, Int: i}
	case Float:
		n, err := number()
		if err != nil {
			return err
		}
		f, perr := strconv.ParseFloat(n, 64)
		if perr != nil {
			return fmt.Errorf("%w: float value %s", ErrTypeMismatch, n)
		}
		out, err = Of(Float, f)
	case Bool:
		var b bool
		if err := dec(&b); err != nil {
			return err
		}
		out = Value{Type: Bool, Bool: b}
	case Time:
		var s string
		if err := dec(&s); err != nil {
			return err
		}
		tm, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			return fmt.Errorf("%w: time value: %v", ErrTypeMismatch, perr)
		}
		if err := checkTime(tm.UTC()); err != nil {
			return fmt.Errorf("%w: %v", ErrTypeMismatch, err)
		}
		out = Value{Type: Time, Time: tm.UTC()}
	case KeywordList:
		var list []string
		if err := dec(&list); err != nil {
			return err
		}
		out, err = Of(KeywordList, list)
	}
	if err != nil {
		return err
	}
	*v = out
	return nil
}

var builtinNames = [...]string{
	Attribute:         "attribute",
	FieldID:           "id",
	FieldWorkflow:     "workflow",
	FieldStatus:       "status",
	FieldCustomStatus: "custom_status",
	FieldBusinessKey:  "business_key",
	FieldVersion:      "version",
	FieldParentID:     "parent_id",
	FieldCreatedAt:    "created_at",
	FieldUpdatedAt:    "updated_at",
	FieldCompletedAt:  "completed_at",
}

// String returns the built-in field's name as queries spell it ("id",
// "created_at"…), "attribute" for Attribute.
func (b Builtin) String() string {
	if int(b) < len(builtinNames) {
		return builtinNames[b]
	}
	return "Builtin(" + strconv.Itoa(int(b)) + ")"
}

// Type returns the type of the built-in field: Time for the times,
// Keyword for the others, Invalid for Attribute.
func (b Builtin) Type() Type {
	switch b {
	case Attribute:
		return Invalid
	case FieldCreatedAt, FieldUpdatedAt, FieldCompletedAt:
		return Time
	}
	if int(b) < len(builtinNames) {
		return Keyword
	}
	return Invalid
}

// Builtins lists the built-in fields, in the order of their constants.
func Builtins() []Field {
	out := make([]Field, 0, len(builtinNames)-1)
	for b := FieldID; int(b) < len(builtinNames); b++ {
		out = append(out, Field{Name: b.String(), Builtin: b, Type: b.Type()})
	}
	return out
}

// LookupBuiltin returns the built-in field of a name, case-insensitively
// ("ID", "Created_At"), with its lower-case name and its type.
func LookupBuiltin(name string) (Field, bool) {
	for b := FieldID; int(b) < len(builtinNames); b++ {
		if strings.EqualFold(name, builtinNames[b]) {
			return Field{Name: builtinNames[b], Builtin: b, Type: b.Type()}, true
		}
	}
	return Field{}, false
}

// reserved are the words of the language, which cannot name an attribute.
var reserved = []string{"and", "or", "not", "in", "between", "starts_with", "is", "null", "true", "false"}

// ValidName reports whether name can be declared as an attribute: an
// identifier of at most 64 bytes that is not a built-in field's name.
// It returns nil when it can, else an error wrapping
// ErrInvalidDeclaration. An identifier is a letter followed by letters,
// digits and underscores (ASCII); a built-in's name or a word of the
// language (AND, OR, NOT, IN, BETWEEN, STARTS_WITH, IS, NULL, TRUE,
// FALSE) in any case is refused.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: an empty name", ErrInvalidDeclaration)
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("%w: name %.20q… is %d bytes (at most %d)", ErrInvalidDeclaration, name, len(name), maxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isLetter(c) || (i > 0 && (isDigit(c) || c == '_')) {
			continue
		}
		return fmt.Errorf("%w: name %q: want a letter followed by letters, digits and underscores", ErrInvalidDeclaration, name)
	}
	if _, ok := LookupBuiltin(name); ok {
		return fmt.Errorf("%w: name %q is a built-in field", ErrInvalidDeclaration, name)
	}
	for _, w := range reserved {
		if strings.EqualFold(name, w) {
			return fmt.Errorf("%w: name %q is a word of the query language", ErrInvalidDeclaration, name)
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// ParseDeclarations parses declarations written "name:type,name:type"
// (types as [ParseType] reads them), as the CLI takes them.
// Spaces around names and types are ignored; an empty or blank s gives an
// empty map. A name declared twice, an invalid name ([ValidName]), an
// unknown type give an error wrapping ErrInvalidDeclaration.
func ParseDeclarations(s string) (map[string]Type, error) {
	out := map[string]Type{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, typ, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%w: %q: want name:type", ErrInvalidDeclaration, part)
		}
		name = strings.TrimSpace(name)
		if err := ValidName(name); err != nil {
			return nil, err
		}
		t, err := ParseType(typ)
		if err != nil {
			return nil, fmt.Errorf("%w (attribute %q)", err, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: %q declared twice", ErrInvalidDeclaration, name)
		}
		out[name] = t
	}
	return out, nil
}
