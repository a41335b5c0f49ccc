package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// An activity's result consumed by the round that runs with its
// completion is never written: the round takes it from the completion,
// not from a row inserted and deleted in the same transaction. A result
// the round does not consume is queued as before.

// claimedTask returns a store whose instance inst-a has a claimed task
// and no queued message, the lease and the task's result.
func claimedTask(t *testing.T) (*postgres.Store, *provider.ActivityLease, provider.Message) {
	t.Helper()
	s := pgtest.NewStore(t, postgres.Options{})
	enqueueSignals(t, s, releaseT0, releaseSignal(t, "m-1", "inst-a"))
	task := provider.ActivityTask{
		ID: provider.ActivityTaskID("inst-a", "exec-1", 2), InstanceID: "inst-a", ExecutionID: "exec-1",
		ScheduledSeq: 2, Name: "charge", Input: []byte(`1`), Attempt: 1, Timeout: time.Minute,
	}
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		dequeueAck(ctx, t, tx, "inst-a", releaseT0, -1)
		return tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: releaseT0})
	}))
	l, err := s.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: "node-1", Now: releaseT0, LockedUntil: releaseT0.Add(time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, l)
	res, err := provider.ActivityOutcome(&l.Task, []byte(`"done"`), nil)
	require.NoError(t, err)
	return s, l, res
}

// messagesInserted returns the rows inserted into the messages table that
// the statistics have not counted yet: the transaction's so far, and
// those of earlier transactions of its connection not yet reported.
func messagesInserted(ctx context.Context, t *testing.T, s *postgres.Store, tx provider.Tx) int64 {
	t.Helper()
	require.NoError(t, tx.(provider.TxFlusher).Flush(ctx))
	var n int64
	require.NoError(t, postgres.TxQueryRow(ctx, tx, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_xact_user_tables
		WHERE schemaname = $1 AND relname = 'messages'`, s.Schema()).Scan(&n))
	return n
}

func queuedIDs(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	msgs, err := s.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "inst-a"})
	require.NoError(t, err)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestCompletionRoundResultRow(t *testing.T) {
	t.Parallel()
	now := releaseT0.Add(time.Second)
	complete := func(ctx context.Context, t *testing.T, tx provider.Tx, l *provider.ActivityLease, res provider.Message) {
		t.Helper()
		require.NoError(t, tx.(provider.ActivityTx).CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: now}))
	}

	t.Run("Consumed", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			before := messagesInserted(ctx, t, s, tx)
			complete(ctx, t, tx, l, res)
			b := dequeueAck(ctx, t, tx, "inst-a", now, -1)
			require.Len(t, b.Messages, 1)
			require.Equal(t, res.ID, b.Messages[0].ID)
			require.Equal(t, res.Payload, b.Messages[0].Payload)
			require.Equal(t, before, messagesInserted(ctx, t, s, tx), "the consumed result has no row")
			return nil
		}))
		require.Empty(t, queuedIDs(t, s))
	})

	t.Run("NotDequeued", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			complete(ctx, t, tx, l, res)
			return nil
		}))
		require.Equal(t, []string{res.ID}, queuedIDs(t, s), "a completion that ran no round queues its result")
	})

	t.Run("NotAcked", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			complete(ctx, t, tx, l, res)
			dequeueAck(ctx, t, tx, "inst-a", now, 0)
			return nil
		}))
		require.Equal(t, []string{res.ID}, queuedIDs(t, s), "a result the round did not ack stays queued")
	})

	t.Run("Abandoned", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			complete(ctx, t, tx, l, res)
			dequeueAck(ctx, t, tx, "inst-a", now, -1)
			return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-a", MessageIDs: []string{res.ID}, VisibleAt: now.Add(time.Minute), Error: "boom"})
		}))
		msgs, err := s.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the abandoned round's result is queued, its ack undone")
		require.Equal(t, res.ID, msgs[0].ID)
		require.Equal(t, 1, msgs[0].Attempts)
		require.Equal(t, "boom", msgs[0].LastError)
	})

	t.Run("BatchFullAbandoned", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		var queued []provider.Message
		for _, id := range []string{"s-0", "s-1", "s-2", "s-3", "s-4", "s-5", "s-6", "s-7", "s-8", "s-9"} {
			queued = append(queued, releaseSignal(t, id, "inst-a"))
		}
		enqueueSignals(t, s, now, queued...)
		require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			complete(ctx, t, tx, l, res)
			b := dequeueAck(ctx, t, tx, "inst-a", now, -1)
			require.Len(t, b.Messages, 10, "a full batch leaves the result to a later round")
			return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-a", VisibleAt: now})
		}))
		require.Len(t, queuedIDs(t, s), 11)
		require.Contains(t, queuedIDs(t, s), res.ID, "the result is queued")
	})

	t.Run("RolledBack", func(t *testing.T) {
		t.Parallel()
		s, l, res := claimedTask(t)
		boom := errors.New("boom")
		require.ErrorIs(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			complete(ctx, t, tx, l, res)
			dequeueAck(ctx, t, tx, "inst-a", now, -1)
			return boom
		}), boom)
		require.Empty(t, queuedIDs(t, s))
		require.NoError(t, s.CompleteActivity(t.Context(), &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: now}), "the claim is still the task's")
		require.Equal(t, []string{res.ID}, queuedIDs(t, s))
	})
}
