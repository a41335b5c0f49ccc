package providertest

import (
	"errors"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testPeekLock covers what only peek-lock stores promise: leases with
// tokens and fencing epochs, their expiry, and the rejection of zombies.
func testPeekLock(t *testing.T, factory Factory) {
	// lease leases instanceID (any instance when empty) at now until
	// now+leaseFor.
	lease := func(t *testing.T, b *bundle, now time.Time, instanceID string) *provider.Lease {
		t.Helper()
		l, err := b.lease.LeaseInstance(t.Context(), &provider.LeaseParams{
			Now: now, LockedUntil: now.Add(leaseFor), Owner: node, Limit: 100, InstanceID: instanceID,
		})
		require.NoError(t, err)
		if l != nil {
			require.NotEmpty(t, l.Token)
			require.Equal(t, node, l.Owner)
			require.Equal(t, now.Add(leaseFor), l.LockedUntil)
			require.NoError(t, checkBatch(l.InstanceID, l.Messages, 100))
		}
		return l
	}
	ack := func(t *testing.T, b *bundle, l *provider.Lease, ids ...string) error {
		t.Helper()
		return b.lease.AckLease(t.Context(), &provider.AckLeaseParams{Lease: l, MessageIDs: ids})
	}

	t.Run("ZombieAppendAcrossAPurgeIsRefused", func(t *testing.T) {
		// A round leases the start of inst-a, loads its (empty) history
		// and stalls; its lease runs out, another round runs the
		// instance to its end, it is purged and started again. The
		// stalled round's append at seq 1 must not land in the new run.
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		first, err := provider.NewMessage("start-1", "inst-a", "exec-1", "exec-1", &history.ExecutionStarted{Name: "approve-claim"})
		require.NoError(t, err)
		b.enqueue(t, base, first)
		zombie := lease(t, b, base, "inst-a")
		require.NotNil(t, zombie)

		run := lease(t, b, zombie.LockedUntil, "inst-a")
		require.NotNil(t, run, "the expired lease was not taken over")
		ended := chain("inst-a", nil, startEvent(t, "exec-1"), markerEvent(t, "done"))
		require.NoError(t, b.lease.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: ended, Lease: run}))
		b.save(t, projections(t, "inst-a", 2, "done", true)) // status completed
		require.NoError(t, ack(t, b, run, "start-1"))
		_, err = b.purges(t).PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-a", By: "user:ops", Now: at(3 * leaseFor)})
		require.NoError(t, err)
		second, err := provider.NewMessage("start-2", "inst-a", "exec-2", "exec-2", &history.ExecutionStarted{Name: "approve-claim"})
		require.NoError(t, err)
		b.enqueue(t, at(3*leaseFor), second)

		stale := chain("inst-a", nil, startEvent(t, "exec-1"))
		err = b.lease.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: stale, Lease: zombie})
		require.Error(t, err, "a zombie appended the purged run's start to the new run")
		require.True(t, errors.Is(err, provider.ErrLeaseLost) || errors.Is(err, provider.ErrConflict), "zombie append: %v", err)
		require.Empty(t, b.load(t, "inst-a", 1), "the purged run came back")

		next := lease(t, b, at(3*leaseFor), "inst-a")
		require.NotNil(t, next, "the new run's start is not delivered")
		require.Equal(t, []string{"start-2"}, messageIDs(next.Messages))
		fresh := chain("inst-a", nil, startEvent(t, "exec-2"))
		require.NoError(t, b.lease.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: fresh, Lease: next}))
		require.Equal(t, fresh, b.load(t, "inst-a", 1))
	})

	t.Run("AppendFencedByALostLeaseWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		zombie := lease(t, b, base, "inst-a")
		require.NotNil(t, zombie)
		successor := lease(t, b, zombie.LockedUntil, "inst-a")
		require.NotNil(t, successor)
		events := chain("inst-a", nil, startEvent(t, execID))
		err := b.lease.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: events, Lease: zombie})
		require.ErrorIs(t, err, provider.ErrLeaseLost)
		require.Empty(t, b.load(t, "inst-a", 1))
		require.NoError(t, b.lease.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: events, Lease: successor}))
		require.Len(t, b.load(t, "inst-a", 1), 1)
	})

	t.Run("ExpiredLeaseIsTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m := signal(t, "m-1", "inst-a")
		b.enqueue(t, base, m)

		l1 := lease(t, b, base, "")
		require.NotNil(t, l1)
		require.Equal(t, "inst-a", l1.InstanceID)
		require.Equal(t, []provider.Message{queued(m, base)}, l1.Messages, "the leased message does not round-trip")
		require.Nil(t, lease(t, b, at(30*time.Second), ""), "a live lease was taken")
		require.Nil(t, lease(t, b, l1.LockedUntil.Add(-time.Microsecond), ""), "a live lease was taken")

		// A lease expires at its LockedUntil.
		l2 := lease(t, b, l1.LockedUntil, "")
		require.NotNil(t, l2, "an expired lease was not taken over")
		require.NotEqual(t, l1.Token, l2.Token)
		require.Greater(t, l2.Epoch, l1.Epoch, "the fencing epoch did not grow")
		// A lease that ran out is not a failed delivery.
		require.Equal(t, []provider.Message{queued(m, base)}, l2.Messages, "a lease that ran out changed the message")

		l3 := lease(t, b, at(4*time.Minute), "")
		require.NotNil(t, l3)
		require.Greater(t, l3.Epoch, l2.Epoch)
		require.NoError(t, ack(t, b, l3, "m-1"))
		require.Nil(t, lease(t, b, at(time.Hour), ""))
	})

	t.Run("PurgeWaitsForAnUnfinishedRound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		// The final round of a child wrote its terminal record, then
		// stalled before enqueueing its parent's notice and acking.
		require.NoError(t, b.appendEvents(t.Context(), "i-1", chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))))
		b.enqueue(t, base, signal(t, "m-1", "i-1"))
		l := lease(t, b, base, "i-1")
		require.NotNil(t, l)
		b.save(t, projections(t, "i-1", 2, "done", true)) // status completed
		purge := func(now time.Time) error {
			_, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: now})
			return err
		}

		require.ErrorIs(t, purge(at(30*time.Second)), provider.ErrInvalidState, "purged under a live lease")
		// The round crashed: its lease ran out, its messages wait for a
		// redelivery that finishes its work.
		require.ErrorIs(t, purge(at(2*leaseFor)), provider.ErrInvalidState, "purged the work of a crashed round")
		require.Len(t, b.load(t, "i-1", 1), 2, "a refused purge deleted history")
		b.instanceOf(t, "i-1")

		// The redelivery finishes the round; then the purge goes ahead.
		l2 := lease(t, b, at(2*leaseFor), "i-1")
		require.NotNil(t, l2)
		require.NoError(t, ack(t, b, l2, "m-1"))
		require.NoError(t, purge(at(2*leaseFor)))
		require.Empty(t, b.load(t, "i-1", 1))
	})

	t.Run("PurgeIgnoresAnExpiredLeaseWithNothingLeft", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		require.NoError(t, b.appendEvents(t.Context(), "i-1", chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))))
		b.save(t, projections(t, "i-1", 2, "done", true))
		b.enqueue(t, base, signal(t, "m-1", "i-1"))
		l := lease(t, b, base, "i-1")
		require.NotNil(t, l)
		// The round dead-lettered its messages and crashed before its
		// ack: no redelivery will come, so nothing is left to wait for.
		require.NoError(t, b.lease.DeadLetterLeased(t.Context(), &provider.DeadLetterLeasedParams{Lease: l, Letters: []provider.DeadLetter{{
			ID: provider.DeadLetterID("m-1", base), InstanceID: "i-1", Message: &l.Messages[0], Reason: provider.ReasonRejected,
			Error: "late", Node: node, At: base, Attempts: 1, Status: provider.DeadLetterDead,
		}}}))
		// A timer that fires after the end does not hold the purge either.
		late := signal(t, "m-2", "i-1")
		late.VisibleAt = at(30 * 24 * time.Hour)
		b.enqueue(t, base, late)
		_, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(2 * leaseFor)})
		require.NoError(t, err)
	})

	t.Run("NextVisibleAtWaitsForTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		l := lease(t, b, base, "")
		require.NotNil(t, l)
		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, l.LockedUntil, next, "NextVisibleAt of a leased instance")
		require.NoError(t, b.lease.RenewLease(t.Context(), &provider.RenewLeaseParams{Lease: l, LockedUntil: at(5 * time.Minute)}))
		next, ok = b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(5*time.Minute), next, "NextVisibleAt of a renewed lease")
		require.NoError(t, ack(t, b, l))
		next, ok = b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, base, next, "NextVisibleAt of a released instance")
	})

	t.Run("AckRemovesOnlyListedAndReleases", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"), signal(t, "m-3", "inst-a"))
		l := lease(t, b, base, "")
		require.NotNil(t, l)
		require.Equal(t, []string{"m-1", "m-2", "m-3"}, messageIDs(l.Messages))
		require.NoError(t, ack(t, b, l, "m-1", "m-3"))

		l2 := lease(t, b, base, "")
		require.NotNil(t, l2, "AckLease did not release the lease")
		require.Equal(t, []string{"m-2"}, messageIDs(l2.Messages))
		require.Equal(t, 0, l2.Messages[0].Attempts, "an ack counted a failed delivery")
		require.Greater(t, l2.Epoch, l.Epoch)
		require.ErrorIs(t, ack(t, b, l, "m-2"), provider.ErrLeaseLost, "ack with a released lease's token")
		require.ErrorIs(t, b.lease.RenewLease(t.Context(), &provider.RenewLeaseParams{Lease: l, LockedUntil: at(time.Hour)}), provider.ErrLeaseLost,
			"renewal of a released lease")
		require.NoError(t, ack(t, b, l2))
		require.Equal(t, []string{"m-2"}, messageIDs(b.drain(t, base)), "an empty ack removed a message")
	})

	t.Run("AbandonReleasesCountsAndHolds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m := signal(t, "m-1", "inst-a")
		b.enqueue(t, base, m)
		l := lease(t, b, base, "")
		require.NotNil(t, l)
		require.NoError(t, b.lease.AbandonLease(t.Context(), &provider.AbandonLeaseParams{Lease: l, VisibleAt: at(10 * time.Second), Error: "boom"}))
		later := signal(t, "m-2", "inst-a")
		b.enqueue(t, at(time.Second), later)

		require.Nil(t, lease(t, b, at(10*time.Second).Add(-time.Microsecond), ""), "an abandoned instance was leased before VisibleAt")
		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(10*time.Second), next)
		// Released: leasable at VisibleAt, well before the old lease ran out.
		l2 := lease(t, b, at(10*time.Second), "")
		require.NotNil(t, l2, "AbandonLease did not release the lease")
		want := []provider.Message{queued(m, base), queued(later, at(time.Second))}
		want[0].Attempts, want[0].LastError = 1, "boom"
		require.Equal(t, want, l2.Messages, "AbandonLease did not record a failed delivery of its messages only")
		require.ErrorIs(t, b.lease.AbandonLease(t.Context(), &provider.AbandonLeaseParams{Lease: l, VisibleAt: at(time.Hour), Error: "again"}),
			provider.ErrLeaseLost, "abandoning a released lease")
		require.NoError(t, ack(t, b, l2, "m-1", "m-2"))
	})

	t.Run("RenewExtends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		l := lease(t, b, base, "")
		require.NotNil(t, l)
		require.NoError(t, b.lease.RenewLease(t.Context(), &provider.RenewLeaseParams{Lease: l, LockedUntil: at(5 * time.Minute)}))
		require.Nil(t, lease(t, b, at(2*time.Minute), ""), "a renewed lease was taken over before its new end")
		require.NoError(t, ack(t, b, l, "m-1"), "the renewed lease lost its token")
		require.Nil(t, lease(t, b, at(time.Hour), ""))

		b.enqueue(t, base, signal(t, "m-2", "inst-a"))
		l = lease(t, b, base, "")
		require.NotNil(t, l)
		require.NoError(t, b.lease.RenewLease(t.Context(), &provider.RenewLeaseParams{Lease: l, LockedUntil: at(5 * time.Minute)}))
		l2 := lease(t, b, at(6*time.Minute), "")
		require.NotNil(t, l2, "a renewed lease did not run out at its new end")
		require.Greater(t, l2.Epoch, l.Epoch)
	})

	t.Run("LiveLeasesAreSkipped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-a", "inst-a"), signal(t, "m-b", "inst-b"))
		first := lease(t, b, base, "")
		require.NotNil(t, first)
		other := map[string]string{"inst-a": "inst-b", "inst-b": "inst-a"}[first.InstanceID]
		require.NotEmpty(t, other)
		second := lease(t, b, base, "")
		require.NotNil(t, second, "the unleased instance was not leased")
		require.Equal(t, other, second.InstanceID)
		require.Nil(t, lease(t, b, base, ""))
		require.Nil(t, lease(t, b, base, first.InstanceID), "a live lease was taken by name")
		require.NoError(t, ack(t, b, first))
		require.NoError(t, ack(t, b, second))
	})

	t.Run("ZombieIsRejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"))
		a := lease(t, b, base, "")
		require.NotNil(t, a)
		bl := lease(t, b, at(2*time.Minute), "")
		require.NotNil(t, bl, "an expired lease was not taken over")
		require.Equal(t, "inst-a", bl.InstanceID)
		require.NotEqual(t, a.Token, bl.Token)
		require.Greater(t, bl.Epoch, a.Epoch)

		// The zombie appends after the new holder did.
		log := chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "m-1"))
		require.NoError(t, b.appendEvents(ctx, "inst-a", log))
		zombieLog := chain("inst-a", nil, startEvent(t, execID), markerEvent(t, "zombie"))
		require.ErrorIs(t, b.appendEvents(ctx, "inst-a", zombieLog), provider.ErrConflict)
		require.Equal(t, log, b.load(t, "inst-a", 1))

		require.ErrorIs(t, ack(t, b, a, "m-1"), provider.ErrLeaseLost, "AckLease")
		dead, err := letters(a.Messages, []string{"m-2"}, provider.ReasonPanic, "zombie", at(2*time.Minute))
		require.NoError(t, err)
		require.ErrorIs(t, b.lease.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: a, Letters: dead}), provider.ErrLeaseLost, "DeadLetterLeased")
		require.ErrorIs(t, b.lease.AbandonLease(ctx, &provider.AbandonLeaseParams{Lease: a, VisibleAt: at(time.Hour), Error: "zombie"}), provider.ErrLeaseLost, "AbandonLease")
		require.ErrorIs(t, b.lease.RenewLease(ctx, &provider.RenewLeaseParams{Lease: a, LockedUntil: at(time.Hour)}), provider.ErrLeaseLost, "RenewLease")

		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{}), "a zombie dead-lettered a message")
		require.Nil(t, lease(t, b, at(2*time.Minute+time.Second), ""), "a zombie released or renewed the new lease")
		require.NoError(t, ack(t, b, bl, "m-1"), "the new holder's ack")
		l := lease(t, b, at(2*time.Minute+time.Second), "")
		require.NotNil(t, l, "the zombie delayed the remaining message")
		require.Equal(t, []string{"m-2"}, messageIDs(l.Messages))
		require.Empty(t, l.Messages[0].LastError, "the zombie's abandon changed the message")
		require.Equal(t, 0, l.Messages[0].Attempts, "the zombie's abandon counted a failed delivery")
	})

	t.Run("PinMessagesRecordsTheTargetExecution", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		pinned := signal(t, "m-1", "inst-a")
		own := signal(t, "m-2", "inst-a")
		own.ExecutionID = "exec-own"
		b.enqueue(t, base, pinned, own)
		l := lease(t, b, base, "")
		require.NotNil(t, l)
		require.NoError(t, b.lease.PinMessages(t.Context(), &provider.PinMessagesParams{Lease: l, Pins: map[string]string{"m-1": "exec-1", "m-2": "exec-1", "m-gone": "exec-1"}}))
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Equal(t, "exec-1", msgs[0].ExecutionID)
		require.Equal(t, "exec-own", msgs[1].ExecutionID, "a message's own execution is kept")
		// A lost lease pins nothing.
		l2 := lease(t, b, at(leaseFor+time.Second), "")
		require.NotNil(t, l2)
		require.ErrorIs(t, b.lease.PinMessages(t.Context(), &provider.PinMessagesParams{Lease: l, Pins: map[string]string{"m-1": "exec-2"}}), provider.ErrLeaseLost)
		require.NoError(t, ack(t, b, l2, "m-1", "m-2"))
	})

	t.Run("EnqueueFencedByALostLeaseWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		zombie := lease(t, b, base, "")
		require.NotNil(t, zombie)
		successor := lease(t, b, at(leaseFor+time.Second), "")
		require.NotNil(t, successor)
		task := activity("inst-a", execID, 3, "")
		err := b.lease.EnqueueActivities(t.Context(), &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base, Lease: zombie})
		require.ErrorIs(t, err, provider.ErrLeaseLost)
		err = b.lease.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-z", "inst-b")}, Now: base, Lease: zombie})
		require.ErrorIs(t, err, provider.ErrLeaseLost)
		require.Nil(t, b.claim(t, at(time.Hour)), "the zombie's task was not queued")
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "inst-b"})
		require.NoError(t, err)
		require.Empty(t, msgs)
		// The current lease enqueues.
		require.NoError(t, b.lease.EnqueueActivities(t.Context(), &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base, Lease: successor}))
		require.NotNil(t, b.claim(t, at(time.Hour)))
	})
}
