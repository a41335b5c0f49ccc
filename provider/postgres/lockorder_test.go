package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// waitLockWaits waits until n sessions wait for a lock on a table of
// schema: the statement of the other side of a race has taken what it
// takes before it blocks.
func waitLockWaits(t *testing.T, conn *pgx.Conn, schema string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		require.NoError(t, conn.QueryRow(t.Context(), `
SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND state = 'active' AND position($1 in query) > 0`, schema).Scan(&waiting))
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting for a session to wait for a lock")
		}
		<-tick.C
	}
}

// holdRound runs a round that dequeues an instance and, once released,
// runs then; locked is closed when the instance is locked.
func holdRound(t *testing.T, s *postgres.Store, now time.Time, then func(ctx context.Context, tx provider.Tx) error) (locked, release chan struct{}, done chan error) {
	t.Helper()
	locked, release, done = make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: "n1", Limit: 100})
			if err != nil {
				return err
			}
			if b == nil {
				return errors.New("nothing to dequeue")
			}
			close(locked)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return then(ctx, tx)
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		require.FailNow(t, "the round ended before it locked its instance", "%v", err)
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for the round to lock its instance")
	}
	return locked, release, done
}

func receive(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for "+what)
		return nil
	}
}

// TestConcurrentWriters races writers that lock the same rows in
// PostgreSQL: every writer takes the instance row first, so none
// deadlocks (40P01) with a round, which does.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()

	t.Run("AbandonWhileARoundAcks", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		admin := adminConn(t)
		ctx := t.Context()
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "inst-a")}, Now: base}))

		_, release, roundDone := holdRound(t, s, base, func(ctx context.Context, tx provider.Tx) error {
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: []string{"m-1"}})
		})
		abandonDone := make(chan error, 1)
		go func() {
			abandonDone <- s.AbandonMessages(ctx, &provider.AbandonMessagesParams{
				InstanceID: "inst-a", MessageIDs: []string{"m-1"}, VisibleAt: base.Add(time.Minute), Error: "boom",
			})
		}()
		waitLockWaits(t, admin, s.Schema(), 1)
		close(release)
		require.NoError(t, receive(t, roundDone, "the round"))
		require.NoError(t, receive(t, abandonDone, "the abandon"))
		msgs, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Empty(t, msgs, "the acked message came back")
	})

	// claimedTask queues a message and an activity task of inst-a and
	// claims the task.
	claimedTask := func(t *testing.T, s *postgres.Store) *provider.ActivityLease {
		t.Helper()
		ctx := t.Context()
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "inst-a")}, Now: base}))
		task := provider.ActivityTask{
			ID: provider.ActivityTaskID("inst-a", "exec-1", 2), InstanceID: "inst-a", ExecutionID: "exec-1", ScheduledSeq: 2,
			Name: "charge-card", Attempt: 1, Timeout: time.Minute,
		}
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			return tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base})
		}))
		l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: base, LockedUntil: base.Add(time.Minute)})
		require.NoError(t, err)
		require.NotNil(t, l)
		return l
	}
	deadLetterTask := func(ctx context.Context, s *postgres.Store, l *provider.ActivityLease) error {
		return s.DeadLetterActivity(ctx, &provider.DeadLetterActivityParams{TaskID: l.Task.ID, Token: l.Token, Letter: provider.DeadLetter{
			ID: "dl-" + l.Task.ID, InstanceID: l.Task.InstanceID, Activity: &l.Task, Reason: provider.ReasonRejected,
			Error: "card declined", Node: "w", At: base, Attempts: 1,
		}})
	}

	t.Run("DeadLetterActivityWhileARoundCancelsIt", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		admin := adminConn(t)
		ctx := t.Context()
		l := claimedTask(t, s)

		_, release, roundDone := holdRound(t, s, base, func(ctx context.Context, tx provider.Tx) error {
			return tx.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "inst-a", ExecutionID: "exec-1"})
		})
		deadDone := make(chan error, 1)
		go func() { deadDone <- deadLetterTask(ctx, s, l) }()
		waitLockWaits(t, admin, s.Schema(), 1)
		close(release)
		require.NoError(t, receive(t, roundDone, "the round"))
		require.ErrorIs(t, receive(t, deadDone, "the dead-lettering"), provider.ErrLeaseLost, "a cancelled task was dead-lettered")
		letters, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{})
		require.NoError(t, err)
		require.Empty(t, letters)
	})

	t.Run("PurgeWhileDeadLetteringAnActivity", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		admin := adminConn(t)
		ctx := t.Context()
		l := claimedTask(t, s)
		rec := &provider.InstanceRecord{
			InstanceID: "inst-a", ExecutionID: "exec-1", Name: "approve", Version: "v1", Status: provider.StatusCompleted,
			CreatedAt: base, UpdatedAt: base, CompletedAt: base, LastSeq: 1,
		}
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: sealed(t, "inst-a", 1)}); err != nil {
				return err
			}
			return tx.SaveProjections(ctx, &provider.Projections{InstanceID: "inst-a", Seq: 1, Instance: rec})
		}))

		// A session holding the instance's history rows stops the purge
		// right after it locked the instance row, in its first delete.
		gate, err := admin.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = gate.Rollback(context.Background()) }()
		_, err = gate.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{s.Schema(), "history"}.Sanitize()+" WHERE instance_id = 'inst-a' FOR UPDATE")
		require.NoError(t, err)
		purgeDone := make(chan error, 1)
		go func() {
			_, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-a", By: "ops", Now: base})
			purgeDone <- err
		}()
		watch := adminConn(t)
		waitLockWaits(t, watch, s.Schema(), 1)
		deadDone := make(chan error, 1)
		go func() { deadDone <- deadLetterTask(ctx, s, l) }()
		waitLockWaits(t, watch, s.Schema(), 2)
		require.NoError(t, gate.Rollback(ctx))

		require.NoError(t, receive(t, purgeDone, "the purge"))
		require.ErrorIs(t, receive(t, deadDone, "the dead-lettering"), provider.ErrLeaseLost, "a purged task was dead-lettered")
		var rows int
		require.NoError(t, watch.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+
			") + (SELECT count(*) FROM "+pgx.Identifier{s.Schema(), "dead_letters"}.Sanitize()+")").Scan(&rows))
		require.Zero(t, rows, "the dead-lettering left rows of a purged instance")
	})

	t.Run("PurgeWhileAnEnqueueIsUncommitted", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		watch := adminConn(t)
		ctx := t.Context()
		endInstance(t, s, "inst-a")
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "p-1", "inst-p")}, Now: base}))

		// A round of another instance enqueues a message to inst-a and
		// has not committed when the purge starts.
		enqueued, release, roundDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			roundDone <- s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
				b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1", Limit: 10, InstanceID: "inst-p"})
				if err != nil {
					return err
				}
				if b == nil {
					return errors.New("nothing to dequeue")
				}
				msgs := []provider.Message{signal(t, "late-1", "inst-a")}
				if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: base}); err != nil {
					return err
				}
				close(enqueued)
				<-release
				return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-p", MessageIDs: []string{"p-1"}})
			})
		}()
		select {
		case <-enqueued:
		case err := <-roundDone:
			require.FailNow(t, "the round ended before it enqueued", "%v", err)
		}
		purge := func() error {
			purgeDone := make(chan error, 1)
			go func() {
				_, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-a", By: "ops", Now: base})
				purgeDone <- err
			}()
			return receive(t, purgeDone, "the purge, which must not wait for a round")
		}
		// The purge cannot see the message: it refuses, as it does for an
		// instance in a round.
		err := purge()
		close(release)
		require.NoError(t, receive(t, roundDone, "the round"))
		if err != nil {
			require.ErrorIs(t, err, provider.ErrInvalidState)
			require.NoError(t, purge(), "the purge of an ended instance failed once the enqueue committed")
		}

		var orphans int
		require.NoError(t, watch.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{s.Schema(), "messages"}.Sanitize()+
			" m WHERE NOT EXISTS (SELECT 1 FROM "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+" i WHERE i.instance_id = m.instance_id)").Scan(&orphans))
		require.Zero(t, orphans, "a message was left without its instance row, never to be dequeued")
		// The id is reused: the new instance gets its own messages only.
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start(t, "start-2", "inst-a")}, Now: base}))
		b := take(t, s, base)
		require.NotNil(t, b)
		require.Equal(t, "inst-a", b.InstanceID)
		require.Len(t, b.Messages, 1, "a message of the purged instance reached the instance that reused its id")
	})
}

// endInstance writes one event and a completed instance record of id.
func endInstance(t *testing.T, s *postgres.Store, id string) {
	t.Helper()
	rec := &provider.InstanceRecord{
		InstanceID: id, ExecutionID: "exec-1", Name: "approve", Version: "v1", Status: provider.StatusCompleted,
		CreatedAt: base, UpdatedAt: base, CompletedAt: base, LastSeq: 1,
	}
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: id, Events: sealed(t, id, 1)}); err != nil {
			return err
		}
		return tx.SaveProjections(ctx, &provider.Projections{InstanceID: id, Seq: 1, Instance: rec})
	}))
}
