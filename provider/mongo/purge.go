package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// tombDoc is a purge's tombstone; in the tombstones collection it has an
// _id of its own and an order key.
type tombDoc struct {
	Instance string `bson:"i"`
	LastSeq  int64  `bson:"ls"`
	LastHash []byte `bson:"lh"`
	PurgedAt int64  `bson:"pa"`
	PurgedBy string `bson:"pb"`
	// Exec is the ended execution the purge deletes: a queued start of
	// another execution (the id's next run) is kept.
	Exec string `bson:"x,omitempty"`
	// Key tells this purge from every other purge of the id, however
	// they resume: two runs of a reused id may end at one seq and be
	// purged at one clock reading. The tombstone's _id holds it.
	Key string `bson:"k,omitempty"`
}

type tombstoneRow struct {
	ID       string `bson:"_id"`
	Order    int64  `bson:"o"`
	Instance string `bson:"i"`
	LastSeq  int64  `bson:"ls"`
	LastHash []byte `bson:"lh"`
	PurgedAt int64  `bson:"pa"`
	PurgedBy string `bson:"pb"`
}

func (r *tombstoneRow) tombstone() provider.Tombstone {
	t := tombDoc{Instance: r.Instance, LastSeq: r.LastSeq, LastHash: r.LastHash, PurgedAt: r.PurgedAt, PurgedBy: r.PurgedBy}
	return t.tombstone()
}

func (t *tombDoc) tombstone() provider.Tombstone {
	return provider.Tombstone{InstanceID: t.Instance, LastSeq: t.LastSeq, LastHash: t.LastHash, PurgedAt: provider.FromUnixNanos(t.PurgedAt), PurgedBy: t.PurgedBy}
}

// PurgeInstance implements provider.PurgeStore. The purge takes the
// instance's next fencing epoch with its tombstone as the mark (so no
// round leases it, and a purge that finds the mark finishes with the same
// tombstone), keeps the tombstone, deletes dead letters, activity tasks
// and their claims, messages, projections, history and keys, and the
// epoch documents last.
func (s *Store) PurgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	latest, err := s.latestLease(ctx, p.InstanceID)
	if err != nil {
		return nil, err
	}
	var mark *tombDoc
	if latest != nil && latest.Purge != nil {
		// An earlier purge stopped half-way: finish it, unless it stopped
		// before it looked for a legal hold and one is in place.
		mark = latest.Purge
		if err := s.heldAfterMark(ctx, mark, latest.ID, latest.Token, true); err != nil {
			return nil, err
		}
	} else {
		if p.OnlyUnfinished {
			return nil, fmt.Errorf("purge %s: %w: no purge of it is unfinished", p.InstanceID, provider.ErrNotFound)
		}
		if mark, err = s.purgeCheck(ctx, p, latest); err != nil {
			return nil, err
		}
		epoch := int64(1)
		if latest != nil {
			epoch = latest.Epoch + 1
		}
		token := newToken()
		ok, err := insertIgnoringDuplicate(ctx, s.c.leases, leaseID(p.InstanceID, epoch), &leaseDoc{
			ID: leaseID(p.InstanceID, epoch), Instance: p.InstanceID, Epoch: epoch, Token: token, Owner: "purge:" + p.By,
			Until: never, Purge: mark,
		})
		if err != nil {
			return nil, fmt.Errorf("purge %s: %w", p.InstanceID, err)
		}
		if !ok {
			return nil, fmt.Errorf("purge %s: %w: a round leased the instance meanwhile", p.InstanceID, provider.ErrInvalidState)
		}
		if err := s.heldAfterMark(ctx, mark, leaseID(p.InstanceID, epoch), token, false); err != nil {
			return nil, err
		}
		if latest != nil && s.mode == provider.ModeTransactional {
			// As a takeover does (see tryLease): a late transaction of
			// the previous epoch fails its commit.
			if _, err := s.c.leases.UpdateOne(ctx, filter("_id", latest.ID), set("sup", true)); err != nil {
				return nil, fmt.Errorf("purge %s: %w", p.InstanceID, translate(err))
			}
		}
	}
	if err := s.purgeWrites(ctx, mark); err != nil {
		return nil, err
	}
	t := mark.tombstone()
	return &t, nil
}

// purgeCheck refuses a purge of an instance that has not ended or that a
// round may still have work for, and returns its tombstone.
func (s *Store) purgeCheck(ctx context.Context, p *provider.PurgeInstanceParams, latest *leaseDoc) (*tombDoc, error) {
	var rec instanceDoc
	err := s.c.instances.FindOne(ctx, filter("_id", p.InstanceID), options.FindOne().SetProjection(filter("s", 1, "st", 1, "r", 1))).Decode(&rec)
	hasRecord := err == nil
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("purge %s: %w", p.InstanceID, translate(err))
	}
	last, hash, err := s.head(ctx, p.InstanceID)
	if err != nil {
		return nil, err
	}
	if !hasRecord && last == 0 {
		return nil, fmt.Errorf("purge %s: %w", p.InstanceID, provider.ErrNotFound)
	}
	if !hasRecord || !provider.Status(rec.Status).Terminal() {
		return nil, fmt.Errorf("purge %s: %w: the instance has not ended", p.InstanceID, provider.ErrInvalidState)
	}
	if last > rec.Seq {
		return nil, fmt.Errorf("purge %s: %w: history is at seq %d, its record at seq %d; a round has not finished", p.InstanceID, provider.ErrInvalidState, last, rec.Seq)
	}
	record, err := rec.record("")
	if err != nil {
		return nil, fmt.Errorf("purge %s: %w", p.InstanceID, err)
	}
	var next messageDoc
	err = s.c.messages.FindOne(ctx, filter("i", p.InstanceID, "k", string(history.KindExecutionStarted), "x", filter("$ne", record.ExecutionID)),
		options.FindOne().SetProjection(filter("_id", 1))).Decode(&next)
	switch {
	case err == nil:
		return nil, fmt.Errorf("purge %s: %w: message %s starts its next run", p.InstanceID, provider.ErrInvalidState, next.ID)
	case !errors.Is(err, mongo.ErrNoDocuments):
		return nil, fmt.Errorf("purge %s: %w", p.InstanceID, translate(err))
	}
	now := provider.UnixNanos(p.Now)
	if latest != nil && !latest.Released {
		if latest.Until > now {
			return nil, fmt.Errorf("purge %s: %w: a round of %s holds its lease until %s", p.InstanceID, provider.ErrInvalidState, latest.Owner, provider.FromUnixNanos(latest.Until).Format(time.RFC3339Nano))
		}
		msgs, err := s.visibleMessages(ctx, p.InstanceID, p.Now, 1)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			return nil, fmt.Errorf("purge %s: %w: a round of %s ended without an ack; its messages wait for a redelivery", p.InstanceID, provider.ErrInvalidState, latest.Owner)
		}
	}
	return &tombDoc{Instance: p.InstanceID, LastSeq: last, LastHash: hash, PurgedAt: now, PurgedBy: p.By, Exec: record.ExecutionID, Key: newToken()}, nil
}

