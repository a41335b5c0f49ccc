package projector_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/query"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// restarted is the history of an instance that ran workflow "a", was
// terminated, and started again as workflow "b".
func restarted(t *testing.T) []history.Event {
	t.Helper()
	type step struct {
		exec  string
		attrs history.Attributes
	}
	steps := []step{
		{"e1", &history.ExecutionStarted{Name: "a", SearchAttributes: history.SearchAttributeMap{"stage": {Type: query.Keyword, Str: "new"}}}},
		{"e1", &history.TurnStarted{}},
		{"e1", &history.ExecutionTerminated{}},
		{"e2", &history.ExecutionStarted{Name: "b"}},
		{"e2", &history.TurnStarted{}},
		{"e2", &history.TurnStarted{}},
	}
	events := make([]history.Event, len(steps))
	for i, s := range steps {
		payload, err := history.EncodeAttributes(s.attrs)
		require.NoError(t, err)
		e := history.Event{Seq: int64(i + 1), InstanceID: "i", ExecutionID: s.exec, Kind: s.attrs.EventKind(), Payload: payload, At: t0}
		if e.Kind == history.KindExecutionStarted || e.Kind.Terminal() {
			e.CorrelationID = s.exec
		}
		events[i] = e
	}
	history.Seal(nil, events)
	return events
}

// counting counts the events it folds and derives the attribute turns.
func counting(name string, workflows ...string) projector.Definition {
	return projector.Definition{
		Name:      name,
		New:       func() any { return 0 },
		Fold:      func(state any, _ *history.Event) (any, error) { return state.(int) + 1, nil },
		Encode:    func(state any) ([]byte, error) { return history.Encode(state) },
		Workflows: workflows,
		Attributes: func(state any) (map[string]query.Value, error) {
			return map[string]query.Value{"turns": {Type: query.Int, Int: int64(state.(int))}}, nil
		},
	}
}

// TestForWorkflows: a projection limited to some workflows folds the
// events of their executions only and has a record only for an instance
// that had one; its derived attributes reach the instance record over
// the workflow's own.
func TestForWorkflows(t *testing.T) {
	t.Parallel()
	p, err := projector.New(counting("all"), counting("only-b", "b"), counting("only-c", "c"))
	require.NoError(t, err)
	v, err := p.FoldAt("i", restarted(t), 0)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"all": 6, "only-b": 3}, v.Custom)
	var names []string
	for _, r := range v.CustomRecords {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"all", "only-b"}, names, "only-c covers none of the instance's executions")
	// Definitions go in name order, so only-b's value wins over all's.
	require.Equal(t, query.Value{Type: query.Int, Int: 3}, v.Instance.Attributes["turns"])
	require.NotContains(t, v.Instance.Attributes, "stage", "the second execution started without attributes")

	// Folded up to the first execution, only-b has not started.
	v, err = p.FoldAt("i", restarted(t), 3)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"all": 3}, v.Custom)
	require.Equal(t, map[string]query.Value{"stage": {Type: query.Keyword, Str: "new"}, "turns": {Type: query.Int, Int: 3}}, v.Instance.Attributes)
}

// TestAttributesErrorFails: an error deriving attributes fails the fold.
func TestAttributesErrorFails(t *testing.T) {
	t.Parallel()
	d := counting("x")
	boom := errors.New("boom")
	d.Attributes = func(any) (map[string]query.Value, error) { return nil, boom }
	p, err := projector.New(d)
	require.NoError(t, err)
	_, err = p.FoldAt("i", restarted(t), 0)
	require.ErrorIs(t, err, boom)
}
