package providertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
)

// testPartitions checks, on a store of several partitions, that the
// dequeue (or lease), the claim and the next visible time honour their
// Partitions: they look in the partitions named only, and in every
// partition when none is named.
func testPartitions(t *testing.T, factory Factory) {
	b := setup(t, factory)
	n := b.store.(provider.Partitioned).Partitions()
	// Instance early, whose work is visible first, and instance late in
	// another partition.
	early, late := "part-early", ""
	pe := provider.PartitionOf(early, n)
	for i := 0; late == ""; i++ {
		if id := fmt.Sprintf("part-late-%d", i); provider.PartitionOf(id, n) != pe {
			late = id
		}
	}
	pl := provider.PartitionOf(late, n)
	ctx := t.Context()

	me, ml := signal(t, "m-early", early), signal(t, "m-late", late)
	me.VisibleAt, ml.VisibleAt = at(0), at(time.Second)
	b.enqueue(t, at(0), me, ml)
	next := func(q provider.Queue, parts []int) (time.Time, bool) {
		t.Helper()
		v, ok, err := b.store.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: q, Partitions: parts})
		require.NoError(t, err)
		return v.UTC(), ok
	}
	v, ok := next(provider.QueueOrchestration, []int{pl})
	require.True(t, ok)
	require.Equal(t, at(time.Second), v, "the next visible time of the late instance's partition")
	v, _ = next(provider.QueueOrchestration, nil)
	require.Equal(t, at(0), v, "the next visible time of every partition")

	take := func(parts []int) string {
		t.Helper()
		now := at(time.Minute)
		var got string
		if b.tx != nil {
			require.NoError(t, b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
				batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, Partitions: parts})
				if err != nil || batch == nil {
					return err
				}
				got = batch.InstanceID
				return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: got, MessageIDs: messageIDs(batch.Messages)})
			}))
			return got
		}
		l, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(leaseFor), Owner: node, Partitions: parts})
		require.NoError(t, err)
		if l == nil {
			return ""
		}
		require.NoError(t, b.lease.AckLease(ctx, &provider.AckLeaseParams{Lease: l, MessageIDs: messageIDs(l.Messages)}))
		return l.InstanceID
	}
	require.Equal(t, late, take([]int{pl}), "the dequeue in the late instance's partition")
	require.Empty(t, take([]int{pl}), "the partition has no work left")
	require.Equal(t, early, take(nil), "the dequeue in every partition")

	te, tl := activity(early, execID, 2, ""), activity(late, execID, 2, "")
	te.VisibleAt, tl.VisibleAt = at(0), at(time.Second)
	b.enqueueTasks(t, at(0), te, tl)
	v, ok = next(provider.QueueActivity, []int{pl})
	require.True(t, ok)
	require.Equal(t, at(time.Second), v, "the next claimable time of the late instance's partition")
	claim := func(parts []int) string {
		t.Helper()
		now := at(time.Minute)
		l, err := b.store.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: node, Now: now, LockedUntil: now.Add(leaseFor), Partitions: parts})
		require.NoError(t, err)
		if l == nil {
			return ""
		}
		return l.Task.ID
	}
	require.Equal(t, tl.ID, claim([]int{pl}), "the claim in the late instance's partition")
	require.Empty(t, claim([]int{pl}), "the partition has no task left")
	require.Equal(t, te.ID, claim([]int{pe, pl}), "the claim in both partitions")
}
