package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// migration is one versioned step of the schema.
type migration struct {
	version int
	name    string
	// apply applies the step to a database at version from.
	apply func(ctx context.Context, s *Store, from int) error
}

// migrations are applied in order; each is idempotent (creating an index
// that exists is a no-op), so a migration interrupted half-way is simply
// run again.
var migrations = []migration{
	{1, "collections and indexes", ignoreFrom(migrateIndexes)},
	{2, "signed checkpoints", ignoreFrom(migrateCheckpoints)},
	{3, "activity task steps", ignoreFrom(migrateActivitySteps)},
	{4, "search fields of instance records", ignoreFrom(migrateSearch)},
	{5, "priority and flow control", ignoreFrom(migrateFlow)},
	{partitionsMigration, "partitions", migratePartitions},
}

// partitionsMigration is the version that records the partition count.
const partitionsMigration = 6

// ignoreFrom adapts a step that does not depend on the version it
// starts from.
func ignoreFrom(f func(ctx context.Context, s *Store) error) func(context.Context, *Store, int) error {
	return func(ctx context.Context, s *Store, _ int) error { return f(ctx, s) }
}

// migratePartitions records the partition count in the settings
// document: Options.Partitions for a new database (from 0), 1 for one
// created before partitions, whose documents have no "pt" and are all
// of partition 0. A store of several partitions gets the queue indexes
// led by "pt": messages by (pt, po, o) and (pt, v, o), activity tasks by
// (pt, q, d, po, o) and (pt, q, d, ca, o). A store of one partition
// keeps the indexes of before, which its queries (naming no partition)
// use.
func migratePartitions(ctx context.Context, s *Store, from int) error {
	p := 1
	if from == 0 {
		p = s.createPartitions
	}
	// A count recorded by an earlier run of this step stays.
	if _, err := s.c.meta.UpdateOne(ctx, filter("_id", settingsID), bson.D{{Key: "$setOnInsert", Value: filter("partitions", p)}},
		options.UpdateOne().SetUpsert(true)); err != nil {
		return fmt.Errorf("record the partition count: %w", translate(err))
	}
	if err := s.readPartitions(ctx, partitionsMigration); err != nil {
		return err
	}
	if s.partitions <= 1 {
		return nil
	}
	for _, step := range []struct {
		c    *mongo.Collection
		keys bson.D
	}{
		{s.c.messages, bson.D{{Key: "pt", Value: 1}, {Key: "po", Value: 1}, {Key: "o", Value: 1}}},
		{s.c.messages, bson.D{{Key: "pt", Value: 1}, {Key: "v", Value: 1}, {Key: "o", Value: 1}}},
		{s.c.tasks, bson.D{{Key: "pt", Value: 1}, {Key: "q", Value: 1}, {Key: "d", Value: 1}, {Key: "po", Value: 1}, {Key: "o", Value: 1}}},
		{s.c.tasks, bson.D{{Key: "pt", Value: 1}, {Key: "q", Value: 1}, {Key: "d", Value: 1}, {Key: "ca", Value: 1}, {Key: "o", Value: 1}}},
	} {
		if _, err := step.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: step.keys}); err != nil {
			return fmt.Errorf("index on %s: %w", step.c.Name(), translate(err))
		}
	}
	return nil
}

