// Package query is Chronicle's language for finding instances: typed
// search attributes, a filter expression parsed into an AST, and the
// evaluation of that AST over one record. Stores translate the AST into
// their own native form (SQL with bind parameters, a MongoDB filter
// document, a fold in memory); user text never reaches a store as text.
//
// # Values
//
// A search attribute is declared with a [Type] (Keyword, Int, Float, Bool,
// Time, KeywordList) and holds a [Value]; [Of] converts a Go value and
// checks the limits ([MaxKeywordBytes], [MaxListLen], finite floats, times
// in UTC to the microsecond). The zero Value is "no value".
//
// # The language
//
//	status = 'running' AND customer = 'acme'
//	  AND created_at BETWEEN '2026-01-01' AND '2026-02-01'
//	amount > 100 OR NOT (tags IN ('test', 'demo') OR business_key IS NULL)
//	workflow STARTS_WITH 'order' AND completed_at IS NOT NULL
//
// A term tests one field: a built-in (id, workflow, status, custom_status,
// business_key, version, parent_id, created_at, updated_at, completed_at)
// or a declared attribute. The operators are = != <> < <= > >=, [NOT] IN
// (list), [NOT] BETWEEN lo AND hi (inclusive), STARTS_WITH 'prefix' and
// IS [NOT] NULL; terms combine with NOT, AND and OR (in that precedence)
// and parentheses. Keywords of the language and built-in names are
// case-insensitive. Literals are 'strings' (a quote doubled inside),
// numbers, true and false; a time is a string in RFC 3339 or YYYY-MM-DD
// (midnight UTC). A literal must suit its field's type; Bool takes = and
// != only, KeywordList =, !=, IN and STARTS_WITH (meaning "holds").
//
// The logic is two-valued: a term on a field without a value is false,
// and NOT inverts a whole term (see [Match]). [Parse] refuses a text
// beyond [MaxLength], [MaxDepth], [MaxInValues] or [MaxTerms] with a
// [*SyntaxError] that names the position.
//
// The package is a leaf: it imports only the standard library, so the
// history and provider packages can hold its values.
package query

import (
	"errors"
	"time"
)

// Type is the declared type of a search attribute. A name is declared once,
// with one type; a value of another type is refused.
type Type uint8

// The attribute types.
const (
	// Invalid is the zero Type: no value (an attribute being unset).
	Invalid Type = iota
	// Keyword is a string compared exactly (=, !=, IN, STARTS_WITH, ranges
	// in byte order).
	Keyword
	// Int is a signed 64-bit integer.
	Int
	// Float is a 64-bit floating-point number.
	Float
	// Bool is true or false.
	Bool
	// Time is an instant, kept in UTC to the microsecond.
	Time
	// KeywordList is a list of keywords; = and IN match a list holding the
	// value (any of the values).
	KeywordList
)

// Value is one typed value: the value of a search attribute, or a literal
// of a query. Only the field of its Type is set.
type Value struct {
	Type  Type      `msgpack:"t" json:"-"`
	Str   string    `msgpack:"s,omitempty" json:"-"`
	Int   int64     `msgpack:"i,omitempty" json:"-"`
	Float float64   `msgpack:"f,omitempty" json:"-"`
	Bool  bool      `msgpack:"b,omitempty" json:"-"`
	Time  time.Time `msgpack:"tm,omitempty" json:"-"`
	List  []string  `msgpack:"l,omitempty" json:"-"`
}

// Builtin names a field every instance has. Zero means a search attribute.
type Builtin uint8

// The built-in fields, spelled in queries as their String.
const (
	Attribute Builtin = iota
	FieldID
	FieldWorkflow
	FieldStatus
	FieldCustomStatus
	FieldBusinessKey
	FieldVersion
	FieldParentID
	FieldCreatedAt
	FieldUpdatedAt
	FieldCompletedAt
)

// Field is what a term tests: a built-in field or a declared attribute,
// with its type.
type Field struct {
	// Name is the attribute's declared name, or the built-in's name.
	Name    string
	Builtin Builtin
	Type    Type
}

// Op is a comparison operator.
type Op uint8

// The comparison operators.
const (
	Eq Op = iota + 1
	Ne
	Lt
	Le
	Gt
	Ge
)

// Expr is a parsed filter: one of [And], [Or], [Not], [Cmp], [In],
// [Prefix] and [Exists]. A nil Expr matches everything.
type Expr interface {
	// String prints the expression in the query language, so that
	// Parse(e.String()) gives e back.
	String() string
	isExpr()
}

// And matches when every term does.
type And struct{ Terms []Expr }

// Or matches when any term does.
type Or struct{ Terms []Expr }

// Not matches when X does not.
type Not struct{ X Expr }

// Cmp compares a field with a value of the field's type (a Keyword for a
// KeywordList field: an element). A field without a value (an attribute
// never set, CompletedAt of a running instance) makes every comparison
// false, != included; NOT inverts the whole term. On a KeywordList field,
// Eq means "holds" and Ne "does not hold" (and the list is set); Parse
// gives a KeywordList field no other operator.
type Cmp struct {
	Field Field
	Op    Op
	Value Value
}

// In matches a field equal to any of Values (on a KeywordList: holding any;
// its Values are then Keywords). Parse gives at least one value.
type In struct {
	Field  Field
	Values []Value
}

// Prefix matches a Keyword field (or a KeywordList holding a keyword)
// starting with Prefix.
type Prefix struct {
	Field  Field
	Prefix string
}

// Exists matches a field that has a value.
type Exists struct{ Field Field }

func (*And) isExpr()    {}
func (*Or) isExpr()     {}
func (*Not) isExpr()    {}
func (*Cmp) isExpr()    {}
func (*In) isExpr()     {}
func (*Prefix) isExpr() {}
func (*Exists) isExpr() {}

// Schema returns the declared type of an attribute name, ok false when the
// name is not declared.
type Schema func(name string) (Type, bool)

// Record is what [Match] evaluates an expression against: the value of
// each field, ok false when the field has none.
type Record interface {
	Field(f Field) (v Value, ok bool)
}

// ErrInvalidQuery wraps every error of [Parse]: a syntax error, an unknown
// field, a value of the wrong type, a query beyond the limits.
var ErrInvalidQuery = errors.New("query: invalid query")

// ErrTypeMismatch wraps the error of [Of] for a value that is not of the
// declared type.
var ErrTypeMismatch = errors.New("query: value does not match the declared type")
