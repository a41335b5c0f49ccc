package round_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// probedStore runs probe when the runner abandons messages outside a
// round, the moment at which another worker could take them.
type probedStore struct {
	*memory.Store
	probe func()
}

func (s *probedStore) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	if s.probe != nil {
		s.probe()
	}
	return s.Store.AbandonMessages(ctx, p)
}

func TestRunnerFailedRoundKeepsItsHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &probedStore{Store: memory.New(memory.Options{Mode: provider.ModeTransactional})}
	clock := round.NewManualClock(t0)
	errBoom := errors.New("boom")
	runner, err := round.NewRunner(store, round.RunnerOptions{
		Node: "n1", Clock: clock,
		Turn:       func(context.Context, *round.TurnInput) (*round.TurnOutput, error) { return nil, errBoom },
		RetryDelay: func(int) time.Duration { return time.Minute },
	})
	require.NoError(t, err)

	// Another worker looks for work when the failed round's abandon runs:
	// it must find the instance locked or held, never its messages.
	var slipped []string
	errProbe := errors.New("probe")
	store.probe = func() {
		err := store.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: clock.Now(), Owner: "n2", Limit: 10})
			if err != nil {
				return err
			}
			if b != nil {
				for _, m := range b.Messages {
					slipped = append(slipped, m.ID)
				}
			}
			return errProbe
		})
		require.ErrorIs(t, err, errProbe)
	}

	m, err := scripted.StartMessage("i", scripted.Script{})
	require.NoError(t, err)
	require.NoError(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: clock.Now()}))

	rep, err := runner.RunOnce(ctx)
	require.ErrorIs(t, err, errBoom)
	require.NotNil(t, rep)
	require.True(t, rep.Failed)
	require.Empty(t, slipped, "another worker took the messages of a failed round before its retry hold was set")

	// The delivery is counted and the instance held for the retry delay.
	queued, err := store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Len(t, queued, 1)
	require.Equal(t, 1, queued[0].Attempts)
	require.Contains(t, queued[0].LastError, "boom")
	rep, err = runner.RunOnce(ctx)
	require.NoError(t, err)
	require.Nil(t, rep, "a failed round's instance was delivered again before its retry delay")
	clock.Advance(time.Minute)
	rep, err = runner.RunOnce(ctx)
	require.ErrorIs(t, err, errBoom)
	require.NotNil(t, rep, "the instance was not delivered again after its retry delay")
	queued, err = store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Equal(t, 2, queued[0].Attempts)
}
