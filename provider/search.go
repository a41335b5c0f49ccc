package provider

import (
	"math"
	"time"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/query"
)

// Field implements [query.Record]: the value of a built-in field or of a
// search attribute of the record, ok false when it has none (an empty
// string, a zero time, an attribute never set or unset, an empty keyword
// list).
func (r *InstanceRecord) Field(f query.Field) (query.Value, bool) {
	switch f.Builtin {
	case query.Attribute:
		v, ok := r.Attributes[f.Name]
		if !ok || v.Type == query.Invalid || (v.Type == query.KeywordList && len(v.List) == 0) {
			return query.Value{}, false
		}
		return v, true
	case query.FieldID:
		return keyword(r.InstanceID)
	case query.FieldWorkflow:
		return keyword(r.Name)
	case query.FieldStatus:
		return keyword(string(r.Status))
	case query.FieldCustomStatus:
		return keyword(r.CustomStatusText)
	case query.FieldBusinessKey:
		return keyword(r.BusinessKey)
	case query.FieldVersion:
		return keyword(r.Version)
	case query.FieldParentID:
		return keyword(r.ParentID)
	case query.FieldCreatedAt:
		return instant(r.CreatedAt)
	case query.FieldUpdatedAt:
		return instant(r.UpdatedAt)
	case query.FieldCompletedAt:
		return instant(r.CompletedAt)
	}
	return query.Value{}, false
}

func keyword(s string) (query.Value, bool) {
	if s == "" {
		return query.Value{}, false
	}
	return query.Value{Type: query.Keyword, Str: s}, true
}

func instant(t time.Time) (query.Value, bool) {
	if t.IsZero() {
		return query.Value{}, false
	}
	return query.Value{Type: query.Time, Time: t.UTC()}, true
}

// TimeBound is a time literal of a query as a store compares it with
// stored times: Unix nanoseconds clamped to what int64 holds (stored times
// are inside, so a clamped bound compares as the instant does) when the
// store keeps nanoseconds, Unix microseconds otherwise, rounded so that
// comparing stored values with it gives the answer of comparing instants:
// down for > and <=, up (ceil) for >= and <. exact is false when the
// literal falls between two stored units (= then matches nothing).
func TimeBound(t time.Time, nanos, ceil bool) (n int64, exact bool) {
	if nanos {
		switch {
		case t.Before(minNanoTime):
			return math.MinInt64 + 1, true
		case t.After(maxNanoTime):
			return math.MaxInt64, true
		}
		return t.UnixNano(), true
	}
	us := t.UnixMicro()
	exact = t.Equal(time.UnixMicro(us))
	if !exact && ceil {
		us++
	}
	return us, exact
}

var (
	minNanoTime = time.Unix(0, math.MinInt64+1)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// PrefixEnd returns the least valid UTF-8 string above every string that
// starts with p: p with its last rune raised by one (a rune that cannot be
// raised is dropped first). ok is false when there is none (p is made of
// U+10FFFF only, or is not valid UTF-8).
func PrefixEnd(p string) (string, bool) {
	if !utf8.ValidString(p) {
		return "", false
	}
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			return p + string(rune(0xE000)), true
		}
		return p + string(r+1), true
	}
	return "", false
}
