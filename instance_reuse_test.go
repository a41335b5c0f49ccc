package chronicle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestPurgedIDReusedWhileAnotherNodeCachesIt reproduces a node trusting its
// cached state of a purged instance when the instance id is started again:
// the new history is no longer than the old one, so nothing after the
// cached seq is stored and only the hash at that seq tells them apart.
func TestPurgedIDReusedWhileAnotherNodeCachesIt(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, memory.New(memory.Options{Mode: mode}))
			nodeB := b.newEngine(t)
			for _, e := range []*chronicle.Engine{b.engine, nodeB} {
				register(t, e, "once", func(ctx *chronicle.Context, in string) (string, error) {
					return chronicle.CallActivity[string](ctx, "echo", in, nil)
				})
				activity(t, e, "echo", func(_ context.Context, in string) (string, error) { return in, nil })
			}
			b.start(t, "once", "X", "first")
			b.drain(t) // node A runs X to completion and keeps it cached
			require.Equal(t, "first", result[string](t, b, "X"))

			_, err := nodeB.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"X"}, By: "ops"})
			require.NoError(t, err)
			_, err = nodeB.Start(b.ctx, "once", "second", &chronicle.StartOptions{InstanceID: "X"})
			require.NoError(t, err)
			worked, err := nodeB.RunOnce(b.ctx) // the first round and the activity
			require.NoError(t, err)
			require.True(t, worked)

			b.drain(t) // node A takes the activity result's round
			require.Equal(t, "second", result[string](t, b, "X"))
			require.NoError(t, err)
		})
	}
}
