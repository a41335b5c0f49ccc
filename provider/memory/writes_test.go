package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

var base = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// crashAfter returns a store of mode whose next call of op stops after its
// k-th record write.
func crashAfter(mode provider.Mode, op memory.Op, k int) *memory.Store {
	armed := true
	return memory.New(memory.Options{Mode: mode, Fault: func(o memory.Op) *memory.Fault {
		if o != op || !armed {
			return nil
		}
		armed = false
		return &memory.Fault{AfterWrites: k}
	}})
}

// claimTask enqueues an activity task of inst-a and claims it at now.
func claimTask(t *testing.T, s *memory.Store, now time.Time) *provider.ActivityLease {
	t.Helper()
	ctx := context.Background()
	task := provider.ActivityTask{ID: "task-1", InstanceID: "inst-a", ExecutionID: "exec-1", ScheduledSeq: 3, Name: "a", Input: []byte("in"),
		Retry: round.DefaultRetryPolicy, Timeout: time.Minute}
	require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base}))
	l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, l)
	return l
}

func TestPeekLockWritesOneRecordAtATime(t *testing.T) {
	t.Parallel()

	t.Run("CompleteActivityCrashAfterTheResult", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := crashAfter(provider.ModePeekLock, memory.OpCompleteActivity, 1)
		l := claimTask(t, s, base)
		result, err := provider.ActivityOutcome(&l.Task, []byte("out"), nil)
		require.NoError(t, err)
		err = s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: result, Now: base})
		require.ErrorIs(t, err, memory.ErrInjected)
		// The result is queued, the task still claimed: nothing is lost.
		require.Len(t, s.QueuedMessages(), 1)
		require.Len(t, s.QueuedActivities(), 1)

		// Its claim runs out; the next attempt completes it with a result
		// of the same id, which is not queued twice.
		l2, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w2", Now: base.Add(time.Minute), LockedUntil: base.Add(2 * time.Minute)})
		require.NoError(t, err)
		require.NotNil(t, l2)
		again, err := provider.ActivityOutcome(&l2.Task, []byte("out"), nil)
		require.NoError(t, err)
		require.Equal(t, result.ID, again.ID)
		require.NoError(t, s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l2.Task.ID, Token: l2.Token, Result: again, Now: base.Add(time.Minute)}))
		require.Len(t, s.QueuedMessages(), 1)
		require.Empty(t, s.QueuedActivities())
	})

	t.Run("TransactionalStepsStayAtomic", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := crashAfter(provider.ModeTransactional, memory.OpCompleteActivity, 1)
		l := claimTask(t, s, base)
		result, err := provider.ActivityOutcome(&l.Task, []byte("out"), nil)
		require.NoError(t, err)
		err = s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: result, Now: base})
		require.ErrorIs(t, err, memory.ErrInjected)
		// AfterWrites acts as AfterEffect: the whole step happened.
		require.Len(t, s.QueuedMessages(), 1)
		require.Empty(t, s.QueuedActivities())
	})

	t.Run("SaveProjectionsWritesTheSnapshotLast", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := crashAfter(provider.ModePeekLock, memory.OpSaveProjections, 1)
		err := s.SaveProjections(ctx, &provider.Projections{
			InstanceID: "inst-a", Seq: 4, Snapshot: []byte("snap"),
			Instance: &provider.InstanceRecord{InstanceID: "inst-a", Status: provider.StatusRunning},
		})
		require.ErrorIs(t, err, memory.ErrInjected)
		rec, err := s.GetInstance(ctx, "inst-a")
		require.NoError(t, err)
		require.EqualValues(t, 4, rec.LastSeq)
		_, _, err = s.GetSnapshot(ctx, "inst-a")
		require.ErrorIs(t, err, provider.ErrNotFound, "the snapshot was written before the record")
	})

	t.Run("PurgeResumesAfterACrash", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := crashAfter(provider.ModePeekLock, memory.OpPurgeInstance, 1)
		require.NoError(t, s.SaveProjections(ctx, &provider.Projections{
			InstanceID: "inst-a", Seq: 1, Snapshot: []byte("snap"),
			Instance: &provider.InstanceRecord{InstanceID: "inst-a", Status: provider.StatusCompleted},
		}))
		_, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-a", By: "ops", Now: base})
		require.ErrorIs(t, err, memory.ErrInjected)

		// The half-purged instance is never leased, even with new work.
		start, err := provider.NewMessage("m-1", "inst-a", "", "", &history.EventRaised{Name: "s"})
		require.NoError(t, err)
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start}, Now: base}))
		l, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(time.Minute), Owner: "n"})
		require.NoError(t, err)
		require.Nil(t, l, "a half-purged instance was leased")

		// Purging again finishes the purge with one tombstone. The message
		// enqueued meanwhile came before the purge's message deletes, so it
		// goes with the instance, as if the purge had run after it.
		ts, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-a", By: "ops", Now: base.Add(time.Second)})
		require.NoError(t, err)
		require.Equal(t, base, ts.PurgedAt, "the resumed purge made a new tombstone")
		all, err := s.ListTombstones(ctx, "inst-a")
		require.NoError(t, err)
		require.Len(t, all, 1)
		_, err = s.GetInstance(ctx, "inst-a")
		require.True(t, errors.Is(err, provider.ErrNotFound))
		require.Empty(t, s.QueuedMessages())
		// The id starts afresh.
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start}, Now: base}))
		l, err = s.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(time.Minute), Owner: "n"})
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Equal(t, "m-1", l.Messages[0].ID)
	})
}