// tombRowID is the id of the tombstone row the purge marked by t keeps.
func tombRowID(t *tombDoc) string {
	if t.Key != "" {
		return id(t.Instance, pad(t.PurgedAt), pad(t.LastSeq), t.Key)
	}
	// A mark written before purges had keys is finished under the id it
	// would have had.
	return id(t.Instance, pad(t.PurgedAt), pad(t.LastSeq))
}

// purgeWrites deletes what the purge marked by t removes, one collection
// after the other; each step is safe to repeat.
func (s *Store) purgeWrites(ctx context.Context, t *tombDoc) error {
	inst := t.Instance
	row := &tombstoneRow{
		ID: tombRowID(t), Order: nextOrder(provider.FromUnixNanos(t.PurgedAt)),
		Instance: inst, LastSeq: t.LastSeq, LastHash: t.LastHash, PurgedAt: t.PurgedAt, PurgedBy: t.PurgedBy,
	}
	if _, err := insertIgnoringDuplicate(ctx, s.c.tombstones, row.ID, row); err != nil {
		return fmt.Errorf("purge %s: tombstone: %w", inst, err)
	}
	var taskIDs []string
	cur, err := s.c.tasks.Find(ctx, filter("i", inst), options.Find().SetProjection(filter("_id", 1)))
	if err != nil {
		return fmt.Errorf("purge %s: %w", inst, translate(err))
	}
	var tasks []taskDoc
	if err := cur.All(ctx, &tasks); err != nil {
		return fmt.Errorf("purge %s: %w", inst, translate(err))
	}
	for _, d := range tasks {
		taskIDs = append(taskIDs, d.ID)
	}
	steps := []struct {
		what string
		c    *mongo.Collection
		f    any
	}{
		{"dead letters", s.c.letters, filter("i", inst)},
		{"activity claims", s.c.claims, filter("t", filter("$in", append([]string{}, taskIDs...)))},
		{"activity tasks", s.c.tasks, filter("i", inst)},
		// The start of the id's next run, enqueued after the check, is
		// kept: it starts the id afresh.
		{"messages", s.c.messages, filter("i", inst, "k", filter("$ne", string(history.KindExecutionStarted)))},
		{"start messages", s.c.messages, filter("i", inst, "k", string(history.KindExecutionStarted), "x", t.Exec)},
		{"snapshot", s.c.snapshots, filter("_id", inst)},
		{"human tasks", s.c.humanTasks, filter("i", inst)},
		{"human task events", s.c.taskEvents, filter("i", inst)},
		{"custom projections", s.c.custom, filter("i", inst)},
		{"incident", s.c.incidents, filter("_id", inst)},
		// A hold whose placement failed after the purge began (see
		// heldAfterMark).
		{"legal hold", s.c.holds, filter("_id", inst)},
		{"instance record", s.c.instances, filter("_id", inst)},
		{"history", s.c.history, filter("i", inst)},
		{"idempotency keys", s.c.keys, filter("i", inst)},
		{"leases", s.c.leases, filter("i", inst)},
	}
	for _, st := range steps {
		if s.beforeWrite != nil {
			if err := s.beforeWrite("purge: " + st.what); err != nil {
				return fmt.Errorf("purge %s: %s: %w", inst, st.what, err)
			}
		}
		if _, err := st.c.DeleteMany(ctx, st.f); err != nil {
			return fmt.Errorf("purge %s: %s: %w", inst, st.what, translate(err))
		}
	}
	return nil
}

// GetTombstone implements provider.PurgeStore.
func (s *Store) GetTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	var r tombstoneRow
	err := s.c.tombstones.FindOne(ctx, filter("i", instanceID), options.FindOne().SetSort(filter("o", -1))).Decode(&r)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("tombstone of %s: %w", instanceID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tombstone of %s: %w", instanceID, translate(err))
	}
	t := r.tombstone()
	return &t, nil
}

// ListTombstones implements provider.PurgeStore.
func (s *Store) ListTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	cur, err := s.c.tombstones.Find(ctx, filter("i", instanceID), options.Find().SetSort(filter("o", 1)))
	if err != nil {
		return nil, translate(err)
	}
	var rows []tombstoneRow
	if err := cur.All(ctx, &rows); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.Tombstone, 0, len(rows))
	for i := range rows {
		out = append(out, rows[i].tombstone())
	}
	return out, nil
}
