package postgres

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/query"
)

// whereSQL compiles filters ([query.Expr]) into SQL over the instances
// table. Every value, attribute names included, becomes a bind parameter:
// no text of a query reaches the statement, whose shape depends only on
// the expression's structure, fields' kinds and operators, so that
// prepared statements are shared by queries of one shape.
//
// Semantics (docs/search.md): a term on a field without a value is false,
// NOT inverts a whole term (two-valued logic: NOT of a term on a missing
// field is true), keywords compare in byte order (COLLATE "C").
type whereSQL struct {
	// alias qualifies the columns of instances ("i." in a join).
	alias string
	// driven is set when the filter's top-level conjunction holds an
	// attribute's equality or IN (see drivenBy) and the sessions are on
	// forced generic plans (Store.forcedGeneric): the statement is then
	// written so that every plan reads the matches from the attributes'
	// GIN index. Built-in keyword equalities are compared COLLATE "C"
	// (the same answer, but no index of the database's collation can
	// serve them, so no plan intersects the GIN index's few matches with
	// a status index's many), and listings sort the matches by an
	// expression of the id, which the primary key cannot give in order
	// (so no plan walks the whole key looking for matches). A generic
	// plan cannot know that a customer is selective: it takes the 1 %
	// that PostgreSQL assumes for @> with a parameter and walks the
	// primary key, a second on 1,000,000 instances where the GIN index
	// answers in a few milliseconds (docs/benchmarks.md). A custom plan
	// knows, and also knows when an attribute is not selective (a region
	// of eight), where walking the key finds a page at once and the
	// driven shape would read every match: custom plans get the plain
	// shape.
	driven bool
	args   []any
}

// drivenBy reports whether e's top-level conjunction holds an equality
// or IN of an attribute, which the GIN index serves.
func drivenBy(e query.Expr) bool {
	switch x := any(e).(type) {
	case *query.And:
		for _, t := range x.Terms {
			if drivenBy(t) {
				return true
			}
		}
	case *query.Cmp:
		return x.Field.Builtin == query.Attribute && x.Op == query.Eq
	case *query.In:
		return x.Field.Builtin == query.Attribute
	}
	return false
}

// eq returns the equality operator of built-in keyword columns: COLLATE
// "C" when the statement is driven by the GIN index.
func (w *whereSQL) eq() string {
	if w.driven {
		return ` COLLATE "C" = `
	}
	return " = "
}

// orderBy returns the ORDER BY expression of a listing by instance id.
func (w *whereSQL) orderBy(col string) string {
	if w.driven {
		return "(" + col + ` || '') COLLATE "C"`
	}
	return col
}

// arg adds a bind parameter and returns its placeholder.
func (w *whereSQL) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

// builtinColumn returns the column of a built-in field and whether it
// holds a time.
func builtinColumn(b query.Builtin) (col string, isTime bool, ok bool) {
	switch b {
	case query.FieldID:
		return "instance_id", false, true
	case query.FieldWorkflow:
		return "name", false, true
	case query.FieldStatus:
		return "status", false, true
	case query.FieldCustomStatus:
		return "custom_status_text", false, true
	case query.FieldBusinessKey:
		return "business_key", false, true
	case query.FieldVersion:
		return "version", false, true
	case query.FieldParentID:
		return "parent_id", false, true
	case query.FieldCreatedAt:
		return "created_at", true, true
	case query.FieldUpdatedAt:
		return "updated_at", true, true
	case query.FieldCompletedAt:
		return "completed_at", true, true
	}
	return "", false, false
}

var sqlOps = map[query.Op]string{query.Eq: "=", query.Ne: "<>", query.Lt: "<", query.Le: "<=", query.Gt: ">", query.Ge: ">="}

// compile returns the SQL of e, a boolean expression; a nil e is TRUE. An
// expression in a positive position may be NULL where a field has no
// value (the WHERE clause takes NULL as false, and AND and OR keep that
// reading); NOT makes its operand two-valued first.
func (w *whereSQL) compile(e query.Expr) (string, error) {
	switch x := any(e).(type) {
	case nil:
		return "TRUE", nil
	case *query.And:
		return w.join(x.Terms, " AND ", "TRUE")
	case *query.Or:
		return w.join(x.Terms, " OR ", "FALSE")
	case *query.Not:
		inner, err := w.compile(x.X)
		if err != nil {
			return "", err
		}
		return "(NOT coalesce(" + inner + ", FALSE))", nil
	case *query.Cmp:
		return w.cmp(x)
	case *query.In:
		return w.in(x)
	case *query.Prefix:
		return w.prefix(x)
	case *query.Exists:
		return w.exists(x.Field)
	}
	return "", fmt.Errorf("%w: unknown expression %T", query.ErrInvalidQuery, e)
}

