package postgres

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
)

var _ provider.PartitionLeaser = (*Store)(nil)

// LeasePartitions implements provider.PartitionLeaser in one transaction,
// serialized with the other nodes' by an advisory lock of the schema (it
// runs every few seconds per node): it renews the node's presence and
// leases, counts the live nodes, gives back the leases beyond the node's
// share (ceil(P / live nodes), the highest partitions first) and takes
// free or expired partitions up to it (the lowest first).
func (s *Store) LeasePartitions(ctx context.Context, p *provider.LeasePartitionsParams) ([]int, error) {
	ident := pgx.Identifier{s.schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{{schema}}", ident) }
	until := p.Now.Add(p.TTL)
	var held []int
	err := s.inTx(ctx, "lease partitions", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.leaseLockKey()); err != nil {
			return failf(err, "lease partitions: lock")
		}
		b := &pgx.Batch{}
		b.Queue(q(`INSERT INTO {{schema}}.partition_nodes (node, expires) VALUES ($1, $2)
ON CONFLICT (node) DO UPDATE SET expires = EXCLUDED.expires`), p.Node, until)
		b.Queue(q(`DELETE FROM {{schema}}.partition_nodes WHERE expires < $1`), p.Now)
		b.Queue(q(`UPDATE {{schema}}.partition_leases SET expires = $2 WHERE owner = $1`), p.Node, until)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return failf(err, "lease partitions: renew")
		}
		var nodes int64
		if err := tx.QueryRow(ctx, q(`SELECT count(*) FROM {{schema}}.partition_nodes`)).Scan(&nodes); err != nil {
			return failf(err, "lease partitions: count nodes")
		}
		share := provider.PartitionShare(s.partitions, int(nodes))
		rows, err := tx.Query(ctx, q(`SELECT part FROM {{schema}}.partition_leases WHERE owner = $1 AND part < $2 ORDER BY part`), p.Node, s.partitions)
		if err != nil {
			return failf(err, "lease partitions: read")
		}
		own, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return failf(err, "lease partitions: read")
		}
		switch {
		case len(own) > share:
			extra := own[share:]
			own = own[:share]
			if _, err := tx.Exec(ctx, q(`DELETE FROM {{schema}}.partition_leases WHERE owner = $1 AND part = ANY ($2::int[])`), p.Node, extra); err != nil {
				return failf(err, "lease partitions: give back")
			}
		case len(own) < share:
			rows, err := tx.Query(ctx, q(`
INSERT INTO {{schema}}.partition_leases AS l (part, owner, expires)
SELECT g.part, $1, $2
FROM generate_series(0, $3 - 1) AS g(part)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.partition_leases o WHERE o.part = g.part AND o.expires >= $4)
ORDER BY g.part
LIMIT $5
ON CONFLICT (part) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires
RETURNING part`), p.Node, until, s.partitions, p.Now, share-len(own))
			if err != nil {
				return failf(err, "lease partitions: take")
			}
			taken, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				return failf(err, "lease partitions: take")
			}
			own = append(own, taken...)
		}
		held = make([]int, len(own))
		for i, part := range own {
			held[i] = int(part)
		}
		slices.Sort(held)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// ReleasePartitions implements provider.PartitionLeaser.
func (s *Store) ReleasePartitions(ctx context.Context, node string) error {
	ident := pgx.Identifier{s.schema}.Sanitize()
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM `+ident+`.partition_leases WHERE owner = $1`, node)
	b.Queue(`DELETE FROM `+ident+`.partition_nodes WHERE node = $1`, node)
	return failf(s.rc.SendBatch(ctx, b).Close(), "release the partitions of %s", node)
}

// leaseLockKey is the advisory lock key of the schema's partition leases.
func (s *Store) leaseLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("chronicle/partitions/" + s.schema))
	return int64(h.Sum64())
}
