package chronicle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestPanickingProjectionIsDeadLettered checks that a custom projection
// whose fold panics fails its round like a panicking workflow does: the
// node keeps running, the message is retried and then dead-lettered with
// reason panic, and other instances are not affected.
func TestPanickingProjectionIsDeadLettered(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, memory.New(memory.Options{Mode: mode}))
			register(t, b.engine, "waiter", func(ctx *chronicle.Context, in string) (string, error) {
				s, err := chronicle.WaitEvent[string](ctx, "go", nil)
				return in + s, err
			})
			require.NoError(t, chronicle.RegisterProjection(b.engine, "signals", 1, func(n int, e *chronicle.Event) (int, error) {
				if e.Kind == history.KindEventRaised && e.InstanceID == "boom" {
					panic("projection bug")
				}
				return n + 1, nil
			}))
			b.start(t, "waiter", "boom", "a")
			b.start(t, "waiter", "fine", "a")
			b.drain(t)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "boom", "go", "b", nil))
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "fine", "go", "b", nil))
			for i := 0; i < 4; i++ {
				b.advance(t, 2*time.Minute) // past each retry delay
			}
			require.Equal(t, "ab", result[string](t, b, "fine"))
			letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "boom"})
			require.NoError(t, err)
			require.Len(t, letters, 1)
			require.Equal(t, provider.ReasonPanic, letters[0].Reason)
			require.Contains(t, letters[0].Error, "projection bug")
			if mode == provider.ModeTransactional {
				require.Equal(t, chronicle.StatusRunning, b.describe(t, "boom").Status, "the signal's event was not kept")
			}
		})
	}
}
