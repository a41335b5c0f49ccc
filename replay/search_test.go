package replay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/replay"
)

// TestSearchAttributeValues: values convert by their declared types, nil
// unsets, and of several bad names the first in name order is reported,
// every time.
func TestSearchAttributeValues(t *testing.T) {
	t.Parallel()
	decls := map[string]query.Type{"a": query.Int, "b": query.Keyword, "c": query.Time, "z": query.Bool}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("X", 7200))
	got, err := replay.SearchAttributeValues(decls, map[string]any{"a": uint8(7), "b": "k", "c": at, "z": nil})
	require.NoError(t, err)
	require.Equal(t, history.SearchAttributeMap{
		"a": {Type: query.Int, Int: 7}, "b": {Type: query.Keyword, Str: "k"},
		"c": {Type: query.Time, Time: at.UTC().Truncate(time.Microsecond)}, "z": {},
	}, got)

	for range 20 {
		_, err := replay.SearchAttributeValues(decls, map[string]any{"z": "no", "b": 1, "y": 1, "a": "x"})
		require.ErrorIs(t, err, replay.ErrInvalidArgument)
		require.ErrorContains(t, err, `"a"`)
	}
	_, err = replay.SearchAttributeValues(decls, map[string]any{"q": 1})
	require.ErrorContains(t, err, `"q" is not declared`)
	got, err = replay.SearchAttributeValues(nil, nil)
	require.NoError(t, err)
	require.Nil(t, got)
}