func (w *whereSQL) join(terms []query.Expr, sep, empty string) (string, error) {
	if len(terms) == 0 {
		return empty, nil
	}
	parts := make([]string, len(terms))
	for i, t := range terms {
		var err error
		if parts[i], err = w.compile(t); err != nil {
			return "", err
		}
	}
	return "(" + strings.Join(parts, sep) + ")", nil
}

// column returns the qualified column of a built-in field.
func (w *whereSQL) column(f query.Field) (col string, isTime bool, err error) {
	col, isTime, ok := builtinColumn(f.Builtin)
	if !ok {
		return "", false, fmt.Errorf("%w: unknown built-in field %d", query.ErrInvalidQuery, f.Builtin)
	}
	return w.alias + col, isTime, nil
}

// attr returns the SQL of an attribute's stored value object.
func (w *whereSQL) attr(f query.Field) string {
	return "(" + w.alias + "attrs -> " + w.arg(f.Name) + "::text)"
}

// typed returns the SQL extracting an attribute's value as a comparable
// SQL value of the field's type (NULL when the attribute is unset or holds
// another type), and the placeholder of v converted alike.
func (w *whereSQL) typed(f query.Field, v query.Value) (val, lit string, err error) {
	a := w.attr(f)
	switch f.Type {
	case query.Keyword:
		return "((" + a + " ->> 'k') COLLATE \"C\")", w.arg(v.Str) + "::text", nil
	case query.Int:
		return "(" + a + " -> 'i')::bigint", w.arg(v.Int) + "::bigint", nil
	case query.Float:
		return "(" + a + " -> 'f')::float8", w.arg(v.Float) + "::float8", nil
	case query.Bool:
		return "(" + a + " -> 'b')::boolean", w.arg(v.Bool) + "::boolean", nil
	case query.Time:
		return "(" + a + " -> 't')::bigint", w.arg(v.Time.UnixMicro()) + "::bigint", nil
	}
	return "", "", fmt.Errorf("%w: no comparison of %s values", query.ErrInvalidQuery, f.Name)
}

// literal converts a value to the field's type where a query may give a
// literal of a related type: a keyword for a list element, an integer
// for a float.
func literal(f query.Field, v query.Value) query.Value {
	switch {
	case f.Type == query.KeywordList && v.Type == query.KeywordList && len(v.List) == 1:
		return query.Value{Type: query.Keyword, Str: v.List[0]}
	case f.Type == query.KeywordList:
		return query.Value{Type: query.Keyword, Str: v.Str}
	case f.Type == query.Float && v.Type == query.Int:
		return query.Value{Type: query.Float, Float: float64(v.Int)}
	}
	return v
}

// contains returns the JSON document that an attrs value contains when
// attribute f equals v (holds v, for a list).
func contains(f query.Field, v query.Value) ([]byte, error) {
	stored := v
	if f.Type == query.KeywordList {
		stored = query.Value{Type: query.KeywordList, List: []string{v.Str}}
	}
	b, err := appendJSONString([]byte{'{'}, f.Name)
	if err != nil {
		return nil, err
	}
	b = append(b, ':')
	if b, err = appendAttrValue(b, stored); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", query.ErrInvalidQuery, f.Name, err)
	}
	return append(b, '}'), nil
}

