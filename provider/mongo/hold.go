package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.HoldStore = (*Store)(nil)

// holdDoc is a legal hold in the legal_holds collection; its _id is the
// instance id, so an instance has at most one.
type holdDoc struct {
	Instance string `bson:"_id"`
	HoldID   string `bson:"h"`
	Reason   string `bson:"r"`
	Actor    string `bson:"a"`
	Ticket   string `bson:"t,omitempty"`
	PlacedAt int64  `bson:"pa"`
}

func (d *holdDoc) hold() *provider.Hold {
	return &provider.Hold{InstanceID: d.Instance, HoldID: d.HoldID, Reason: d.Reason, Actor: d.Actor, Ticket: d.Ticket, PlacedAt: provider.FromUnixNanos(d.PlacedAt)}
}

// PlaceHold implements provider.HoldStore. A hold and a purge each write
// first and then look for the other's write: the hold its document, then
// the purge's mark (the instance's epoch document holding a tombstone);
// the purge its mark, then the hold. Whichever looks second sees the
// other and gives way (the hold deletes its document and returns
// ErrNotFound; the purge takes its mark back and returns ErrHeld), so a
// purge never deletes an instance whose hold was placed.
func (s *Store) PlaceHold(ctx context.Context, h *provider.Hold) (*provider.Hold, bool, error) {
	exists := func() (bool, error) {
		err := s.c.instances.FindOne(ctx, filter("_id", h.InstanceID), options.FindOne().SetProjection(filter("_id", 1))).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return false, nil
		}
		return err == nil, translate(err)
	}
	notFound := fmt.Errorf("hold %s: %w", h.InstanceID, provider.ErrNotFound)
	ok, err := exists()
	if err != nil {
		return nil, false, fmt.Errorf("hold %s: %w", h.InstanceID, err)
	}
	if !ok {
		return nil, false, notFound
	}
	doc := &holdDoc{Instance: h.InstanceID, HoldID: h.HoldID, Reason: h.Reason, Actor: h.Actor, Ticket: h.Ticket, PlacedAt: provider.UnixNanos(h.PlacedAt)}
	placed, err := insertIgnoringDuplicate(ctx, s.c.holds, h.InstanceID, doc)
	if err != nil {
		return nil, false, fmt.Errorf("hold %s: %w", h.InstanceID, err)
	}
	if !placed {
		cur, err := s.GetHold(ctx, h.InstanceID)
		if err != nil {
			return nil, false, err
		}
		return cur, false, nil
	}
	latest, err := s.latestLease(ctx, h.InstanceID)
	if err == nil && (latest == nil || latest.Purge == nil) {
		// The purge deletes the instance's record before its epoch
		// documents: a purge that finished since the first look is seen
		// here.
		ok, err = exists()
	}
	if err != nil || latest != nil && latest.Purge != nil || !ok {
		if _, derr := s.c.holds.DeleteOne(ctx, filter("_id", h.InstanceID, "h", h.HoldID)); derr != nil {
			return nil, false, fmt.Errorf("hold %s: take the hold back: %w", h.InstanceID, errors.Join(err, translate(derr)))
		}
		if err != nil {
			return nil, false, err
		}
		return nil, false, notFound
	}
	return doc.hold(), true, nil
}

// ReleaseHold implements provider.HoldStore.
func (s *Store) ReleaseHold(ctx context.Context, instanceID, holdID string) error {
	res, err := s.c.holds.DeleteOne(ctx, filter("_id", instanceID, "h", holdID))
	if err != nil {
		return fmt.Errorf("release hold %s of %s: %w", holdID, instanceID, translate(err))
	}
	if res.DeletedCount == 0 {
		return fmt.Errorf("release hold %s of %s: %w", holdID, instanceID, provider.ErrNotFound)
	}
	return nil
}

// GetHold implements provider.HoldStore.
func (s *Store) GetHold(ctx context.Context, instanceID string) (*provider.Hold, error) {
	var d holdDoc
	if err := s.c.holds.FindOne(ctx, filter("_id", instanceID)).Decode(&d); err != nil {
		return nil, fmt.Errorf("hold of %s: %w", instanceID, translate(err))
	}
	return d.hold(), nil
}

// ListHolds implements provider.HoldStore.
func (s *Store) ListHolds(ctx context.Context, afterID string, limit int) ([]provider.Hold, error) {
	o := options.Find().SetSort(filter("_id", 1))
	if limit > 0 {
		o.SetLimit(int64(limit))
	}
	cur, err := s.c.holds.Find(ctx, filter("_id", filter("$gt", afterID)), o)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", translate(err))
	}
	var docs []holdDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list holds: %w", translate(err))
	}
	out := make([]provider.Hold, len(docs))
	for i := range docs {
		out[i] = *docs[i].hold()
	}
	return out, nil
}

// heldAfterMark is the purge's look for a hold once its mark is written:
// with a hold it takes the mark back (the instance's previous epoch is
// the latest again) and returns ErrHeld. A purge that resumes finds the
// mark it left; when a hold exists and the purge has not begun deleting
// (its tombstone is not kept yet), it gives way as well; once it has
// begun, the hold came after its look, from a placement that failed
// before it looked for the mark, and the purge deletes it with the rest.
//
// A queued record of a legal hold (HoldPlaced or HoldReleased) keeps the
// purge off the same way, with ErrInvalidState until a round has
// recorded it: a release queues its record before it deletes the hold,
// so a purge that finds no hold finds the record.
func (s *Store) heldAfterMark(ctx context.Context, mark *tombDoc, epochID, token string, resumed bool) error {
	refusal, err := s.holdRefusal(ctx, mark.Instance)
	if err != nil || refusal == nil {
		return err
	}
	if resumed {
		err := s.c.tombstones.FindOne(ctx, filter("_id", tombRowID(mark)), options.FindOne().SetProjection(filter("_id", 1))).Err()
		if err == nil {
			return nil // begun: finish it
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("purge %s: %w", mark.Instance, translate(err))
		}
	}
	if _, err := s.c.leases.DeleteOne(ctx, filter("_id", epochID, "tok", token)); err != nil {
		return fmt.Errorf("purge %s: take the mark back: %w", mark.Instance, translate(err))
	}
	return refusal
}

// holdRefusal returns why a purge of the instance must not go on because
// of a legal hold: ErrHeld for a hold in place, ErrInvalidState for a
// queued record of one; nil when neither.
func (s *Store) holdRefusal(ctx context.Context, instanceID string) (error, error) {
	cur, err := s.GetHold(ctx, instanceID)
	switch {
	case err == nil:
		return fmt.Errorf("purge %s: %w (hold %s placed by %s)", instanceID, provider.ErrHeld, cur.HoldID, cur.Actor), nil
	case !errors.Is(err, provider.ErrNotFound):
		return nil, fmt.Errorf("purge %s: %w", instanceID, err)
	}
	var m messageDoc
	err = s.c.messages.FindOne(ctx, filter("i", instanceID, "k", filter("$in", []string{string(history.KindHoldPlaced), string(history.KindHoldReleased)})),
		options.FindOne().SetProjection(filter("_id", 1))).Decode(&m)
	switch {
	case err == nil:
		return fmt.Errorf("purge %s: %w: message %s records a legal hold", instanceID, provider.ErrInvalidState, m.ID), nil
	case !errors.Is(err, mongo.ErrNoDocuments):
		return nil, fmt.Errorf("purge %s: %w", instanceID, translate(err))
	}
	return nil, nil
}
