package query

import "strings"

// Match evaluates e over r. A nil e matches.
//
// The logic is two-valued: a term on a field without a value is false
// (every comparison, != included, IN and STARTS_WITH), IS NOT NULL is
// true iff the field has a value, and NOT inverts a whole term, so that
// NOT amount > 5 matches a record without amount. On a KeywordList, =
// means "holds", != "is set and does not hold", IN "holds any" and
// STARTS_WITH "holds an element starting with". Keywords compare in byte
// order, numbers numerically, times by instant; a value of another type
// than the literal's never matches.
func Match(e Expr, r Record) bool {
	switch x := e.(type) {
	case nil:
		return true
	case *And:
		for _, t := range x.Terms {
			if !Match(t, r) {
				return false
			}
		}
		return true
	case *Or:
		for _, t := range x.Terms {
			if Match(t, r) {
				return true
			}
		}
		return false
	case *Not:
		return !Match(x.X, r)
	case *Exists:
		v, ok := r.Field(x.Field)
		return ok && !v.IsZero()
	case *Cmp:
		v, ok := r.Field(x.Field)
		if !ok || v.IsZero() {
			return false
		}
		if v.Type == KeywordList && x.Value.Type == Keyword {
			switch x.Op {
			case Eq:
				return holds(v.List, x.Value.Str)
			case Ne:
				return !holds(v.List, x.Value.Str)
			}
			for _, s := range v.List {
				if compareOp(strings.Compare(s, x.Value.Str), x.Op) {
					return true
				}
			}
			return false
		}
		return v.Type == x.Value.Type && compareOp(Compare(v, x.Value), x.Op)
	case *In:
		v, ok := r.Field(x.Field)
		if !ok || v.IsZero() {
			return false
		}
		for _, w := range x.Values {
			if v.Type == KeywordList && w.Type == Keyword {
				if holds(v.List, w.Str) {
					return true
				}
			} else if v.Type == w.Type && Compare(v, w) == 0 {
				return true
			}
		}
		return false
	case *Prefix:
		v, ok := r.Field(x.Field)
		if !ok {
			return false
		}
		switch v.Type {
		case Keyword:
			return strings.HasPrefix(v.Str, x.Prefix)
		case KeywordList:
			for _, s := range v.List {
				if strings.HasPrefix(s, x.Prefix) {
					return true
				}
			}
		}
		return false
	}
	return false
}

// holds reports whether list holds s.
func holds(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// compareOp applies op to the result of a comparison.
func compareOp(c int, op Op) bool {
	switch op {
	case Eq:
		return c == 0
	case Ne:
		return c != 0
	case Lt:
		return c < 0
	case Le:
		return c <= 0
	case Gt:
		return c > 0
	case Ge:
		return c >= 0
	}
	return false
}
