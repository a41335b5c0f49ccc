package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// The wake-ups at a round's release: a released instance wakes this
// store's orchestration workers only when one of them may have skipped
// work of it while the round held it. Every wake-up that finds nothing is
// an empty round transaction and a next-visible query.

var releaseT0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func releaseSignal(t *testing.T, id, instanceID string) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(id, instanceID, "", id, &history.EventRaised{Name: "poke", Payload: []byte(id), IdempotencyKey: id})
	require.NoError(t, err)
	return m
}

func enqueueSignals(t *testing.T, s *postgres.Store, now time.Time, msgs ...provider.Message) {
	t.Helper()
	require.NoError(t, s.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: msgs, Now: now}))
}

func woken(hint <-chan struct{}) bool {
	select {
	case <-hint:
		return true
	default:
		return false
	}
}

// dequeueAck dequeues instanceID in tx (any instance when it is empty)
// and acks the first ack messages of its batch (all when ack < 0).
func dequeueAck(ctx context.Context, t *testing.T, tx provider.Tx, instanceID string, now time.Time, ack int) *provider.Batch {
	t.Helper()
	b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: "node-1", Limit: 10, InstanceID: instanceID})
	require.NoError(t, err)
	require.NotNil(t, b)
	ids := make([]string, 0, len(b.Messages))
	for _, m := range b.Messages {
		ids = append(ids, m.ID)
	}
	if ack >= 0 {
		ids = ids[:ack]
	}
	require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: b.InstanceID, MessageIDs: ids}))
	return b
}

func TestRoundReleaseWakes(t *testing.T) {
	t.Parallel()
	now := releaseT0.Add(time.Second)

	t.Run("NothingLeft", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		enqueueSignals(t, s, releaseT0, releaseSignal(t, "m-1", "inst-a"))
		hint := postgres.OrchestrationHint(s)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			dequeueAck(ctx, t, tx, "", now, -1)
			return nil
		}))
		require.False(t, woken(hint), "a round that left its instance without messages wakes no worker")
	})

	t.Run("MessageLeft", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		enqueueSignals(t, s, releaseT0, releaseSignal(t, "m-1", "inst-a"), releaseSignal(t, "m-2", "inst-a"))
		hint := postgres.OrchestrationHint(s)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			dequeueAck(ctx, t, tx, "", now, 1)
			return nil
		}))
		require.True(t, woken(hint), "a round that left a message wakes a worker")
	})

	t.Run("ArrivalAtTheEnd", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		enqueueSignals(t, s, releaseT0, releaseSignal(t, "m-1", "inst-a"))
		// A message arrives after the round's last look for messages,
		// before its release; the enqueue's own wake-up closes the hint
		// it finds, the release the next one.
		var hint <-chan struct{}
		postgres.SetAfterCommit(s, func() error {
			err := s.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{releaseSignal(t, "m-2", "inst-a")}, Now: now})
			hint = postgres.OrchestrationHint(s)
			return err
		})
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			dequeueAck(ctx, t, tx, "", now, -1)
			return nil
		}))
		require.True(t, woken(hint), "work that arrived after the round's last look wakes a worker at the release")
	})

	t.Run("CompletionRound", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)

		hint := postgres.OrchestrationHint(s)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			require.NoError(t, tx.(provider.ActivityTx).CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: now}))
			dequeueAck(ctx, t, tx, "inst-a", now, -1)
			// A signal that arrives while the round holds the instance is
			// visible to this store's workers, which look again for it
			// (their dequeue skips the locked row).
			enqueueSignals(t, s, now, releaseSignal(t, "m-2", "inst-a"))
			hint = postgres.OrchestrationHint(s)
			at, ok, err := s.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration})
			require.NoError(t, err)
			require.True(t, ok, "the held instance's signal counts in the next visible time")
			require.Equal(t, now, at)
			return nil
		}))
		require.False(t, woken(hint), "the release of a round run with a completion wakes no worker")
	})
}
