package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// instanceDoc is an instance's record projection, by instance id: the
// fields ListInstances and queries filter on, and the whole record
// encoded (which GetInstance and ListInstances decode, so every field
// round-trips exactly). Times are Unix nanoseconds, absent when zero.
// The search attributes are kept twice: A holds their values by name
// (keywords as strings, ints as int64, floats as doubles, booleans,
// times as int64 microseconds, lists as arrays of strings), for
// ranges, prefixes, existence and grouping; AX holds one key per value
// (attrKey), for equality and IN through the compound index
// {ax, st, ca} (docs/providers.md, "Search").
type instanceDoc struct {
	ID           string   `bson:"_id"`
	Seq          int64    `bson:"s"`
	Status       string   `bson:"st"`
	Name         string   `bson:"n"`
	BusinessKey  string   `bson:"bk"`
	Version      string   `bson:"ver"`
	ParentID     string   `bson:"p"`
	CustomStatus string   `bson:"cs"`
	Created      int64    `bson:"ca,omitempty"`
	Updated      int64    `bson:"ua,omitempty"`
	Completed    int64    `bson:"co,omitempty"`
	A            bson.D   `bson:"a,omitempty"`
	AX           []string `bson:"ax"`
	Record       []byte   `bson:"r"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// newInstanceDoc builds the document of rec, folded at seq; data is rec
// encoded.
func newInstanceDoc(rec *provider.InstanceRecord, seq int64, data []byte) *instanceDoc {
	a, ax := attrFields(rec.Attributes)
	return &instanceDoc{
		ID: rec.InstanceID, Seq: seq, Status: string(rec.Status), Name: rec.Name, BusinessKey: rec.BusinessKey,
		Version: rec.Version, ParentID: rec.ParentID, CustomStatus: rec.CustomStatusText,
		Created: provider.UnixNanos(rec.CreatedAt), Updated: provider.UnixNanos(rec.UpdatedAt), Completed: provider.UnixNanos(rec.CompletedAt),
		A: a, AX: ax, Record: data,
	}
}

// snapshotDoc is an instance's runtime snapshot.
type snapshotDoc struct {
	ID   string `bson:"_id"`
	Seq  int64  `bson:"s"`
	Data []byte `bson:"d"`
}

// humanTaskDoc is a human task record, by task id (unique per store).
type humanTaskDoc struct {
	ID       string   `bson:"_id"`
	Instance string   `bson:"i"`
	Seq      int64    `bson:"s"`
	Status   string   `bson:"st"`
	Assignee string   `bson:"as"`
	Roles    []string `bson:"ro"`
	Record   []byte   `bson:"r"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// taskEventDoc is a human task event, by (instance, Seq, task).
type taskEventDoc struct {
	ID       string `bson:"_id"`
	Instance string `bson:"i"`
	Seq      int64  `bson:"s"`
	Task     string `bson:"t"`
	Record   []byte `bson:"r"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// customDoc is a custom projection's record, by (name, instance).
type customDoc struct {
	ID       string `bson:"_id"`
	Instance string `bson:"i"`
	Name     string `bson:"n"`
	Version  int    `bson:"ver"`
	Seq      int64  `bson:"s"`
	Data     []byte `bson:"d"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// utc puts decoded times in UTC, as the engine's clock gives them
// (MessagePack decodes them in the local zone).
func utc(ts ...*time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			*t = time.Time{}
		} else {
			*t = t.UTC()
		}
	}
}

func customID(name, instanceID string) string { return id(name, instanceID) }

func (d *customDoc) record() provider.CustomRecord {
	return provider.CustomRecord{Name: d.Name, Version: d.Version, InstanceID: d.Instance, Seq: d.Seq, Data: d.Data}
}

// writeForward writes doc (whose _id is docID and whose "s" is seq) unless
// the stored document was folded at or beyond seq, or fails match (the
// extra conditions, such as the owning instance). It reports whether it
// wrote.
func writeForward(ctx context.Context, c *mongo.Collection, docID string, seq int64, doc any, match bson.D) (bool, error) {
	f := append(filter("_id", docID, "s", filter("$lt", seq)), match...)
	res, err := c.ReplaceOne(ctx, f, doc)
	if err != nil {
		return false, translate(err)
	}
	if res.MatchedCount > 0 {
		return true, nil
	}
	return insertIgnoringDuplicate(ctx, c, docID, doc)
}

