package mongo_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/providertest"
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

	for _, bad := range []int{-1, provider.MaxPartitions + 1} {
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

// TestPartitionLeases runs providertest.PartitionLeases on a store of
// 16 partitions.
func TestPartitionLeases(t *testing.T) {
	t.Parallel()
	providertest.PartitionLeases(t, mongotest.NewStore(t, chmongo.Options{Partitions: 16}))
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