// migrateFlow adds what priority and flow control need: the order field
// "po" of messages (their VisibleAt, priority 0) and of activity tasks
// (their claimable time), with the name, priority and concurrency key
// of each task from its encoding, to documents written before them, each
// only while it has none; the indexes that claims and dequeues sort by;
// and the indexes of the flow collections (slot sets, activity slots,
// rate tokens).
func migrateFlow(ctx context.Context, s *Store) error {
	for {
		cur, err := s.c.messages.Find(ctx, filter("po", filter("$exists", false)), options.Find().SetSort(filter("_id", 1)).SetLimit(500).SetProjection(filter("v", 1)))
		if err != nil {
			return translate(err)
		}
		var docs []messageDoc
		if err := cur.All(ctx, &docs); err != nil {
			return translate(err)
		}
		if len(docs) == 0 {
			break
		}
		for _, d := range docs {
			if _, err := s.c.messages.UpdateOne(ctx, filter("_id", d.ID, "po", filter("$exists", false)), set("po", d.Visible)); err != nil {
				return fmt.Errorf("order of message %s: %w", d.ID, translate(err))
			}
		}
	}
	for {
		cur, err := s.c.tasks.Find(ctx, filter("po", filter("$exists", false)), options.Find().SetSort(filter("_id", 1)).SetLimit(500))
		if err != nil {
			return translate(err)
		}
		var docs []taskDoc
		if err := cur.All(ctx, &docs); err != nil {
			return translate(err)
		}
		if len(docs) == 0 {
			break
		}
		for _, d := range docs {
			t, err := d.task()
			if err != nil {
				return err
			}
			// A claimer that rewrote the hint meanwhile wrote "po" too.
			if _, err := s.c.tasks.UpdateOne(ctx, filter("_id", d.ID, "po", filter("$exists", false)),
				set("po", orderAt(d.ClaimableAt, t.Priority), "an", t.Name, "pr", t.Priority, "ck", t.ConcurrencyKey)); err != nil {
				return fmt.Errorf("order of activity task %s: %w", d.ID, translate(err))
			}
		}
	}
	for _, step := range []struct {
		c    *mongo.Collection
		keys bson.D
	}{
		{s.c.messages, bson.D{{Key: "po", Value: 1}, {Key: "o", Value: 1}}},
		{s.c.tasks, bson.D{{Key: "q", Value: 1}, {Key: "d", Value: 1}, {Key: "po", Value: 1}, {Key: "o", Value: 1}}},
		{s.c.slotSets, bson.D{{Key: "k", Value: 1}, {Key: "v", Value: -1}}},
		{s.c.activitySlots, bson.D{{Key: "k", Value: 1}, {Key: "s", Value: 1}, {Key: "n", Value: -1}}},
		{s.c.rateTokens, bson.D{{Key: "k", Value: 1}, {Key: "w", Value: 1}}},
	} {
		if _, err := step.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: step.keys}); err != nil {
			return fmt.Errorf("index on %s: %w", step.c.Name(), translate(err))
		}
	}
	return nil
}

// migrateSearch adds the search fields of instance documents (the
// built-ins queries need, the attributes in "a" and "ax") to documents
// written before them, from their encoded record, each only while it is
// unchanged, and creates the indexes of queries: {ax, st, ca} (equality on
// attributes, a status, a created_at range), and on MongoDB a wildcard
// index on "a" (ranges and prefixes of attributes), which FerretDB 1.x
// cannot create (it uses no secondary index at all; see docs/providers.md).
func migrateSearch(ctx context.Context, s *Store) error {
	for {
		cur, err := s.c.instances.Find(ctx, filter("ax", filter("$exists", false)), options.Find().SetSort(filter("_id", 1)).SetLimit(500))
		if err != nil {
			return translate(err)
		}
		var docs []instanceDoc
		if err := cur.All(ctx, &docs); err != nil {
			return translate(err)
		}
		if len(docs) == 0 {
			break
		}
		for _, d := range docs {
			rec, err := d.record("")
			if err != nil {
				return err
			}
			rec.InstanceID = d.ID
			n := newInstanceDoc(&rec, d.Seq, d.Record)
			upd := filter("$set", filter("ver", n.Version, "p", n.ParentID, "cs", n.CustomStatus, "ax", n.AX))
			if n.A != nil {
				upd[0].Value = append(upd[0].Value.(bson.D), bson.E{Key: "a", Value: n.A})
			}
			if n.Completed != 0 {
				upd[0].Value = append(upd[0].Value.(bson.D), bson.E{Key: "co", Value: n.Completed})
			}
			if _, err := s.c.instances.UpdateOne(ctx, filter("_id", d.ID, "s", d.Seq, "ax", filter("$exists", false)), upd); err != nil {
				return fmt.Errorf("search fields of instance %s: %w", d.ID, translate(err))
			}
		}
		// A document changed meanwhile was rewritten whole, with its
		// search fields; the next page finds the rest.
	}
	if _, err := s.c.instances.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ax", Value: 1}, {Key: "st", Value: 1}, {Key: "ca", Value: 1}}}); err != nil {
		return fmt.Errorf("index on %s: %w", s.c.instances.Name(), translate(err))
	}
	ferret, err := s.isFerretDB(ctx)
	if err != nil {
		return err
	}
	if !ferret {
		if _, err := s.c.instances.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a.$**", Value: 1}}}); err != nil {
			return fmt.Errorf("wildcard index on %s (MongoDB 4.2 or later): %w", s.c.instances.Name(), translate(err))
		}
	}
	return nil
}

