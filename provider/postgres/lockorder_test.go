package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/round"
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
func holdRound(t *testing.T, s *postgres.Store, now time.Time, then func(ctx context.Context, tx round.Tx) error) (locked, release chan struct{}, done chan error) {
	t.Helper()
	locked, release, done = make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.RunRound(t.Context(), func(ctx context.Context, tx round.Tx) error {
			b, err := tx.DequeueInstance(ctx, &round.DequeueParams{Now: now, Owner: "n1", Limit: 100})
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
		require.NoError(t, s.EnqueueMessages(ctx, &round.EnqueueMessagesParams{Messages: []round.Message{signal(t, "m-1", "inst-a")}, Now: base}))

		_, release, roundDone := holdRound(t, s, base, func(ctx context.Context, tx round.Tx) error {
			return tx.AckMessages(ctx, &round.AckMessagesParams{InstanceID: "inst-a", MessageIDs: []string{"m-1"}})
		})
		abandonDone := make(chan error, 1)
		go func() {
			abandonDone <- s.AbandonMessages(ctx, &round.AbandonMessagesParams{
				InstanceID: "inst-a", MessageIDs: []string{"m-1"}, VisibleAt: base.Add(time.Minute), Error: "boom",
			})
		}()
		waitLockWaits(t, admin, s.Schema(), 1)
		close(release)
		require.NoError(t, receive(t, roundDone, "the round"))
		require.NoError(t, receive(t, abandonDone, "the abandon"))
		msgs, err := s.ListMessages(ctx, &round.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Empty(t, msgs, "the acked message came back")
	})
}
