package providertest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testConcurrentActivities covers claims and completions made at once by
// many workers, which a store may combine: each claim takes a task of its
// own, each completion settles its own task alone, and a stale token
// fails only its own call.
func testConcurrentActivities(t *testing.T, factory Factory) {
	t.Run("ConcurrentClaimsAndCompletionsSettleEachTaskOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		const n = 12
		var tasks []provider.ActivityTask
		for i := range n {
			tasks = append(tasks, activity(fmt.Sprintf("inst-%d", i%3), "exec-1", int64(2+i), ""))
		}
		b.enqueueTasks(t, base, tasks...)

		ctx := context.WithoutCancel(t.Context())
		leases := make([]*provider.ActivityLease, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				leases[i], errs[i] = b.store.ClaimActivity(ctx, &provider.ClaimActivityParams{
					Owner: node, Now: base, LockedUntil: at(leaseFor),
				})
			})
		}
		wg.Wait()
		var claimed []string
		for i := range n {
			require.NoError(t, errs[i])
			require.NotNil(t, leases[i], "claim %d found no task while %d were queued", i, n)
			require.NotEmpty(t, leases[i].Token)
			require.False(t, leases[i].LockedUntil.Before(at(leaseFor)), "a claim holds for less than asked")
			claimed = append(claimed, leases[i].Task.ID)
		}
		sort.Strings(claimed)
		var want []string
		for _, task := range tasks {
			want = append(want, task.ID)
		}
		sort.Strings(want)
		require.Equal(t, want, claimed, "the claims did not take each task once")
		require.Nil(t, b.claim(t, at(1)), "a task was claimable while every task was claimed")

		// Each lease completes once with its token, and once more with a
		// stale one, all at the same time.
		stale := make([]error, n)
		for i := range n {
			l := leases[i]
			res, err := provider.ActivityOutcome(&l.Task, []byte(`"done"`), nil)
			require.NoError(t, err)
			wg.Go(func() {
				errs[i] = b.store.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token, Result: res, Now: at(1)})
			})
			wg.Go(func() {
				stale[i] = b.store.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: l.Task.ID, Token: l.Token + "-stale", Result: res, Now: at(1)})
			})
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i], "completion of %s", leases[i].Task.ID)
			require.ErrorIs(t, stale[i], provider.ErrLeaseLost, "completion of %s with a stale token", leases[i].Task.ID)
		}
		var results []string
		for _, m := range b.drain(t, at(2)) {
			results = append(results, m.ID)
		}
		sort.Strings(results)
		for i := range want {
			want[i] = provider.ActivityResultID(want[i])
		}
		require.Equal(t, want, results, "each completion enqueues its own result once")
		require.Nil(t, b.claim(t, at(leaseFor+1)), "a completed task is claimable again")
	})
}
