package oracle

import (
	"errors"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// ErrInvalidFilter is wrapped by the error of a query the store cannot
// translate: an attribute name that is not an identifier, an operator the
// field's type does not have, a value of another type than the field's.
// The engine's parser never produces one; a store called directly may.
var ErrInvalidFilter = errors.New("oracle: invalid filter")

// keywordTag is put before every keyword stored in the attributes table's
// str column: Oracle keeps ” as NULL, and a tagged "" is a value. One
// tag before every value keeps byte order and prefixes.
const keywordTag = "k"

// whereSQL is a filter compiled to a SQL condition on the instances table
// (alias i) with its bind arguments. The text holds only SQL of this file
// and bind names :w0, :w1, …; every value of the query, attribute names
// included, is a bind.
type whereSQL struct {
	sb   strings.Builder
	args []any
}

// bind adds a bind argument and writes its name.
func (w *whereSQL) bind(v any) {
	name := fmt.Sprintf("w%d", len(w.args))
	w.args = append(w.args, named(name, v))
	w.sb.WriteString(":" + name)
}

func (w *whereSQL) write(parts ...any) {
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			w.sb.WriteString(p)
		case boundValue:
			w.bind(p.v)
		}
	}
}

// boundValue marks a value that write binds.
type boundValue struct{ v any }

func b(v any) boundValue { return boundValue{v} }

// compileWhere compiles e. A nil e is "1 = 1".
//
// Two-valued logic: every term compiles to a condition that is TRUE or
// FALSE, never NULL (an attribute term is an EXISTS; a built-in term
// requires its column IS NOT NULL, and "" literals, which Oracle binds
// as NULL, are decided here), so NOT x is NOT (x), true on an instance
// without the field.
func compileWhere(e query.Expr) (string, []any, error) {
	w := &whereSQL{}
	if e == nil {
		return "1 = 1", nil, nil
	}
	if err := w.expr(e, 0); err != nil {
		return "", nil, err
	}
	return w.sb.String(), w.args, nil
}

const maxCompileDepth = 2 * query.MaxDepth

func (w *whereSQL) expr(e query.Expr, depth int) error {
	if depth > maxCompileDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrInvalidFilter, maxCompileDepth)
	}
	switch x := e.(type) {
	case *query.And:
		return w.list(" AND ", "1 = 1", x.Terms, depth)
	case *query.Or:
		return w.list(" OR ", "1 = 0", x.Terms, depth)
	case *query.Not:
		w.write("NOT (")
		if err := w.expr(x.X, depth+1); err != nil {
			return err
		}
		w.write(")")
		return nil
	case *query.Cmp:
		return w.cmp(x.Field, x.Op, x.Value)
	case *query.In:
		return w.in(x)
	case *query.Prefix:
		return w.prefix(x)
	case *query.Exists:
		return w.exists(x.Field)
	case nil:
		w.write("1 = 1")
		return nil
	}
	return fmt.Errorf("%w: unknown expression %T", ErrInvalidFilter, e)
}

func (w *whereSQL) list(op, empty string, terms []query.Expr, depth int) error {
	if len(terms) == 0 {
		w.write(empty)
		return nil
	}
	w.write("(")
	for i, t := range terms {
		if i > 0 {
			w.write(op)
		}
		if err := w.expr(t, depth+1); err != nil {
			return err
		}
	}
	w.write(")")
	return nil
}

// builtinColumns are the instances table's columns of the built-ins.
var builtinColumns = map[query.Builtin]string{
	query.FieldID: "i.instance_id", query.FieldWorkflow: "i.name", query.FieldStatus: "i.status",
	query.FieldCustomStatus: "i.custom_status_key", query.FieldBusinessKey: "i.business_key",
	query.FieldVersion: "i.version", query.FieldParentID: "i.parent_id", query.FieldCreatedAt: "i.created_at",
	query.FieldUpdatedAt: "i.updated_at", query.FieldCompletedAt: "i.completed_at",
}

