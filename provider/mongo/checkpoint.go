package mongo

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.CheckpointStore = (*Store)(nil)

// checkpointDoc is a signed checkpoint, by its number: the unique _id
// makes exactly one of two appends of one number land. Its leaves are
// documents of their own (a checkpoint may cover more instances than one
// document holds).
type checkpointDoc struct {
	ID     string `bson:"_id"`
	Number int64  `bson:"n"`
	Hash   []byte `bson:"h"`
	// Data is the checkpoint without its leaves, as JSON.
	Data []byte `bson:"d"`
}

// checkpointLeafDoc is one head a checkpoint covers, by (checkpoint
// hash, instance). Leaves are written before their checkpoint: those of
// an append that lost the race for its number belong to no stored
// checkpoint and are never read.
type checkpointLeafDoc struct {
	ID         string `bson:"_id"`
	Checkpoint []byte `bson:"c"`
	Number     int64  `bson:"n"`
	Instance   string `bson:"i"`
	Seq        int64  `bson:"s"`
	Hash       []byte `bson:"lh"`
	// Purged marks a tombstone leaf; documents written before it have
	// none (a head).
	Purged bool `bson:"p,omitempty"`
}

// AppendCheckpoint implements provider.CheckpointStore: the leaves first,
// one document each, then the checkpoint, whose insert by number is the
// append.
func (s *Store) AppendCheckpoint(ctx context.Context, c *history.Checkpoint) error {
	stored, err := s.checkpointHeader(ctx, filter("_id", pad(c.Number)), nil)
	if err != nil {
		return err
	}
	if stored != nil {
		if bytes.Equal(stored.Hash, c.Hash) {
			return nil
		}
		return fmt.Errorf("checkpoint %d: %w: another checkpoint has its number", c.Number, provider.ErrConflict)
	}
	latest, err := s.checkpointHeader(ctx, nil, filter("_id", -1))
	if err != nil {
		return err
	}
	var number int64
	var prev []byte
	if latest != nil {
		number, prev = latest.Number, latest.Hash
	}
	if c.Number != number+1 || !bytes.Equal(c.PrevHash, prev) {
		return fmt.Errorf("checkpoint %d: %w: the latest is %d", c.Number, provider.ErrConflict, number)
	}
	for _, l := range c.Leaves {
		doc := &checkpointLeafDoc{
			ID: id(hex.EncodeToString(c.Hash), l.InstanceID), Checkpoint: c.Hash, Number: c.Number,
			Instance: l.InstanceID, Seq: l.Seq, Hash: l.Hash, Purged: l.Purged,
		}
		if _, err := insertIgnoringDuplicate(ctx, s.c.checkpointLeaves, doc.ID, doc); err != nil {
			return fmt.Errorf("checkpoint %d: leaf of %s: %w", c.Number, l.InstanceID, err)
		}
	}
	header := *c
	header.Leaves = nil
	data, err := json.Marshal(&header)
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", c.Number, err)
	}
	ok, err := insertIgnoringDuplicate(ctx, s.c.checkpoints, pad(c.Number), &checkpointDoc{ID: pad(c.Number), Number: c.Number, Hash: c.Hash, Data: data})
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", c.Number, err)
	}
	if !ok {
		// Another append of this number landed first.
		stored, err := s.checkpointHeader(ctx, filter("_id", pad(c.Number)), nil)
		if err != nil {
			return err
		}
		if stored == nil || !bytes.Equal(stored.Hash, c.Hash) {
			return fmt.Errorf("checkpoint %d: %w: another checkpoint has its number", c.Number, provider.ErrConflict)
		}
	}
	return nil
}

// checkpointHeader returns the first checkpoint document matching f in
// sort order, or nil.
func (s *Store) checkpointHeader(ctx context.Context, f, sort any) (*checkpointDoc, error) {
	if f == nil {
		f = filter()
	}
	o := options.FindOne()
	if sort != nil {
		o.SetSort(sort)
	}
	var d checkpointDoc
	err := s.c.checkpoints.FindOne(ctx, f, o).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", translate(err))
	}
	return &d, nil
}

// checkpoint decodes a checkpoint document and reads its leaves.
func (s *Store) checkpoint(ctx context.Context, d *checkpointDoc) (history.Checkpoint, error) {
	var c history.Checkpoint
	if err := json.Unmarshal(d.Data, &c); err != nil {
		return c, fmt.Errorf("checkpoint %d: %w: %w", d.Number, history.ErrCorrupt, err)
	}
	cur, err := s.c.checkpointLeaves.Find(ctx, filter("c", d.Hash), options.Find().SetSort(filter("i", 1)))
	if err != nil {
		return c, fmt.Errorf("checkpoint %d: %w", d.Number, translate(err))
	}
	var leaves []checkpointLeafDoc
	if err := cur.All(ctx, &leaves); err != nil {
		return c, fmt.Errorf("checkpoint %d: %w", d.Number, translate(err))
	}
	c.Leaves = make([]history.CheckpointLeaf, len(leaves))
	for i, l := range leaves {
		c.Leaves[i] = history.CheckpointLeaf{InstanceID: l.Instance, Seq: l.Seq, Hash: l.Hash, Purged: l.Purged}
	}
	return c, nil
}

// LatestCheckpoint implements provider.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context) (*history.Checkpoint, error) {
	d, err := s.checkpointHeader(ctx, nil, filter("_id", -1))
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("latest checkpoint: %w", provider.ErrNotFound)
	}
	c, err := s.checkpoint(ctx, d)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// ListCheckpoints implements provider.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, p *provider.ListCheckpointsParams) ([]history.Checkpoint, error) {
	limit := limitOf(p.Limit)
	var docs []checkpointDoc
	if p.InstanceID == "" {
		cur, err := s.c.checkpoints.Find(ctx, filter("n", filter("$gt", p.AfterNumber)), options.Find().SetSort(filter("_id", 1)).SetLimit(int64(limit)))
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", translate(err))
		}
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", translate(err))
		}
	} else {
		cur, err := s.c.checkpointLeaves.Find(ctx, filter("i", p.InstanceID, "n", filter("$gt", p.AfterNumber)), options.Find().SetSort(filter("n", 1)))
		if err != nil {
			return nil, fmt.Errorf("list checkpoints of %s: %w", p.InstanceID, translate(err))
		}
		var leaves []checkpointLeafDoc
		if err := cur.All(ctx, &leaves); err != nil {
			return nil, fmt.Errorf("list checkpoints of %s: %w", p.InstanceID, translate(err))
		}
		for _, l := range leaves {
			if len(docs) == limit {
				break
			}
			d, err := s.checkpointHeader(ctx, filter("_id", pad(l.Number)), nil)
			if err != nil {
				return nil, err
			}
			// A leaf of an append that lost its number belongs to no
			// stored checkpoint.
			if d != nil && bytes.Equal(d.Hash, l.Checkpoint) {
				docs = append(docs, *d)
			}
		}
	}
	out := make([]history.Checkpoint, 0, len(docs))
	for i := range docs {
		c, err := s.checkpoint(ctx, &docs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
