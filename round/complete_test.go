package round_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// opCounts counts a memory store's operations by kind.
type opCounts struct{ commits, completions, dequeues atomic.Int64 }

func (c *opCounts) fault(op memory.Op) *memory.Fault {
	switch op {
	case memory.OpCommit:
		c.commits.Add(1)
	case memory.OpCompleteActivity:
		c.completions.Add(1)
	case memory.OpDequeueInstance:
		c.dequeues.Add(1)
	}
	return nil
}

// inlineWorker returns an activity worker of b that completes tasks with
// b's runner.
func inlineWorker(t *testing.T, b *bundle) *round.ActivityWorker {
	t.Helper()
	w, err := round.NewActivityWorker(b.store, round.ActivityWorkerOptions{
		Node: "n1", Resolve: scripted.Resolve, Clock: b.clock, Jitter: func() float64 { return 0 }, Rounds: b.runner,
	})
	require.NoError(t, err)
	return w
}

var twoActivities = []history.Kind{
	history.KindExecutionStarted, history.KindTurnStarted, history.KindActivityScheduled,
	history.KindActivityCompleted, history.KindTurnStarted, history.KindActivityScheduled,
	history.KindActivityCompleted, history.KindTurnStarted, history.KindExecutionCompleted,
}

// TestCompleteActivityRunsTheRoundInItsTransaction: a completion runs the
// round its result wakes in the same commit: the result is consumed there
// and never stays queued, and no orchestration round is needed after the
// start's.
func TestCompleteActivityRunsTheRoundInItsTransaction(t *testing.T) {
	t.Parallel()
	var ops opCounts
	b := setup(t, provider.ModeTransactional, memory.Options{Fault: ops.fault}, round.Hooks{})
	require.True(t, b.runner.CompletesActivities())
	w := inlineWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	rep, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, rep)
	ops.commits.Store(0)
	for i := range 2 {
		arep, err := w.RunOnce(b.ctx)
		require.NoError(t, err)
		require.Equal(t, round.OutcomeCompleted, arep.Outcome)
		require.NoError(t, arep.RoundErr)
		require.Len(t, arep.Rounds, 1, "activity %d: its instance's round ran with the completion", i)
		require.Equal(t, "i", arep.Rounds[0].InstanceID)
		require.Equal(t, 1, arep.Rounds[0].Processed)
		require.NotNil(t, arep.Rounds[0].Head, "the round's head is reported (checkpoints)")
		require.Empty(t, b.store.QueuedMessages(), "activity %d: the result was consumed in the completion's transaction", i)
	}
	require.Equal(t, int64(2), ops.commits.Load(), "one commit per activity: completion and round")
	require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
	require.Equal(t, twoActivities, kinds(b.history(t, "i")))
	rep, err = b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Nil(t, rep, "no round left for an orchestration worker")
}

// TestCompleteActivityLeavesALockedInstance: while another round holds the
// instance, the completion does not wait for it: it commits alone and the
// result waits in the queue for a round.
func TestCompleteActivityLeavesALockedInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.ModeTransactional, memory.Options{}, round.Hooks{})
	w := inlineWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Signal, Name: "go"})
	_, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	b.signal(t, "i", "go", "k")
	holding := errors.New("the holding round rolls back")
	err = b.store.RunRound(b.ctx, func(ctx context.Context, tx provider.Tx) error {
		batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: b.clock.Now(), Owner: "other", InstanceID: "i"})
		require.NoError(t, err)
		require.NotNil(t, batch)
		arep, err := w.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, round.OutcomeCompleted, arep.Outcome)
		require.Empty(t, arep.Rounds, "the instance is locked: no round ran")
		return holding
	})
	require.ErrorIs(t, err, holding)
	msgs, err := b.store.ListMessages(b.ctx, &provider.ListMessagesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Len(t, msgs, 2, "the signal and the result, committed alone")
	require.Empty(t, b.store.QueuedActivities())
	b.drain(t)
	require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
}

