package providertest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testActivities covers the activity queue: claims, routing, delayed
// visibility, lease expiry and fencing, completion, retry, idempotent
// enqueue and cancellation.
func testActivities(t *testing.T, factory Factory) {
	t.Run("ClaimOldestOfTheServedQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		other := activity("inst-c", execID, 2, "x")
		first := activity("inst-a", execID, 2, "")
		second := activity("inst-b", execID, 2, "")
		b.enqueueTasks(t, base, other)
		b.enqueueTasks(t, at(time.Second), first)
		b.enqueueTasks(t, at(2*time.Second), second)
		now := at(3 * time.Second)

		l := b.claim(t, now)
		require.NotNil(t, l)
		require.Equal(t, queuedTask(first, at(time.Second)), l.Task, "the oldest task of the default queue, round-tripped")
		l2 := b.claim(t, now)
		require.NotNil(t, l2)
		require.Equal(t, second.ID, l2.Task.ID)
		require.Nil(t, b.claim(t, now), "a worker of the default queue claimed a task of queue x")
		require.Nil(t, b.claim(t, now, "y"))
		lx := b.claim(t, now, "x")
		require.NotNil(t, lx)
		require.Equal(t, queuedTask(other, base), lx.Task)
		require.Nil(t, b.claim(t, now, "x", ""))

		// A worker serving several queues takes the oldest of them all.
		third := activity("inst-a", execID, 3, "")
		fourth := activity("inst-a", execID, 4, "x")
		b.enqueueTasks(t, at(4*time.Second), third)
		b.enqueueTasks(t, at(5*time.Second), fourth)
		l = b.claim(t, at(6*time.Second), "x", "")
		require.NotNil(t, l)
		require.Equal(t, third.ID, l.Task.ID)
		l = b.claim(t, at(6*time.Second), "x", "")
		require.NotNil(t, l)
		require.Equal(t, fourth.ID, l.Task.ID)
		require.Nil(t, b.claim(t, at(6*time.Second), "x", ""))
	})

	t.Run("DelayedVisibility", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		_, ok := b.nextTask(t, "")
		require.False(t, ok, "NextVisibleAt of an empty activity queue")

		late := activity("inst-a", execID, 2, "")
		late.VisibleAt = at(10 * time.Second)
		soon := activity("inst-b", execID, 2, "x")
		soon.VisibleAt = at(5 * time.Second)
		b.enqueueTasks(t, base, late, soon)

		require.Nil(t, b.claim(t, base))
		require.Nil(t, b.claim(t, base, "x"))
		for _, c := range []struct {
			queues []string
			want   time.Time
			ok     bool
		}{
			{[]string{""}, at(10 * time.Second), true},
			{[]string{"x"}, at(5 * time.Second), true},
			{[]string{"x", ""}, at(5 * time.Second), true},
			{[]string{"y"}, time.Time{}, false},
		} {
			next, ok := b.nextTask(t, c.queues...)
			require.Equal(t, c.ok, ok, "NextVisibleAt of queues %q", c.queues)
			if c.ok {
				require.Equal(t, c.want, next, "NextVisibleAt of queues %q", c.queues)
			}
		}
		_, ok = b.nextVisible(t)
		require.False(t, ok, "tasks count in NextVisibleAt of the orchestration queue")

		require.Nil(t, b.claim(t, at(10*time.Second).Add(-time.Microsecond)))
		l := b.claim(t, at(10*time.Second))
		require.NotNil(t, l)
		require.Equal(t, queuedTask(late, base), l.Task)
		l = b.claim(t, at(10*time.Second), "x")
		require.NotNil(t, l)
		require.Equal(t, soon.ID, l.Task.ID)

		// Zero times take Now.
		zero := activity("inst-a", execID, 3, "")
		b.enqueueTasks(t, at(20*time.Second), zero)
		require.Nil(t, b.claim(t, at(20*time.Second).Add(-time.Microsecond)))
		l = b.claim(t, at(20*time.Second))
		require.NotNil(t, l)
		require.Equal(t, queuedTask(zero, at(20*time.Second)), l.Task)
	})

	t.Run("ClaimExpiresAndFencesTheOldToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task)

		l1 := b.claim(t, base)
		require.NotNil(t, l1)
		require.Nil(t, b.claim(t, at(30*time.Second)), "a claimed task was claimed again before its lease ran out")
		l2 := b.claim(t, at(2*time.Minute))
		require.NotNil(t, l2, "a task whose lease ran out was not claimed again")
		require.Equal(t, task.ID, l2.Task.ID)
		require.NotEqual(t, l1.Token, l2.Token)

		b.zombieCalls(t, l1, at(2*time.Minute))
		require.Empty(t, b.drain(t, at(time.Hour)), "a zombie completion enqueued a result")
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{}), "a zombie dead-lettered the task")
		require.Nil(t, b.claim(t, at(2*time.Minute+time.Second)), "a zombie call released the new claim")

		// Heartbeats of the current claim extend it.
		require.NoError(t, b.store.HeartbeatActivity(t.Context(), &provider.HeartbeatActivityParams{
			TaskID: task.ID, Token: l2.Token, LockedUntil: at(10 * time.Minute),
		}))
		require.Nil(t, b.claim(t, at(5*time.Minute)), "a heartbeat did not extend the claim")
		res := b.complete(t, l2, at(6*time.Minute))
		require.Equal(t, []provider.Message{queued(res, at(6*time.Minute))}, b.drain(t, at(time.Hour)))
	})

	t.Run("CompleteRemovesTheTaskAndEnqueuesTheResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task)
		l := b.claim(t, base)
		require.NotNil(t, l)
		res := b.complete(t, l, at(time.Second))

		require.Nil(t, b.claim(t, at(time.Hour)), "a completed task was claimed again")
		_, ok := b.nextTask(t, "")
		require.False(t, ok, "a completed task is still queued")
		require.ErrorIs(t, b.store.CompleteActivity(t.Context(), &provider.CompleteActivityParams{
			TaskID: task.ID, Token: l.Token, Result: res, Now: at(2 * time.Second),
		}), provider.ErrLeaseLost, "completing twice")

		got := b.drain(t, at(time.Second))
		require.Equal(t, []provider.Message{queued(res, at(time.Second))}, got)
		require.Equal(t, provider.ActivityResultID(task.ID), got[0].ID)
		require.Equal(t, history.KindActivityCompleted, got[0].Kind)
		require.Equal(t, history.SeqCorrelation(2), got[0].CorrelationID)

		// A completed task's id stays known.
		b.enqueueTasks(t, at(3*time.Second), task)
		require.Nil(t, b.claim(t, at(time.Hour)), "a completed task came back when enqueued again")
	})

	t.Run("RetryReleasesForAnotherAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task)
		l := b.claim(t, base)
		require.NotNil(t, l)
		require.NoError(t, b.store.RetryActivity(t.Context(), &provider.RetryActivityParams{
			TaskID: task.ID, Token: l.Token, VisibleAt: at(time.Minute), Error: "card service down",
		}))
		require.ErrorIs(t, b.store.HeartbeatActivity(t.Context(), &provider.HeartbeatActivityParams{
			TaskID: task.ID, Token: l.Token, LockedUntil: at(time.Hour),
		}), provider.ErrLeaseLost, "the retried claim still holds")

		require.Nil(t, b.claim(t, at(30*time.Second)), "a retried task was claimed before its VisibleAt")
		next, ok := b.nextTask(t, "")
		require.True(t, ok)
		require.Equal(t, at(time.Minute), next)

		l2 := b.claim(t, at(time.Minute))
		require.NotNil(t, l2)
		require.NotEqual(t, l.Token, l2.Token)
		want := queuedTask(task, base)
		want.Attempt, want.VisibleAt, want.LastError = 2, at(time.Minute), "card service down"
		require.Equal(t, want, l2.Task)
		require.Empty(t, b.drain(t, at(time.Hour)), "a retry enqueued a result")
	})

	t.Run("EnqueueIsIdempotentByTaskID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task, task)
		changed := task
		changed.Name, changed.Input = "other", []byte("other")
		b.enqueueTasks(t, at(time.Second), changed)

		l := b.claim(t, at(2*time.Second))
		require.NotNil(t, l)
		require.Equal(t, queuedTask(task, base), l.Task, "a second enqueue changed the queued task")
		require.Nil(t, b.claim(t, at(2*time.Second)), "a duplicate enqueue left a second task")
	})

	t.Run("CancelRemovesTheExecutionsTasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		claimed := activity("inst-a", execID, 3, "")
		waiting := activity("inst-a", execID, 2, "x")
		otherExecution := activity("inst-a", "exec-2", 2, "")
		otherInstance := activity("inst-b", execID, 2, "")
		b.enqueueTasks(t, base, claimed)
		b.enqueueTasks(t, at(time.Second), waiting, otherExecution, otherInstance)
		l := b.claim(t, at(2*time.Second))
		require.NotNil(t, l)
		require.Equal(t, claimed.ID, l.Task.ID)

		require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
			return s.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "inst-a", ExecutionID: execID})
		}))
		b.zombieCalls(t, l, at(3*time.Second))

		now := at(time.Hour)
		var left []string
		for l := b.claim(t, now, "", "x"); l != nil; l = b.claim(t, now, "", "x") {
			left = append(left, l.Task.ID)
			b.complete(t, l, now)
			require.Less(t, len(left), 10, "the activity queue does not drain")
		}
		require.ElementsMatch(t, []string{otherExecution.ID, otherInstance.ID}, left)
		results := b.drain(t, now)
		require.ElementsMatch(t, []string{provider.ActivityResultID(otherExecution.ID), provider.ActivityResultID(otherInstance.ID)}, messageIDs(results),
			"a cancelled task enqueued a result")

		// Cancelled tasks' ids stay known.
		b.enqueueTasks(t, now, claimed, waiting)
		require.Nil(t, b.claim(t, at(2*time.Hour), "", "x"), "a cancelled task came back when enqueued again")
	})

	t.Run("CancelOtherThanRemovesEveryOtherExecutionsTasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		old1 := activity("inst-a", "exec-1", 2, "")
		old2 := activity("inst-a", "exec-2", 2, "")
		current := activity("inst-a", "exec-3", 2, "")
		otherInstance := activity("inst-b", "exec-1", 2, "")
		b.enqueueTasks(t, base, old1, old2, current, otherInstance)
		require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
			return s.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "inst-a", OtherThan: "exec-3"})
		}))
		var left []string
		for l := b.claim(t, at(time.Hour)); l != nil; l = b.claim(t, at(time.Hour)) {
			left = append(left, l.Task.ID)
			b.complete(t, l, at(time.Hour))
			require.Less(t, len(left), 10)
		}
		require.ElementsMatch(t, []string{current.ID, otherInstance.ID}, left)
	})

	t.Run("UnknownTaskOrTokenIsLeaseLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.zombieCalls(t, &provider.ActivityLease{Task: queuedTask(task, base), Token: "no-such-token"}, base)

		b.enqueueTasks(t, base, task)
		// Queued but not claimed: no token matches.
		b.zombieCalls(t, &provider.ActivityLease{Task: queuedTask(task, base), Token: "no-such-token"}, base)
		l := b.claim(t, base)
		require.NotNil(t, l)
		b.zombieCalls(t, &provider.ActivityLease{Task: l.Task, Token: l.Token + "-forged"}, base)
		require.Nil(t, b.claim(t, at(time.Second)), "a call with a wrong token released the claim")
		b.complete(t, l, at(time.Second))
	})

	t.Run("ConcurrentClaimsAreExclusive", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		const tasks, workers = 48, 8
		var all []provider.ActivityTask
		for i := range tasks {
			all = append(all, activity(fmt.Sprintf("inst-%02d", i%12), execID, int64(2+i/12), ""))
		}
		b.enqueueTasks(t, base, all...)

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var (
			mu        sync.Mutex
			completed = map[string]int{}
			errs      []error
			wg        sync.WaitGroup
		)
		done := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(completed) == tasks || len(errs) > 0
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("worker-%d", w)
				for !done() {
					if ctx.Err() != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s: tasks left unclaimed: %w", owner, ctx.Err()))
						mu.Unlock()
						return
					}
					err := func() error {
						l, err := b.store.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: owner, Now: base, LockedUntil: at(time.Hour)})
						if err != nil || l == nil {
							runtime.Gosched()
							return err
						}
						res, err := provider.ActivityOutcome(&l.Task, nil, nil)
						if err != nil {
							return err
						}
						if err := b.store.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: base}); err != nil {
							return fmt.Errorf("complete %s: %w", l.Task.ID, err)
						}
						mu.Lock()
						completed[l.Task.ID]++
						mu.Unlock()
						return nil
					}()
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s: %w", owner, err))
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.Len(t, completed, tasks)
		for id, n := range completed {
			require.Equal(t, 1, n, "task %s was completed %d times", id, n)
		}
		results := messageIDs(b.drain(t, base))
		require.Len(t, results, tasks)
		for _, task := range all {
			require.True(t, slices.Contains(results, provider.ActivityResultID(task.ID)), "no result of task %s", task.ID)
		}
	})
}

