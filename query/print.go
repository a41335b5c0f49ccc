package query

import "strings"

// String prints the field's name (lower case for a built-in).
func (f Field) String() string {
	if f.Builtin != Attribute && f.Name == "" {
		return f.Builtin.String()
	}
	return f.Name
}

// String prints the terms joined by AND, an Or among them in parentheses.
func (e *And) String() string { return join(e.Terms, " AND ", true) }

// String prints the terms joined by OR.
func (e *Or) String() string { return join(e.Terms, " OR ", false) }

func join(terms []Expr, sep string, and bool) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(sep)
		}
		if _, isOr := t.(*Or); and && isOr {
			b.WriteString("(" + t.String() + ")")
			continue
		}
		b.WriteString(t.String())
	}
	return b.String()
}

// String prints NOT x, or the negated form of a term: IS NULL, NOT IN,
// NOT BETWEEN.
func (e *Not) String() string {
	switch x := e.X.(type) {
	case *Exists:
		return x.Field.String() + " IS NULL"
	case *In:
		return x.Field.String() + " NOT " + x.String()[len(x.Field.String())+1:]
	case *And:
		if lo, hi, ok := betweenOf(x); ok {
			return lo.Field.String() + " NOT BETWEEN " + lo.Value.String() + " AND " + hi.Value.String()
		}
		return "NOT (" + x.String() + ")"
	case *Or:
		return "NOT (" + x.String() + ")"
	}
	return "NOT " + e.X.String()
}

// betweenOf recognizes what BETWEEN parses into: field >= lo AND field <= hi.
func betweenOf(a *And) (lo, hi *Cmp, ok bool) {
	if len(a.Terms) != 2 {
		return nil, nil, false
	}
	lo, ok1 := a.Terms[0].(*Cmp)
	hi, ok2 := a.Terms[1].(*Cmp)
	if !ok1 || !ok2 || lo.Op != Ge || hi.Op != Le || lo.Field != hi.Field {
		return nil, nil, false
	}
	return lo, hi, true
}

// String prints "field op literal".
func (e *Cmp) String() string {
	return e.Field.String() + " " + e.Op.String() + " " + e.Value.String()
}

// String prints "field IN (v, …)".
func (e *In) String() string {
	var b strings.Builder
	b.WriteString(e.Field.String())
	b.WriteString(" IN (")
	for i, v := range e.Values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.String())
	}
	b.WriteString(")")
	return b.String()
}

// String prints "field STARTS_WITH 'prefix'".
func (e *Prefix) String() string { return e.Field.String() + " STARTS_WITH " + quote(e.Prefix) }

// String prints "field IS NOT NULL".
func (e *Exists) String() string { return e.Field.String() + " IS NOT NULL" }