// TestCompleteActivityKeepsTheCompletionOfAFailedRound: a round that fails
// in the completion's transaction is abandoned as any round: the
// completion commits, and its result stays queued, counted and held until
// the retry.
func TestCompleteActivityKeepsTheCompletionOfAFailedRound(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.ModeTransactional, memory.Options{}, round.Hooks{})
	failing := true
	var err error
	b.runner, err = round.NewRunner(b.store, round.RunnerOptions{
		Node: "n1", Clock: b.clock,
		Turn: func(ctx context.Context, in *round.TurnInput) (*round.TurnOutput, error) {
			if failing && in.Snapshot.LastSeq > 3 {
				return nil, errors.New("boom")
			}
			return scripted.Turn(ctx, in)
		},
	})
	require.NoError(t, err)
	w := inlineWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	_, err = b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	arep, err := w.RunOnce(b.ctx)
	require.NoError(t, err, "the round's failure is the round's, not the activity's")
	require.Equal(t, round.OutcomeCompleted, arep.Outcome)
	require.ErrorContains(t, arep.RoundErr, "boom")
	require.Len(t, arep.Rounds, 1)
	require.True(t, arep.Rounds[0].Failed)
	require.Empty(t, b.store.QueuedActivities(), "the task is gone")
	msgs, err := b.store.ListMessages(b.ctx, &provider.ListMessagesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, provider.ActivityResultID(arep.TaskID), msgs[0].ID)
	require.Equal(t, 1, msgs[0].Attempts, "the failed delivery is counted")
	require.Len(t, b.history(t, "i"), 3, "the round appended nothing")
	rep, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Nil(t, rep, "held until the retry")
	failing = false
	b.clock.Advance(round.DefaultRetryDelay(1))
	require.NoError(t, scripted.Drain(b.ctx, b.runner, w, 100))
	require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
	require.Equal(t, twoActivities, kinds(b.history(t, "i")))
}

// TestCompleteActivityCrashLosesNothing kills the process at every point
// of the transaction that completes an activity and runs its round (after
// the completion, and at each crash point of the round): nothing of it is
// kept, the task's claim runs out, and its next attempt completes it, once.
func TestCompleteActivityCrashLosesNothing(t *testing.T) {
	t.Parallel()
	for _, point := range append([]round.CrashPoint{round.AfterCompletion}, round.CrashPoints()...) {
		t.Run(string(point), func(t *testing.T) {
			t.Parallel()
			crashes, inWorker := 0, false
			hooks := round.Hooks{Crash: func(_ context.Context, p round.CrashPoint, _ string) error {
				if p == point && inWorker && crashes < 2 {
					crashes++
					return errors.New("kill -9")
				}
				return nil
			}}
			b := setup(t, provider.ModeTransactional, memory.Options{}, hooks)
			w := inlineWorker(t, b)
			b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
			for range 50 {
				_, err := b.runner.RunOnce(b.ctx)
				require.NoError(t, err)
				inWorker = true
				arep, err := w.RunOnce(b.ctx)
				inWorker = false
				if round.IsCrash(err) {
					require.NotNil(t, arep)
					b.runner.Forget()
					if point != round.AfterCommit {
						require.Empty(t, b.store.QueuedMessages(), "nothing of the transaction is kept")
						require.Len(t, b.store.QueuedActivities(), 1, "the task stays claimed")
					}
					b.clock.Advance(time.Minute) // the claim runs out
					continue
				}
				require.NoError(t, err)
				if arep == nil && b.status(t, "i") == provider.StatusCompleted {
					break
				}
				b.clock.Advance(time.Minute) // retries of timed-out attempts
			}
			require.Equal(t, 2, crashes)
			require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
			events := b.history(t, "i")
			_, err := round.Fold("i", events)
			require.NoError(t, err)
			require.Equal(t, twoActivities, kinds(events))
			require.Empty(t, b.store.QueuedMessages())
			require.Empty(t, b.store.QueuedActivities())
		})
	}
}

// TestCompleteActivityOnPeekLockCompletesAlone: a peek-lock store cannot
// complete in a round's transaction; the worker completes as before and
// leaves the round to the runner.
func TestCompleteActivityOnPeekLockCompletesAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.ModePeekLock, memory.Options{}, round.Hooks{})
	require.False(t, b.runner.CompletesActivities())
	w := inlineWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	_, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	arep, err := w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, round.OutcomeCompleted, arep.Outcome)
	require.Empty(t, arep.Rounds)
	require.Len(t, b.store.QueuedMessages(), 1, "the result waits for a round")
	require.NoError(t, scripted.Drain(b.ctx, b.runner, w, 100))
	require.Equal(t, twoActivities, kinds(b.history(t, "i")))
}

