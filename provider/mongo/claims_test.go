package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// claimTask is an activity task of instance inst, enqueued at base.
func claimTask(inst string) provider.ActivityTask {
	return provider.ActivityTask{
		ID: provider.ActivityTaskID(inst, "exec-1", 2), InstanceID: inst, ExecutionID: "exec-1", ScheduledSeq: 2,
		Name: "charge-card", Attempt: 1,
	}
}

// Times of the expired-claim cases: the slow owner claims at base for a
// minute, the other worker takes the claim over at takeoverAt, and a
// retry makes the task visible again at retryAt.
var (
	takeoverAt = base.Add(2 * time.Minute)
	retryAt    = base.Add(10 * time.Minute)
)

type claimBundle struct {
	s *chmongo.Store
}

func (b *claimBundle) enqueue(t *testing.T, task provider.ActivityTask) {
	t.Helper()
	require.NoError(t, b.s.EnqueueActivities(t.Context(), &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base}))
}

func (b *claimBundle) claim(ctx context.Context, owner string, now time.Time) (*provider.ActivityLease, error) {
	return b.s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: owner, Now: now, LockedUntil: now.Add(time.Hour)})
}

// slowOwner claims task at base until a minute later: its claim has
// expired by takeoverAt.
func (b *claimBundle) slowOwner(t *testing.T, task provider.ActivityTask) *provider.ActivityLease {
	t.Helper()
	l, err := b.s.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: "slow", Now: base, LockedUntil: base.Add(time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Equal(t, task.ID, l.Task.ID)
	return l
}

func (b *claimBundle) retry(ctx context.Context, l *provider.ActivityLease) error {
	return b.s.RetryActivity(ctx, &provider.RetryActivityParams{TaskID: l.Task.ID, Token: l.Token, VisibleAt: retryAt, Error: "card service down"})
}

func (b *claimBundle) complete(ctx context.Context, l *provider.ActivityLease) error {
	res, err := provider.ActivityOutcome(&l.Task, []byte(`"charged"`), nil)
	if err != nil {
		return err
	}
	return b.s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: takeoverAt})
}

func (b *claimBundle) queued(t *testing.T, inst string) []provider.QueuedActivity {
	t.Helper()
	q, err := b.s.ListQueuedActivities(t.Context(), &provider.ListQueuedActivitiesParams{InstanceID: inst})
	require.NoError(t, err)
	return q
}

func (b *claimBundle) messages(t *testing.T, inst string) []provider.Message {
	t.Helper()
	m, err := b.s.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: inst})
	require.NoError(t, err)
	return m
}

