package mongo

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// SetAfterFirstRead installs the hook CancelActivities runs after its
// first read.
func SetAfterFirstRead(s *Store, hook func()) { s.afterFirstRead = hook }

// SetBeforeClaimWrite installs the hook ClaimActivity runs before it
// writes a claim of a task it read as claimable.
func SetBeforeClaimWrite(s *Store, hook func(taskID string)) { s.beforeClaimWrite = hook }

// SetBeforeSettleWrite installs the hook CompleteActivity, RetryActivity
// and DeadLetterActivity run after they checked the claim and before
// their first write.
func SetBeforeSettleWrite(s *Store, hook func(taskID string)) { s.beforeSettleWrite = hook }

// SetAfterSettleStep installs the hook the settlements of an activity
// claim run after their first write; its error ends the call there.
func SetAfterSettleStep(s *Store, hook func(taskID string) error) { s.afterSettleStep = hook }

// ClaimKey claims an idempotency key for the event at seq of an append
// whose first Seq is first, as AppendHistory does before it writes the
// events: what a round that crashed between the two writes leaves.
func ClaimKey(ctx context.Context, s *Store, instanceID string, k history.Key, seq, first int64) error {
	return s.claimKey(ctx, instanceID, k, seq, first)
}

// InsertClaim writes claim step k of a task, valid until until (Unix
// nanoseconds), as a claimer that died before it wrote the claim into the
// task's hint leaves it.
func InsertClaim(ctx context.Context, s *Store, taskID string, k, until int64) error {
	var d taskDoc
	if err := s.c.tasks.FindOne(ctx, filter("_id", taskID)).Decode(&d); err != nil {
		return err
	}
	_, err := s.c.claims.InsertOne(ctx, &stepDoc{ID: stepID(taskID, k), Task: taskID, K: k, Kind: stepClaim, Token: newToken(), Owner: "dead", Until: until, Activity: d.Task})
	return err
}

// LegacyClaims puts a store's activity tasks back as schema 2 left them:
// no steps; each task's claim count n, with a claim document (task, i)
// for i up to n; and the task in claimed, held by owner with token until
// until (Unix nanoseconds), when token is not empty. The schema version
// is set to 2.
func LegacyClaims(ctx context.Context, s *Store, taskID string, n int64, token, owner string, until int64) error {
	if _, err := s.c.claims.DeleteMany(ctx, filter("t", taskID)); err != nil {
		return err
	}
	for i := int64(1); i <= n; i++ {
		if _, err := s.c.claims.InsertOne(ctx, filter("_id", id(taskID, pad(i)), "t", taskID, "u", until)); err != nil {
			return err
		}
	}
	upd := set("n", n)
	if token != "" {
		upd = set("n", n, "tok", token, "own", owner, "u", until, "ca", until)
	}
	if _, err := s.c.tasks.UpdateOne(ctx, filter("_id", taskID), upd); err != nil {
		return err
	}
	_, err := s.c.meta.UpdateOne(ctx, filter("_id", "version"), set("v", 2))
	return err
}

// SetBeforeWrite installs the hook some multi-record steps run before a
// record write (see Store.beforeWrite); an error stops the step there.
func SetBeforeWrite(s *Store, hook func(what string) error) { s.beforeWrite = hook }

// InstanceFilter is the filter document ListInstances sends for p.
func InstanceFilter(p *provider.ListInstancesParams) (bson.D, error) { return instanceFilter(p) }

// CountPipeline is the aggregation CountInstances sends for p to
// MongoDB.
func CountPipeline(p *provider.CountInstancesParams) (bson.A, error) {
	pl, _, err := countPipeline(p, true)
	return pl, err
}

// IsFerretDB reports whether the store's server is FerretDB.
func IsFerretDB(ctx context.Context, s *Store) (bool, error) { return s.isFerretDB(ctx) }

// AsBeforeSearch makes the store look as a store of schema 3 left it: the
// search fields of every instance document removed, the version 3.
func AsBeforeSearch(ctx context.Context, s *Store) error {
	if _, err := s.c.instances.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: filter("ver", "", "p", "", "cs", "", "co", "", "a", "", "ax", "")}}); err != nil {
		return err
	}
	_, err := s.c.meta.UpdateOne(ctx, filter("_id", "version"), set("v", 3))
	return err
}

// AsBeforeFlow makes the store look as a store of schema 4 left it: the
// order, name, priority and concurrency key fields of messages and
// activity tasks removed, the version 4.
func AsBeforeFlow(ctx context.Context, s *Store) error {
	if _, err := s.c.messages.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: filter("po", "", "pr", "")}}); err != nil {
		return err
	}
	if _, err := s.c.tasks.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: filter("po", "", "an", "", "pr", "", "ck", "")}}); err != nil {
		return err
	}
	_, err := s.c.meta.UpdateOne(ctx, filter("_id", "version"), set("v", 4))
	return err
}

// AsBeforePartitions makes the store look as a store of schema 5 left
// it: no settings document, no field "pt" on any document, the version 5.
func AsBeforePartitions(ctx context.Context, s *Store) error {
	for _, c := range []*mongo.Collection{s.c.instances, s.c.history, s.c.messages, s.c.tasks, s.c.letters, s.c.humanTasks, s.c.taskEvents, s.c.custom} {
		if _, err := c.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: filter("pt", "")}}); err != nil {
			return err
		}
	}
	if _, err := s.c.meta.DeleteOne(ctx, filter("_id", settingsID)); err != nil {
		return err
	}
	_, err := s.c.meta.UpdateOne(ctx, filter("_id", "version"), set("v", 5))
	return err
}