// testListQueuedActivities covers the operator's view of an instance's
// activity tasks.
func testListQueuedActivities(t *testing.T, factory Factory) {
	t.Run("QueuedAndClaimedTasksOfOneInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.requireOneOrder(t)
		b.enqueueTasks(t, base, activity("i-1", execID, 3, ""), activity("i-2", execID, 3, ""), activity("i-1", execID, 5, "x"))
		l := b.claim(t, at(time.Second))
		require.NotNil(t, l)
		require.Equal(t, "i-1", l.Task.InstanceID)
		got, err := b.inspect(t).ListQueuedActivities(t.Context(), &provider.ListQueuedActivitiesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, int64(3), got[0].Task.ScheduledSeq)
		require.Equal(t, l.Owner, got[0].Owner)
		require.Equal(t, l.LockedUntil, got[0].LockedUntil)
		require.Equal(t, int64(5), got[1].Task.ScheduledSeq)
		require.Empty(t, got[1].Owner)
		require.True(t, got[1].LockedUntil.IsZero())
		b.complete(t, l, at(2*time.Second))
		got, err = b.inspect(t).ListQueuedActivities(t.Context(), &provider.ListQueuedActivitiesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		got, err = b.inspect(t).ListQueuedActivities(t.Context(), &provider.ListQueuedActivitiesParams{InstanceID: "none"})
		require.NoError(t, err)
		require.Empty(t, got)
	})
}