// TestExpiredClaimIsSettledOnce: the owner of an expired claim settles it
// while another worker takes it over. Exactly one of them wins, the loser
// writes nothing, the attempt is counted once and a retry's backoff holds.
// (A takeover built on a read from before a retry used to win too, and
// counted the attempt again without the backoff; on the MongoDB wire
// server's non-atomic conditional updates, both used to win nearly every
// race.)
func TestExpiredClaimIsSettledOnce(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *claimBundle {
		t.Helper()
		return &claimBundle{s: mongotest.NewStore(t, chmongo.Options{})}
	}

	t.Run("RetryBeforeTheTakeoverWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := claimTask("i")
		b.enqueue(t, task)
		slow := b.slowOwner(t, task)
		chmongo.SetBeforeClaimWrite(b.s, func(string) {
			chmongo.SetBeforeClaimWrite(b.s, nil)
			require.NoError(t, b.retry(t.Context(), slow), "the owner settles its claim before the takeover writes")
		})
		l, err := b.claim(t.Context(), "other", takeoverAt)
		require.NoError(t, err)
		require.Nil(t, l, "a takeover read before the retry won the retried claim too")

		l, err = b.claim(t.Context(), "other", retryAt.Add(-time.Second))
		require.NoError(t, err)
		require.Nil(t, l, "the retry's backoff was skipped")
		l, err = b.claim(t.Context(), "other", retryAt)
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Nil(t, l.Expired, "the retried claim was taken over as expired")
		require.Equal(t, 2, l.Task.Attempt, "the attempt was counted other than once")
	})

	t.Run("CompletionBeforeTheTakeoverWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := claimTask("i")
		b.enqueue(t, task)
		slow := b.slowOwner(t, task)
		chmongo.SetBeforeClaimWrite(b.s, func(string) {
			chmongo.SetBeforeClaimWrite(b.s, nil)
			require.NoError(t, b.complete(t.Context(), slow))
		})
		l, err := b.claim(t.Context(), "other", takeoverAt)
		require.NoError(t, err)
		require.Nil(t, l, "a completed claim was taken over")
		require.Len(t, b.messages(t, "i"), 1, "the result")
		require.Empty(t, b.queued(t, "i"), "a completed task is still queued")
	})

	t.Run("TakeoverBeforeTheCompletionWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := claimTask("i")
		b.enqueue(t, task)
		slow := b.slowOwner(t, task)
		var other *provider.ActivityLease
		chmongo.SetBeforeSettleWrite(b.s, func(string) {
			chmongo.SetBeforeSettleWrite(b.s, nil)
			var err error
			other, err = b.claim(t.Context(), "other", takeoverAt)
			require.NoError(t, err)
			require.NotNil(t, other, "the expired claim is taken over")
		})
		require.ErrorIs(t, b.complete(t.Context(), slow), provider.ErrLeaseLost)
		require.Empty(t, b.messages(t, "i"), "the owner that lost its claim enqueued its result")
		require.NotNil(t, other.Expired)
		q := b.queued(t, "i")
		require.Len(t, q, 1)
		require.Equal(t, "other", q[0].Owner)
		require.NoError(t, b.complete(t.Context(), other))
		require.Len(t, b.messages(t, "i"), 1)
	})

	t.Run("TakeoverBeforeTheRetryWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := claimTask("i")
		b.enqueue(t, task)
		slow := b.slowOwner(t, task)
		var other *provider.ActivityLease
		chmongo.SetBeforeSettleWrite(b.s, func(string) {
			chmongo.SetBeforeSettleWrite(b.s, nil)
			var err error
			other, err = b.claim(t.Context(), "other", takeoverAt)
			require.NoError(t, err)
			require.NotNil(t, other, "the expired claim is taken over")
		})
		require.ErrorIs(t, b.retry(t.Context(), slow), provider.ErrLeaseLost)
		q := b.queued(t, "i")
		require.Len(t, q, 1)
		require.Equal(t, "other", q[0].Owner, "the owner that lost its claim released the takeover's")
		require.Equal(t, 1, q[0].Task.Attempt, "the owner that lost its claim counted the attempt")
		// The takeover counts the timed-out attempt.
		require.NoError(t, b.s.RetryActivity(t.Context(), &provider.RetryActivityParams{TaskID: task.ID, Token: other.Token, VisibleAt: retryAt, Error: "timed out"}))
		l, err := b.claim(t.Context(), "third", retryAt)
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Equal(t, 2, l.Task.Attempt)
	})

	// races runs n races of the slow owner's settle against a takeover,
	// started together, each on a task of its own, and checks each with
	// check; it returns how many both won.
	races := func(t *testing.T, b *claimBundle, n int, settle func(ctx context.Context, l *provider.ActivityLease) error,
		check func(t *testing.T, inst string, settled bool)) (doubles int) {
		t.Helper()
		for i := range n {
			inst := fmt.Sprintf("race-%03d", i)
			task := claimTask(inst)
			b.enqueue(t, task)
			slow := b.slowOwner(t, task)
			start := make(chan struct{})
			settled := make(chan error, 1)
			taken := make(chan *provider.ActivityLease, 1)
			errs := make(chan error, 1)
			go func() { <-start; settled <- settle(t.Context(), slow) }()
			go func() {
				<-start
				l, err := b.claim(t.Context(), "other", takeoverAt)
				errs <- err
				taken <- l
			}()
			close(start)
			var (
				serr error
				l    *provider.ActivityLease
			)
			for range 2 {
				select {
				case serr = <-settled:
				case err := <-errs:
					require.NoError(t, err)
					l = <-taken
				case <-time.After(10 * time.Second):
					t.Fatalf("race %d did not end", i)
				}
			}
			if serr != nil {
				require.ErrorIs(t, serr, provider.ErrLeaseLost, "race %d", i)
			}
			switch {
			case serr == nil && l != nil:
				doubles++
				continue
			case serr != nil && l == nil:
				t.Fatalf("race %d: neither the owner nor the takeover won", i)
			}
			if l != nil {
				require.Equal(t, task.ID, l.Task.ID)
				require.NotNil(t, l.Expired, "race %d", i)
				require.Equal(t, 1, l.Task.Attempt, "race %d", i)
			}
			check(t, inst, serr == nil)
		}
		return doubles
	}

	const n = 200
	t.Run("RacesOfARetryAndATakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		doubles := races(t, b, n, b.retry, func(t *testing.T, inst string, retried bool) {
			q := b.queued(t, inst)
			require.Len(t, q, 1, inst)
			if retried {
				require.Equal(t, 2, q[0].Task.Attempt, "%s: the retry", inst)
				require.Equal(t, retryAt, q[0].Task.VisibleAt, inst)
				require.Empty(t, q[0].Owner, "%s: a retried task is claimed", inst)
			} else {
				require.Equal(t, 1, q[0].Task.Attempt, "%s: the owner that lost counted the attempt", inst)
				require.Equal(t, "other", q[0].Owner, inst)
			}
		})
		require.Zero(t, doubles, "both the retry and the takeover won %d of %d races", doubles, n)
	})

	t.Run("RacesOfACompletionAndATakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		doubles := races(t, b, n, b.complete,
			func(t *testing.T, inst string, completed bool) {
				q, m := b.queued(t, inst), b.messages(t, inst)
				if completed {
					require.Empty(t, q, "%s: a completed task is queued", inst)
					require.Len(t, m, 1, "%s: the result", inst)
				} else {
					require.Len(t, q, 1, inst)
					require.Equal(t, "other", q[0].Owner, inst)
					require.Empty(t, m, "%s: the owner that lost enqueued its result", inst)
				}
			})
		require.Zero(t, doubles, "both the completion and the takeover won %d of %d races", doubles, n)
	})
}