// TestPeekLockZombieCancelBetweenFenceAndDelete: a document store checks a
// cancel's fence (the instance's lease) with a read and deletes each task
// with its own write, so a round can lose its lease between the two. Its
// successor starts a new execution and enqueues that execution's task; the
// zombie's cancel of every execution but its own must not delete it: a
// fenced cancel chooses its tasks with the fence check and deletes them by
// id, never by a predicate evaluated at delete time.
func TestPeekLockZombieCancelBetweenFenceAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		s       *memory.Store
		zombie  *provider.Lease
		stalled = true
	)
	task := func(id, exec string) provider.ActivityTask {
		return provider.ActivityTask{ID: id, InstanceID: "inst-a", ExecutionID: exec, ScheduledSeq: 3, Name: "a",
			Retry: round.DefaultRetryPolicy, Timeout: time.Minute}
	}
	s = memory.New(memory.Options{Mode: provider.ModePeekLock, BetweenWrites: func(op memory.Op, done int) {
		if op != memory.OpCancelActivities || done != 0 || !stalled {
			return
		}
		stalled = false
		// The zombie passed its fence check; its lease runs out and the
		// successor leases the instance and enqueues its new execution's
		// task.
		now := zombie.LockedUntil
		succ, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(time.Minute), Owner: "n2"})
		require.NoError(t, err)
		require.NotNil(t, succ)
		require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task("task-new", "exec-2")}, Now: now, Lease: succ}))
	}})
	start, err := provider.NewMessage("m-1", "inst-a", "", "", &history.EventRaised{Name: "s"})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start}, Now: base}))
	zombie, err = s.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(time.Minute), Owner: "n1"})
	require.NoError(t, err)
	require.NotNil(t, zombie)
	require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task("task-old", "exec-0")}, Now: base, Lease: zombie}))

	// The zombie cancels every execution's tasks but exec-1's.
	err = s.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "inst-a", OtherThan: "exec-1", Lease: zombie})
	require.NoError(t, err)
	var left []string
	for _, q := range s.QueuedActivities() {
		left = append(left, q.Task.ID)
	}
	require.Equal(t, []string{"task-new"}, left, "the zombie's cancel deleted the task its successor enqueued")
}

// TestHalfWrittenDeadLetterThenRedrive: DeadLetterLeased wrote the letter
// and stopped before it removed the message; an operator redrives the
// letter while the message is still queued, and the next delivery
// dead-letters the message again. The message must not be lost: it was
// (the redrive's enqueue was a no-op on the queued message, yet the
// letter was marked redriven; the second dead-lettering found the letter
// id taken, wrote nothing and removed the message).
func TestHalfWrittenDeadLetterThenRedrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := crashAfter(provider.ModePeekLock, memory.OpDeadLetterLeased, 1)
	m, err := provider.NewMessage("m-1", "inst-a", "", "k-1", &history.EventRaised{Name: "poke", IdempotencyKey: "k-1"})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: base}))
	deadLetter := func(now time.Time) error {
		t.Helper()
		l, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(time.Minute), Owner: "n", InstanceID: "inst-a"})
		require.NoError(t, err)
		require.NotNil(t, l, "the message is not delivered")
		require.Len(t, l.Messages, 1)
		q := l.Messages[0]
		return s.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: l, Letters: []provider.DeadLetter{{
			ID: provider.DeadLetterID(q.ID, q.EnqueuedAt), InstanceID: "inst-a", Message: &q,
			Reason: provider.ReasonMaxDeliveries, Error: "too many", Node: "n", At: now, Attempts: q.Attempts + 1,
		}}})
	}
	require.ErrorIs(t, deadLetter(base), memory.ErrInjected)
	letters, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: "inst-a"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Len(t, s.QueuedMessages(), 1, "the message went before the crash")

	// The operator redrives the letter while its message is still queued.
	redriveErr := s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: letters[0].ID, Status: provider.DeadLetterRedriven, By: "ops", Now: base.Add(time.Second)})
	// The next delivery dead-letters it again, whole.
	require.NoError(t, deadLetter(base.Add(2*time.Minute)))

	queued := s.QueuedMessages()
	dead, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: "inst-a", Status: provider.DeadLetterDead})
	require.NoError(t, err)
	require.True(t, len(queued) == 1 || (len(dead) == 1 && dead[0].Message != nil && dead[0].Message.ID == "m-1"),
		"the message is lost: redrive %v, queued %v, unresolved letters %v", redriveErr, queued, dead)
	if len(dead) == 1 {
		// It can still be redriven, and then runs.
		require.NoError(t, s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: dead[0].ID, Status: provider.DeadLetterRedriven, By: "ops", Now: base.Add(3 * time.Minute)}))
		require.Len(t, s.QueuedMessages(), 1, "the redrive queued nothing")
	}
}
