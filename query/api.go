package query

// Limits of a query: Parse refuses a longer text, a deeper nesting, a
// longer IN list or more terms with ErrInvalidQuery.
const (
	// MaxLength is the longest query text, in bytes.
	MaxLength = 16 << 10
	// MaxDepth is the deepest nesting of parentheses and prefix NOTs.
	MaxDepth = 32
	// MaxInValues is the most values of one IN list.
	MaxInValues = 1000
	// MaxTerms is the most terms of a query: comparisons, IN, STARTS_WITH
	// and IS [NOT] NULL count one, BETWEEN two (its two comparisons).
	MaxTerms = 256
)

// SchemaOf returns the Schema of a map of declarations.
func SchemaOf(decls map[string]Type) Schema {
	return func(name string) (Type, bool) { t, ok := decls[name]; return t, ok && t != Invalid }
}
