package mongo_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// TestPartitionsRecorded: a new database records the partition count it
// was created with; a store opened on it with another count fails with
// a *PartitionsError, and one opened with 0 takes the recorded count.
func TestPartitionsRecorded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := mongotest.URL(t)
	s := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
	require.Equal(t, 16, s.Partitions())

	open := func(partitions int) (*chmongo.Store, error) {
		o, err := chmongo.New(ctx, chmongo.Options{Client: mongotest.Client(t, url), Database: s.Database(), Partitions: partitions, MigrateOnStart: true})
		if err == nil {
			t.Cleanup(o.Close)
		}
		return o, err
	}
	_, err := open(8)
	var pe *chmongo.PartitionsError
	require.True(t, errors.As(err, &pe), "opened with 8 partitions: %v", err)
	require.Equal(t, chmongo.PartitionsError{Database: s.Database(), Recorded: 16, Requested: 8}, *pe)
	o, err := open(0)
	require.NoError(t, err)
	require.Equal(t, 16, o.Partitions(), "a store opened with 0 takes the recorded count")
	o, err = open(16)
	require.NoError(t, err)
	require.Equal(t, 16, o.Partitions())

	for _, bad := range []int{-1, chmongo.MaxPartitions + 1} {
		_, err := chmongo.New(ctx, chmongo.Options{Client: mongotest.Client(t, url), Database: s.Database(), Partitions: bad})
		require.ErrorIs(t, err, chmongo.ErrInvalidOptions, "Partitions %d", bad)
	}
}

// TestStoreBeforePartitions: a database written before partitions (no
// settings document, no "pt" on its documents) migrates to one
// partition, whose queue queries find its documents; opening it with
// more partitions fails.
func TestStoreBeforePartitions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := mongotest.URL(t)
	s := mongotest.NewStore(t, chmongo.Options{})
	m, err := provider.NewMessage("m-1", "old", "", "m-1", &history.EventRaised{Name: "poke", IdempotencyKey: "m-1"})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: base}))
	require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{claimTask("old")}, Now: base}))
	require.NoError(t, chmongo.AsBeforePartitions(ctx, s))

	_, err = chmongo.New(ctx, chmongo.Options{Client: mongotest.Client(t, url), Database: s.Database(), Partitions: 16, MigrateOnStart: true})
	var pe *chmongo.PartitionsError
	require.True(t, errors.As(err, &pe), "a store before partitions opened with 16: %v", err)
	require.Equal(t, 1, pe.Recorded)

	o, err := chmongo.New(ctx, chmongo.Options{Client: mongotest.Client(t, url), Database: s.Database(), MigrateOnStart: true})
	require.NoError(t, err)
	t.Cleanup(o.Close)
	require.Equal(t, 1, o.Partitions())
	v, err := o.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, chmongo.LatestSchemaVersion(), v)
	now := base.Add(time.Minute)
	for _, parts := range [][]int{{0}, nil} {
		next, ok, err := o.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration, Partitions: parts})
		require.NoError(t, err)
		require.True(t, ok, "the old message is visible (partitions %v)", parts)
		require.False(t, next.After(now))
	}
	l, err := o.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute), Partitions: []int{0}})
	require.NoError(t, err)
	require.NotNil(t, l, "the old task is claimed in partition 0")
	lease, err := o.LeaseInstance(ctx, &provider.LeaseParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute), Partitions: []int{0}})
	require.NoError(t, err)
	require.NotNil(t, lease, "the old message is leased in partition 0")
	require.Equal(t, "old", lease.InstanceID)
}

// TestPartitionLeases: nodes split the partitions by their leases, take
// over the leases of a node that stops renewing once they expire, even
// the shares out when a node comes back, and take the partitions of a
// node that gives them back at once.
func TestPartitionLeases(t *testing.T) {
	t.Parallel()
	s := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
	ctx := t.Context()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 10 * time.Second
	lease := func(node string, at time.Duration) []int {
		t.Helper()
		held, err := s.LeasePartitions(ctx, &provider.LeasePartitionsParams{Node: node, Now: t0.Add(at), TTL: ttl})
		require.NoError(t, err)
		return held
	}
	require.Equal(t, provider.AllPartitions(16), lease("a", 0), "a node alone takes every partition")
	require.Empty(t, lease("b", time.Second), "live leases are not taken")
	a := lease("a", 2*time.Second)
	require.Len(t, a, 8, "a gives back what is beyond its share")
	b := lease("b", 3*time.Second)
	require.Len(t, b, 8, "b takes what a gave back")
	require.Equal(t, provider.AllPartitions(16), slices.Sorted(slices.Values(append(slices.Clone(a), b...))), "together they hold every partition once")
	require.Equal(t, a, lease("a", 4*time.Second), "a renewal keeps the share")

	// a stops renewing: its leases expire at 14s.
	require.Equal(t, b, lease("b", 13*time.Second), "a's leases are live until they expire")
	require.Equal(t, provider.AllPartitions(16), lease("b", 15*time.Second), "b takes over a's partitions")

	// a comes back: the share is rebalanced as b gives back its extra.
	require.Empty(t, lease("a", 16*time.Second))
	require.Len(t, lease("b", 17*time.Second), 8)
	require.Len(t, lease("a", 18*time.Second), 8)

	// A node that leaves gives its partitions back at once.
	require.NoError(t, s.ReleasePartitions(ctx, "a"))
	require.Equal(t, provider.AllPartitions(16), lease("b", 19*time.Second))
}

// TestPartitionHints: work enqueued through a store of several partitions
// closes the hint channels of its partitions only (and the queue's).
func TestPartitionHints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := mongotest.NewStore(t, chmongo.Options{Partitions: 2})
	id := "i-0"
	for i := 1; provider.PartitionOf(id, 2) != 1; i++ {
		id = fmt.Sprintf("i-%d", i)
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, q := range []provider.Queue{provider.QueueOrchestration, provider.QueueActivity} {
		all, p0, p1 := s.WorkHint(q), s.PartitionHint(q, 0), s.PartitionHint(q, 1)
		if q == provider.QueueOrchestration {
			m, err := provider.NewMessage("m-1", id, "", "m-1", &history.EventRaised{Name: "poke", IdempotencyKey: "m-1"})
			require.NoError(t, err)
			require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: base}))
		} else {
			require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{claimTask(id)}, Now: base}))
		}
		require.True(t, closed(all), "%s: the queue's hint", q)
		require.True(t, closed(p1), "%s: the hint of the work's partition", q)
		require.False(t, closed(p0), "%s: the hint of another partition", q)
	}
}
