package chronicle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// The end-to-end tests on PostgreSQL: the same workflows as on the memory
// store, on the real server, each test in a schema of its own.

func setupPostgres(t *testing.T, opts ...chronicle.Options) *bundle {
	t.Helper()
	return setupOn(t, newPostgresStore(t), opts...)
}

// storeOnPool opens a store of opts in schema on a pool of its own, made
// from configure's changes to the test server's configuration (a tracer,
// runtime parameters); both close when the test ends.
func storeOnPool(ctx context.Context, t *testing.T, schema string, opts postgres.Options, configure func(*pgxpool.Config)) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts.Pool, opts.Schema, opts.MigrateOnStart = pool, schema, true
	store, err := postgres.New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return pool, store
}

// newPostgresStore returns a store in a fresh schema.
func newPostgresStore(t *testing.T) *postgres.Store {
	t.Helper()
	return pgtest.NewStore(t, postgres.Options{})
}

func TestPostgresEndToEnd(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, func(t *testing.T) provider.Store { return newPostgresStore(t) })
	// A store of 16 partitions: the engine leases them and its workers
	// look in its own first.
	t.Run("Partitions16", func(t *testing.T) {
		t.Parallel()
		testEndToEnd(t, func(t *testing.T) provider.Store { return pgtest.NewStore(t, postgres.Options{Partitions: 16}) })
	})
}

// testEndToEnd runs the end-to-end workflows on stores made by newStore
// (each subtest makes its own): a database provider against the memory
// store's results.
func testEndToEnd(t *testing.T, newStore func(t *testing.T) provider.Store) {
	on := func(t *testing.T, opts ...chronicle.Options) *bundle {
		t.Helper()
		return setupOn(t, newStore(t), opts...)
	}

	t.Run("LoanWithRestartsMatchesMemory", func(t *testing.T) {
		t.Parallel()
		ref := setup(t)
		registerLoan(t, ref.engine)
		want := runLoan(t, ref, nil)

		b := on(t)
		registerLoan(t, b.engine)
		got := runLoan(t, b, func(int) {
			b.engine = b.newEngine(t)
			registerLoan(t, b.engine)
		})
		require.Equal(t, comparable(want), comparable(got))
		require.Equal(t, result[string](t, ref, "loan-1"), result[string](t, b, "loan-1"))
		require.NoError(t, b.engine.Verify(b.ctx, "loan-1"))
		diffs, err := b.engine.CheckProjections(b.ctx, "loan-1")
		require.NoError(t, err)
		require.Empty(t, diffs, "stored projections equal the fold of history")
	})

	t.Run("HumanTasksAndQueries", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		register(t, b.engine, "review", reviewWorkflow)
		b.start(t, "review", "claim-1", claimReview{Claim: "C-1", Amount: 1200})
		b.drain(t)
		ana := chronicle.User{ID: "ana", Roles: []string{"adjuster"}}
		inbox, err := b.engine.ListTasks(b.ctx, chronicle.TaskFilter{Roles: ana.Roles, Unassigned: true})
		require.NoError(t, err)
		require.Len(t, inbox, 1)
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, "review-C-1", chronicle.User{ID: "eve"}), chronicle.ErrForbidden)
		require.NoError(t, b.engine.ClaimTask(b.ctx, "review-C-1", ana))
		b.drain(t)
		require.NoError(t, b.engine.CompleteTask(b.ctx, "review-C-1", "approve", ana))
		b.drain(t)
		require.Equal(t, "approve", result[string](t, b, "claim-1"))
		trail, err := b.engine.TaskEvents(b.ctx, "review-C-1")
		require.NoError(t, err)
		require.Len(t, trail, 3)
		list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Status: chronicle.StatusCompleted, Workflow: "review"})
		require.NoError(t, err)
		require.Len(t, list, 1)
	})

	t.Run("DeadLettersRedriveAndPurge", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			return chronicle.CallActivity[string](ctx, "ocr", "scan.pdf", nil)
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonUnknownActivity, letters[0].Reason)
		activity(t, b.engine, "ocr", func(_ context.Context, f string) (string, error) { return "text of " + f, nil })
		require.NoError(t, b.engine.RedriveDeadLetter(b.ctx, letters[0].ID, "ops"))
		b.drain(t)
		require.Equal(t, "text of scan.pdf", result[string](t, b, "i"))

		dir := t.TempDir()
		rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"i"}, By: "ops", Archive: chronicle.ArchiveJSONL(dir)})
		require.NoError(t, err)
		require.Len(t, rep.Purged, 1)
		ts, err := b.engine.GetTombstone(b.ctx, "i")
		require.NoError(t, err)
		require.Equal(t, rep.Purged[0].LastHash, ts.LastHash)
		_, err = b.engine.History(b.ctx, "i")
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	})

	t.Run("NondeterminismIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		activity(t, b.engine, "a", func(context.Context, int) (int, error) { return 1, nil })
		register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) {
			if _, err := chronicle.CallActivity[int](ctx, "a", n, nil); err != nil {
				return 0, err
			}
			return chronicle.WaitEvent[int](ctx, "go", nil)
		})
		b.start(t, "wf", "i", 1)
		b.drain(t)
		b.engine = b.newEngine(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) {
			return chronicle.WaitEvent[int](ctx, "go", nil)
		})
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", 1, nil))
		for i := 0; i < 5; i++ {
			b.advance(t, time.Minute)
		}
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonNondeterminism, letters[0].Reason)
		require.Contains(t, b.describe(t, "i").Incident, "nondeterminism")
	})

	t.Run("OutageKeepsArrivalOrder", func(t *testing.T) {
		t.Parallel()
		testOutageKeepsArrivalOrder(t, on(t))
	})

	t.Run("RunWakesByNotify", func(t *testing.T) {
		t.Parallel()
		// The safety poll never passes on the manual clock: only the
		// store's hints and timers wake the workers.
		b := on(t, chronicle.Options{SafetyPoll: time.Hour, EagerActivities: true})
		activity(t, b.engine, "a", func(context.Context, string) (string, error) { return "a", nil })
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			if _, err := chronicle.CallActivity[string](ctx, "a", "", nil); err != nil {
				return "", err
			}
			return chronicle.WaitEvent[string](ctx, "go", nil)
		})
		ctx, cancel := context.WithCancel(b.ctx)
		done := make(chan error, 1)
		go func() { done <- b.engine.Run(ctx) }()
		b.start(t, "wf", "i", "")
		waitUntil(t, b, func() bool {
			events, err := b.engine.History(b.ctx, "i")
			return err == nil && count(events, history.KindActivityCompleted) == 1
		})
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "done", nil))
		inst, err := b.engine.Wait(b.ctx, "i")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, inst.Status)
		cancel()
		require.NoError(t, receive(t, done))
	})
}

