package chronicle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/replay"
)

// MaxSearchAttributes bounds the search attributes of one instance: a
// start or an upsert that would give it more is refused with
// ErrInvalidArgument.
const MaxSearchAttributes = replay.MaxSearchAttributes

// validateDeclarations checks declared search attributes: valid names,
// known types.
func validateDeclarations(decls map[string]query.Type) error {
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(decls)) {
		if err := query.ValidName(name); err != nil {
			bad = append(bad, fmt.Sprintf("SearchAttributes: %v", err))
			continue
		}
		if t := decls[name]; t < query.Keyword || t > query.KeywordList {
			bad = append(bad, fmt.Sprintf("SearchAttributes: %q has no valid type (%d)", name, t))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errors.New(strings.Join(bad, "; "))
}

// schema returns the Schema of the engine's declared search attributes.
func (e *Engine) schema() query.Schema { return query.SchemaOf(e.opts.SearchAttributes) }

// parseWhere parses a filter with the engine's declarations; a text that
// does not parse is ErrInvalidArgument.
func (e *Engine) parseWhere(where string) (query.Expr, error) {
	if strings.TrimSpace(where) == "" {
		return nil, nil
	}
	x, err := query.Parse(where, e.schema())
	if err != nil {
		return nil, fmt.Errorf("%w: where: %w", ErrInvalidArgument, err)
	}
	return x, nil
}

// startAttributes checks the search attributes of a start and returns
// them as recorded: nil values (unset) are left out.
func (e *Engine) startAttributes(attrs map[string]any) (history.SearchAttributeMap, error) {
	values, err := replay.SearchAttributeValues(e.opts.SearchAttributes, attrs)
	if err != nil {
		return nil, err
	}
	for k, v := range values {
		if v.Type == query.Invalid {
			delete(values, k)
		}
	}
	if len(values) > MaxSearchAttributes {
		return nil, invalid("%d search attributes, at most %d allowed", len(values), MaxSearchAttributes)
	}
	if len(values) == 0 {
		return nil, nil
	}
	return values, nil
}

// goValues returns attribute values as Go values (Value.Any).
func goValues(m map[string]query.Value) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v.Type != query.Invalid {
			out[k] = v.Any()
		}
	}
	return out
}

// CountFilter selects and groups instances for CountInstances.
type CountFilter struct {
	// Where is a filter in the query language, as [InstanceFilter.Where];
	// empty counts every instance.
	Where string
	// By names the field to group by: a built-in field (status, workflow,
	// custom_status, business_key, version, ...) or a declared attribute
	// that is not a keyword list. Empty counts every match as one group.
	By string
}

// Count is one group of CountInstances.
type Count struct {
	// Value is the group's value of the By field (string, int64, float64,
	// bool or time.Time), nil for the instances without one and for the
	// single group of a count without By.
	Value any
	Count int64
}

// CountInstances counts the instances matching f.Where, grouped by f.By,
// groups in ascending order of their value (instances without a value
// first). It counts instance records: instances whose start is still
// queued, or was dead-lettered before their first round, are not counted.
func (e *Engine) CountInstances(ctx context.Context, f CountFilter) ([]Count, error) {
	where, err := e.parseWhere(f.Where)
	if err != nil {
		return nil, err
	}
	p := &provider.CountInstancesParams{Where: where}
	if by := strings.TrimSpace(f.By); by != "" {
		field, err := query.ParseField(by, e.schema())
		if err != nil {
			return nil, fmt.Errorf("%w: by: %w", ErrInvalidArgument, err)
		}
		if field.Type == query.KeywordList {
			return nil, invalid("by: %s is a keyword list, which cannot group a count", field.Name)
		}
		p.By = &field
	}
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	groups, err := s.CountInstances(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("count instances: %w", err)
	}
	out := make([]Count, len(groups))
	for i, g := range groups {
		out[i] = Count{Value: g.Value.Any(), Count: g.Count}
	}
	return out, nil
}

// ProjectionFilter selects the records of a custom projection for
// ListProjections.
type ProjectionFilter struct {
	// Where filters by the fields of the records' instances, in the query
	// language.
	Where string
	// AfterID pages: pass the last instance id of the previous page.
	AfterID string
	// Limit bounds the page; zero means 100.
	Limit int
}

// ProjectionItem is one instance's state of a custom projection.
type ProjectionItem[S any] struct {
	InstanceID string
	// Seq is the last event folded into State.
	Seq   int64
	State S
}

// ListProjections returns the states of the custom projection name for
// the instances matching f, in instance id order: one query, however many
// instances.
func ListProjections[S any](ctx context.Context, e *Engine, name string, f ProjectionFilter) ([]ProjectionItem[S], error) {
	if err := validateID("projection name", name); err != nil {
		return nil, err
	}
	where, err := e.parseWhere(f.Where)
	if err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	recs, err := s.ListCustomProjections(ctx, &provider.ListCustomProjectionsParams{Name: name, Where: where, AfterID: f.AfterID, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list projection %s: %w", name, err)
	}
	out := make([]ProjectionItem[S], len(recs))
	for i := range recs {
		r := &recs[i]
		out[i] = ProjectionItem[S]{InstanceID: r.InstanceID, Seq: r.Seq}
		if err := e.payloads.Decode(r.Data, &out[i].State); err != nil {
			return nil, fmt.Errorf("decode projection %s of %s: %w", name, r.InstanceID, err)
		}
	}
	return out, nil
}

// ProjectionOption configures a custom projection at RegisterProjection.
type ProjectionOption interface{ projectionOption() }

type projectionOption func(*projectionConfig)

func (projectionOption) projectionOption() {}

// projectionConfig is what the options of a projection set.
type projectionConfig struct {
	workflows  []string
	attributes func(state any) (map[string]any, error)
}

// ForWorkflows folds and stores the projection for instances of the named
// workflows only, instead of every instance of every workflow: it folds
// the events of their executions and is stored for an instance that has
// had one.
func ForWorkflows(names ...string) ProjectionOption {
	return projectionOption(func(c *projectionConfig) { c.workflows = append(c.workflows, names...) })
}

// ProjectionAttributes makes fields of the projection's state search
// attributes of its instance: after each fold, attrs returns their values
// by declared name ([Options.SearchAttributes]), and they are stored with
// the instance record, queryable like attributes set by the workflow, over
// which they win; a nil value leaves the workflow's own. They are derived
// from history, so a rebuild derives them again. A value that is not
// declared or not of its declared type, or more than MaxSearchAttributes
// with the workflow's, fails the round, as a fold error does.
func ProjectionAttributes[S any](attrs func(state S) map[string]any) ProjectionOption {
	return projectionOption(func(c *projectionConfig) {
		c.attributes = func(state any) (map[string]any, error) {
			s, _ := state.(S)
			return attrs(s), nil
		}
	})
}
