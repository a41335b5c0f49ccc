package replay

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/query"
)

// ErrInvalidArgument wraps every argument the engine refuses: at the
// client API, and a search attribute workflow code sets that is not
// declared or not of its declared type.
var ErrInvalidArgument = errors.New("chronicle: invalid argument")

// MaxSearchAttributes bounds the search attributes of one instance.
const MaxSearchAttributes = 64

// SearchAttributeValues converts search attribute values given as Go
// values to typed values by their declared types (decls): an undeclared
// name, or a value that is not of its declared type, is an error wrapping
// ErrInvalidArgument that names the attribute. A nil value gives the zero
// Value (unset). Names are checked in order, so the error is the same
// every time.
func SearchAttributeValues(decls map[string]query.Type, attrs map[string]any) (history.SearchAttributeMap, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	out := make(history.SearchAttributeMap, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		t, ok := decls[name]
		if !ok || t == query.Invalid {
			return nil, fmt.Errorf("%w: search attribute %q is not declared (Options.SearchAttributes)", ErrInvalidArgument, name)
		}
		v, err := query.Of(t, attrs[name])
		if err != nil {
			return nil, fmt.Errorf("%w: search attribute %q: %w", ErrInvalidArgument, name, err)
		}
		out[name] = v
	}
	return out, nil
}

// UpsertSearchAttributes sets search attributes of the instance, by
// declared name; a nil value unsets one. Each value must be of its declared
// type, or nothing is recorded and the error wraps ErrInvalidArgument; so
// does a change that would give the instance more than
// MaxSearchAttributes. The change is an event of history
// (SearchAttributesUpserted), so it replays and is hash-chained like any
// other; continue-as-new carries the attributes into the next execution.
func (c *Context) UpsertSearchAttributes(attrs map[string]any) error {
	x := c.x
	values, err := SearchAttributeValues(x.r.opts.SearchAttributes, attrs)
	if err != nil {
		return fmt.Errorf("chronicle: upsert search attributes: %w", err)
	}
	if len(values) == 0 {
		return nil
	}
	n := len(x.attrs)
	for k, v := range values {
		_, had := x.attrs[k]
		switch {
		case v.Type == query.Invalid && had:
			n--
		case v.Type != query.Invalid && !had:
			n++
		}
	}
	if n > MaxSearchAttributes {
		return fmt.Errorf("chronicle: upsert search attributes: %w: an instance has at most %d search attributes, this would give it %d", ErrInvalidArgument, MaxSearchAttributes, n)
	}
	e := x.command(&history.SearchAttributesUpserted{Attributes: values}, "")
	if x.replaying {
		// History holds what the call recorded: the attributes are its.
		a, err := e.Attributes()
		if err != nil {
			x.abort(err)
		}
		values = a.(*history.SearchAttributesUpserted).Attributes
	}
	x.upsert(values)
	return nil
}

// upsert applies recorded attribute changes to the executor's attributes,
// which continue-as-new carries into the next execution.
func (x *executor) upsert(m history.SearchAttributeMap) {
	for k, v := range m {
		if v.Type == query.Invalid {
			delete(x.attrs, k)
			continue
		}
		if x.attrs == nil {
			x.attrs = history.SearchAttributeMap{}
		}
		x.attrs[k] = v
	}
}
