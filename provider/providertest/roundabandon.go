package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testAbandonInRound covers Tx.AbandonMessages: a failed round records
// its failed delivery before it releases the instance, so that no other
// worker takes the messages before the retry hold is set.
func testAbandonInRound(t *testing.T, factory Factory) {
	t.Run("UndoesTheRoundAndHoldsTheInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		now := at(time.Second)
		hold := at(time.Minute)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"), signal(t, "m-3", "inst-a"))
		var taken *delivery
		err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, Limit: 10})
			if err != nil {
				return err
			}
			if batch == nil {
				return errors.New("nothing dequeued")
			}
			// Every kind of write the round can make, all to be undone.
			events := chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "m-1"))
			if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: events}); err != nil {
				return err
			}
			if err := tx.SaveProjections(ctx, projections(t, "inst-a", 2, "round", true)); err != nil {
				return err
			}
			if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "n-1", "inst-b")}, Now: now}); err != nil {
				return err
			}
			if err := tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{activity("inst-a", execID, 3, "")}, Now: now}); err != nil {
				return err
			}
			ls, err := letters(batch.Messages, []string{"m-3"}, provider.ReasonPanic, "turn panicked", now)
			if err != nil {
				return err
			}
			if err := tx.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: "inst-a", Letters: ls}); err != nil {
				return err
			}
			if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: []string{"m-1", "m-2"}}); err != nil {
				return err
			}
			err = tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{
				InstanceID: "inst-a", MessageIDs: messageIDs(batch.Messages), VisibleAt: hold, Error: "boom",
			})
			if err != nil {
				return err
			}
			// Until the round ends, another worker finds the instance
			// locked, even at the end of the hold.
			taken = b.take(t, at(time.Hour), 10, "")
			return nil
		})
		require.NoError(t, err)
		require.Nil(t, taken, "another round dequeued the instance of a round that abandoned its messages before it ended")

		require.Empty(t, b.load(t, "inst-a", 1), "history of an abandoned round")
		_, _, err = b.store.GetSnapshot(t.Context(), "inst-a")
		require.ErrorIs(t, err, provider.ErrNotFound, "snapshot of an abandoned round")
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{}), "dead letters of an abandoned round")
		require.Nil(t, b.claim(t, at(time.Hour)), "activity task of an abandoned round")

		require.Nil(t, b.take(t, hold.Add(-time.Microsecond), 10, ""), "an abandoned instance was dequeued before its hold ended")
		d := b.take(t, hold, 10, "")
		require.NotNil(t, d, "an abandoned instance was not released at the end of its hold")
		require.Equal(t, "inst-a", d.InstanceID, "message enqueued by an abandoned round")
		require.Equal(t, []string{"m-1", "m-2", "m-3"}, messageIDs(d.Messages))
		for _, m := range d.Messages {
			require.Equal(t, 1, m.Attempts, "failed delivery of %s not counted", m.ID)
			require.Equal(t, "boom", m.LastError)
		}
		require.Nil(t, b.take(t, at(time.Hour), 10, ""), "message enqueued by an abandoned round")
	})

	t.Run("OnlyALockedInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{
				InstanceID: "inst-a", MessageIDs: []string{"m-1"}, VisibleAt: at(time.Minute), Error: "boom",
			})
		})
		require.Error(t, err, "a round abandoned messages of an instance it did not dequeue")
		d := b.take(t, base, 10, "")
		require.NotNil(t, d)
		require.Equal(t, 0, d.Messages[0].Attempts)
	})
}
