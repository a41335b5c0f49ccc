package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/query"
)

// TestCountByKeywordListIsRefused: a count cannot group by a keyword
// list (the engine refuses it first; the store does not guess a meaning).
func TestCountByKeywordListIsRefused(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	by := query.Field{Name: "tags", Type: query.KeywordList}
	_, err := store.CountInstances(t.Context(), &provider.CountInstancesParams{By: &by})
	require.ErrorIs(t, err, query.ErrInvalidQuery)
	groups, err := store.CountInstances(t.Context(), &provider.CountInstancesParams{})
	require.NoError(t, err)
	require.Equal(t, []provider.GroupCount{{Count: 0}}, groups, "an empty store counts one empty group")
}
