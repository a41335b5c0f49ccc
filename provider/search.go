package provider

import (
	"time"

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
