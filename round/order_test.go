package round_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
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

// messageKinds returns the kinds of the events of history that messages
// brought, in order: what the rounds took from the queue and in which
// order they applied it.
func messageKinds(events []history.Event) []history.Kind {
	var out []history.Kind
	for _, e := range events {
		switch e.Kind {
		case history.KindEventRaised, history.KindTimerFired:
			out = append(out, e.Kind)
		}
	}
	return out
}

// TestBatchInEffectOrder: a round applies its messages in the order they
// took effect, not in the order they were queued. The timer's message was
// queued when the wait began, the signals while no round ran; the signals
// arrived before the timer was due, so they are recorded first. With a
// batch limit that cuts the batch, the round that sees only the timer and
// the first signal leaves the timer for a round that also sees the second
// signal, which arrived before the timer was due too.
func TestBatchInEffectOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		for _, limit := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/limit-%d", mode, limit), func(t *testing.T) {
				t.Parallel()
				b := setup(t, mode, memory.Options{}, round.Hooks{})
				runner, err := round.NewRunner(b.store, round.RunnerOptions{Node: "n1", Turn: scripted.Turn, Clock: b.clock, BatchLimit: limit})
				require.NoError(t, err)
				b.runner = runner
				b.start(t, "i",
					scripted.Step{Kind: scripted.Timer, Delay: 2 * time.Minute},
					scripted.Step{Kind: scripted.Signal, Name: "go"},
					scripted.Step{Kind: scripted.Signal, Name: "go"})
				b.drain(t) // the timer is queued, due at +2 min
				b.clock.Advance(10 * time.Second)
				b.signal(t, "i", "go", "k1")
				b.clock.Advance(10 * time.Second)
				b.signal(t, "i", "go", "k2")
				b.clock.Advance(2 * time.Minute)
				b.drain(t)
				require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
				require.Equal(t, []history.Kind{history.KindEventRaised, history.KindEventRaised, history.KindTimerFired},
					messageKinds(b.history(t, "i")))
			})
		}
	}
}

// TestSkewNeverReordersArrivals: the times messages carry come from the
// clocks of the nodes that queued them. A signal queued right after a start
// by a node whose clock is behind is not moved ahead of the start (it
// would find no execution and be dead-lettered): an arrival counts as no
// earlier than what was queued before it.
func TestSkewNeverReordersArrivals(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode, memory.Options{}, round.Hooks{})
			b.clock.Advance(time.Minute)
			b.start(t, "i", scripted.Step{Kind: scripted.Signal, Name: "go"})
			m, err := scripted.SignalMessage("i", "go", "k1")
			require.NoError(t, err)
			m.EnqueuedAt = t0 // a minute behind the start's node
			require.NoError(t, b.store.EnqueueMessages(b.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: t0}))
			b.drain(t)
			require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
			letters, err := b.store.ListDeadLetters(b.ctx, &provider.ListDeadLettersParams{})
			require.NoError(t, err)
			require.Empty(t, letters)
		})
	}
}
