package fuzz_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/round"
)

// Reproductions of bugs that TestRapidWorkflowsPostgres and the rapid
// tests' human tasks found.

// TestRegressionPostgresEnqueueWaitsForRound: the postgres provider's doc
// (Limits) says "Enqueueing to a locked instance does not wait", but an
// enqueue to an instance whose round had written its projections (or
// cleared its hold) waited until that round's transaction ended: the
// enqueue statement's INSERT INTO instances ... ON CONFLICT DO NOTHING met
// the row version that the round's UPDATE created, and a unique check
// waits for the transaction that is changing a conflicting row. A
// client's RaiseEvent, an activity worker's CompleteActivity, and another
// instance's round that notifies a parent all waited for the whole round.
func TestRegressionPostgresEnqueueWaitsForRound(t *testing.T) {
	store := pgtest.NewStore(t, postgres.Options{})
	ctx := context.Background()
	start, err := provider.NewMessage("start-1", "claim", "exec-1", "exec-1", &history.ExecutionStarted{Name: "w"})
	require.NoError(t, err)
	require.NoError(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start}, Now: t0}))

	inRound, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- store.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: t0, Owner: "n1", Limit: 10})
			if err != nil {
				return err
			}
			if b == nil || b.InstanceID != "claim" {
				return errors.New("nothing dequeued")
			}
			// What every round that appends does: write the snapshot (and
			// the instance record) into the instance's row.
			if err := tx.SaveProjections(ctx, &provider.Projections{InstanceID: "claim", Seq: 1, Snapshot: []byte{0x80}}); err != nil {
				return err
			}
			close(inRound)
			<-release
			return nil
		})
	}()
	select {
	case <-inRound:
	case err := <-done:
		t.Fatalf("round ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("round did not start")
	}
	signal, err := provider.NewMessage("signal-1", "claim", "", "key-1", &history.EventRaised{Name: "go", IdempotencyKey: "key-1"})
	require.NoError(t, err)
	enqueueCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = store.EnqueueMessages(enqueueCtx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal}, Now: t0})
	cancel()
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, err, "enqueueing to a locked instance must not wait for its round")
}

// TestRegressionPeekLockCancelLostWithNewExecution: in peek-lock mode, a
// round that ended an execution and started the next one in the same
// batch (terminate-and-restart, or a turn that continued as new) and died
// between its append and its CancelActivities left the activity tasks of
// the ended execution queued for good: the redelivered batch was all
// duplicates, and the cold round's repair (Snapshot.OpenWork) derived
// only the current execution's work — the cancellation of an ended
// execution's tasks only when the current execution was the one that
// ended. The tasks then ran after their execution had ended. Transactional
// mode is not affected: its cancel commits with the append.
func TestRegressionPeekLockCancelLostWithNewExecution(t *testing.T) {
	t.Run("TerminateAndRestart", func(t *testing.T) {
		b := regSetup(t)
		b.enqueue(t, b.start(t, "claim", "exec-a", "worker", 0))
		b.round(t, b.n1)
		require.Len(t, b.store.QueuedActivities(), 1, "the activity of exec-a is queued")
		// Engine.Start with ReuseTerminateAndRestart enqueues exactly this.
		b.enqueue(t,
			b.request(t, "terminate-1", "claim", "", &history.ExecutionTerminated{Reason: "restarted by ops"}),
			b.start(t, "claim", "exec-b", "waiter", 0))
		b.crashAfterAppend(t, b.n1)
		b.round(t, b.n2)

		require.Equal(t, "exec-b", b.snapshot(t, "claim").ExecutionID)
		require.Empty(t, b.store.QueuedActivities(), "the activity of the terminated exec-a must be cancelled")
	})

	t.Run("ContinueAsNew", func(t *testing.T) {
		b := regSetup(t)
		b.enqueue(t, b.start(t, "claim", "exec-a", "abandoner", 0))
		b.round(t, b.n1)
		require.Len(t, b.store.QueuedActivities(), 1, "the activity of exec-a is queued")
		b.enqueue(t, b.request(t, "signal-1", "claim", "key-1", &history.EventRaised{Name: "go", IdempotencyKey: "key-1"}))
		b.crashAfterAppend(t, b.n1)
		b.round(t, b.n2)

		snap := b.snapshot(t, "claim")
		require.NotEqual(t, "exec-a", snap.ExecutionID, "exec-a continued as new")
		require.Empty(t, b.store.QueuedActivities(), "the activity of exec-a, which continued as new, must be cancelled")
	})
}

