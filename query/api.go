package query

import "errors"

// errTodo marks the functions of this file whose bodies are being written.
var errTodo = errors.New("query: not implemented yet")

// Limits of a query: Parse refuses a longer text, a deeper nesting, a
// longer IN list or more terms with ErrInvalidQuery.
const (
	MaxLength   = 16 << 10
	MaxDepth    = 32
	MaxInValues = 1000
	MaxTerms    = 256
)

// Parse parses a filter. Built-in field names are case-insensitive; any
// other name must be declared in schema. An empty or blank src returns a
// nil Expr, which matches everything.
func Parse(src string, schema Schema) (Expr, error) { return nil, errTodo }

// ParseField resolves a field name (for a group-by) as Parse does.
func ParseField(name string, schema Schema) (Field, error) { return Field{}, errTodo }

// Match evaluates e over r. A nil e matches.
func Match(e Expr, r Record) bool { return e == nil }

// SchemaOf returns the Schema of a map of declarations.
func SchemaOf(decls map[string]Type) Schema {
	return func(name string) (Type, bool) { t, ok := decls[name]; return t, ok && t != Invalid }
}
