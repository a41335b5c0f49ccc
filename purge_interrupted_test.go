package chronicle_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestInterruptedPurgeIsFinished: a peek-lock purge that deleted the
// instance's record and stopped (a crash between two of its record
// writes) left its purge mark, which keeps every round off the id.
// Engine.Purge skipped the id as not found, and a Start of the id queued
// a start that no round ever took. Either now finishes the purge first.
func TestInterruptedPurgeIsFinished(t *testing.T) {
	t.Parallel()
	for _, finish := range []string{"Purge", "Start"} {
		t.Run("By"+finish, func(t *testing.T) {
			t.Parallel()
			// The purge of an instance without letters, tasks or messages
			// writes the mark, the tombstone, the projections (the record
			// goes), the history and the instance last: it stops after
			// the projections.
			var crash atomic.Bool
			mem := memory.New(memory.Options{Mode: provider.ModePeekLock, Fault: func(op memory.Op) *memory.Fault {
				if op == memory.OpPurgeInstance && crash.CompareAndSwap(true, false) {
					return &memory.Fault{AfterWrites: 3}
				}
				return nil
			}})
			b := setupOn(t, mem)
			register(t, b.engine, "echo", echo)
			b.start(t, "echo", "e-1", "first")
			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "e-1", "go", "!", nil))
			b.drain(t)
			require.Equal(t, chronicle.StatusCompleted, b.describe(t, "e-1").Status)
			first := b.history(t, "e-1")

			crash.Store(true)
			_, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"e-1"}, By: "ops"})
			require.ErrorIs(t, err, memory.ErrInjected)
			_, err = b.engine.Describe(b.ctx, "e-1")
			require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "the purge did not stop after the record went")

			switch finish {
			case "Purge":
				rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"e-1"}, By: "ops"})
				require.NoError(t, err)
				require.Empty(t, rep.Skipped, "the interrupted purge was not finished")
				require.Len(t, rep.Purged, 1)
				require.Equal(t, first[len(first)-1].Seq, rep.Purged[0].LastSeq)
				require.Equal(t, first[len(first)-1].Hash, rep.Purged[0].LastHash)
			case "Start":
			}
			// The id starts again and runs.
			b.start(t, "echo", "e-1", "second")
			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "e-1", "go", "!", nil))
			b.drain(t)
			inst := b.describe(t, "e-1")
			require.Equal(t, chronicle.StatusCompleted, inst.Status, "the restarted id was never leased")
			require.Equal(t, "second!", result[string](t, b, "e-1"))
			all, err := b.engine.ListTombstones(b.ctx, "e-1")
			require.NoError(t, err)
			require.Len(t, all, 1)
			require.Equal(t, first[len(first)-1].Hash, all[0].LastHash)
		})
	}
}

// TestPurgeKeepsTheRestartOfAnEndedInstance: Start with
// ReuseTerminateAndRestart of an ended instance queues the start of its
// next run; a purge of the ended run deleted it, and the restarted
// instance was never found. The purge is now refused until the new run
// has started, and the new run runs.
func TestPurgeKeepsTheRestartOfAnEndedInstance(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, memory.New(memory.Options{Mode: mode}))
			register(t, b.engine, "echo", echo)
			b.start(t, "echo", "e-1", "first")
			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "e-1", "go", "!", nil))
			b.drain(t)
			require.Equal(t, chronicle.StatusCompleted, b.describe(t, "e-1").Status)

			_, err := b.engine.Start(b.ctx, "echo", "second", &chronicle.StartOptions{InstanceID: "e-1", Reuse: chronicle.ReuseTerminateAndRestart})
			require.NoError(t, err)
			rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"e-1"}, By: "ops"})
			require.NoError(t, err)
			require.Empty(t, rep.Purged, "the ended run was purged with its restart queued")
			require.Contains(t, rep.Skipped, "e-1")

			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "e-1", "go", "?", nil))
			b.drain(t)
			require.Equal(t, chronicle.StatusCompleted, b.describe(t, "e-1").Status, "the restarted instance never ran")
			require.Equal(t, "second?", result[string](t, b, "e-1"))
		})
	}
}