// field is how a query field is stored.
type field struct {
	attr bool
	name string
	typ  query.Type
	// col is the built-in's column, or the attributes table's column of
	// the value (a.str, a.num, a.dbl).
	col string
}

func resolve(f query.Field) (field, error) {
	if f.Builtin == query.Attribute {
		if !validAttrName(f.Name) {
			return field{}, fmt.Errorf("%w: attribute name %q is not an identifier", ErrInvalidFilter, f.Name)
		}
		col := "a.num"
		switch f.Type {
		case query.Keyword, query.KeywordList:
			col = "a.str"
		case query.Float:
			col = "a.dbl"
		case query.Int, query.Bool, query.Time:
		default:
			return field{}, fmt.Errorf("%w: attribute %s has no type", ErrInvalidFilter, f.Name)
		}
		return field{attr: true, name: f.Name, typ: f.Type, col: col}, nil
	}
	col, ok := builtinColumns[f.Builtin]
	if !ok {
		return field{}, fmt.Errorf("%w: unknown built-in field %d", ErrInvalidFilter, f.Builtin)
	}
	return field{name: f.Builtin.String(), typ: f.Builtin.Type(), col: col}, nil
}

// validAttrName reports whether name can be a declared attribute's name
// (an identifier of at most 64 bytes: it names a field or fills a column).
func validAttrName(name string) bool { return query.ValidName(name) == nil }

// storedType is the vtype of a field's rows: list elements are stored as
// KeywordList rows.
func storedType(t query.Type) int64 { return int64(t) }

func checkValue(f field, v query.Value) error {
	want := f.typ
	if want == query.KeywordList {
		want = query.Keyword
	}
	if v.Type != want {
		return fmt.Errorf("%w: a %s value for %s, a %s field", ErrInvalidFilter, v.Type, f.name, f.typ)
	}
	return nil
}

// attrRows opens an EXISTS on the attribute rows of f of the instance;
// the caller writes the value condition (starting with " AND ") and
// closes it with ")".
func (w *whereSQL) attrRows(f field) {
	w.write("EXISTS (SELECT 1 FROM {{obj:ATTRIBUTES}} a WHERE a.instance_id = i.instance_id AND a.name = ", b(f.name), " AND a.vtype = ", b(storedType(f.typ)))
}

// value is the stored form of a literal, and whether the literal has
// one: a time between two stored units has none for =.
func value(f field, v query.Value, ceil bool) (any, bool) {
	switch v.Type {
	case query.Keyword:
		if f.attr {
			return keywordTag + v.Str, true
		}
		return v.Str, true
	case query.Int:
		return v.Int, true
	case query.Float:
		return v.Float, true
	case query.Bool:
		if v.Bool {
			return int64(1), true
		}
		return int64(0), true
	case query.Time:
		return provider.TimeBound(v.Time, !f.attr, ceil)
	}
	return nil, false
}

var opSQL = map[query.Op]string{query.Eq: " = ", query.Ne: " <> ", query.Lt: " < ", query.Le: " <= ", query.Gt: " > ", query.Ge: " >= "}

