package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
)

// testActivityTx covers [provider.ActivityTx]: an activity task completed
// inside a round's transaction, whose result the round's dequeue of the
// instance sees, all kept or lost with the transaction.
func testActivityTx(t *testing.T, factory Factory) {
	// setupCompletion returns a bundle whose instance inst-a has a queued
	// signal and a claimed task, and the task's lease and result.
	setupCompletion := func(t *testing.T) (*bundle, *provider.ActivityLease, provider.Message) {
		t.Helper()
		b := setup(t, factory)
		a, ok := b.store.(provider.ActivityTxStore)
		if !ok || !a.CompletesInRound() {
			t.Skip("providertest: SKIPPED: the store does not implement provider.ActivityTxStore")
		}
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		b.enqueueTasks(t, base, activity("inst-a", execID, 2, ""))
		l := b.claim(t, at(time.Second))
		require.NotNil(t, l)
		res, err := provider.ActivityOutcome(&l.Task, []byte(`"done"`), nil)
		require.NoError(t, err)
		return b, l, res
	}
	complete := func(ctx context.Context, tx provider.Tx, l *provider.ActivityLease, token string, res provider.Message) error {
		return tx.(provider.ActivityTx).CompleteActivity(ctx, &provider.CompleteActivityParams{
			TaskID: l.Task.ID, Token: token, Result: res, Now: at(2 * time.Second),
		})
	}

	t.Run("DequeueTakesTheResult", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			if err := complete(ctx, tx, l, l.Token, res); err != nil {
				return err
			}
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"})
			if err != nil {
				return err
			}
			require.NotNil(t, batch, "the instance, with its result, is dequeued")
			require.Equal(t, []string{"m-1", res.ID}, messageIDs(batch.Messages), "the result follows what was queued before it")
			require.Equal(t, res.Payload, batch.Messages[1].Payload)
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: messageIDs(batch.Messages)})
		}))
		require.Empty(t, b.drain(t, at(time.Hour)), "the result was acked in the transaction")
		require.Nil(t, b.claim(t, at(time.Hour)), "the task is gone")
		// The task stays known: a retried round's enqueue is a no-op.
		b.enqueueTasks(t, at(time.Hour), activity("inst-a", execID, 2, ""))
		require.Nil(t, b.claim(t, at(time.Hour)))
	})

	t.Run("CommittedAloneTheResultStaysQueued", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			return complete(ctx, tx, l, l.Token, res)
		}))
		got := b.drain(t, at(time.Hour))
		require.Equal(t, []string{"m-1", res.ID}, messageIDs(got))
		require.Nil(t, b.claim(t, at(time.Hour)))
	})

	t.Run("RollbackKeepsTheClaim", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		boom := errors.New("boom")
		require.ErrorIs(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			if err := complete(ctx, tx, l, l.Token, res); err != nil {
				return err
			}
			if _, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"}); err != nil {
				return err
			}
			return boom
		}), boom)
		require.Equal(t, []string{"m-1"}, messageIDs(b.drain(t, at(2*time.Second))), "no result without the commit")
		b.complete(t, l, at(3*time.Second)) // the claim is still the task's
		require.Equal(t, []string{res.ID}, messageIDs(b.drain(t, at(time.Hour))))
	})

	t.Run("StaleTokenIsLeaseLost", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			if err := complete(ctx, tx, l, l.Token+"-stale", res); err != nil {
				return err
			}
			// A store may tell it at the next statement of the round.
			_, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"})
			return err
		})
		require.ErrorIs(t, err, provider.ErrLeaseLost)
		require.Equal(t, []string{"m-1"}, messageIDs(b.drain(t, at(2*time.Second))), "nothing enqueued")
		b.complete(t, l, at(3*time.Second))
	})

	t.Run("EnqueueClaimed", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		task := activity("inst-a", execID, 3, "")
		enqueue := func(ctx context.Context, tx provider.Tx, abandon bool) error {
			ct, ok := tx.(provider.ClaimingTx)
			if !ok {
				t.Skip("providertest: SKIPPED: the store's Tx does not implement provider.ClaimingTx")
			}
			if err := complete(ctx, tx, l, l.Token, res); err != nil {
				return err
			}
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"})
			if err != nil {
				return err
			}
			require.NotNil(t, batch)
			if err := ct.EnqueueClaimedActivity(ctx, &provider.EnqueueClaimedActivityParams{
				Task: task, Now: at(2 * time.Second), Token: "tok-eager", Owner: "eager", LockedUntil: at(time.Minute),
			}); err != nil {
				return err
			}
			if abandon {
				return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-a", VisibleAt: at(2 * time.Second)})
			}
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: messageIDs(batch.Messages)})
		}
		// An abandon of the instance undoes it.
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error { return enqueue(ctx, tx, true) }))
		require.Nil(t, b.claim(t, at(2*time.Hour)), "the abandoned round's task is not there")
		require.Equal(t, []string{"m-1", res.ID}, messageIDs(b.drain(t, at(time.Hour))))

		b, l, res = setupCompletion(t)
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error { return enqueue(ctx, tx, false) }))
		require.Nil(t, b.claim(t, at(30*time.Second)), "claimed until LockedUntil")
		res3, err := provider.ActivityOutcome(&task, []byte(`"eager"`), nil)
		require.NoError(t, err)
		require.NoError(t, b.store.CompleteActivity(t.Context(), &provider.CompleteActivityParams{
			TaskID: task.ID, Token: "tok-eager", Result: res3, Now: at(3 * time.Second),
		}), "the claim is the task's")
		require.Equal(t, []string{res3.ID}, messageIDs(b.drain(t, at(time.Hour))))
		require.Nil(t, b.claim(t, at(2*time.Hour)))
		// Its id is known: enqueued again, it is not.
		b.enqueueTasks(t, at(2*time.Hour), task)
		require.Nil(t, b.claim(t, at(2*time.Hour)))
	})

	t.Run("OtherOpenTasksLeaveTheRound", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		b.enqueueTasks(t, base, activity("inst-a", execID, 3, ""))
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			if err := complete(ctx, tx, l, l.Token, res); err != nil {
				return err
			}
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"})
			require.Nil(t, batch, "another task of the instance is open")
			return err
		}))
		require.Equal(t, []string{"m-1", res.ID}, messageIDs(b.drain(t, at(time.Hour))), "the completion committed alone")
	})

	t.Run("AbandonKeepsTheCompletion", func(t *testing.T) {
		t.Parallel()
		b, l, res := setupCompletion(t)
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			if err := complete(ctx, tx, l, l.Token, res); err != nil {
				return err
			}
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(2 * time.Second), Owner: node, Limit: 10, InstanceID: "inst-a"})
			if err != nil {
				return err
			}
			require.NotNil(t, batch)
			if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: messageIDs(batch.Messages)}); err != nil {
				return err
			}
			return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{
				InstanceID: "inst-a", MessageIDs: messageIDs(batch.Messages), VisibleAt: at(time.Minute), Error: "boom",
			})
		}))
		require.Empty(t, b.drain(t, at(30*time.Second)), "held until the retry")
		got := b.drain(t, at(time.Minute))
		require.Equal(t, []string{"m-1", res.ID}, messageIDs(got), "the ack was undone, the completion kept")
		for _, m := range got {
			require.Equal(t, 1, m.Attempts, "message %s: the failed delivery is counted", m.ID)
		}
		require.Nil(t, b.claim(t, at(time.Hour)), "the task is gone")
	})
}