// eagerWorker returns an inline worker of b that takes the next task
// claimed.
func eagerWorker(t *testing.T, b *bundle) *round.ActivityWorker {
	t.Helper()
	w, err := round.NewActivityWorker(b.store, round.ActivityWorkerOptions{
		Node: "n1", Resolve: scripted.Resolve, Clock: b.clock, Jitter: func() float64 { return 0 }, Rounds: b.runner, Eager: true,
	})
	require.NoError(t, err)
	return w
}

// TestEagerHandsOverTheNextTask: the round run with a completion enqueues
// the activity it schedules claimed by the worker, which runs it without
// a claim of its own.
func TestEagerHandsOverTheNextTask(t *testing.T) {
	t.Parallel()
	var claims atomic.Int64
	b := setup(t, provider.ModeTransactional, memory.Options{Fault: func(op memory.Op) *memory.Fault {
		if op == memory.OpClaimActivity {
			claims.Add(1)
		}
		return nil
	}}, round.Hooks{})
	w := eagerWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	_, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	arep, err := w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Len(t, arep.Rounds, 1)
	next := arep.Next
	require.NotNil(t, next, "the round's activity is handed over")
	queued := b.store.QueuedActivities()
	require.Len(t, queued, 1)
	require.Equal(t, next.Task.ID, queued[0].Task.ID)
	require.Equal(t, "n1", queued[0].Owner, "stored claimed by the worker")
	require.Equal(t, next.LockedUntil, queued[0].LockedUntil)
	other, err := b.store.ClaimActivity(b.ctx, &provider.ClaimActivityParams{Owner: "n2", Now: b.clock.Now(), LockedUntil: b.clock.Now().Add(time.Minute)})
	require.NoError(t, err)
	require.Nil(t, other, "no other worker claims it")
	arep, err = w.RunLease(b.ctx, next)
	require.NoError(t, err)
	require.Equal(t, round.OutcomeCompleted, arep.Outcome)
	require.Len(t, arep.Rounds, 1)
	require.Nil(t, arep.Next, "the workflow ended")
	require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
	require.Equal(t, twoActivities, kinds(b.history(t, "i")))
	require.Equal(t, int64(2), claims.Load(), "the first activity's claim and the other node's empty one")
}

// TestEagerTaskLeftUnrunRunsOut: a worker that dies holding a task handed
// over leaves it claimed until its claim runs out; the next claim counts
// the lost attempt and the workflow goes on.
func TestEagerTaskLeftUnrunRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.ModeTransactional, memory.Options{}, round.Hooks{})
	w := eagerWorker(t, b)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	_, err := b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	arep, err := w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, arep.Next)
	arep, err = w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Nil(t, arep, "the task is claimed")
	b.clock.Advance(time.Minute) // the claim runs out
	arep, err = w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, round.OutcomeRetry, arep.Outcome, "the lost attempt is counted")
	b.clock.Advance(time.Minute)
	require.NoError(t, scripted.Drain(b.ctx, b.runner, w, 100))
	require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
	require.Equal(t, twoActivities, kinds(b.history(t, "i")))
}

// TestEagerSkipsTasksItMustNotClaim: a task of a queue the worker does not
// serve is enqueued unclaimed.
func TestEagerSkipsTasksItMustNotClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.ModeTransactional, memory.Options{}, round.Hooks{})
	w, err := round.NewActivityWorker(b.store, round.ActivityWorkerOptions{
		Node: "n1", Resolve: scripted.Resolve, Clock: b.clock, Rounds: b.runner, Eager: true, Queues: []string{"", "other"},
		Rates: []provider.RateLimit{{Key: "b", Activity: "b", Tokens: 10, Interval: time.Second}},
	})
	require.NoError(t, err)
	b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
	_, err = b.runner.RunOnce(b.ctx)
	require.NoError(t, err)
	arep, err := w.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Len(t, arep.Rounds, 1)
	require.Nil(t, arep.Next, "a rate limit of the worker matches the task")
	queued := b.store.QueuedActivities()
	require.Len(t, queued, 1)
	require.Empty(t, queued[0].Owner, "enqueued unclaimed")
}
