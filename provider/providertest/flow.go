package providertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
)

// testPriority covers the order of visible work by priority: higher first,
// equal priority in today's order, aging by PriorityStep, and never
// before VisibleAt.
func testPriority(t *testing.T, factory Factory) {
	t.Run("MessagesByPriority", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.requireOneOrder(t)
		low := signal(t, "m-low", "inst-low")
		b.enqueue(t, base, low)
		mid := signal(t, "m-mid", "inst-mid")
		b.enqueue(t, at(time.Second), mid)
		high := signal(t, "m-high", "inst-high")
		high.Priority = 2
		b.enqueue(t, at(2*time.Second), high)
		// Priority 1 a whole step and a second later: the low message,
		// older by more than a step, has aged past it.
		aged := signal(t, "m-aged", "inst-aged")
		aged.Priority = 1
		b.enqueue(t, at(provider.PriorityStep+time.Second), aged)
		// Priority 5, not visible yet: it waits for its time.
		later := signal(t, "m-later", "inst-later")
		later.Priority = 5
		later.VisibleAt = at(time.Hour)
		b.enqueue(t, at(3*time.Second), later)

		now := at(provider.PriorityStep + 2*time.Second)
		got := b.drain(t, now)
		require.Equal(t, []string{"m-high", "m-low", "m-mid", "m-aged"}, messageIDs(got),
			"priority 2 first, then by VisibleAt shifted one step per level")
		require.Equal(t, 2, got[0].Priority, "the priority round-trips")
		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(time.Hour), next, "NextVisibleAt is the VisibleAt, whatever the priority")
		require.Equal(t, []string{"m-later"}, messageIDs(b.drain(t, at(time.Hour))))
	})

	t.Run("NegativePriorityWaits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.requireOneOrder(t)
		back := signal(t, "m-back", "inst-back")
		back.Priority = -2
		b.enqueue(t, base, back)
		plain := signal(t, "m-plain", "inst-plain")
		b.enqueue(t, at(provider.PriorityStep), plain)
		require.Equal(t, []string{"m-plain", "m-back"}, messageIDs(b.drain(t, at(provider.PriorityStep))))
	})

	t.Run("ActivitiesByPriority", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.requireOneOrder(t)
		low := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, low)
		high := activity("inst-b", execID, 2, "")
		high.Priority = 3
		b.enqueueTasks(t, at(time.Second), high)
		// In another queue, priority 1 and younger than the low task by
		// less than a step: a worker serving both queues takes it second.
		other := activity("inst-c", execID, 2, "x")
		other.Priority = 1
		b.enqueueTasks(t, at(2*time.Second), other)
		now := at(3 * time.Second)

		l := b.claim(t, now, "", "x")
		require.NotNil(t, l)
		require.Equal(t, high.ID, l.Task.ID, "the higher priority first")
		require.Equal(t, queuedTask(high, at(time.Second)), l.Task, "priority round-trips")
		l = b.claim(t, now, "", "x")
		require.NotNil(t, l)
		require.Equal(t, other.ID, l.Task.ID, "priority 1 of queue x before priority 0 of the default queue")
		l = b.claim(t, now, "", "x")
		require.NotNil(t, l)
		require.Equal(t, low.ID, l.Task.ID)
		require.Nil(t, b.claim(t, now, "", "x"))
	})
}

