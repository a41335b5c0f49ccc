package round_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// TestGroupRollsBackOnlyTheFailingRound runs three instances' rounds in one
// transaction while the middle one fails: the others commit, the failing
// one is rolled back to its savepoint and held for a retry (an error) or
// dead-lettered (a dead-letter error), and runs again alone.
func TestGroupRollsBackOnlyTheFailingRound(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]error{
		"retried":       errors.New("boom"),
		"dead-lettered": &round.DeadLetterError{Reason: provider.ReasonRejected, Err: errors.New("refused")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, provider.ModeTransactional, memory.Options{}, round.Hooks{})
			failing := true
			var err error
			b.runner, err = round.NewRunner(b.store, round.RunnerOptions{
				Node: "n1", Clock: b.clock, GroupSize: 3,
				Turn: func(ctx context.Context, in *round.TurnInput) (*round.TurnOutput, error) {
					if in.InstanceID == "b" && failing {
						return nil, fail
					}
					return scripted.Turn(ctx, in)
				},
			})
			require.NoError(t, err)
			for _, id := range []string{"a", "b", "c"} {
				b.start(t, id, scripted.Step{Kind: scripted.Activity, Name: "a"})
			}
			reps, err := b.runner.RunGroup(b.ctx)
			require.Len(t, reps, 3, "one transaction took all three instances")
			for _, id := range []string{"a", "c"} {
				require.Equal(t, []history.Kind{history.KindExecutionStarted, history.KindTurnStarted, history.KindActivityScheduled},
					kinds(b.history(t, id))[:3], "%s committed with the group", id)
			}
			require.Empty(t, b.history(t, "b"), "the failing round wrote nothing")
			require.Equal(t, "b", reps[1].InstanceID)
			msgs, lerr := b.store.ListMessages(b.ctx, &provider.ListMessagesParams{InstanceID: "b"})
			require.NoError(t, lerr)
			if name == "retried" {
				require.ErrorContains(t, err, "boom")
				require.True(t, reps[1].Failed)
				require.Len(t, msgs, 1)
				require.Equal(t, 1, msgs[0].Attempts, "the failed delivery is counted")
				require.Contains(t, msgs[0].LastError, "boom")
				// Held for the retry delay, then run again alone.
				failing = false
				b.clock.Advance(round.DefaultRetryDelay(1))
				b.drain(t)
				require.Equal(t, provider.StatusCompleted, b.status(t, "b"))
			} else {
				require.NoError(t, err)
				require.Equal(t, 1, reps[1].DeadLettered)
				require.Empty(t, msgs)
				letters, lerr := b.store.ListDeadLetters(b.ctx, &provider.ListDeadLettersParams{InstanceID: "b"})
				require.NoError(t, lerr)
				require.Len(t, letters, 1)
				require.Equal(t, provider.ReasonRejected, letters[0].Reason)
				require.Equal(t, 1, letters[0].Attempts)
			}
			b.drain(t)
			for _, id := range []string{"a", "c"} {
				require.Equal(t, provider.StatusCompleted, b.status(t, id))
			}
		})
	}
}

// TestColdRoundDropsASignalSeenBeforeTheSnapshot: the stored snapshot
// leaves out the execution's idempotency keys, so a round that starts
// from it (a restarted node) must find them in the execution's events and
// still drop a signal it recorded before.
func TestColdRoundDropsASignalSeenBeforeTheSnapshot(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode, memory.Options{}, round.Hooks{})
			b.start(t, "i", scripted.Step{Kind: scripted.Signal, Name: "s1"}, scripted.Step{Kind: scripted.Signal, Name: "s2"})
			b.drain(t)
			b.signal(t, "i", "s1", "k1")
			b.drain(t)
			before := len(b.history(t, "i"))
			b.runner.Forget() // the node restarts: the next round is cold
			b.signal(t, "i", "s1", "k1")
			rep, err := b.runner.RunOnce(b.ctx)
			require.NoError(t, err)
			require.True(t, rep.Cold)
			require.Equal(t, 1, rep.Duplicates, "the signal's key was recorded before the stored snapshot")
			require.Len(t, b.history(t, "i"), before)
		})
	}
}
