package provider

import (
	"context"
	"hash/fnv"
	"time"
)

// PartitionOf returns the partition of an instance in a store of
// partitions partitions: the FNV-1a 32-bit hash of the instance id modulo
// partitions, in [0, partitions). With partitions <= 1 it is 0. The
// function is part of every store's format and never changes: a store
// records its partition count when it is created, and every row of an
// instance carries the partition computed here.
func PartitionOf(instanceID string, partitions int) int {
	if partitions <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(instanceID))
	return int(h.Sum32() % uint32(partitions))
}

// MaxPartitions is the largest partition count a store can have.
const MaxPartitions = 4096

// Partitioned is implemented by stores whose instances are spread over
// partitions (see [PartitionOf]). A store that does not implement it has
// one partition, 0.
type Partitioned interface {
	// Partitions returns the store's partition count, recorded when the
	// store was created; at least 1.
	Partitions() int
}

// PartitionLeaser is implemented by partitioned stores that keep leases
// on partitions, by which the nodes sharing a store split its partitions
// between them. A lease is an affinity, never a lock: the instance lock
// of a round is what keeps two rounds off one instance, so a node may
// dequeue from any partition, and does so now and then so that no
// partition waits for an expired lease.
type PartitionLeaser interface {
	Partitioned
	// LeasePartitions renews the node's presence and leases until
	// p.Now+p.TTL and balances the partitions: a node holds at most
	// ceil(P / live nodes) partitions, gives back the ones beyond its
	// share and takes free or expired ones up to it. It returns the
	// partitions the node holds afterwards, in ascending order.
	LeasePartitions(ctx context.Context, p *LeasePartitionsParams) ([]int, error)
	// ReleasePartitions gives back every partition lease of the node and
	// its presence, so that the other nodes take them at once.
	ReleasePartitions(ctx context.Context, node string) error
}

// LeasePartitionsParams are the params of LeasePartitions.
type LeasePartitionsParams struct {
	Node string
	Now  time.Time
	// TTL is how long the leases and the node's presence last unless
	// renewed.
	TTL time.Duration
}

// PartitionShare returns the share of a node among nodes live nodes of a
// store of partitions partitions, the most leases a PartitionLeaser lets
// it hold: ceil(partitions / nodes), and every partition when no node
// is counted.
func PartitionShare(partitions, nodes int) int {
	return (partitions + nodes - 1) / max(nodes, 1)
}

// AllPartitions returns 0, 1, …, partitions-1 (just 0 when partitions <= 1).
func AllPartitions(partitions int) []int {
	out := make([]int, max(partitions, 1))
	for i := range out {
		out[i] = i
	}
	return out
}
