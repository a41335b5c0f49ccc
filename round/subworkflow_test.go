package round_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

func TestChildIDs(t *testing.T) {
	t.Parallel()

	t.Run("DependOnTheParentsExecution", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p/exec-1/3", round.DefaultChildID("p", "exec-1", 3))
		// A purged and reused parent id has a new execution id.
		require.NotEqual(t, round.DefaultChildID("p", "exec-1", 3), round.DefaultChildID("p", "exec-2", 3))
		// Two parents naming one child at one seq.
		require.NotEqual(t, round.ChildExecutionID("p1", "exec-1", 3), round.ChildExecutionID("p2", "exec-1", 3))
		require.NotEqual(t, round.ChildExecutionID("p", "exec-1", 3), round.ChildExecutionID("p", "exec-2", 3))
		require.NotEqual(t, round.ChildStartMessageID("p1", "exec-1", 3), round.ChildStartMessageID("p2", "exec-1", 3))
		require.NotEqual(t, round.ChildStartMessageID("p", "exec-1", 3), round.ChildStartMessageID("p", "exec-2", 3))
	})

	t.Run("LongDefaultIDIsStillValid", func(t *testing.T) {
		t.Parallel()
		parent := strings.Repeat("p", history.MaxIDLength)
		id := round.DefaultChildID(parent, "exec-1", 3)
		require.NoError(t, history.ValidateID("child", id))
		require.NotEqual(t, id, round.DefaultChildID(parent, "exec-2", 3))
		require.Equal(t, id, round.DefaultChildID(parent, "exec-1", 3), "not deterministic")
	})
}
