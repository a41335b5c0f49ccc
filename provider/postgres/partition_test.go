package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

func TestPartitionsRecordedAtCreation(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := t.Context()
	open := func(p int) (*postgres.Store, error) {
		s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema, MigrateOnStart: true, Partitions: p})
		if err == nil {
			t.Cleanup(s.Close)
		}
		return s, err
	}
	s, err := open(16)
	require.NoError(t, err)
	require.Equal(t, 16, s.Partitions())

	// Zero opens the store with the count it recorded.
	s, err = open(0)
	require.NoError(t, err)
	require.Equal(t, 16, s.Partitions())

	// Another count is refused.
	_, err = open(8)
	var pe *postgres.PartitionsError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 16, pe.Recorded)
	require.Equal(t, 8, pe.Requested)
}

func TestPartitionsOfAMigratedStore(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := t.Context()
	s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	require.NoError(t, err)
	defer s.Close()
	_, err = postgres.MigrateTo(ctx, s, 8)
	require.NoError(t, err)
	// A store that existed before partitions has its rows in partition 0:
	// it has one partition, whatever the options of the Store migrating it.
	s2, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema, MigrateOnStart: true, Partitions: 16})
	var pe *postgres.PartitionsError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Recorded)
	require.Nil(t, s2)
	s3, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	require.NoError(t, err)
	defer s3.Close()
	require.Equal(t, 1, s3.Partitions())
}

// TestPartitionLeases drives two nodes' leases on one store of 16
// partitions with explicit times: they split the partitions, and the
// partitions of a node that stops renewing are taken over once its leases
// expire.
func TestPartitionLeases(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{Partitions: 16})
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

func TestPartitionOf(t *testing.T) {
	t.Parallel()
	// The function is part of the stored format: these values never
	// change (FNV-1a 32-bit of the id, modulo the count).
	require.Equal(t, 0, provider.PartitionOf("order-1", 1))
	require.Equal(t, 0, provider.PartitionOf("order-1", 0))
	for id, want := range map[string][2]int{
		"order-1": {13, 1}, "order-2": {4, 0}, "loan-1": {9, 0}, "i-1": {14, 3}, "i-2": {11, 5},
	} {
		require.Equal(t, want[0], provider.PartitionOf(id, 16), id)
		require.Equal(t, want[1], provider.PartitionOf(id, 7), id)
	}
}
