package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.CheckpointStore = (*Store)(nil)

const checkpointColumns = `number, prev_hash, at, key_id, root, size, hash, signature`

const latestCheckpointSQL = `
SELECT ` + checkpointColumns + ` FROM {{schema}}.checkpoints ORDER BY number DESC LIMIT 1`

const checkpointHashSQL = `
SELECT hash FROM {{schema}}.checkpoints WHERE number = $1`

const insertCheckpointSQL = `
INSERT INTO {{schema}}.checkpoints (` + checkpointColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

const insertLeavesSQL = `
INSERT INTO {{schema}}.checkpoint_leaves (number, instance_id, seq, hash, purged)
SELECT $1, l.instance_id, l.seq, l.hash, l.purged
FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::boolean[]) AS l (instance_id, seq, hash, purged)`

const listCheckpointsSQL = `
SELECT ` + checkpointColumns + ` FROM {{schema}}.checkpoints
WHERE number > $1
  AND ($2 = '' OR number IN (SELECT number FROM {{schema}}.checkpoint_leaves WHERE instance_id = $2 AND number > $1))
ORDER BY number
LIMIT $3`

const checkpointLeavesSQL = `
SELECT number, instance_id, seq, hash, purged FROM {{schema}}.checkpoint_leaves
WHERE number = ANY ($1)
ORDER BY number, instance_id`

// AppendCheckpoint implements provider.CheckpointStore: one transaction
// reads the latest checkpoint, checks the number and previous hash, and
// inserts the checkpoint and its leaves. Two appends of one number
// collide on the primary key: the loser gets ErrConflict.
func (s *Store) AppendCheckpoint(ctx context.Context, c *history.Checkpoint) error {
	err := pgx.BeginTxFunc(ctx, s.pool, s.sql.begin, func(tx pgx.Tx) error {
		var stored []byte
		err := tx.QueryRow(ctx, s.sql.checkpointHash, c.Number).Scan(&stored)
		switch {
		case err == nil && bytes.Equal(stored, c.Hash):
			return nil // a retry
		case err == nil:
			return fmt.Errorf("%w: another checkpoint has number %d", provider.ErrConflict, c.Number)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var (
			latest  int64
			prev    []byte
			latestC *history.Checkpoint
		)
		latestC, err = scanCheckpoint(tx.QueryRow(ctx, s.sql.latestCheckpoint))
		switch {
		case err == nil:
			latest, prev = latestC.Number, latestC.Hash
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if c.Number != latest+1 || !bytes.Equal(c.PrevHash, prev) {
			return fmt.Errorf("%w: checkpoint %d does not follow the latest, %d", provider.ErrConflict, c.Number, latest)
		}
		if _, err := tx.Exec(ctx, s.sql.insertCheckpoint, c.Number, c.PrevHash, c.At, c.KeyID, c.Root, c.Size, c.Hash, c.Signature); err != nil {
			return err
		}
		if len(c.Leaves) == 0 {
			return nil
		}
		ids, seqs, hashes, purged := make([]string, len(c.Leaves)), make([]int64, len(c.Leaves)), make([][]byte, len(c.Leaves)), make([]bool, len(c.Leaves))
		for i, l := range c.Leaves {
			ids[i], seqs[i], hashes[i], purged[i] = l.InstanceID, l.Seq, l.Hash, l.Purged
		}
		_, err = tx.Exec(ctx, s.sql.insertLeaves, c.Number, ids, seqs, hashes, purged)
		return err
	})
	return failf(err, "append checkpoint %d", c.Number)
}

func scanCheckpoint(row pgx.Row) (*history.Checkpoint, error) {
	c := &history.Checkpoint{}
	var at time.Time
	if err := row.Scan(&c.Number, &c.PrevHash, &at, &c.KeyID, &c.Root, &c.Size, &c.Hash, &c.Signature); err != nil {
		return nil, err
	}
	c.At = at.UTC()
	if len(c.PrevHash) == 0 {
		c.PrevHash = nil
	}
	return c, nil
}

// LatestCheckpoint implements provider.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context) (*history.Checkpoint, error) {
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, s.sql.latestCheckpoint))
	if err != nil {
		return nil, failf(err, "latest checkpoint")
	}
	cs := []history.Checkpoint{*c}
	if err := s.loadLeaves(ctx, cs); err != nil {
		return nil, err
	}
	return &cs[0], nil
}

// ListCheckpoints implements provider.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, p *provider.ListCheckpointsParams) ([]history.Checkpoint, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, s.sql.listCheckpoints, p.AfterNumber, p.InstanceID, limit)
	if err != nil {
		return nil, failf(err, "list checkpoints")
	}
	var out []history.Checkpoint
	for rows.Next() {
		c, err := scanCheckpoint(rows)
		if err != nil {
			rows.Close()
			return nil, failf(err, "list checkpoints")
		}
		out = append(out, *c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, failf(err, "list checkpoints")
	}
	return out, s.loadLeaves(ctx, out)
}

// loadLeaves fills in the leaves of checkpoints, in one query.
func (s *Store) loadLeaves(ctx context.Context, cs []history.Checkpoint) error {
	if len(cs) == 0 {
		return nil
	}
	numbers := make([]int64, len(cs))
	at := make(map[int64]int, len(cs))
	for i := range cs {
		numbers[i], at[cs[i].Number] = cs[i].Number, i
		cs[i].Leaves = []history.CheckpointLeaf{}
	}
	rows, err := s.pool.Query(ctx, s.sql.checkpointLeaves, numbers)
	if err != nil {
		return failf(err, "checkpoint leaves")
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		var l history.CheckpointLeaf
		if err := rows.Scan(&n, &l.InstanceID, &l.Seq, &l.Hash, &l.Purged); err != nil {
			return failf(err, "checkpoint leaves")
		}
		c := &cs[at[n]]
		c.Leaves = append(c.Leaves, l)
	}
	return failf(rows.Err(), "checkpoint leaves")
}
