package round_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// TestInFlightWorkGoesFirst: an instance's activity tasks and results keep
// the place of its creation in the queues, so a workflow in flight takes
// its next step before instances started after it take their first.
func TestInFlightWorkGoesFirst(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode, memory.Options{}, round.Hooks{})
			two := []scripted.Step{{Kind: scripted.Activity, Name: "a"}, {Kind: scripted.Activity, Name: "a"}}
			b.start(t, "old", two...)
			_, err := b.runner.RunOnce(b.ctx) // old schedules its first activity
			require.NoError(t, err)
			b.clock.Advance(time.Second)
			b.start(t, "new-1", two...)
			b.start(t, "new-2", two...)
			for range 2 {
				_, err := b.runner.RunOnce(b.ctx) // the new ones schedule theirs
				require.NoError(t, err)
			}
			rep, err := b.worker.RunOnce(b.ctx)
			require.NoError(t, err)
			require.Equal(t, "old", rep.InstanceID, "the oldest task goes first")
			b.clock.Advance(time.Second)
			b.start(t, "new-3", two...)
			round1, err := b.runner.RunOnce(b.ctx)
			require.NoError(t, err)
			require.Equal(t, "old", round1.InstanceID, "old's result goes ahead of a later start")
			rep, err = b.worker.RunOnce(b.ctx)
			require.NoError(t, err)
			require.Equal(t, "old", rep.InstanceID, "old's second activity goes ahead of the new ones' first")
			b.drain(t)
			for _, id := range []string{"old", "new-1", "new-2", "new-3"} {
				require.Equal(t, provider.StatusCompleted, b.status(t, id))
			}
		})
	}
}
