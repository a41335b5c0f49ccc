package mongo

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.PartitionLeaser = (*Store)(nil)

// partitionLeaseDoc is the lease of a partition, by partition, in
// partition_leases. (The presence of a node in partition_nodes is a
// document {_id: node, e: expires}, written field by field.)
type partitionLeaseDoc struct {
	Part    int    `bson:"_id"`
	Owner   string `bson:"own"`
	Expires int64  `bson:"e"`
}

// LeasePartitions implements provider.PartitionLeaser: it renews the
// node's presence and leases, counts the live nodes, gives back the leases
// beyond the node's share (ceil(P / live nodes), the highest partitions
// first) and takes free or expired partitions up to it (the lowest
// first), each by a conditional write of the partition's document (an
// insert, or an update of an expired lease), so that of two nodes taking
// one partition one wins. Without a transaction two nodes may count the
// live nodes differently for a renewal; a lease is an affinity only, and
// the next renewals even the shares out.
func (s *Store) LeasePartitions(ctx context.Context, p *provider.LeasePartitionsParams) ([]int, error) {
	now, until := provider.UnixNanos(p.Now), provider.UnixNanos(p.Now.Add(p.TTL))
	if _, err := s.c.partNodes.UpdateOne(ctx, filter("_id", p.Node), set("e", until), options.UpdateOne().SetUpsert(true)); err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: presence: %w", translate(err))
	}
	if _, err := s.c.partNodes.DeleteMany(ctx, filter("e", filter("$lt", now))); err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: forget nodes: %w", translate(err))
	}
	if _, err := s.c.partLeases.UpdateMany(ctx, filter("own", p.Node), set("e", until)); err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: renew: %w", translate(err))
	}
	nodes, err := s.c.partNodes.CountDocuments(ctx, filter())
	if err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: count nodes: %w", translate(err))
	}
	share := provider.PartitionShare(s.partitions, int(nodes))
	cur, err := s.c.partLeases.Find(ctx, filter("e", filter("$gte", now)))
	if err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: read: %w", translate(err))
	}
	var live []partitionLeaseDoc
	if err := cur.All(ctx, &live); err != nil {
		return nil, fmt.Errorf("mongo: lease partitions: read: %w", translate(err))
	}
	var own []int
	taken := map[int]bool{}
	for _, l := range live {
		taken[l.Part] = true
		if l.Owner == p.Node && l.Part < s.partitions {
			own = append(own, l.Part)
		}
	}
	slices.Sort(own)
	if len(own) > share {
		extra := own[share:]
		own = own[:share]
		if _, err := s.c.partLeases.DeleteMany(ctx, filter("own", p.Node, "_id", filter("$in", extra))); err != nil {
			return nil, fmt.Errorf("mongo: lease partitions: give back: %w", translate(err))
		}
	}
	for part := 0; part < s.partitions && len(own) < share; part++ {
		if taken[part] {
			continue
		}
		won, err := s.takePartition(ctx, part, p.Node, now, until)
		if err != nil {
			return nil, err
		}
		if won {
			own = append(own, part)
		}
	}
	slices.Sort(own)
	return own, nil
}

// takePartition takes the lease of a partition that is free (no
// document) or expired; it reports whether it won.
func (s *Store) takePartition(ctx context.Context, part int, node string, now, until int64) (bool, error) {
	res, err := s.c.partLeases.UpdateOne(ctx, filter("_id", part, "e", filter("$lt", now)), set("own", node, "e", until))
	if err != nil {
		return false, fmt.Errorf("mongo: lease partition %d: %w", part, translate(err))
	}
	if res.MatchedCount > 0 {
		return true, nil
	}
	_, err = s.c.partLeases.InsertOne(ctx, &partitionLeaseDoc{Part: part, Owner: node, Expires: until})
	if mongo.IsDuplicateKeyError(err) {
		// Another node's live lease, or its take just now.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mongo: lease partition %d: %w", part, translate(err))
	}
	return true, nil
}

// ReleasePartitions implements provider.PartitionLeaser.
func (s *Store) ReleasePartitions(ctx context.Context, node string) error {
	if _, err := s.c.partLeases.DeleteMany(ctx, filter("own", node)); err != nil {
		return fmt.Errorf("mongo: release the partitions of %s: %w", node, translate(err))
	}
	if _, err := s.c.partNodes.DeleteOne(ctx, filter("_id", node)); err != nil {
		return fmt.Errorf("mongo: release the partitions of %s: %w", node, translate(err))
	}
	return nil
}
