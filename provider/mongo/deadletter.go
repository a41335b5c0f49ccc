package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// letterDoc is a dead letter, by its deterministic id.
type letterDoc struct {
	ID       string `bson:"_id"`
	Instance string `bson:"i"`
	// Message and Activity are the provider's encodings of the item.
	Message    []byte `bson:"m"`
	Activity   []byte `bson:"t"`
	Raw        []byte `bson:"raw"`
	Reason     string `bson:"r"`
	Error      string `bson:"er"`
	Node       string `bson:"nd"`
	At         int64  `bson:"at"`
	Attempts   int    `bson:"a"`
	Status     string `bson:"st"`
	ResolvedBy string `bson:"rb"`
	ResolvedAt int64  `bson:"ra"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// incidentDoc is an instance's incident: the newest unresolved dead
// letter. It is a document of its own, so that an activity worker setting
// it never races a round writing the instance's record.
type incidentDoc struct {
	ID   string `bson:"_id"`
	Text string `bson:"tx"`
}

// newLetterDoc builds the document of l, of partition part.
func newLetterDoc(l *provider.DeadLetter, part int) (*letterDoc, error) {
	d := &letterDoc{
		Part: part, ID: l.ID, Instance: l.InstanceID, Raw: l.Raw, Reason: string(l.Reason), Error: l.Error, Node: l.Node,
		At: provider.UnixNanos(l.At), Attempts: l.Attempts, Status: string(l.Status), ResolvedBy: l.ResolvedBy, ResolvedAt: provider.UnixNanos(l.ResolvedAt),
	}
	if d.Status == "" {
		d.Status = string(provider.DeadLetterDead)
	}
	var err error
	if l.Message != nil {
		if d.Message, err = provider.MarshalMessage(l.Message); err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", l.ID, err)
		}
	}
	if l.Activity != nil {
		if d.Activity, err = provider.MarshalActivityTask(l.Activity); err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", l.ID, err)
		}
	}
	return d, nil
}

func (d *letterDoc) letter() (provider.DeadLetter, error) {
	l := provider.DeadLetter{
		ID: d.ID, InstanceID: d.Instance, Raw: d.Raw, Reason: provider.Reason(d.Reason), Error: d.Error, Node: d.Node,
		At: provider.FromUnixNanos(d.At), Attempts: d.Attempts, Status: provider.DeadLetterStatus(d.Status), ResolvedBy: d.ResolvedBy,
		ResolvedAt: provider.FromUnixNanos(d.ResolvedAt),
	}
	if d.Message != nil {
		m, err := provider.UnmarshalMessage(d.Message)
		if err != nil {
			return l, fmt.Errorf("dead letter %s: %w", d.ID, err)
		}
		l.Message = &m
	}
	if d.Activity != nil {
		t, err := provider.UnmarshalActivityTask(d.Activity)
		if err != nil {
			return l, fmt.Errorf("dead letter %s: %w", d.ID, err)
		}
		l.Activity = &t
	}
	return l, nil
}

// setIncident writes an instance's incident ("" clears it).
func (s *Store) setIncident(ctx context.Context, instanceID, text string) error {
	_, err := s.c.incidents.UpdateOne(ctx, filter("_id", instanceID), set("tx", text), options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("incident of %s: %w", instanceID, translate(err))
	}
	return nil
}

// incidents returns the incidents of instances.
func (s *Store) incidentsOf(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.c.incidents.Find(ctx, filter("_id", filter("$in", ids)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []incidentDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	for _, d := range docs {
		out[d.ID] = d.Text
	}
	return out, nil
}

// deadLetterWrites stores letters (each idempotent by id), then the
// instance's incident, then removes each letter's message: a crash before
// a removal leaves the message queued, to be dead-lettered again under
// the same letter id.
func (s *Store) deadLetterWrites(ctx context.Context, instanceID string, letters []provider.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	for i := range letters {
		if err := s.insertLetter(ctx, &letters[i]); err != nil {
			return err
		}
	}
	last := letters[len(letters)-1]
	if err := s.setIncident(ctx, instanceID, string(last.Reason)+": "+last.Error); err != nil {
		return err
	}
	for _, l := range letters {
		if l.Message != nil {
			if s.beforeWrite != nil {
				if err := s.beforeWrite("dead letter: remove " + l.Message.ID); err != nil {
					return err
				}
			}
			// Only the message the letter holds (enqueued at the same
			// time): one requeued since by a redrive stays.
			if _, err := s.c.messages.DeleteOne(ctx, filter("_id", l.Message.ID, "i", instanceID, "e", provider.UnixNanos(l.Message.EnqueuedAt))); err != nil {
				return fmt.Errorf("remove message %s: %w", l.Message.ID, translate(err))
			}
		}
	}
	return nil
}

// insertLetter stores a dead letter unless its id is taken by an
// unresolved letter (the same dead-lettering, resumed); a letter of that
// id that an operator resolved does not hold the item, which is stored
// under provider.ResolvedDeadLetterID instead.
func (s *Store) insertLetter(ctx context.Context, l *provider.DeadLetter) error {
	c := *l
	for range 8 {
		d, err := newLetterDoc(&c, s.part(c.InstanceID))
		if err != nil {
			return err
		}
		ok, err := insertIgnoringDuplicate(ctx, s.c.letters, d.ID, d)
		if err != nil {
			return fmt.Errorf("dead letter %s: %w", d.ID, err)
		}
		if ok {
			return nil
		}
		var old letterDoc
		if err := s.c.letters.FindOne(ctx, filter("_id", d.ID), options.FindOne().SetProjection(filter("st", 1, "ra", 1))).Decode(&old); err != nil {
			return fmt.Errorf("dead letter %s: %w", d.ID, translate(err))
		}
		if old.Status == string(provider.DeadLetterDead) {
			return nil
		}
		c.ID = provider.ResolvedDeadLetterID(c.ID, provider.FromUnixNanos(old.ResolvedAt))
	}
	return fmt.Errorf("dead letter %s: %w: its ids are taken by resolved letters", l.ID, provider.ErrInvalidState)
}

// ListDeadLetters implements provider.DeadLetterStore.
func (s *Store) ListDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	f := filter("_id", filter("$gt", p.AfterID))
	if p.InstanceID != "" {
		f = append(f, bson.E{Key: "i", Value: p.InstanceID})
	}
	if p.Status != "" {
		f = append(f, bson.E{Key: "st", Value: string(p.Status)})
	}
	cur, err := s.c.letters.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetLimit(int64(limitOf(p.Limit))))
	if err != nil {
		return nil, translate(err)
	}
	var docs []letterDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.DeadLetter, 0, len(docs))
	for i := range docs {
		l, err := docs[i].letter()
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// GetDeadLetter implements provider.DeadLetterStore.
func (s *Store) GetDeadLetter(ctx context.Context, lid string) (*provider.DeadLetter, error) {
	var d letterDoc
	err := s.c.letters.FindOne(ctx, filter("_id", lid)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("dead letter %s: %w", lid, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("dead letter %s: %w", lid, translate(err))
	}
	l, err := d.letter()
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// ResolveDeadLetter implements provider.DeadLetterStore: what the
// resolution queues first, the incident next, the letter's status last.
func (s *Store) ResolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	l, err := s.GetDeadLetter(ctx, p.ID)
	if err != nil {
		return err
	}
	if l.Status != provider.DeadLetterDead {
		return fmt.Errorf("dead letter %s is %s: %w", p.ID, l.Status, provider.ErrInvalidState)
	}
	if m := l.Message; m != nil && p.Status == provider.DeadLetterRedriven {
		err := s.c.messages.FindOne(ctx, filter("_id", m.ID, "e", provider.UnixNanos(m.EnqueuedAt)), options.FindOne().SetProjection(filter("_id", 1))).Err()
		switch {
		case err == nil:
			return fmt.Errorf("dead letter %s: %w: %w", p.ID, provider.ErrInvalidState, provider.ErrDeadLetteringUnfinished)
		case !errors.Is(err, mongo.ErrNoDocuments):
			return fmt.Errorf("dead letter %s: %w", p.ID, translate(err))
		}
	}
	switch p.Status {
	case provider.DeadLetterRedriven:
		if l.Message != nil {
			m := *l.Message
			m.Attempts, m.LastError, m.VisibleAt, m.EnqueuedAt = 0, "", p.Now, p.Now
			if _, err := s.enqueueMessages(ctx, []provider.Message{m}, p.Now); err != nil {
				return err
			}
			s.notify(provider.QueueOrchestration)
		}
		if l.Activity != nil {
			t := *l.Activity
			t.VisibleAt, t.EnqueuedAt, t.LastError = p.Now, p.Now, ""
			if err := s.requeueTask(ctx, t, p.Now); err != nil {
				return err
			}
		}
	case provider.DeadLetterDiscarded:
		var queue []provider.Message
		if l.Activity != nil {
			m, err := provider.DiscardedActivityResult(l, p.By)
			if err != nil {
				return err
			}
			queue = append(queue, m)
		}
		if m, ok, err := provider.DiscardedSubWorkflowResult(l, p.By); err != nil {
			return err
		} else if ok {
			queue = append(queue, m)
		}
		if len(queue) > 0 {
			if _, err := s.enqueueMessages(ctx, queue, p.Now); err != nil {
				return err
			}
			s.notify(provider.QueueOrchestration)
		}
	default:
		return fmt.Errorf("dead letter %s: %w: cannot resolve to %q", p.ID, provider.ErrInvalidState, p.Status)
	}
	// The incident is the newest dead letter still unresolved but this
	// one.
	var newest letterDoc
	err = s.c.letters.FindOne(ctx, filter("i", l.InstanceID, "st", string(provider.DeadLetterDead), "_id", filter("$ne", l.ID)),
		options.FindOne().SetSort(filter("at", -1, "_id", -1))).Decode(&newest)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		if _, err := s.c.incidents.DeleteOne(ctx, filter("_id", l.InstanceID)); err != nil {
			return fmt.Errorf("incident of %s: %w", l.InstanceID, translate(err))
		}
	case err != nil:
		return fmt.Errorf("incident of %s: %w", l.InstanceID, translate(err))
	default:
		if err := s.setIncident(ctx, l.InstanceID, newest.Reason+": "+newest.Error); err != nil {
			return err
		}
	}
	res, err := s.c.letters.UpdateOne(ctx, filter("_id", p.ID, "st", string(provider.DeadLetterDead)),
		set("st", string(p.Status), "rb", p.By, "ra", provider.UnixNanos(p.Now)))
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", p.ID, translate(err))
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("dead letter %s was resolved meanwhile: %w", p.ID, provider.ErrInvalidState)
	}
	return nil
}