// isFerretDB reports whether the server is FerretDB (its buildInfo names
// its version).
func (s *Store) isFerretDB(ctx context.Context) (bool, error) {
	var info bson.M
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return false, fmt.Errorf("buildInfo: %w", translate(err))
	}
	_, ok := info["ferretdbVersion"]
	return ok, nil
}

// migrateActivitySteps turns the claim documents of schema 2 into task
// steps (stepDoc): the old documents go (they only marked claims won,
// and a finished task's were deleted already), and each task claimed now
// gets its claim as its first step, so that its owner's token still
// settles it. Run again, it finds nothing left to delete and the steps
// written.
func migrateActivitySteps(ctx context.Context, s *Store) error {
	if _, err := s.c.claims.DeleteMany(ctx, filter("s", filter("$exists", false))); err != nil {
		return fmt.Errorf("old activity claims: %w", translate(err))
	}
	if _, err := s.c.claims.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "t", Value: 1}, {Key: "k", Value: -1}}}); err != nil {
		return fmt.Errorf("index on %s: %w", s.c.claims.Name(), translate(err))
	}
	cur, err := s.c.tasks.Find(ctx, filter("d", false, "tok", filter("$ne", "")))
	if err != nil {
		return translate(err)
	}
	var claimed []taskDoc
	if err := cur.All(ctx, &claimed); err != nil {
		return translate(err)
	}
	for _, d := range claimed {
		st := &stepDoc{ID: stepID(d.ID, 1), Task: d.ID, K: 1, Kind: stepClaim, Token: d.Token, Owner: d.Owner, Until: d.Until, Activity: d.Task}
		if _, err := insertIgnoringDuplicate(ctx, s.c.claims, st.ID, st); err != nil {
			return fmt.Errorf("claim of activity task %s: %w", d.ID, err)
		}
	}
	return nil
}

func migrateCheckpoints(ctx context.Context, s *Store) error {
	for _, keys := range []bson.D{{{Key: "c", Value: 1}, {Key: "i", Value: 1}}, {{Key: "i", Value: 1}, {Key: "n", Value: 1}}} {
		if _, err := s.c.checkpointLeaves.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys}); err != nil {
			return fmt.Errorf("index on %s: %w", s.c.checkpointLeaves.Name(), translate(err))
		}
	}
	if _, err := s.c.checkpoints.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}}); err != nil {
		return fmt.Errorf("index on %s: %w", s.c.checkpoints.Name(), translate(err))
	}
	return nil
}

// LatestSchemaVersion is the schema version this build writes.
func LatestSchemaVersion() int { return migrations[len(migrations)-1].version }