// SaveProjections implements provider.Steps: task records, task events,
// custom records, the instance record and the snapshot, in that order,
// each a conditional write of its own document.
func (s *Store) SaveProjections(ctx context.Context, p *provider.Projections) error {
	if err := s.fence(ctx, p.Lease); err != nil {
		return fmt.Errorf("projections of %s: %w", p.InstanceID, err)
	}
	for i := range p.Tasks {
		t := p.Tasks[i]
		data, err := history.Encode(&t)
		if err != nil {
			return fmt.Errorf("human task %s: %w", t.TaskID, err)
		}
		doc := &humanTaskDoc{Part: s.part(p.InstanceID), ID: t.TaskID, Instance: p.InstanceID, Seq: t.Seq, Status: string(t.Status), Assignee: t.Assignee, Roles: t.Roles, Record: data}
		if doc.Roles == nil {
			doc.Roles = []string{}
		}
		wrote, err := writeForward(ctx, s.c.humanTasks, t.TaskID, t.Seq, doc, filter("i", p.InstanceID))
		if err != nil {
			return fmt.Errorf("human task %s: %w", t.TaskID, err)
		}
		if !wrote {
			var old humanTaskDoc
			if err := s.c.humanTasks.FindOne(ctx, filter("_id", t.TaskID), options.FindOne().SetProjection(filter("i", 1))).Decode(&old); err != nil {
				return fmt.Errorf("human task %s: %w", t.TaskID, translate(err))
			}
			if old.Instance != p.InstanceID {
				return &provider.TaskIDTakenError{TaskID: t.TaskID, InstanceID: p.InstanceID, Owner: old.Instance}
			}
		}
	}
	for i := range p.TaskEvents {
		e := p.TaskEvents[i]
		data, err := history.Encode(&e)
		if err != nil {
			return fmt.Errorf("human task event %s/%d: %w", e.TaskID, e.Seq, err)
		}
		doc := &taskEventDoc{Part: s.part(p.InstanceID), ID: id(p.InstanceID, pad(e.Seq), e.TaskID), Instance: p.InstanceID, Seq: e.Seq, Task: e.TaskID, Record: data}
		if _, err := insertIgnoringDuplicate(ctx, s.c.taskEvents, doc.ID, doc); err != nil {
			return fmt.Errorf("human task event %s/%d: %w", e.TaskID, e.Seq, err)
		}
	}
	for i := range p.Custom {
		if err := s.saveCustom(ctx, &p.Custom[i]); err != nil {
			return err
		}
	}
	if p.Instance != nil {
		rec := *p.Instance
		rec.LastSeq, rec.Incident = p.Seq, ""
		data, err := history.Encode(&rec)
		if err != nil {
			return fmt.Errorf("instance record of %s: %w", p.InstanceID, err)
		}
		rec.InstanceID = p.InstanceID
		doc := newInstanceDoc(&rec, p.Seq, data)
		doc.Part = s.part(p.InstanceID)
		if _, err := writeForward(ctx, s.c.instances, p.InstanceID, p.Seq, doc, nil); err != nil {
			return fmt.Errorf("instance record of %s: %w", p.InstanceID, err)
		}
	}
	if p.Snapshot != nil {
		doc := &snapshotDoc{ID: p.InstanceID, Seq: p.Seq, Data: p.Snapshot}
		if _, err := writeForward(ctx, s.c.snapshots, p.InstanceID, p.Seq, doc, nil); err != nil {
			return fmt.Errorf("snapshot of %s: %w", p.InstanceID, err)
		}
	}
	return nil
}

// saveCustom writes a custom record when it replaces the stored one,
// conditional on the stored one being unchanged since it was read.
func (s *Store) saveCustom(ctx context.Context, c *provider.CustomRecord) error {
	cid := customID(c.Name, c.InstanceID)
	doc := &customDoc{Part: s.part(c.InstanceID), ID: cid, Instance: c.InstanceID, Name: c.Name, Version: c.Version, Seq: c.Seq, Data: c.Data}
	for range 3 {
		var old customDoc
		err := s.c.custom.FindOne(ctx, filter("_id", cid)).Decode(&old)
		if errors.Is(err, mongo.ErrNoDocuments) {
			ok, err := insertIgnoringDuplicate(ctx, s.c.custom, cid, doc)
			if err != nil || ok {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("custom projection %s of %s: %w", c.Name, c.InstanceID, translate(err))
		}
		oldRec := old.record()
		if !c.Replaces(&oldRec) {
			return nil
		}
		res, err := s.c.custom.ReplaceOne(ctx, filter("_id", cid, "s", old.Seq, "ver", old.Version), doc)
		if err != nil {
			return fmt.Errorf("custom projection %s of %s: %w", c.Name, c.InstanceID, translate(err))
		}
		if res.MatchedCount > 0 {
			return nil
		}
	}
	return fmt.Errorf("custom projection %s of %s: %w: the stored record keeps changing", c.Name, c.InstanceID, provider.ErrConflict)
}

// ResetProjections implements provider.Steps: the snapshot first, then
// the instance record (its incident stays), task records, task events and
// the custom records named.
func (s *Store) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	if _, err := s.c.snapshots.DeleteOne(ctx, filter("_id", p.InstanceID)); err != nil {
		return fmt.Errorf("reset snapshot of %s: %w", p.InstanceID, translate(err))
	}
	steps := []struct {
		c *mongo.Collection
		f bson.D
	}{
		{s.c.instances, filter("_id", p.InstanceID)},
		{s.c.humanTasks, filter("i", p.InstanceID)},
		{s.c.taskEvents, filter("i", p.InstanceID)},
	}
	if len(p.Custom) > 0 {
		steps = append(steps, struct {
			c *mongo.Collection
			f bson.D
		}{s.c.custom, filter("i", p.InstanceID, "n", filter("$in", p.Custom))})
	}
	for _, st := range steps {
		if _, err := st.c.DeleteMany(ctx, st.f); err != nil {
			return fmt.Errorf("reset projections of %s: %w", p.InstanceID, translate(err))
		}
	}
	return nil
}

