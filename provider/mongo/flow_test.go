package mongo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// keyedTask is claimTask with a concurrency key of limit 1.
func keyedTask(inst string) provider.ActivityTask {
	t := claimTask(inst)
	t.ConcurrencyKey, t.ConcurrencyLimit = "tenant", 1
	return t
}

// TestHeartbeatDoesNotReviveASlotTakenOver: once a claim of a keyed task
// ran out, another task of the key takes its slot; the first claim's
// heartbeat must then fail rather than make two live claims of a key of
// limit 1.
func TestHeartbeatDoesNotReviveASlotTakenOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := &claimBundle{s: mongotest.NewStore(t, chmongo.Options{})}
	first, second := keyedTask("a"), keyedTask("b")
	b.enqueue(t, first)
	b.enqueue(t, second)
	slow := b.slowOwner(t, first)
	l, err := b.claim(ctx, "other", base.Add(30*time.Second))
	require.NoError(t, err)
	require.Nil(t, l, "the key of limit 1 is full while the first claim is live")

	l, err = b.claim(ctx, "other", takeoverAt)
	require.NoError(t, err)
	require.NotNil(t, l, "the claim that ran out frees the key's slot")
	err = b.s.HeartbeatActivity(ctx, &provider.HeartbeatActivityParams{TaskID: first.ID, Token: slow.Token, LockedUntil: takeoverAt.Add(time.Hour)})
	require.ErrorIs(t, err, provider.ErrLeaseLost, "a heartbeat revived a claim whose slot was taken")
	n, err := b.s.CountClaims(ctx, "tenant", takeoverAt)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestClaimThatLosesItsTaskGivesBackItsToken: a claimer that took a rate
// token and then lost the task to another claimer gives the token back,
// so the window's next claim gets it.
func TestClaimThatLosesItsTaskGivesBackItsToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := &claimBundle{s: mongotest.NewStore(t, chmongo.Options{})}
	lost, next := claimTask("a"), claimTask("b")
	b.enqueue(t, lost)
	rates := []provider.RateLimit{{Key: "cards", Activity: lost.Name, Tokens: 1, Interval: time.Hour}}
	claim := func() *provider.ActivityLease {
		l, err := b.s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: base, LockedUntil: base.Add(time.Minute), Rates: rates})
		require.NoError(t, err)
		return l
	}
	chmongo.SetBeforeClaimWrite(b.s, func(taskID string) {
		chmongo.SetBeforeClaimWrite(b.s, nil)
		require.NoError(t, chmongo.InsertClaim(ctx, b.s, taskID, 1, base.Add(time.Minute).UnixNano()))
	})
	require.Nil(t, claim(), "the task was claimed by another worker first")
	b.enqueue(t, next)
	l := claim()
	require.NotNil(t, l, "the token of the lost claim was spent")
	require.Equal(t, next.ID, l.Task.ID)
	require.Nil(t, claim(), "one token an hour")
}

// TestMigrationOrdersOldWork: migration 5 gives messages and activity
// tasks written before it their order fields, from their visibility and
// their encoded priority.
func TestMigrationOrdersOldWork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := mongotest.NewStore(t, chmongo.Options{})
	plain, urgent := claimTask("a"), claimTask("b")
	urgent.Priority = 5
	for _, task := range []provider.ActivityTask{plain, urgent} {
		require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base}))
	}
	var msgs []provider.Message
	for i, inst := range []string{"late", "early"} {
		m, err := provider.NewMessage("m-"+inst, inst, "", "m-"+inst, &history.EventRaised{Name: "poke", IdempotencyKey: "m-" + inst})
		require.NoError(t, err)
		// Enqueued in this order, visible in the other.
		m.VisibleAt = base.Add(time.Duration(1-i) * time.Second)
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: base}))
	}
	require.NoError(t, chmongo.AsBeforeFlow(ctx, s))
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, v)

	require.NoError(t, s.Migrate(ctx))
	v, err = s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, chmongo.LatestSchemaVersion(), v)
	now := base.Add(time.Minute)
	l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Equal(t, urgent.ID, l.Task.ID, "the task of priority 5 first")
	lease, err := s.LeaseInstance(ctx, &provider.LeaseParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, lease)
	require.Equal(t, "early", lease.InstanceID, "the message visible first")
}