// TestRegressionPeekLockZombieCancelsNewExecution: in peek-lock mode, the
// cold-start repair of a round cancels the activity tasks of every
// execution but the one current when the round loaded the history
// (CancelActivitiesParams.OtherThan), and CancelActivities, unlike the
// enqueues, is not fenced by the round's lease. A round that stalls past
// its lease (a zombie) and goes on after another node started a newer
// execution deletes that execution's activity tasks: the activity stays
// pending in history with no task to run it, and the instance hangs.
func TestRegressionPeekLockZombieCancelsNewExecution(t *testing.T) {
	b := regSetup(t)
	b.enqueue(t, b.start(t, "claim", "exec-a", "waiter", 0))
	b.round(t, b.n1)
	restart := func(msgID, exec, workflow string) {
		b.enqueue(t,
			b.request(t, msgID, "claim", "", &history.ExecutionTerminated{Reason: "restarted by ops"}),
			b.start(t, "claim", exec, workflow, 0))
	}
	restart("terminate-1", "exec-b", "waiter")
	// A peek-lock round that terminates leaves the start behind the
	// terminate for the next round (see
	// TestPeekLockStartAfterATerminateWaitsForTheNextRound): a restart takes two rounds.
	b.round(t, b.n1)
	b.round(t, b.n1)

	// n2 has no cache, so its round on the instance is cold: it derives
	// the cancellation of every execution but exec-b, and stalls before
	// running it.
	b.enqueue(t, b.request(t, "signal-1", "claim", "key-1", &history.EventRaised{Name: "other", IdempotencyKey: "key-1"}))
	pz := &pause{at: round.AfterProject, paused: make(chan struct{}), resumed: make(chan struct{})}
	b.n2.mu.Lock()
	b.n2.pause = pz
	b.n2.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := b.n2.runner.RunOnce(context.Background())
		done <- err
	}()
	select {
	case <-pz.paused:
	case err := <-done:
		t.Fatalf("round did not stall: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("round did not stall")
	}
	// Meanwhile n1 takes over and restarts the instance with exec-c, which
	// schedules an activity.
	b.clock.Advance(leaseDuration + time.Second)
	restart("terminate-2", "exec-c", "worker")
	b.round(t, b.n1)
	b.round(t, b.n1)
	require.Equal(t, "exec-c", b.snapshot(t, "claim").ExecutionID)
	require.Len(t, b.store.QueuedActivities(), 1, "the activity of exec-c is queued")

	close(pz.resumed)
	select {
	case err := <-done:
		require.True(t, errors.Is(err, provider.ErrLeaseLost), "the zombie cannot ack: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("zombie round did not end")
	}
	require.Len(t, b.store.QueuedActivities(), 1, "the zombie must not cancel the activity of exec-c")
}

// TestRegressionPostgresEnqueueToANewInstance: an enqueue to an instance
// that does not exist yet (the start of a child with an explicit id) while
// another open transaction creates the same instance row waits for that
// transaction, as PostgreSQL's unique check does, and then succeeds: both
// messages are queued and neither enqueue fails. TestRapidWorkflowsPostgres
// found the wait with shared child ids while a round was paused; it is
// documented in docs/providers.md (instance rows are created in id order,
// so such waits never deadlock), and that machine keeps shared child ids
// away from its paused rounds.
func TestRegressionPostgresEnqueueToANewInstance(t *testing.T) {
	store := pgtest.NewStore(t, postgres.Options{})
	ctx := context.Background()
	childStart := func(id, exec string) provider.Message {
		m, err := provider.NewMessage(id, "kid", exec, exec, &history.ExecutionStarted{Name: "w"})
		require.NoError(t, err)
		return m
	}
	inRound, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- store.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			// A parent's round starts the child "kid" and stays open.
			if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{childStart("start-1", "exec-1")}, Now: t0}); err != nil {
				return err
			}
			close(inRound)
			<-release
			return nil
		})
	}()
	select {
	case <-inRound:
	case err := <-done:
		t.Fatalf("round ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("round did not start")
	}
	// Another parent's start of "kid" (a round's enqueue, or a client's)
	// waits for the round; it completes once the round commits.
	enqueued := make(chan error, 1)
	go func() {
		enqueued <- store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{childStart("start-2", "exec-2")}, Now: t0})
	}()
	close(release)
	require.NoError(t, <-done)
	select {
	case err := <-enqueued:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the enqueue did not complete after the round committed")
	}
	msgs, err := store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "kid"})
	require.NoError(t, err)
	require.Len(t, msgs, 2, "both starts are queued")
}
