package chronicle

import (
	"context"
	"errors"
)

// errSearchTodo marks the search functions whose bodies are being written.
var errSearchTodo = errors.New("chronicle: search not implemented yet")

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
// first).
func (e *Engine) CountInstances(ctx context.Context, f CountFilter) ([]Count, error) {
	return nil, errSearchTodo
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
	return nil, errSearchTodo
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
// workflows only, instead of every instance of every workflow.
func ForWorkflows(names ...string) ProjectionOption {
	return projectionOption(func(c *projectionConfig) { c.workflows = append(c.workflows, names...) })
}

// ProjectionAttributes makes fields of the projection's state search
// attributes of its instance: after each fold, attrs returns their values
// by declared name ([Options.SearchAttributes]), and they are stored with
// the instance record, queryable like attributes set by the workflow. They
// are derived from history, so a rebuild derives them again.
func ProjectionAttributes[S any](attrs func(state S) map[string]any) ProjectionOption {
	return projectionOption(func(c *projectionConfig) {
		c.attributes = func(state any) (map[string]any, error) {
			s, _ := state.(S)
			return attrs(s), nil
		}
	})
}