// GetSnapshot implements provider.Store and provider.Steps.
func (s *Store) GetSnapshot(ctx context.Context, instanceID string) ([]byte, int64, error) {
	var d snapshotDoc
	err := s.c.snapshots.FindOne(ctx, filter("_id", instanceID)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, 0, fmt.Errorf("snapshot of %s: %w", instanceID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot of %s: %w", instanceID, translate(err))
	}
	if d.Data == nil {
		d.Data = []byte{}
	}
	return d.Data, d.Seq, nil
}

func (d *instanceDoc) record(incident string) (provider.InstanceRecord, error) {
	var rec provider.InstanceRecord
	if err := history.Decode(d.Record, &rec); err != nil {
		return rec, fmt.Errorf("instance record of %s: %w", d.ID, err)
	}
	rec.LastSeq, rec.Incident = d.Seq, incident
	utc(&rec.CreatedAt, &rec.UpdatedAt, &rec.CompletedAt)
	for name, v := range rec.Attributes {
		if v.Type == query.Time {
			utc(&v.Time)
			rec.Attributes[name] = v
		}
	}
	return rec, nil
}

// GetInstance implements provider.Store.
func (s *Store) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceRecord, error) {
	var d instanceDoc
	err := s.c.instances.FindOne(ctx, filter("_id", instanceID)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("instance %s: %w", instanceID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("instance %s: %w", instanceID, translate(err))
	}
	inc, err := s.incidentsOf(ctx, []string{instanceID})
	if err != nil {
		return nil, err
	}
	rec, err := d.record(inc[instanceID])
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// ListInstances implements provider.QueryStore.
func (s *Store) ListInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	f, err := instanceFilter(p)
	if err != nil {
		return nil, err
	}
	cur, err := s.c.instances.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetLimit(int64(limitOf(p.Limit))).SetProjection(filter("a", 0, "ax", 0)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []instanceDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	ids := make([]string, len(docs))
	for i := range docs {
		ids[i] = docs[i].ID
	}
	inc, err := s.incidentsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]provider.InstanceRecord, 0, len(docs))
	for i := range docs {
		rec, err := docs[i].record(inc[docs[i].ID])
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (d *humanTaskDoc) record() (provider.TaskRecord, error) {
	var t provider.TaskRecord
	if err := history.Decode(d.Record, &t); err != nil {
		return t, fmt.Errorf("human task %s: %w", d.ID, err)
	}
	utc(&t.Due, &t.CreatedAt, &t.UpdatedAt, &t.CompletedAt)
	return t, nil
}

// GetTask implements provider.QueryStore.
func (s *Store) GetTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	var d humanTaskDoc
	err := s.c.humanTasks.FindOne(ctx, filter("_id", taskID)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("task %s: %w", taskID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", taskID, translate(err))
	}
	t, err := d.record()
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTasks implements provider.QueryStore.
func (s *Store) ListTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	f := filter("_id", filter("$gt", p.AfterID))
	add := func(k string, v any) { f = append(f, bson.E{Key: k, Value: v}) }
	if p.InstanceID != "" {
		add("i", p.InstanceID)
	}
	if p.Status != "" {
		add("st", string(p.Status))
	}
	if p.Assignee != "" {
		add("as", p.Assignee)
	}
	if p.Unassigned {
		add("as", "")
	}
	if len(p.Roles) > 0 {
		add("ro", filter("$in", p.Roles))
	}
	cur, err := s.c.humanTasks.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetLimit(int64(limitOf(p.Limit))))
	if err != nil {
		return nil, translate(err)
	}
	var docs []humanTaskDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.TaskRecord, 0, len(docs))
	for i := range docs {
		t, err := docs[i].record()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// ListTaskEvents implements provider.QueryStore.
func (s *Store) ListTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	f := filter("i", p.InstanceID)
	if p.TaskID != "" {
		f = append(f, bson.E{Key: "t", Value: p.TaskID})
	}
	cur, err := s.c.taskEvents.Find(ctx, f, options.Find().SetSort(filter("s", 1, "t", 1)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []taskEventDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.TaskEventRecord, 0, len(docs))
	for _, d := range docs {
		var e provider.TaskEventRecord
		if err := history.Decode(d.Record, &e); err != nil {
			return nil, fmt.Errorf("human task event %s/%d: %w", d.Task, d.Seq, err)
		}
		utc(&e.At)
		out = append(out, e)
	}
	return out, nil
}

// GetCustomProjection implements provider.QueryStore.
func (s *Store) GetCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	var d customDoc
	err := s.c.custom.FindOne(ctx, filter("_id", customID(name, instanceID))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("custom projection %s of %s: %w", name, instanceID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("custom projection %s of %s: %w", name, instanceID, translate(err))
	}
	r := d.record()
	return &r, nil
}