func migrateIndexes(ctx context.Context, s *Store) error {
	idx := func(c *mongo.Collection, keys ...string) error {
		d := bson.D{}
		for _, k := range keys {
			if k[0] == '-' {
				d = append(d, bson.E{Key: k[1:], Value: -1})
			} else {
				d = append(d, bson.E{Key: k, Value: 1})
			}
		}
		_, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: d})
		return err
	}
	for _, step := range []struct {
		c    *mongo.Collection
		keys []string
	}{
		{s.c.messages, []string{"i", "o"}},
		{s.c.messages, []string{"v", "o"}},
		{s.c.leases, []string{"i", "-e"}},
		{s.c.history, []string{"i", "f"}},
		{s.c.keys, []string{"i"}},
		{s.c.tasks, []string{"q", "d", "ca", "o"}},
		{s.c.tasks, []string{"i", "o"}},
		{s.c.claims, []string{"t"}},
		{s.c.letters, []string{"i"}},
		{s.c.letters, []string{"st"}},
		{s.c.instances, []string{"st"}},
		{s.c.instances, []string{"n"}},
		{s.c.instances, []string{"bk"}},
		{s.c.humanTasks, []string{"i"}},
		{s.c.humanTasks, []string{"as"}},
		{s.c.taskEvents, []string{"i", "s"}},
		{s.c.custom, []string{"i"}},
		{s.c.tombstones, []string{"i", "o"}},
	} {
		if err := idx(step.c, step.keys...); err != nil {
			return fmt.Errorf("index %v on %s: %w", step.keys, step.c.Name(), translate(err))
		}
	}
	return nil
}

// SchemaVersion returns the schema version of the store's database (0
// when it was never migrated).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var doc struct {
		V int `bson:"v"`
	}
	err := s.c.meta.FindOne(ctx, filter("_id", "version")).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mongo: schema version: %w", translate(err))
	}
	return doc.V, nil
}

// migrateLockFor bounds how long a migration holds its lock when its
// process dies.
const migrateLockFor = 5 * time.Minute

// Migrate brings the database to [LatestSchemaVersion]. It runs the
// missing migrations under a lock document, so that of several processes
// starting at once one migrates and the others wait for it.
func (s *Store) Migrate(ctx context.Context) error {
	token := newToken()
	for {
		now := time.Now()
		_, err := s.c.meta.InsertOne(ctx, bson.D{{Key: "_id", Value: "migrate-lock"}, {Key: "tok", Value: token}, {Key: "u", Value: provider.UnixNanos(now.Add(migrateLockFor))}})
		if err == nil {
			break
		}
		if !mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("mongo: migration lock: %w", translate(err))
		}
		// Take over a lock whose holder died.
		if _, err := s.c.meta.DeleteOne(ctx, bson.D{{Key: "_id", Value: "migrate-lock"}, {Key: "u", Value: bson.D{{Key: "$lte", Value: provider.UnixNanos(now)}}}}); err != nil {
			return fmt.Errorf("mongo: migration lock: %w", translate(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer func() {
		_, _ = s.c.meta.DeleteOne(context.WithoutCancel(ctx), filter("_id", "migrate-lock", "tok", token))
	}()
	current, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		if err := m.apply(ctx, s, current); err != nil {
			return fmt.Errorf("mongo: migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := s.c.meta.UpdateOne(ctx, filter("_id", "version"), set("v", m.version), options.UpdateOne().SetUpsert(true)); err != nil {
			return fmt.Errorf("mongo: migration %d (%s): record the version: %w", m.version, m.name, translate(err))
		}
		s.log.Info("chronicle mongo migration applied", "database", s.db.Name(), "version", m.version, "name", m.name)
	}
	return nil
}

// DropDatabase drops the store's database with everything in it: what a
// benchmark or a test that made the database does when it is done.
func (s *Store) DropDatabase(ctx context.Context) error {
	if err := s.db.Drop(ctx); err != nil {
		return fmt.Errorf("mongo: drop database %s: %w", s.db.Name(), translate(err))
	}
	return nil
}
