package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/round"
)

// base is the clock reading the tests start from.
var base = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

const waitTimeout = 10 * time.Second

// signal builds a raised-event message keyed by its id.
func signal(t *testing.T, id, instanceID string) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(id, instanceID, "", id, &history.EventRaised{Name: "poke", IdempotencyKey: id})
	require.NoError(t, err)
	return m
}

// start builds the start message of execution exec-1.
func start(t *testing.T, id, instanceID string) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(id, instanceID, "exec-1", "exec-1", &history.ExecutionStarted{Name: "approve", Version: "v1"})
	require.NoError(t, err)
	return m
}

// sealed returns n sealed marker events of instanceID from seq 1.
func sealed(t *testing.T, instanceID string, n int) []history.Event {
	t.Helper()
	events := make([]history.Event, n)
	for i := range events {
		payload, err := history.EncodeAttributes(&history.MarkerRecorded{Marker: history.MarkerSideEffect, Name: fmt.Sprint(i)})
		require.NoError(t, err)
		events[i] = history.Event{
			Seq: int64(i + 1), InstanceID: instanceID, ExecutionID: "exec-1", Kind: history.KindMarkerRecorded,
			At: base.Add(time.Duration(i) * time.Second), Actor: history.WorkerActor("n1"), Payload: payload,
		}
	}
	history.Seal(nil, events)
	return events
}

// adminConn opens a connection of its own to the test server.
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for "+what)
	}
}

// take dequeues and acks the visible messages of one instance.
func take(t *testing.T, s *postgres.Store, now time.Time) *provider.Batch {
	t.Helper()
	var got *provider.Batch
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: "n1", Limit: 100})
		if err != nil || b == nil {
			return err
		}
		got = b
		ids := make([]string, len(b.Messages))
		for i, m := range b.Messages {
			ids[i] = m.ID
		}
		return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: b.InstanceID, MessageIDs: ids})
	}))
	return got
}

func TestOptions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	_, err := postgres.New(ctx, postgres.Options{Schema: "Bad-Name", Mode: provider.ModePeekLock})
	require.ErrorIs(t, err, postgres.ErrInvalidOptions)
	// Every problem is reported at once, each naming its field.
	require.ErrorContains(t, err, "one of Pool and URL is required")
	require.ErrorContains(t, err, `invalid Schema "Bad-Name"`)
	require.ErrorContains(t, err, "Mode peek-lock is not supported")

	_, err = postgres.New(ctx, postgres.Options{URL: "postgres://x", Pool: &pgxpool.Pool{}})
	require.ErrorContains(t, err, "Pool and URL are mutually exclusive")

	for _, name := range []string{"", "1abc", "ABC", "a-b", "a b", `a"b`, "a;drop", "é", "a234567890123456789012345678901234567890123456789012345678901234"} {
		if name == "" {
			continue // empty means the default
		}
		require.Error(t, postgres.ValidateSchema(name), "schema %q", name)
	}
	for _, name := range []string{"chronicle", "_x", "a1_b2", "a23456789012345678901234567890123456789012345678901234567890123"} {
		require.NoError(t, postgres.ValidateSchema(name), "schema %q", name)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := t.Context()

	s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	require.NoError(t, err, "New without migrating only warns")
	defer s.Close()
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, v, "a schema that does not exist is at version 0")

	// Nodes starting together migrate once.
	var wg sync.WaitGroup
	versions := make([]int, 4)
	errs := make([]error, 4)
	for i := range versions {
		wg.Go(func() { versions[i], errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i := range versions {
		require.NoError(t, errs[i])
		require.Equal(t, postgres.LatestSchemaVersion(), versions[i])
	}
	v, err = s.Migrate(ctx)
	require.NoError(t, err, "migrating an up-to-date schema")
	require.Equal(t, postgres.LatestSchemaVersion(), v)
	v, err = s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, postgres.LatestSchemaVersion(), v)

	conn := adminConn(t)
	var applied int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&applied))
	require.Equal(t, postgres.LatestSchemaVersion(), applied, "each migration is recorded once")
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"activity_task_ids", "activity_tasks", "checkpoint_leaves", "checkpoints", "custom_projections", "dead_letters",
		"flow_keys", "flow_rates", "flow_slots", "history", "human_task_events", "human_tasks", "instances", "legal_holds", "messages",
		"partition_leases", "partition_nodes", "schema_migrations", "store_settings", "tombstones",
	}, tables)

	// The migrated schema works.
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
	require.NotNil(t, take(t, s, base))
}

func TestRoundFailsWhenItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	admin := adminConn(t)
	ctx := t.Context()
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{
		Messages: []provider.Message{signal(t, "m-1", "i-1"), signal(t, "m-2", "i-1")}, Now: base,
	}))
	kill := func(tx provider.Tx) {
		var killed bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 30000)`, int64(postgres.BackendPID(tx))).Scan(&killed))
		require.True(t, killed)
	}

	for _, c := range []struct {
		name string
		// after runs once the backend is gone (pg_terminate_backend with a
		// timeout waits for its exit, and so for its locks to be released);
		// the round returns its result.
		after func(ctx context.Context, tx provider.Tx, b *provider.Batch) error
	}{
		{"NextStepFails", func(ctx context.Context, tx provider.Tx, b *provider.Batch) error {
			return tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: sealed(t, "i-1", 2)})
		}},
		{"CommitFails", func(ctx context.Context, tx provider.Tx, b *provider.Batch) error {
			_ = tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1", "m-2"}})
			return nil // ignore the failed step: the commit must fail
		}},
	} {
		var dequeued []string
		err := s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1", Limit: 10})
			if err != nil {
				return err
			}
			require.NotNil(t, b, c.name)
			for _, m := range b.Messages {
				dequeued = append(dequeued, m.ID)
			}
			kill(tx)
			return c.after(ctx, tx, b)
		})
		require.Error(t, err, "%s: a round whose connection was killed succeeded", c.name)
		require.Equal(t, []string{"m-1", "m-2"}, dequeued, c.name)
	}

	// Nothing was written and the messages come back.
	history, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
	require.NoError(t, err)
	require.Empty(t, history)
	b := take(t, s, base)
	require.NotNil(t, b, "the messages of the killed round are gone")
	require.Len(t, b.Messages, 2)
	require.Nil(t, take(t, s, base))
}

func TestCommitWhoseOutcomeIsUnknownIsSafeToRetry(t *testing.T) {
	t.Parallel()
	errUnknown := errors.New("connection lost after COMMIT was sent")
	failNext := func(s *postgres.Store) {
		var once sync.Once
		postgres.SetAfterCommit(s, func() error {
			err := error(nil)
			once.Do(func() { err = errUnknown })
			return err
		})
	}

	t.Run("RetriedAppendIsANoop", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		failNext(s)
		ctx := t.Context()
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
		events := sealed(t, "i-1", 3)
		appendRound := func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1", InstanceID: "i-1"})
			if err != nil {
				return err
			}
			if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: events}); err != nil {
				return err
			}
			if b == nil {
				return nil
			}
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{b.Messages[0].ID}})
		}
		require.ErrorIs(t, s.RunRound(ctx, appendRound), errUnknown)

		stored, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
		require.NoError(t, err)
		require.Equal(t, events, stored, "the commit happened")
		// Running the round again: the append of the same sealed events is
		// a no-op, nothing is duplicated.
		require.NoError(t, s.RunRound(ctx, appendRound))
		stored, err = s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
		require.NoError(t, err)
		require.Equal(t, events, stored)
		require.Nil(t, take(t, s, base), "the message was acked by the first commit")
	})

	t.Run("RunnerAcksTheRedeliveredMessages", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		failNext(s)
		ctx := t.Context()
		clock := round.NewManualClock(base)
		runner, err := round.NewRunner(s, round.RunnerOptions{
			Node: "n1", Clock: clock,
			Turn: func(context.Context, *round.TurnInput) (*round.TurnOutput, error) { return &round.TurnOutput{}, nil },
		})
		require.NoError(t, err)
		defer runner.Forget()
		msgs := []provider.Message{start(t, "m-start", "i-1"), signal(t, "m-sig", "i-1")}
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: base}))

		rep, err := runner.RunOnce(ctx)
		require.ErrorIs(t, err, errUnknown)
		require.True(t, rep.Failed)
		stored, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
		require.NoError(t, err)
		require.Len(t, stored, 2, "the commit happened")

		// The messages are delivered again (as after a lost ack): the round
		// finds their events in history and only acks them.
		clock.Advance(time.Hour)
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: clock.Now()}))
		rep, err = runner.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, rep.Duplicates)
		require.Zero(t, rep.Appended)
		again, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
		require.NoError(t, err)
		require.Equal(t, stored, again, "no duplicate events")
		require.NoError(t, history.Verify(again))
		rep, err = runner.RunOnce(ctx)
		require.NoError(t, err)
		require.Nil(t, rep, "every message was acked")
	})
}

func TestRounds(t *testing.T) {
	t.Parallel()

	t.Run("EnqueueToALockedInstanceDoesNotWait", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		ctx := t.Context()
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
			require.NoError(t, err)
			require.NotNil(t, b)
			// A client raises an event while the round holds the instance.
			enqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			require.NoError(t, s.EnqueueMessages(enqCtx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-2", "i-1")}, Now: base}))
			// Only this store's rounds hold it, so it is not counted as due.
			_, ok, err := s.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration})
			require.NoError(t, err)
			require.False(t, ok, "an instance locked by this store's round counts in NextVisibleAt")
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1"}})
		}))
		b := take(t, s, base)
		require.NotNil(t, b)
		require.Equal(t, "m-2", b.Messages[0].ID)
	})

	t.Run("GroupCommitDequeuesSeveralInstances", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewStore(t, postgres.Options{})
		ctx := t.Context()
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{
			Messages: []provider.Message{signal(t, "m-a", "i-a"), signal(t, "m-b", "i-b")}, Now: base,
		}))
		var got []string
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			for {
				b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
				if err != nil || b == nil {
					return err
				}
				got = append(got, b.InstanceID)
				if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: b.InstanceID, MessageIDs: []string{b.Messages[0].ID}}); err != nil {
					return err
				}
			}
		}))
		require.Equal(t, []string{"i-a", "i-b"}, got)
		require.Nil(t, take(t, s, base))
	})

	t.Run("ConflictLeavesTheRoundUsable", func(t *testing.T) {
		t.Parallel()
		s, first := storeWithEvent(t)
		ctx := t.Context()
		raised := func(seq int64, key string, prev []byte) []history.Event { return raisedEvent(t, "i-1", seq, key, prev) }
		// A round group: i-2's round appends, i-1's conflicts, twice.
		for _, conflicting := range [][]history.Event{
			raised(2, "k1", first[0].Hash), // a used idempotency key (a unique violation)
			raised(1, "k2", nil),           // a taken Seq
		} {
			enqueueSignals(t, s, base, signal(t, "m-2", "i-2"))
			enqueueSignals(t, s, base, signal(t, "m-1", "i-1"))
			require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
				b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1", InstanceID: "i-2"})
				require.NoError(t, err)
				require.NotNil(t, b)
				if b.Head == nil || b.Head.Seq == 0 {
					require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-2", Events: sealed(t, "i-2", 1)}))
				}
				require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-2", MessageIDs: []string{"m-2"}}))
				require.NoError(t, tx.(provider.TxFlusher).Flush(ctx))
				b, err = tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1", InstanceID: "i-1"})
				require.NoError(t, err)
				require.NotNil(t, b)
				// The append is deferred: its conflict is the flush's.
				err = tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: conflicting})
				if err == nil {
					err = tx.(provider.TxFlusher).Flush(ctx)
				}
				require.ErrorIs(t, err, provider.ErrConflict)
				// The failing instance is abandoned; the transaction goes
				// on, and commits the other instance's round.
				require.NoError(t, tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1"}, VisibleAt: base, Error: err.Error()}))
				return tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "n-2", "i-2")}, Now: base})
			}))
		}
		got, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-2", FromSeq: 1})
		require.NoError(t, err)
		require.Len(t, got, 1)
		requireAbandonedTwice(t, s, first)
		msgs, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i-2"})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the other round's ack and enqueue committed")
		require.Equal(t, "n-2", msgs[0].ID)
	})

	// FlushAndDequeue sends a round's writes with the next dequeue: when
	// they fail, the error is the round's (ErrFlush), even where the
	// dequeue ran after them and locked the next instance, and the abandon
	// of the round's instance undoes that lock with the writes.
	t.Run("AFailedFlushWithTheNextDequeueIsTheRoundsOwn", func(t *testing.T) {
		t.Parallel()
		s, first := storeWithEvent(t)
		ctx := t.Context()
		raised := func(seq int64, key string, prev []byte) []history.Event { return raisedEvent(t, "i-1", seq, key, prev) }
		for i, conflicting := range [][]history.Event{
			raised(2, "k1", first[0].Hash), // a used idempotency key: the statement fails
			raised(1, "k2", nil),           // a taken Seq: the check after it fails
		} {
			enqueueSignals(t, s, base, signal(t, "m-1", "i-1"))
			enqueueSignals(t, s, base, signal(t, fmt.Sprintf("m-3-%d", i), "i-3"))
			require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
				b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
				require.NoError(t, err)
				require.Equal(t, "i-1", b.InstanceID)
				require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: conflicting}))
				require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1"}}))
				next, err := tx.(provider.FlushDequeuer).FlushAndDequeue(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
				require.ErrorIs(t, err, provider.ErrFlush)
				require.ErrorIs(t, err, provider.ErrConflict)
				require.Nil(t, next)
				require.NoError(t, tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1"}, VisibleAt: base, Error: err.Error()}))
				// The next instance is there to dequeue, its lock undone
				// with the failed writes or never taken.
				b, err = tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
				require.NoError(t, err)
				require.Equal(t, "i-3", b.InstanceID)
				require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-3", MessageIDs: []string{b.Messages[0].ID}}))
				next, err = tx.(provider.FlushDequeuer).FlushAndDequeue(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
				require.NoError(t, err)
				require.Nil(t, next)
				return nil
			}))
		}
		requireAbandonedTwice(t, s, first)
		msgs, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i-3"})
		require.NoError(t, err)
		require.Empty(t, msgs, "the next instance's rounds committed their acks")
	})
}

func TestWorkHints(t *testing.T) {
	t.Parallel()

	// Two stores on one schema stand for two nodes.
	nodes := func(t *testing.T) (a, b *postgres.Store) {
		t.Helper()
		a = pgtest.NewStore(t, postgres.Options{})
		b, err := postgres.New(t.Context(), postgres.Options{URL: pgtest.URL(t), Schema: a.Schema()})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		return a, b
	}
	// listening waits until a's listener is connected: the first hint is
	// closed then (hints may have been missed before).
	listening := func(t *testing.T, a *postgres.Store) {
		t.Helper()
		waitClosed(t, a.WorkHint(provider.QueueOrchestration), "the listener to connect")
	}

	t.Run("NotifyFromAnotherNodeWakes", func(t *testing.T) {
		t.Parallel()
		a, b := nodes(t)
		listening(t, a)
		hint := a.WorkHint(provider.QueueOrchestration)
		tasks := a.WorkHint(provider.QueueActivity)
		require.NoError(t, b.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
		waitClosed(t, hint, "a NOTIFY of another store")
		require.NoError(t, b.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			return tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Now: base, Tasks: []provider.ActivityTask{{
				ID: "task-1", InstanceID: "i-1", ExecutionID: "exec-1", ScheduledSeq: 2, Name: "charge", Attempt: 1,
			}}})
		}))
		waitClosed(t, tasks, "a NOTIFY sent at commit")
	})

	t.Run("PartitionHints", func(t *testing.T) {
		t.Parallel()
		a := pgtest.NewStore(t, postgres.Options{Partitions: 2})
		b, err := postgres.New(t.Context(), postgres.Options{URL: pgtest.URL(t), Schema: a.Schema()})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		// Both listeners connected: a connection closes every hint.
		listening(t, a)
		listening(t, b)
		id := "i-0"
		for i := 1; provider.PartitionOf(id, 2) != 1; i++ {
			id = fmt.Sprintf("i-%d", i)
		}
		q := provider.QueueOrchestration
		a0, a1, all := a.PartitionHint(q, 0), a.PartitionHint(q, 1), a.WorkHint(q)
		b0, b1 := b.PartitionHint(q, 0), b.PartitionHint(q, 1)
		require.NoError(t, b.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", id)}, Now: base}))
		waitClosed(t, b1, "the hint of the enqueue's partition in its own store")
		require.False(t, woken(b0), "an enqueue in partition 1 closed the hint of partition 0 of its store")
		waitClosed(t, a1, "a NOTIFY naming partition 1")
		waitClosed(t, all, "a NOTIFY naming partition 1, on the queue's hint")
		require.False(t, woken(a0), "a NOTIFY naming partition 1 closed the hint of partition 0")
	})

	t.Run("ListenerReconnects", func(t *testing.T) {
		t.Parallel()
		a, b := nodes(t)
		listening(t, a)
		hint := a.WorkHint(provider.QueueOrchestration)
		admin := adminConn(t)
		var killed int
		require.NoError(t, admin.QueryRow(t.Context(), `
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			postgres.ListenerApplicationName(a.Schema())).Scan(&killed))
		require.Equal(t, 1, killed, "one listening connection per store")
		waitClosed(t, hint, "the hint after the listener failed")

		// After reconnecting, notifications arrive again.
		listening(t, a)
		hint = a.WorkHint(provider.QueueOrchestration)
		require.NoError(t, b.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
		waitClosed(t, hint, "a NOTIFY after reconnecting")
	})
}

