package providertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// testActivityExpiry covers activity claims that run out without a result:
// each is a timed-out attempt, counted, backed off and ended by the retry
// policy, so an activity that kills its worker cannot run forever.
func testActivityExpiry(t *testing.T, factory Factory) {
	t.Run("TakeOverReportsTheExpiredClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task)

		l1 := b.claim(t, base)
		require.NotNil(t, l1)
		require.Nil(t, l1.Expired, "a first claim reported an expired one")
		l2 := b.claim(t, at(leaseFor))
		require.NotNil(t, l2)
		require.Equal(t, &provider.ExpiredClaim{Owner: node, LockedUntil: at(leaseFor)}, l2.Expired)
		require.Equal(t, 1, l2.Task.Attempt, "the store counted the lost attempt itself")

		// A claim released by a retry is not an expired one.
		require.NoError(t, b.store.RetryActivity(t.Context(), &provider.RetryActivityParams{
			TaskID: task.ID, Token: l2.Token, VisibleAt: at(3 * leaseFor), Error: "lost",
		}))
		l3 := b.claim(t, at(3*leaseFor))
		require.NotNil(t, l3)
		require.Nil(t, l3.Expired, "a claim after a retry reported an expired one")
		require.Equal(t, 2, l3.Task.Attempt)
	})

	t.Run("WorkerThatDiesUsesUpItsAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		task.Retry = history.RetryPolicy{MaxAttempts: 3, InitialInterval: 10 * time.Second, MaxInterval: time.Minute, Multiplier: 2}
		b.enqueueTasks(t, base, task)

		clock := round.NewManualClock(base)
		ran := 0
		w, err := round.NewActivityWorker(b.store, round.ActivityWorkerOptions{
			Node: "node-2", Clock: clock, LeaseDuration: leaseFor, Jitter: func() float64 { return 0 },
			Resolve: func(string) (round.ActivityFunc, bool) {
				return func(context.Context, *provider.ActivityLease, *round.Heartbeat) ([]byte, error) {
					ran++
					return []byte(`"ran"`), nil
				}, true
			},
		})
		require.NoError(t, err)

		for attempt := 1; attempt <= 3; attempt++ {
			// A worker claims the attempt and dies with it.
			dead := b.claim(t, clock.Now())
			require.NotNil(t, dead, "attempt %d is not claimable", attempt)
			require.Equal(t, attempt, dead.Task.Attempt)
			clock.Advance(leaseFor)

			rep, err := w.RunOnce(t.Context())
			require.NoError(t, err)
			require.NotNil(t, rep, "the expired claim of attempt %d was not taken over", attempt)
			require.Equal(t, attempt, rep.Attempt)
			require.ErrorIs(t, rep.Err, round.ErrActivityTimedOut)
			var timedOut *round.ActivityTimedOutError
			require.ErrorAs(t, rep.Err, &timedOut)
			require.Equal(t, node, timedOut.Owner)
			require.Equal(t, dead.LockedUntil, timedOut.LockedUntil)
			if attempt < 3 {
				// Backoff: 10s doubling, half of it jitter (0 here).
				delay := 5 * time.Second << (attempt - 1)
				require.Equal(t, round.OutcomeRetry, rep.Outcome, "attempt %d", attempt)
				require.Equal(t, clock.Now().Add(delay), rep.RetryAt)
				require.Nil(t, b.claim(t, clock.Now().Add(delay-time.Second)), "attempt %d was not backed off", attempt+1)
				clock.Advance(delay)
				continue
			}
			require.Equal(t, round.OutcomeFailed, rep.Outcome)
		}
		require.Zero(t, ran, "the worker ran an attempt whose claim had expired")
		require.Nil(t, b.claim(t, at(time.Hour)), "a task that used up its attempts is still queued")

		got := b.drain(t, clock.Now())
		require.Len(t, got, 1, "the failed result")
		require.Equal(t, provider.ActivityResultID(task.ID), got[0].ID)
		require.Equal(t, history.KindActivityFailed, got[0].Kind)
		attrs, err := history.DecodeAttributes(got[0].Kind, got[0].Payload)
		require.NoError(t, err)
		failed, ok := attrs.(*history.ActivityFailed)
		require.True(t, ok, "payload %T", attrs)
		require.Equal(t, 3, failed.Attempts)
		require.Equal(t, round.FailureLeaseExpired, failed.Failure.Type)
	})

	// The owner of an expired claim settles it while another worker
	// takes it over: exactly one wins. A retry that wins is counted
	// once and keeps its backoff; a takeover that wins holds the claim
	// with the attempt not yet counted.
	t.Run("ExpiredClaimIsSettledOrTakenOverNotBoth", func(t *testing.T) {
		t.Parallel()
		const races = 50
		for _, settle := range []string{"retry", "complete"} {
			b := setup(t, factory)
			for i := range races {
				inst := fmt.Sprintf("%s-%02d", settle, i)
				task := activity(inst, execID, 2, "")
				b.enqueueTasks(t, base, task)
				slow := b.claim(t, base)
				require.NotNil(t, slow)
				require.Equal(t, task.ID, slow.Task.ID)
				res, err := provider.ActivityOutcome(&slow.Task, []byte(`"done"`), nil)
				require.NoError(t, err)

				start := make(chan struct{})
				settled := make(chan error, 1)
				taken := make(chan claimed, 1)
				go func() {
					<-start
					if settle == "retry" {
						settled <- b.store.RetryActivity(t.Context(), &provider.RetryActivityParams{TaskID: task.ID, Token: slow.Token, VisibleAt: at(10 * leaseFor), Error: "down"})
						return
					}
					settled <- b.store.CompleteActivity(t.Context(), &provider.CompleteActivityParams{TaskID: task.ID, Token: slow.Token, Result: res, Now: at(leaseFor)})
				}()
				go func() {
					<-start
					l, err := b.store.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: "other", Now: at(leaseFor), LockedUntil: at(5 * leaseFor)})
					taken <- claimed{l, err}
				}()
				close(start)
				var (
					serr error
					c    claimed
				)
				for range 2 {
					select {
					case serr = <-settled:
					case c = <-taken:
					case <-time.After(waitTimeout):
						require.FailNow(t, "a race did not end", "%s", inst)
					}
				}
				require.NoError(t, c.err, inst)
				if serr != nil {
					require.ErrorIs(t, serr, provider.ErrLeaseLost, inst)
				}
				require.False(t, serr == nil && c.lease != nil, "%s: both the owner's %s and the takeover won", inst, settle)
				require.False(t, serr != nil && c.lease == nil, "%s: neither the owner's %s nor the takeover won", inst, settle)

				q, err := b.inspect(t).ListQueuedActivities(t.Context(), &provider.ListQueuedActivitiesParams{InstanceID: inst})
				require.NoError(t, err)
				switch {
				case c.lease != nil:
					require.NotNil(t, c.lease.Expired, inst)
					require.Equal(t, 1, c.lease.Task.Attempt, inst)
					require.Len(t, q, 1, inst)
					require.Equal(t, "other", q[0].Owner, inst)
					require.Equal(t, 1, q[0].Task.Attempt, "%s: the owner that lost counted the attempt", inst)
				case settle == "retry":
					require.Len(t, q, 1, inst)
					require.Empty(t, q[0].Owner, "%s: a retried task is claimed", inst)
					require.Equal(t, 2, q[0].Task.Attempt, "%s: the retry", inst)
					require.Equal(t, at(10*leaseFor), q[0].Task.VisibleAt, inst)
				default:
					require.Empty(t, q, "%s: a completed task is queued", inst)
				}
			}
		}
	})
}

// claimed is the outcome of a ClaimActivity call.
type claimed struct {
	lease *provider.ActivityLease
	err   error
}