// testActivityLimits covers concurrency keys and rate limits of activity
// claims.
func testActivityLimits(t *testing.T, factory Factory) {
	t.Run("ConcurrencyKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.requireOneOrder(t)
		keyed := func(inst string, seq int64, key string, limit int) provider.ActivityTask {
			task := activity(inst, execID, seq, "")
			task.ConcurrencyKey, task.ConcurrencyLimit = key, limit
			return task
		}
		a1, a2, a3 := keyed("inst-a", 2, "customer-1", 2), keyed("inst-b", 2, "customer-1", 2), keyed("inst-c", 2, "customer-1", 2)
		b1, b2 := keyed("inst-d", 2, "customer-2", 1), keyed("inst-e", 2, "customer-2", 1)
		free := activity("inst-f", execID, 2, "")
		b.enqueueTasks(t, base, a1, a2, a3, b1, b2, free)
		now := at(time.Second)

		var got []string
		leases := map[string]*provider.ActivityLease{}
		for {
			l := b.claim(t, now)
			if l == nil {
				break
			}
			got = append(got, l.Task.ID)
			leases[l.Task.ID] = l
		}
		require.Equal(t, "customer-1", leases[a1.ID].Task.ConcurrencyKey, "the key round-trips")
		require.Equal(t, 2, leases[a1.ID].Task.ConcurrencyLimit)
		require.Equal(t, []string{a1.ID, a2.ID, b1.ID, free.ID}, got,
			"two of customer-1, one of customer-2, and the task without a key; the others wait")
		fs, counts := b.store.(provider.FlowStore)
		if counts {
			n, err := fs.CountClaims(t.Context(), "customer-1", now)
			require.NoError(t, err)
			require.Equal(t, 2, n)
		}

		// A completion frees a slot of its key, not of another.
		l := b.claim(t, now)
		require.Nil(t, l)
		b.complete(t, leases[b1.ID], now)
		l = b.claim(t, now)
		require.NotNil(t, l)
		require.Equal(t, b2.ID, l.Task.ID)
		require.Nil(t, b.claim(t, now))

		// A claim that ran out no longer counts: its task, or another of
		// the key, is claimed, never more than the limit.
		later := now.Add(leaseFor)
		taken := map[string]int{}
		for {
			l := b.claim(t, later)
			if l == nil {
				break
			}
			taken[l.Task.ConcurrencyKey]++
		}
		require.Equal(t, map[string]int{"customer-1": 2, "customer-2": 1, "": 1}, taken,
			"once every claim ran out, the limits of each key again")
		if counts {
			n, err := fs.CountClaims(t.Context(), "customer-1", later)
			require.NoError(t, err)
			require.Equal(t, 2, n)
		}
	})

	t.Run("ConcurrentClaimsKeepTheLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		var tasks []provider.ActivityTask
		for i := range 12 {
			task := activity(fmt.Sprintf("inst-%02d", i), execID, 2, "")
			task.ConcurrencyKey, task.ConcurrencyLimit = "tenant", 3
			tasks = append(tasks, task)
		}
		b.enqueueTasks(t, base, tasks...)
		now := at(time.Second)
		var mu sync.Mutex
		claimed := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					l, err := b.store.ClaimActivity(context.Background(), &provider.ClaimActivityParams{Owner: node, Now: now, LockedUntil: now.Add(leaseFor)})
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					if l != nil {
						mu.Lock()
						claimed++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 3, claimed, "eight workers claiming at once took exactly the limit")
	})

	t.Run("RateLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		var mail []provider.ActivityTask
		for i := range 4 {
			task := activity(fmt.Sprintf("inst-%d", i), execID, 2, "")
			task.Name = "send-mail"
			mail = append(mail, task)
		}
		other := activity("inst-x", execID, 2, "")
		b.enqueueTasks(t, base, mail...)
		b.enqueueTasks(t, at(time.Second), other)
		rates := []provider.RateLimit{{Key: "mail", Activity: "send-mail", Tokens: 2, Interval: time.Minute}}
		claim := func(now time.Time) *provider.ActivityLease {
			l, err := b.store.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: node, Now: now, LockedUntil: now.Add(leaseFor), Rates: rates})
			require.NoError(t, err)
			return l
		}
		now := at(2 * time.Second)
		var got []string
		for l := claim(now); l != nil; l = claim(now) {
			got = append(got, l.Task.ID)
		}
		require.Equal(t, []string{mail[0].ID, mail[1].ID, other.ID}, got, "two tokens a minute for send-mail; other tasks pass")
		// The next window has two tokens again.
		next := base.Truncate(time.Minute).Add(time.Minute)
		got = nil
		for l := claim(next); l != nil; l = claim(next) {
			got = append(got, l.Task.ID)
		}
		require.Equal(t, []string{mail[2].ID, mail[3].ID}, got)
	})
}