// raisedEvent returns an event raised on instanceID at seq with the
// idempotency key key, sealed after the hash prev.
func raisedEvent(t *testing.T, instanceID string, seq int64, key string, prev []byte) []history.Event {
	t.Helper()
	e := []history.Event{{Seq: seq, InstanceID: instanceID, ExecutionID: "exec-1", Kind: history.KindEventRaised,
		CorrelationID: key, At: base, Actor: "system", Payload: mustAttributes(t, key)}}
	history.Seal(prev, e)
	return e
}

// storeWithEvent returns a new store whose instance i-1 has one event in
// its history, which it returns.
func storeWithEvent(t *testing.T) (*postgres.Store, []history.Event) {
	t.Helper()
	s := pgtest.NewStore(t, postgres.Options{})
	first := raisedEvent(t, "i-1", 1, "k1", nil)
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		return tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: first})
	}))
	return s, first
}

// requireAbandonedTwice checks that i-1's history is still first alone and
// that its message m-1 is queued with the two failed deliveries of two
// abandoned rounds.
func requireAbandonedTwice(t *testing.T, s *postgres.Store, first []history.Event) {
	t.Helper()
	got, err := s.LoadHistory(t.Context(), &provider.LoadHistoryParams{InstanceID: "i-1", FromSeq: 1})
	require.NoError(t, err)
	require.Equal(t, first, got)
	msgs, err := s.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "i-1"})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the abandoned instance's message is still queued")
	require.Equal(t, 2, msgs[0].Attempts, "with both failed deliveries counted")
}
