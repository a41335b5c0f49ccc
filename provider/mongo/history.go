package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// historyDoc holds the events of one append, by (instance, first Seq):
// two appends at the same first Seq collide on _id, so exactly one lands.
type historyDoc struct {
	ID       string   `bson:"_id"`
	Instance string   `bson:"i"`
	First    int64    `bson:"f"`
	Last     int64    `bson:"l"`
	LastHash []byte   `bson:"lh"`
	Events   [][]byte `bson:"ev"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// keyDoc claims an idempotency key of an instance for the event at Seq of
// the append whose first Seq is First. It is written before the events: a
// key whose append never landed (a crash, or a lost race between the two
// writes) is an orphan, recognised because no history document of that
// first Seq holds the key (see claimKey), and taken over.
type keyDoc struct {
	ID       string `bson:"_id"`
	Instance string `bson:"i"`
	First    int64  `bson:"f"`
	Seq      int64  `bson:"s"`
}

func historyID(instanceID string, first int64) string { return id(instanceID, pad(first)) }

func keyID(instanceID string, k history.Key) string {
	return id(instanceID, k.ExecutionID, k.Class, k.CorrelationID)
}

// LoadHistory implements provider.Store and provider.Steps.
func (s *Store) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	from := max(p.FromSeq, 1)
	cur, err := s.c.history.Find(ctx, filter("i", p.InstanceID, "l", filter("$gte", from)), options.Find().SetSort(filter("f", 1)))
	if err != nil {
		return nil, fmt.Errorf("load history of %s: %w", p.InstanceID, translate(err))
	}
	var docs []historyDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("load history of %s: %w", p.InstanceID, translate(err))
	}
	var out []history.Event
	for _, d := range docs {
		for j, data := range d.Events {
			seq := d.First + int64(j)
			if seq < from {
				continue
			}
			e, err := history.UnmarshalEvent(data)
			if err != nil {
				return nil, fmt.Errorf("load history of %s: %w", p.InstanceID,
					&history.ChainError{Seq: seq, InstanceID: p.InstanceID, Reason: "stored event does not decode: " + err.Error()})
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// head returns the last stored Seq of an instance and its hash.
func (s *Store) head(ctx context.Context, instanceID string) (int64, []byte, error) {
	var d historyDoc
	err := s.c.history.FindOne(ctx, filter("i", instanceID), options.FindOne().SetSort(filter("f", -1)).
		SetProjection(filter("l", 1, "lh", 1))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("history head of %s: %w", instanceID, translate(err))
	}
	return d.Last, d.LastHash, nil
}

// AppendHistory implements provider.Steps: the idempotency keys are
// claimed first, one document each, then the events land in one document.
func (s *Store) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	first := p.Events[0].Seq
	for i := range p.Events {
		e := &p.Events[i]
		if e.Seq != first+int64(i) || e.InstanceID != p.InstanceID {
			return fmt.Errorf("append to %s: %w: event %d has seq %d of instance %q", p.InstanceID, provider.ErrConflict, i, e.Seq, e.InstanceID)
		}
	}
	if err := s.fence(ctx, p.Lease); err != nil {
		return fmt.Errorf("append to %s: %w", p.InstanceID, err)
	}
	last, lastHash, err := s.head(ctx, p.InstanceID)
	if err != nil {
		return err
	}
	if first >= 1 && first <= last {
		return s.retriedAppend(ctx, p)
	}
	if first != last+1 {
		return fmt.Errorf("append to %s: %w: first seq %d, expected %d", p.InstanceID, provider.ErrConflict, first, last+1)
	}
	if last > 0 && !bytes.Equal(p.Events[0].PrevHash, lastHash) {
		// Built on another history of the id (one purged since, say).
		return fmt.Errorf("append to %s at seq %d: %w: the events follow another history than the stored one", p.InstanceID, first, provider.ErrConflict)
	}
	seen := map[history.Key]bool{}
	for i := range p.Events {
		e := &p.Events[i]
		k, ok := e.Key()
		if !ok {
			continue
		}
		if seen[k] {
			return fmt.Errorf("append to %s at seq %d: %w: idempotency key %s already used", p.InstanceID, e.Seq, provider.ErrConflict, k)
		}
		seen[k] = true
		if err := s.claimKey(ctx, p.InstanceID, k, e.Seq, first); err != nil {
			return err
		}
	}
	doc := historyDoc{
		Part: s.part(p.InstanceID), ID: historyID(p.InstanceID, first), Instance: p.InstanceID, First: first, Last: first + int64(len(p.Events)) - 1,
		LastHash: p.Events[len(p.Events)-1].Hash, Events: make([][]byte, len(p.Events)),
	}
	for i := range p.Events {
		doc.Events[i] = history.MarshalEvent(&p.Events[i])
	}
	if _, err := s.c.history.InsertOne(ctx, &doc); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			if mongo.SessionFromContext(ctx) != nil {
				// The duplicate aborted the transaction: nothing more can
				// be read in it.
				return fmt.Errorf("append to %s at seq %d: %w: seq already taken", p.InstanceID, first, provider.ErrConflict)
			}
			return s.retriedAppend(ctx, p)
		}
		return fmt.Errorf("append to %s: %w", p.InstanceID, translate(err))
	}
	if p.Lease != nil {
		// The fence read and the insert are two operations: a lease lost
		// between them (the instance ended, was purged and started again
		// meanwhile) is found by reading the fence again, and the
		// insert undone before any round of the new lease could build
		// on it (that round's own append at this seq collides with it).
		if err := s.fence(ctx, p.Lease); err != nil {
			_, derr := s.c.history.DeleteOne(context.WithoutCancel(ctx), filter("_id", doc.ID, "lh", doc.LastHash))
			return errors.Join(fmt.Errorf("append to %s: %w", p.InstanceID, err), translate(derr))
		}
	}
	return nil
}

// retriedAppend returns nil when the events are stored with the same
// hashes (a retried append), ErrConflict otherwise.
func (s *Store) retriedAppend(ctx context.Context, p *provider.AppendHistoryParams) error {
	first := p.Events[0].Seq
	stored, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: p.InstanceID, FromSeq: first})
	if err != nil {
		return err
	}
	for i := range p.Events {
		if i >= len(stored) || stored[i].Seq != p.Events[i].Seq || !bytes.Equal(stored[i].Hash, p.Events[i].Hash) {
			return fmt.Errorf("append to %s at seq %d: %w: seq already taken", p.InstanceID, first+int64(i), provider.ErrConflict)
		}
	}
	return nil
}

// claimKey writes the key document of an event of the append whose first
// Seq is first. A key already claimed is judged by the history document
// of its claiming append (keyed by that append's first Seq): when it
// holds an event with the key, the key is used (ErrConflict); when another
// append's document holds that first Seq, or none does below the head,
// the claiming append never landed and the key is taken over; a claim by
// a rival append at the same first Seq is left to the history insert,
// which only one of them wins.
func (s *Store) claimKey(ctx context.Context, instanceID string, k history.Key, seq, first int64) error {
	kid := keyID(instanceID, k)
	for range 3 {
		ok, err := insertIgnoringDuplicate(ctx, s.c.keys, kid, &keyDoc{ID: kid, Instance: instanceID, First: first, Seq: seq})
		if err != nil {
			return fmt.Errorf("append to %s: idempotency key %s: %w", instanceID, k, err)
		}
		if ok {
			return nil
		}
		var old keyDoc
		err = s.c.keys.FindOne(ctx, filter("_id", kid)).Decode(&old)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return fmt.Errorf("append to %s: idempotency key %s: %w", instanceID, k, translate(err))
		}
		if old.First == first {
			return nil
		}
		if old.First > first {
			// Claimed by an append that read a newer head than this one.
			return fmt.Errorf("append to %s at seq %d: %w: idempotency key %s is claimed by an append at seq %d", instanceID, seq, provider.ErrConflict, k, old.First)
		}
		var d historyDoc
		err = s.c.history.FindOne(ctx, filter("_id", historyID(instanceID, old.First))).Decode(&d)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
		case err != nil:
			return fmt.Errorf("append to %s: idempotency key %s: %w", instanceID, k, translate(err))
		default:
			for j, data := range d.Events {
				e, err := history.UnmarshalEvent(data)
				if err != nil {
					return fmt.Errorf("append to %s: %w", instanceID,
						&history.ChainError{Seq: d.First + int64(j), InstanceID: instanceID, Reason: "stored event does not decode: " + err.Error()})
				}
				if ek, ok := e.Key(); ok && ek == k {
					return fmt.Errorf("append to %s at seq %d: %w: idempotency key %s already used", instanceID, seq, provider.ErrConflict, k)
				}
			}
		}
		// An orphan: its append never landed. Take it over.
		if _, err := s.c.keys.DeleteOne(ctx, filter("_id", kid, "f", old.First)); err != nil {
			return fmt.Errorf("append to %s: idempotency key %s: %w", instanceID, k, translate(err))
		}
	}
	return fmt.Errorf("append to %s at seq %d: %w: idempotency key %s is contended", instanceID, seq, provider.ErrConflict, k)
}