// testSlots covers the concurrency slots of instances and parking.
func testSlots(t *testing.T, factory Factory) {
	t.Run("AcquireWaitRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		acquire := func(holder string, limit int, now time.Time) bool {
			var ok bool
			require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
				var err error
				ok, err = f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "customer-1", Limit: limit, Holder: holder, Now: now})
				return err
			}))
			return ok
		}
		release := func(holder string) []string {
			var wake []string
			require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
				var err error
				wake, err = f.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: "customer-1", Holder: holder})
				return err
			}))
			return wake
		}
		fs := flowStore(t, b)
		_, err := fs.GetSlots(t.Context(), "customer-1")
		require.ErrorIs(t, err, provider.ErrNotFound)

		require.True(t, acquire("i-1", 1, base))
		require.True(t, acquire("i-1", 1, at(time.Second)), "a holder acquiring again holds")
		require.False(t, acquire("i-2", 1, at(2*time.Second)))
		require.False(t, acquire("i-3", 1, at(3*time.Second)))
		require.False(t, acquire("i-2", 1, at(4*time.Second)), "a waiter acquiring again keeps its place")
		rec, err := fs.GetSlots(t.Context(), "customer-1")
		require.NoError(t, err)
		require.Equal(t, &provider.SlotRecord{
			Key: "customer-1", Limit: 1,
			Holders: []provider.SlotHolder{{ID: "i-1", Since: base}},
			Waiters: []provider.SlotHolder{{ID: "i-2", Since: at(2 * time.Second)}, {ID: "i-3", Since: at(3 * time.Second)}},
		}, rec)

		require.Equal(t, []string{"i-2"}, release("i-1"), "the first waiter is woken")
		require.Equal(t, []string{"i-2"}, release("i-1"), "a repeated release wakes it again")
		require.False(t, acquire("i-3", 1, at(5*time.Second)), "the second waiter does not pass the first")
		require.False(t, acquire("i-4", 1, at(5*time.Second)), "nor does a newcomer")
		require.True(t, acquire("i-2", 1, at(6*time.Second)))
		require.Empty(t, release("i-9"), "releasing a stranger wakes nobody while the slots are full")

		// A higher limit frees slots for the first waiters in order.
		require.True(t, acquire("i-3", 3, at(7*time.Second)))
		require.True(t, acquire("i-4", 3, at(8*time.Second)))
		require.False(t, acquire("i-5", 3, at(9*time.Second)))
		rec, err = fs.GetSlots(t.Context(), "customer-1")
		require.NoError(t, err)
		require.Equal(t, 3, rec.Limit)
		require.Equal(t, []provider.SlotHolder{{ID: "i-2", Since: at(6 * time.Second)}, {ID: "i-3", Since: at(7 * time.Second)}, {ID: "i-4", Since: at(8 * time.Second)}}, rec.Holders)
		require.Equal(t, []provider.SlotHolder{{ID: "i-5", Since: at(9 * time.Second)}}, rec.Waiters)
		require.Equal(t, []string{"i-5"}, release("i-3"))
		require.Empty(t, release("i-5"), "a waiter that leaves frees nothing")
		rec, err = fs.GetSlots(t.Context(), "customer-1")
		require.NoError(t, err)
		require.Empty(t, rec.Waiters)

		waiting, err := fs.ListSlots(t.Context(), &provider.ListSlotsParams{OnlyWaiting: true})
		require.NoError(t, err)
		require.Empty(t, waiting, "no set has waiters")
		require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
			for i, h := range []string{"j-1", "j-2"} {
				if _, err := f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "customer-0", Limit: 1, Holder: h, Now: at(time.Duration(20+i) * time.Second)}); err != nil {
					return err
				}
			}
			return nil
		}))
		all, err := fs.ListSlots(t.Context(), &provider.ListSlotsParams{})
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, "customer-0", all[0].Key, "ordered by key")
		waiting, err = fs.ListSlots(t.Context(), &provider.ListSlotsParams{OnlyWaiting: true})
		require.NoError(t, err)
		require.Len(t, waiting, 1)
		require.Equal(t, []provider.SlotHolder{{ID: "j-2", Since: at(21 * time.Second)}}, waiting[0].Waiters)
		page, err := fs.ListSlots(t.Context(), &provider.ListSlotsParams{AfterKey: "customer-0", Limit: 1})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, "customer-1", page[0].Key)
	})

	t.Run("ConcurrentAcquires", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		flowStore(t, b)
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
					ok, err := f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: 2, Holder: fmt.Sprintf("i-%d", i), Now: at(time.Duration(i) * time.Second)})
					if ok {
						mu.Lock()
						granted++
						mu.Unlock()
					}
					return err
				})
				if err != nil {
					t.Errorf("acquire: %v", err)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 2, granted)
		rec, err := flowStore(t, b).GetSlots(t.Context(), "k")
		require.NoError(t, err)
		require.Len(t, rec.Holders, 2)
		require.Len(t, rec.Waiters, 8)
	})

	t.Run("ParkAndWake", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		fs := flowStore(t, b)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-b"))
		// A round takes inst-a, parks it and acks nothing.
		b.park(t, at(time.Second), "inst-a")
		b.enqueue(t, at(2*time.Second), signal(t, "m-3", "inst-a"))
		require.Equal(t, []string{"m-2"}, messageIDs(b.drain(t, at(time.Hour))), "a parked instance is not dequeued, nor what came after")
		require.NoError(t, fs.WakeInstances(t.Context(), &provider.WakeInstancesParams{InstanceIDs: []string{"inst-a", "inst-unknown"}}))
		require.Equal(t, []string{"m-1", "m-3"}, messageIDs(b.drain(t, at(time.Hour))))

		// A wake in a round, and a wake of an instance that is not parked.
		b.enqueue(t, at(2*time.Hour), signal(t, "m-4", "inst-c"))
		b.park(t, at(2*time.Hour), "inst-c")
		require.Empty(t, b.drain(t, at(3*time.Hour)))
		require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
			return f.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"inst-c", "inst-a"}})
		}))
		require.Equal(t, []string{"m-4"}, messageIDs(b.drain(t, at(3*time.Hour))))
	})

	t.Run("WaitAtEnqueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		fs := flowStore(t, b)
		sw := capability[provider.StartWaiter](t, b.store, "provider.StartWaiter")
		enqueue := func(now time.Time, waits []provider.SlotWait, msgs ...provider.Message) {
			t.Helper()
			require.NoError(t, sw.EnqueueWaiting(t.Context(), &provider.EnqueueWaitingParams{Messages: msgs, Now: now, Waits: waits}))
		}
		wait := func(id, key string, limit int) provider.SlotWait {
			return provider.SlotWait{InstanceID: id, Key: key, Limit: limit}
		}
		acquire := func(key, holder string, limit int, now time.Time) bool {
			t.Helper()
			var ok bool
			require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
				var err error
				ok, err = f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: key, Limit: limit, Holder: holder, Now: now})
				return err
			}))
			return ok
		}
		enqueue(base, []provider.SlotWait{wait("inst-a", "k", 1), wait("inst-b", "k", 1), wait("inst-c", "k", 1)},
			signal(t, "m-a", "inst-a"), signal(t, "m-b", "inst-b"), signal(t, "m-c", "inst-c"))
		if b.tx == nil {
			// A peek-lock store applies no wait: the enqueue is an
			// EnqueueMessages.
			_, err := fs.GetSlots(t.Context(), "k")
			require.ErrorIs(t, err, provider.ErrNotFound)
			require.Equal(t, []string{"m-a", "m-b", "m-c"}, messageIDs(b.drain(t, at(time.Second))))
			return
		}
		rec, err := fs.GetSlots(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, &provider.SlotRecord{Key: "k", Limit: 1, Waiters: []provider.SlotHolder{
			{ID: "inst-a", Since: base}, {ID: "inst-b", Since: base}, {ID: "inst-c", Since: base},
		}}, rec, "the waits join the waiters in order; the new key gets their limit")
		require.Equal(t, []string{"m-a"}, messageIDs(b.drain(t, at(time.Second))),
			"the first waiter is not parked: it takes its slot in its first round; the others are")
		_, ok := b.nextVisible(t)
		require.False(t, ok, "parked instances have no visible work")
		require.True(t, acquire("k", "inst-a", 1, at(2*time.Second)), "the first waiter takes the slot")
		require.False(t, acquire("k", "inst-new", 1, at(2*time.Second)), "a newcomer queues behind the waits")

		var wake []string
		require.NoError(t, b.flow(t, func(ctx context.Context, f provider.FlowSteps) error {
			var err error
			if wake, err = f.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: "k", Holder: "inst-a"}); err != nil {
				return err
			}
			return f.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: wake})
		}))
		require.Equal(t, []string{"inst-b"}, wake)
		require.Equal(t, []string{"m-b"}, messageIDs(b.drain(t, at(3*time.Second))), "the release woke the next waiter only")

		// An existing key keeps its limit; a wait for a holder or a
		// waiter changes nothing.
		require.True(t, acquire("k2", "inst-x", 2, at(4*time.Second)))
		require.True(t, acquire("k2", "inst-y", 2, at(4*time.Second)))
		enqueue(at(5*time.Second), []provider.SlotWait{wait("inst-d", "k2", 3), wait("inst-x", "k2", 3), wait("inst-b", "k", 1)},
			signal(t, "m-d", "inst-d"), signal(t, "m-x", "inst-x"))
		rec, err = fs.GetSlots(t.Context(), "k2")
		require.NoError(t, err)
		require.Equal(t, 2, rec.Limit, "a wait does not set the limit of a key that has one")
		require.Equal(t, []provider.SlotHolder{{ID: "inst-d", Since: at(5 * time.Second)}}, rec.Waiters)
		require.Len(t, rec.Holders, 2)
		require.Equal(t, []string{"m-d", "m-x"}, messageIDs(b.drain(t, at(6*time.Second))),
			"under its own limit of 3 inst-d is the first of one free slot: not parked")
		rec, err = fs.GetSlots(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, []string{"inst-b", "inst-c", "inst-new"}, slotIDs(rec.Waiters), "inst-b waits once")
	})

	if b := setup(t, factory); b.tx != nil {
		t.Run("RolledBack", func(t *testing.T) {
			t.Parallel()
			b := setup(t, factory)
			flowStore(t, b)
			errUndo := errors.New("undo")
			err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
				f := tx.(provider.FlowSteps)
				if _, err := f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: 1, Holder: "i-1", Now: base}); err != nil {
					return err
				}
				return errUndo
			})
			require.ErrorIs(t, err, errUndo)
			_, err = flowStore(t, b).GetSlots(t.Context(), "k")
			if !errors.Is(err, provider.ErrNotFound) {
				rec, err := flowStore(t, b).GetSlots(t.Context(), "k")
				require.NoError(t, err)
				require.Empty(t, rec.Holders, "an acquire rolled back holds nothing")
			}
		})
	} else {
		t.Run("Fenced", func(t *testing.T) {
			t.Parallel()
			b := setup(t, factory)
			flowStore(t, b)
			b.enqueue(t, base, signal(t, "m-1", "inst-a"))
			ctx := t.Context()
			zombie, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(leaseFor), Owner: node})
			require.NoError(t, err)
			require.NotNil(t, zombie)
			later := base.Add(2 * leaseFor)
			next, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: later, LockedUntil: later.Add(leaseFor), Owner: node})
			require.NoError(t, err)
			require.NotNil(t, next)
			f := b.lease.(provider.FlowSteps)
			_, err = f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: 1, Holder: "inst-a", Now: later, Lease: zombie})
			require.ErrorIs(t, err, provider.ErrLeaseLost)
			_, err = f.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: "k", Holder: "inst-a", Lease: zombie})
			require.ErrorIs(t, err, provider.ErrLeaseLost)
			require.ErrorIs(t, f.ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: "inst-a", Lease: zombie}), provider.ErrLeaseLost)
			require.ErrorIs(t, f.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"inst-b"}, Lease: zombie}), provider.ErrLeaseLost)
			ok, err := f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: 1, Holder: "inst-a", Now: later, Lease: next})
			require.NoError(t, err)
			require.True(t, ok)
		})
	}
}