func (w *whereSQL) cmp(qf query.Field, op query.Op, v query.Value) error {
	f, err := resolve(qf)
	if err != nil {
		return err
	}
	if err := checkValue(f, v); err != nil {
		return err
	}
	if _, ok := opSQL[op]; !ok {
		return fmt.Errorf("%w: unknown operator %d", ErrInvalidFilter, op)
	}
	if (f.typ == query.KeywordList || f.typ == query.Bool) && op != query.Eq && op != query.Ne {
		return fmt.Errorf("%w: a %s field (%s) compares only with = and !=", ErrInvalidFilter, f.typ, f.name)
	}
	ceil := op == query.Lt || op == query.Ge
	val, exact := value(f, v, ceil)
	if !f.attr && v.Type == query.Keyword && v.Str == "" && f.col != "i.instance_id" {
		// "" is no value of a built-in (and binds as NULL).
		switch op {
		case query.Ne, query.Gt, query.Ge:
			return w.exists(qf)
		}
		w.write("1 = 0")
		return nil
	}
	if !exact {
		switch op {
		case query.Eq:
			w.write("1 = 0")
			return nil
		case query.Ne:
			return w.exists(qf)
		}
	}
	if f.attr {
		if f.typ == query.KeywordList && op == query.Ne {
			// Set, and not holding the value.
			w.write("(")
			w.attrRows(f)
			w.write(") AND NOT ")
			w.attrRows(f)
			w.write(" AND a.str = ", b(val), "))")
			return nil
		}
		w.attrRows(f)
		w.write(" AND "+f.col+opSQL[op], b(val), ")")
		return nil
	}
	if f.col == "i.instance_id" && v.Str == "" {
		// Every id is > '' and nothing equals it; "" binds as NULL.
		switch op {
		case query.Ne, query.Gt, query.Ge:
			w.write("1 = 1")
		default:
			w.write("1 = 0")
		}
		return nil
	}
	w.write("("+f.col+" IS NOT NULL AND "+f.col+opSQL[op], b(val), ")")
	return nil
}

// maxInBinds bounds the binds of one IN list (Oracle allows 1,000).
const maxInBinds = 500

func (w *whereSQL) in(x *query.In) error {
	f, err := resolve(x.Field)
	if err != nil {
		return err
	}
	var vals []any
	for _, v := range x.Values {
		if err := checkValue(f, v); err != nil {
			return err
		}
		if !f.attr && v.Type == query.Keyword && v.Str == "" {
			continue
		}
		if val, exact := value(f, v, false); exact {
			vals = append(vals, val)
		}
	}
	if len(vals) == 0 {
		w.write("1 = 0")
		return nil
	}
	if f.attr {
		w.attrRows(f)
		w.write(" AND ")
	} else {
		w.write("(" + f.col + " IS NOT NULL AND ")
	}
	w.write("(")
	for start := 0; start < len(vals); start += maxInBinds {
		if start > 0 {
			w.write(" OR ")
		}
		w.write(f.col + " IN (")
		for i, v := range vals[start:min(len(vals), start+maxInBinds)] {
			if i > 0 {
				w.write(", ")
			}
			w.bind(v)
		}
		w.write(")")
	}
	w.write("))")
	return nil
}

func (w *whereSQL) prefix(x *query.Prefix) error {
	f, err := resolve(x.Field)
	if err != nil {
		return err
	}
	if f.typ != query.Keyword && f.typ != query.KeywordList {
		return fmt.Errorf("%w: STARTS_WITH on %s, a %s field", ErrInvalidFilter, f.name, f.typ)
	}
	if x.Prefix == "" {
		return w.exists(x.Field)
	}
	tag := ""
	if f.attr {
		tag = keywordTag
	}
	up, bounded := provider.PrefixEnd(x.Prefix)
	if f.attr {
		w.attrRows(f)
		w.write(" AND ")
	} else {
		w.write("(" + f.col + " IS NOT NULL AND ")
	}
	w.write(f.col+" >= ", b(tag+x.Prefix))
	if bounded {
		w.write(" AND "+f.col+" < ", b(tag+up))
	}
	w.write(")")
	return nil
}

func (w *whereSQL) exists(qf query.Field) error {
	f, err := resolve(qf)
	if err != nil {
		return err
	}
	if f.attr {
		w.attrRows(f)
		w.write(")")
		return nil
	}
	w.write(f.col + " IS NOT NULL")
	return nil
}

// groupColumn is the column CountInstances groups by, and whether the
// attributes table is joined for it.
func groupColumn(by *query.Field) (field, error) {
	f, err := resolve(*by)
	if err != nil {
		return field{}, err
	}
	if f.typ == query.KeywordList {
		return field{}, fmt.Errorf("%w: cannot group by %s, a list", ErrInvalidFilter, f.name)
	}
	return f, nil
}
