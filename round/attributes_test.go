package round_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/round"
)

// attrEvents builds the events of one instance from attributes: an
// ExecutionStarted opens execution "exec-<n>", correlated with it, and
// so does the end event it follows.
func attrEvents(t *testing.T, attrs ...history.Attributes) []history.Event {
	t.Helper()
	events := make([]history.Event, len(attrs))
	exec := ""
	for i, a := range attrs {
		payload, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		if a.EventKind() == history.KindExecutionStarted {
			exec = "exec-" + string(rune('1'+i))
		}
		e := history.Event{Seq: int64(i + 1), InstanceID: "i", ExecutionID: exec, Kind: a.EventKind(), Payload: payload, At: t0}
		if a.EventKind() == history.KindExecutionStarted || a.EventKind().Terminal() {
			e.CorrelationID = exec
		}
		events[i] = e
	}
	history.Seal(nil, events)
	return events
}

func kw(s string) query.Value { return query.Value{Type: query.Keyword, Str: s} }

// TestSnapshotFoldsAttributes: the start's attributes, upserts and
// unsets, and the custom status text reach the snapshot, its stored form,
// its record and its clones (which do not share them); the next
// execution starts from its own start's attributes.
func TestSnapshotFoldsAttributes(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	events := attrEvents(t,
		&history.ExecutionStarted{Name: "order", SearchAttributes: history.SearchAttributeMap{"customer": kw("c-1"), "amount": {Type: query.Float, Float: 10}}},
		&history.TurnStarted{},
		&history.SearchAttributesUpserted{Attributes: history.SearchAttributeMap{"amount": {}, "due": {Type: query.Time, Time: due}, "customer": kw("c-2")}},
		&history.CustomStatusSet{Status: []byte{0xa4, 'p', 'a', 'i', 'd'}, Text: "paid"},
	)
	snap, err := round.Fold("i", events)
	require.NoError(t, err)
	want := history.SearchAttributeMap{"customer": kw("c-2"), "due": {Type: query.Time, Time: due}}
	require.Equal(t, want, snap.Attributes)
	require.Equal(t, "paid", snap.CustomStatusText)

	rec := snap.Record()
	require.Equal(t, map[string]query.Value(want), rec.Attributes)
	require.Equal(t, "paid", rec.CustomStatusText)
	rec.Attributes["customer"] = kw("changed")
	require.Equal(t, kw("c-2"), snap.Attributes["customer"], "the record does not share the snapshot's map")

	clone := snap.Clone()
	more := attrEvents(t, &history.SearchAttributesUpserted{Attributes: history.SearchAttributeMap{"customer": {}}})[0]
	more.Seq, more.ExecutionID = 5, snap.ExecutionID
	history.Seal(snap.LastHash, []history.Event{more})
	require.NoError(t, clone.Apply(&more, nil))
	require.NotContains(t, clone.Attributes, "customer")
	require.Contains(t, snap.Attributes, "customer", "a clone does not share the attributes")

	data, err := round.MarshalSnapshot(snap)
	require.NoError(t, err)
	back, err := round.UnmarshalSnapshot(data)
	require.NoError(t, err)
	require.Equal(t, snap.Attributes, back.Attributes)
	require.Equal(t, "paid", back.CustomStatusText)

	// Unsetting the last attribute leaves none; a new execution takes
	// its start's.
	ended := attrEvents(t,
		&history.ExecutionStarted{Name: "order", SearchAttributes: history.SearchAttributeMap{"customer": kw("c-1")}},
		&history.TurnStarted{},
		&history.SearchAttributesUpserted{Attributes: history.SearchAttributeMap{"customer": {}}},
		&history.ExecutionCompleted{},
		&history.ExecutionStarted{Name: "order", SearchAttributes: history.SearchAttributeMap{"region": kw("north")}},
	)
	snap, err = round.Fold("i", ended[:3])
	require.NoError(t, err)
	require.Nil(t, snap.Attributes)
	require.Nil(t, snap.Record().Attributes)
	snap, err = round.Fold("i", ended)
	require.NoError(t, err)
	require.Equal(t, history.SearchAttributeMap{"region": kw("north")}, snap.Attributes)
}

// TestMergeAttributes: derived attributes win over the record's own, and
// a zero Value sets nothing.
func TestMergeAttributes(t *testing.T) {
	t.Parallel()
	r := &provider.InstanceRecord{Attributes: map[string]query.Value{"a": kw("own"), "b": kw("own")}}
	round.MergeAttributes(r, map[string]query.Value{"a": kw("derived"), "b": {}, "c": kw("new")})
	require.Equal(t, map[string]query.Value{"a": kw("derived"), "b": kw("own"), "c": kw("new")}, r.Attributes)
	empty := &provider.InstanceRecord{}
	round.MergeAttributes(empty, nil)
	require.Nil(t, empty.Attributes)
}