// slotIDs returns the ids of holders or waiters.
func slotIDs(hs []provider.SlotHolder) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// flowStore returns the store's FlowStore, or skips the case.
func flowStore(t *testing.T, b *bundle) provider.FlowStore {
	t.Helper()
	return capability[provider.FlowStore](t, b.store, "provider.FlowStore")
}

// flow runs fn on the flow steps of a round: a transaction's in
// transactional mode, the store's in peek-lock mode.
func (b *bundle) flow(t *testing.T, fn func(ctx context.Context, f provider.FlowSteps) error) error {
	t.Helper()
	return b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
		f, ok := s.(provider.FlowSteps)
		if !ok {
			return fmt.Errorf("the round steps of %T have no provider.FlowSteps", s)
		}
		return fn(ctx, f)
	})
}

// park dequeues instanceID at now, parks it and acks nothing.
func (b *bundle) park(t *testing.T, now time.Time, instanceID string) {
	t.Helper()
	ctx := t.Context()
	if b.tx != nil {
		require.NoError(t, b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, InstanceID: instanceID})
			if err != nil {
				return err
			}
			if batch == nil {
				return fmt.Errorf("%s has no work to park", instanceID)
			}
			return tx.(provider.FlowSteps).ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: instanceID})
		}))
		return
	}
	l, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(leaseFor), Owner: node, InstanceID: instanceID})
	require.NoError(t, err)
	require.NotNil(t, l, "%s has no work to park", instanceID)
	require.NoError(t, b.lease.(provider.FlowSteps).ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: instanceID, Lease: l}))
	require.NoError(t, b.lease.AckLease(ctx, &provider.AckLeaseParams{Lease: l}))
}
