package chronicle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// TestEngineOnCoreOnlyStore runs a workflow with an activity and a signal
// on a store that has only the core of the contract, and checks that a call
// needing an optional capability gets a typed error.
func TestEngineOnCoreOnlyStore(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, providertest.CoreOnly(memory.New(memory.Options{Mode: mode})))
			register(t, b.engine, "greet", func(ctx *chronicle.Context, name string) (string, error) {
				hello, err := chronicle.CallActivity[string](ctx, "hello", name, nil)
				if err != nil {
					return "", err
				}
				mark, err := chronicle.WaitEvent[string](ctx, "mark", nil)
				return hello + mark, err
			})
			activity(t, b.engine, "hello", func(_ context.Context, name string) (string, error) { return "hello " + name, nil })
			b.start(t, "greet", "g", "ana")
			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "g", "mark", "!", nil))
			b.drain(t)
			require.Equal(t, "hello ana!", result[string](t, b, "g"))
			require.NoError(t, b.engine.Verify(b.ctx, "g"))

			_, err := b.engine.Describe(b.ctx, "nobody")
			require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "an unknown id is not found, dead letters unread")
			_, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{})
			require.ErrorIs(t, err, chronicle.ErrUnsupported)
			var unsupported *chronicle.UnsupportedError
			require.ErrorAs(t, err, &unsupported)
			require.Equal(t, "provider.QueryStore", unsupported.Capability)
			_, err = b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
			require.ErrorIs(t, err, chronicle.ErrUnsupported)
			_, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"g"}, By: "ops"})
			require.ErrorIs(t, err, chronicle.ErrUnsupported)
			_, err = b.engine.Hold(b.ctx, "g", chronicle.HoldOptions{Reason: "r", Actor: "counsel"})
			require.ErrorAs(t, err, &unsupported)
			require.Equal(t, "provider.HoldStore", unsupported.Capability)
			h, err := b.engine.GetHold(b.ctx, "g")
			require.NoError(t, err)
			require.Nil(t, h, "a store without holds holds nothing")
		})
	}
}