// errCrash ends a settlement after its first write, as a crash would.
var errCrash = errors.New("crash after the settlement's step")

// TestInterruptedSettlementIsFinished: a settlement whose worker died
// after its first write (the step that settles the claim) is finished,
// by the same call again or by the next claimer once the claim ran out,
// with its result queued once and a retry's backoff kept.
func TestInterruptedSettlementIsFinished(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*claimBundle, provider.ActivityTask, *provider.ActivityLease) {
		t.Helper()
		b := &claimBundle{s: mongotest.NewStore(t, chmongo.Options{})}
		task := claimTask("i")
		b.enqueue(t, task)
		slow := b.slowOwner(t, task)
		chmongo.SetAfterSettleStep(b.s, func(string) error {
			chmongo.SetAfterSettleStep(b.s, nil)
			return errCrash
		})
		return b, task, slow
	}

	t.Run("CompletionByItsOwner", func(t *testing.T) {
		t.Parallel()
		b, _, slow := setup(t)
		require.ErrorIs(t, b.complete(t.Context(), slow), errCrash)
		require.Empty(t, b.messages(t, "i"))
		l, err := b.claim(t.Context(), "other", base.Add(30*time.Second))
		require.NoError(t, err)
		require.Nil(t, l, "a settled claim was claimed again")

		require.NoError(t, b.complete(t.Context(), slow), "the owner finishes its settlement")
		require.Len(t, b.messages(t, "i"), 1)
		require.Empty(t, b.queued(t, "i"))
		require.ErrorIs(t, b.complete(t.Context(), slow), provider.ErrLeaseLost, "completing a finished claim again")
		require.ErrorIs(t, b.retry(t.Context(), slow), provider.ErrLeaseLost, "retrying a completed claim")
		require.Len(t, b.messages(t, "i"), 1)
	})

	t.Run("CompletionByTheNextClaimer", func(t *testing.T) {
		t.Parallel()
		b, _, slow := setup(t)
		require.ErrorIs(t, b.complete(t.Context(), slow), errCrash)
		l, err := b.claim(t.Context(), "other", takeoverAt)
		require.NoError(t, err)
		require.Nil(t, l, "a completed task was taken over")
		m := b.messages(t, "i")
		require.Len(t, m, 1, "the next claimer queues the result")
		require.Equal(t, provider.ActivityResultID(slow.Task.ID), m[0].ID)
		require.Empty(t, b.queued(t, "i"))
		require.ErrorIs(t, b.complete(t.Context(), slow), provider.ErrLeaseLost)
		require.Len(t, b.messages(t, "i"), 1)
	})

	t.Run("RetryByTheNextClaimer", func(t *testing.T) {
		t.Parallel()
		b, _, slow := setup(t)
		require.ErrorIs(t, b.retry(t.Context(), slow), errCrash)
		l, err := b.claim(t.Context(), "other", takeoverAt)
		require.NoError(t, err)
		require.Nil(t, l, "a retried claim was taken over before the retry's VisibleAt")
		q := b.queued(t, "i")
		require.Len(t, q, 1)
		require.Empty(t, q[0].Owner)
		require.Equal(t, 2, q[0].Task.Attempt)
		at, ok, err := b.s.NextVisibleAt(t.Context(), &provider.NextVisibleAtParams{Queue: provider.QueueActivity})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, retryAt, at, "the claimer rewrote when the task is claimable")

		l, err = b.claim(t.Context(), "other", retryAt)
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Nil(t, l.Expired)
		require.Equal(t, 2, l.Task.Attempt)
	})

	t.Run("DeadLetterByTheNextClaimer", func(t *testing.T) {
		t.Parallel()
		b, task, slow := setup(t)
		letter := provider.DeadLetter{
			ID: provider.DeadLetterID(task.ID, slow.Task.EnqueuedAt), InstanceID: "i", Reason: provider.ReasonUnknownActivity,
			Error: "no activity named charge-card", Node: "slow", At: base, Attempts: 1, Status: provider.DeadLetterDead,
		}
		require.ErrorIs(t, b.s.DeadLetterActivity(t.Context(), &provider.DeadLetterActivityParams{TaskID: task.ID, Token: slow.Token, Letter: letter}), errCrash)
		_, err := b.s.GetDeadLetter(t.Context(), letter.ID)
		require.ErrorIs(t, err, provider.ErrNotFound)

		l, err := b.claim(t.Context(), "other", takeoverAt)
		require.NoError(t, err)
		require.Nil(t, l, "a dead-lettered task was taken over")
		got, err := b.s.GetDeadLetter(t.Context(), letter.ID)
		require.NoError(t, err, "the next claimer writes the letter")
		require.NotNil(t, got.Activity)
		require.Equal(t, task.ID, got.Activity.ID)
		require.Equal(t, provider.ReasonUnknownActivity, got.Reason)
		require.Empty(t, b.queued(t, "i"))
	})
}