func (w *whereSQL) cmp(c *query.Cmp) (string, error) {
	op, ok := sqlOps[c.Op]
	if !ok {
		return "", fmt.Errorf("%w: unknown operator %d", query.ErrInvalidQuery, c.Op)
	}
	if c.Field.Builtin != query.Attribute {
		col, isTime, err := w.column(c.Field)
		if err != nil {
			return "", err
		}
		if isTime {
			if c.Value.Type != query.Time {
				return "", fmt.Errorf("%w: %s compares with a time", query.ErrInvalidQuery, c.Field.Name)
			}
			return "(" + col + " " + op + " " + w.arg(c.Value.Time) + "::timestamptz)", nil
		}
		if c.Value.Type != query.Keyword {
			return "", fmt.Errorf("%w: %s compares with a string", query.ErrInvalidQuery, c.Field.Name)
		}
		// An empty string is no value: = '' matches nothing, and the
		// other operators need a value.
		switch {
		case c.Op == query.Eq && c.Value.Str == "":
			return "FALSE", nil
		case c.Op == query.Eq:
			return "(" + col + w.eq() + w.arg(c.Value.Str) + "::text)", nil
		}
		return "(" + col + " <> '' AND " + col + " COLLATE \"C\" " + op + " " + w.arg(c.Value.Str) + "::text)", nil
	}
	v := literal(c.Field, c.Value)
	switch {
	case c.Op == query.Eq:
		doc, err := contains(c.Field, v)
		if err != nil {
			return "", err
		}
		return "(" + w.alias + "attrs @> " + w.arg(doc) + "::jsonb)", nil
	case c.Field.Type == query.KeywordList && c.Op == query.Ne:
		doc, err := contains(c.Field, v)
		if err != nil {
			return "", err
		}
		return "(" + w.attr(c.Field) + " -> 'l' IS NOT NULL AND NOT " + w.alias + "attrs @> " + w.arg(doc) + "::jsonb)", nil
	case c.Field.Type == query.KeywordList || (c.Field.Type == query.Bool && c.Op != query.Ne):
		return "", fmt.Errorf("%w: %s has no order", query.ErrInvalidQuery, c.Field.Name)
	}
	val, lit, err := w.typed(c.Field, v)
	if err != nil {
		return "", err
	}
	return "(" + val + " " + op + " " + lit + ")", nil
}

func (w *whereSQL) in(x *query.In) (string, error) {
	if x.Field.Builtin != query.Attribute {
		col, isTime, err := w.column(x.Field)
		if err != nil {
			return "", err
		}
		if isTime {
			ts := make([]time.Time, len(x.Values))
			for i, v := range x.Values {
				ts[i] = v.Time
			}
			return "(" + col + " = ANY (" + w.arg(ts) + "::timestamptz[]))", nil
		}
		var strs []string
		for _, v := range x.Values {
			if v.Str != "" {
				strs = append(strs, v.Str)
			}
		}
		if len(strs) == 0 {
			return "FALSE", nil
		}
		return "(" + col + w.eq() + "ANY (" + w.arg(strs) + "::text[]))", nil
	}
	if len(x.Values) == 0 {
		return "FALSE", nil
	}
	docs := make([]string, len(x.Values))
	for i, v := range x.Values {
		doc, err := contains(x.Field, literal(x.Field, v))
		if err != nil {
			return "", err
		}
		docs[i] = string(doc)
	}
	return "(" + w.alias + "attrs @> ANY (" + w.arg(docs) + "::jsonb[]))", nil
}

func (w *whereSQL) prefix(x *query.Prefix) (string, error) {
	if x.Field.Builtin != query.Attribute {
		col, isTime, err := w.column(x.Field)
		if err != nil {
			return "", err
		}
		if isTime {
			return "", fmt.Errorf("%w: STARTS_WITH on the time %s", query.ErrInvalidQuery, x.Field.Name)
		}
		return "(" + col + " <> '' AND starts_with(" + col + ", " + w.arg(x.Prefix) + "::text))", nil
	}
	switch x.Field.Type {
	case query.Keyword:
		return "starts_with(" + w.attr(x.Field) + " ->> 'k', " + w.arg(x.Prefix) + "::text)", nil
	case query.KeywordList:
		return "EXISTS (SELECT 1 FROM jsonb_array_elements_text(" + w.attr(x.Field) + " -> 'l') AS e (v) WHERE starts_with(e.v, " +
			w.arg(x.Prefix) + "::text))", nil
	}
	return "", fmt.Errorf("%w: STARTS_WITH on %s, which is not a keyword", query.ErrInvalidQuery, x.Field.Name)
}

func (w *whereSQL) exists(f query.Field) (string, error) {
	if f.Builtin != query.Attribute {
		col, isTime, err := w.column(f)
		if err != nil {
			return "", err
		}
		if isTime {
			return "(" + col + " IS NOT NULL)", nil
		}
		return "(" + col + " <> '')", nil
	}
	tag := typeTag(f.Type)
	if tag == "" {
		return "", fmt.Errorf("%w: attribute %s has no type", query.ErrInvalidQuery, f.Name)
	}
	// The tag is one of the constants of typeTag, never a query's text.
	return "(" + w.attr(f) + " -> '" + tag + "' IS NOT NULL)", nil
}
