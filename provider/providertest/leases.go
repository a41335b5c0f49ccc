package providertest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
)

// PartitionLeases drives two nodes' leases on s, an empty store of 16
// partitions, with explicit times: they split the partitions, take over
// the leases of a node that stops renewing once they expire, even the
// shares out when a node comes back, and take the partitions of a node
// that gives them back at once.
func PartitionLeases(t *testing.T, s provider.PartitionLeaser) {
	t.Helper()
	require.Equal(t, 16, s.Partitions(), "the lease test runs on a store of 16 partitions")
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