// TestMigrationKeepsClaimsOfSchema2: migration 3 turns the claim
// documents of schema 2 into steps. A task claimed before it is still
// claimed by the same token, which settles it; a task claimed and
// retried before is claimed afresh (its old claim documents would
// otherwise collide with its steps).
func TestMigrationKeepsClaimsOfSchema2(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := &claimBundle{s: mongotest.NewStore(t, chmongo.Options{})}
	held, retried := claimTask("held"), claimTask("retried")
	b.enqueue(t, held)
	b.enqueue(t, retried)
	until := base.Add(time.Minute)
	require.NoError(t, chmongo.LegacyClaims(ctx, b.s, held.ID, 2, "legacy-token", "old-worker", until.UnixNano()))
	require.NoError(t, chmongo.LegacyClaims(ctx, b.s, retried.ID, 3, "", "", until.UnixNano()))
	v, err := b.s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)

	require.NoError(t, b.s.Migrate(ctx))
	v, err = b.s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, chmongo.LatestSchemaVersion(), v)
	require.NoError(t, b.s.Migrate(ctx), "migrating again")

	q := b.queued(t, "held")
	require.Len(t, q, 1)
	require.Equal(t, "old-worker", q[0].Owner)
	require.Equal(t, until, q[0].LockedUntil)

	l, err := b.claim(ctx, "new-worker", base)
	require.NoError(t, err)
	require.NotNil(t, l, "the task retried before the migration is claimable")
	require.Equal(t, retried.ID, l.Task.ID)
	require.Nil(t, l.Expired)
	l, err = b.claim(ctx, "new-worker", base)
	require.NoError(t, err)
	require.Nil(t, l, "the task claimed before the migration was claimed again")

	require.NoError(t, b.complete(ctx, &provider.ActivityLease{Task: held, Token: "legacy-token"}), "the claim's token settles it")
	require.Len(t, b.messages(t, "held"), 1)
	require.Empty(t, b.queued(t, "held"))
}