// TestPostgresUndecodableHistoryRow checks what a history row that does not
// decode does: verification names its seq and goes on to the other
// instances, and the instance's next round is dead-lettered as
// corrupt-history instead of failing until max deliveries.
func TestPostgresUndecodableHistoryRow(t *testing.T) {
	t.Parallel()
	store := pgtest.NewStore(t, postgres.Options{})
	b := setupOn(t, store)
	waiter := func(ctx *chronicle.Context, in string) (string, error) {
		s, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return in + s, err
	}
	register(t, b.engine, "waiter", waiter)
	b.start(t, "waiter", "bad", "a")
	b.start(t, "waiter", "good", "a")
	b.drain(t)
	tag, err := store.Pool().Exec(b.ctx, `UPDATE `+pgx.Identifier{store.Schema(), "history"}.Sanitize()+`
		SET event = '\xc1c1c1'::bytea WHERE instance_id = 'bad' AND seq = 2`)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())

	var broken *history.ChainError
	require.ErrorAs(t, b.engine.Verify(b.ctx, "bad"), &broken)
	require.Equal(t, int64(2), broken.Seq)
	all, err := b.engine.VerifyAll(b.ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.ErrorAs(t, all[0].Err, &broken)
	require.Equal(t, "bad", all[0].InstanceID)
	require.NoError(t, all[1].Err)

	restarted := b.newEngine(t) // a cold node loads the broken row
	register(t, restarted, "waiter", waiter)
	require.NoError(t, restarted.RaiseEvent(b.ctx, "bad", "go", "b", nil))
	require.NoError(t, restarted.RaiseEvent(b.ctx, "good", "go", "b", nil))
	drain(t, restarted)
	letters, err := restarted.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "bad"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, provider.ReasonCorruptHistory, letters[0].Reason)
	require.Contains(t, letters[0].Error, "seq 2")
	require.Equal(t, "ab", result[string](t, b, "good"))
}

// TestPostgresRoundErrorWithNUL checks that a failed round whose error
// text holds a NUL byte (here a projection's fold error) is still recorded
// on its messages: PostgreSQL text cannot hold NUL, and an abandon that
// failed would retry the round without counting or holding it.
func TestPostgresRoundErrorWithNUL(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	register(t, b.engine, "waiter", func(ctx *chronicle.Context, in string) (string, error) {
		s, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return in + s, err
	})
	require.NoError(t, chronicle.RegisterProjection(b.engine, "picky", 1, func(n int, e *chronicle.Event) (int, error) {
		if e.Kind == history.KindEventRaised {
			return n, errors.New("bad\x00byte")
		}
		return n + 1, nil
	}))
	b.start(t, "waiter", "w", "a")
	b.drain(t)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "w", "go", "b", nil))
	worked, err := b.engine.RunOnce(b.ctx)
	require.NoError(t, err)
	require.True(t, worked)
	msgs, err := b.store.ListMessages(b.ctx, &provider.ListMessagesParams{InstanceID: "w"})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 1, msgs[0].Attempts, "the failed delivery was recorded")
	require.Contains(t, msgs[0].LastError, "bad\uFFFDbyte")
}

// On PostgreSQL, as on the memory store, starts of new instances whose
// key is full wait from their enqueue: no round parks them.
func TestPostgresConcurrencyWaitFromEnqueue(t *testing.T) {
	testWaitFromEnqueue(t, newPostgresStore(t), true)
}
