package mongo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// taskDoc is an activity task, by task id. It stays, marked done, when the
// task completes, is cancelled or dead-lettered, so that its id is
// remembered until the instance is purged.
type taskDoc struct {
	ID        string `bson:"_id"`
	Instance  string `bson:"i"`
	Execution string `bson:"x"`
	Queue     string `bson:"q"`
	// ClaimableAt is VisibleAt, or the end of a live claim; never once
	// done.
	ClaimableAt int64 `bson:"ca"`
	Order       int64 `bson:"o"`
	// Claims counts the claims so far: claim n is won by inserting the
	// claim document (task, n).
	Claims int64  `bson:"n"`
	Token  string `bson:"tok"`
	Owner  string `bson:"own"`
	Until  int64  `bson:"u"`
	Done   bool   `bson:"d"`
	// Task is the provider.MarshalActivityTask encoding.
	Task []byte `bson:"t"`
}

// claimDoc marks that claim n of a task was won, until Until: a claim
// document whose claimer died before it wrote the claim into the task is
// taken over once Until has passed.
type claimDoc struct {
	ID    string `bson:"_id"`
	Task  string `bson:"t"`
	Until int64  `bson:"u"`
}

func (d *taskDoc) task() (provider.ActivityTask, error) {
	t, err := provider.UnmarshalActivityTask(d.Task)
	if err != nil {
		return t, fmt.Errorf("activity task %s: %w", d.ID, err)
	}
	return t, nil
}

// EnqueueActivities implements provider.Steps: one insert per task,
// idempotent by task id, also after the task is done.
func (s *Store) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	if err := s.fence(ctx, p.Lease); err != nil {
		return err
	}
	wrote := false
	for _, t := range p.Tasks {
		t.SetDefaults(p.Now)
		data, err := provider.MarshalActivityTask(&t)
		if err != nil {
			return fmt.Errorf("enqueue activity task %s: %w", t.ID, err)
		}
		ok, err := insertIgnoringDuplicate(ctx, s.c.tasks, t.ID, &taskDoc{
			ID: t.ID, Instance: t.InstanceID, Execution: t.ExecutionID, Queue: t.Queue,
			ClaimableAt: provider.UnixNanos(t.VisibleAt), Order: nextOrder(p.Now), Task: data,
		})
		if err != nil {
			return fmt.Errorf("enqueue activity task %s: %w", t.ID, err)
		}
		wrote = wrote || ok
	}
	if wrote {
		s.notify(provider.QueueActivity)
	}
	return nil
}

// ClaimActivity implements provider.Store. The oldest claimable tasks are
// read, and the first whose next claim document this call inserts is
// won; only then is the task's document updated with the claim.
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	for range 4 {
		cur, err := s.c.tasks.Find(ctx, filter("q", filter("$in", queuesOf(p.Queues)), "d", false, "ca", filter("$lte", provider.UnixNanos(p.Now))),
			options.Find().SetSort(filter("ca", 1, "o", 1)).SetLimit(16))
		if err != nil {
			return nil, translate(err)
		}
		var docs []taskDoc
		if err := cur.All(ctx, &docs); err != nil {
			return nil, translate(err)
		}
		if len(docs) == 0 {
			return nil, nil
		}
		// The oldest first; a claimer that loses it tries the others in
		// a random order, so that the claimers that lost it do not all
		// race again for the next one.
		order := make([]int, 1, len(docs))
		for _, i := range rand.Perm(len(docs)) {
			if i != 0 {
				order = append(order, i)
			}
		}
		for _, i := range order {
			l, err := s.tryClaim(ctx, &docs[i], p)
			if l != nil || err != nil {
				return l, err
			}
		}
	}
	return nil, nil
}

func (s *Store) tryClaim(ctx context.Context, d *taskDoc, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	n := d.Claims + 1
	cid := id(d.ID, pad(n))
	ok, err := insertIgnoringDuplicate(ctx, s.c.claims, cid, &claimDoc{ID: cid, Task: d.ID, Until: provider.UnixNanos(p.LockedUntil)})
	if err != nil {
		return nil, err
	}
	if !ok {
		// Won by another claimer, unless that claimer died before it
		// wrote the claim into the task: then its claim document has
		// expired and goes.
		res, err := s.c.claims.DeleteOne(ctx, filter("_id", cid, "u", filter("$lte", provider.UnixNanos(p.Now))))
		if err != nil {
			return nil, fmt.Errorf("claim activity task %s: %w", d.ID, translate(err))
		}
		if res.DeletedCount == 0 {
			return nil, nil
		}
		if ok, err = insertIgnoringDuplicate(ctx, s.c.claims, cid, &claimDoc{ID: cid, Task: d.ID, Until: provider.UnixNanos(p.LockedUntil)}); err != nil || !ok {
			return nil, err
		}
	}
	token := newToken()
	res, err := s.c.tasks.UpdateOne(ctx, filter("_id", d.ID, "n", d.Claims, "d", false),
		set("n", n, "tok", token, "own", p.Owner, "u", provider.UnixNanos(p.LockedUntil), "ca", provider.UnixNanos(p.LockedUntil)))
	if err != nil {
		return nil, fmt.Errorf("claim activity task %s: %w", d.ID, translate(err))
	}
	if res.MatchedCount == 0 {
		// Completed or cancelled since it was read.
		return nil, nil
	}
	t, err := d.task()
	if err != nil {
		return nil, err
	}
	l := &provider.ActivityLease{Task: t, Token: token, Owner: p.Owner, LockedUntil: p.LockedUntil}
	if d.Token != "" {
		l.Expired = &provider.ExpiredClaim{Owner: d.Owner, LockedUntil: provider.FromUnixNanos(d.Until)}
	}
	return l, nil
}

// claimed returns a task whose claim token is token, else ErrLeaseLost.
func (s *Store) claimed(ctx context.Context, taskID, token string) (*taskDoc, error) {
	var d taskDoc
	err := s.c.tasks.FindOne(ctx, filter("_id", taskID, "tok", token, "d", false)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && token == "") {
		return nil, fmt.Errorf("activity task %s: %w", taskID, provider.ErrLeaseLost)
	}
	if err != nil {
		return nil, fmt.Errorf("activity task %s: %w", taskID, translate(err))
	}
	return &d, nil
}

// HeartbeatActivity implements provider.Store.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	if p.Token == "" {
		return fmt.Errorf("activity task %s: %w", p.TaskID, provider.ErrLeaseLost)
	}
	return updateHeld(ctx, s.c.tasks, filter("_id", p.TaskID, "tok", p.Token, "d", false),
		set("u", provider.UnixNanos(p.LockedUntil), "ca", provider.UnixNanos(p.LockedUntil)), "activity task "+p.TaskID)
}

// finishTask marks a claimed task done (conditional on its token) and
// drops its claim documents.
func (s *Store) finishTask(ctx context.Context, taskID, token string) error {
	if err := updateHeld(ctx, s.c.tasks, filter("_id", taskID, "tok", token, "d", false),
		set("d", true, "tok", "", "own", "", "u", int64(0), "ca", never), "activity task "+taskID); err != nil {
		return err
	}
	return s.dropClaims(ctx, taskID)
}

// dropClaims deletes a task's claim documents; the task's claim count
// stays, so a later claim never reuses one. Outside a transaction a
// failure only leaves documents behind (logged); inside one it aborts the
// transaction, so it is returned.
func (s *Store) dropClaims(ctx context.Context, taskID string) error {
	if _, err := s.c.claims.DeleteMany(ctx, filter("t", taskID)); err != nil {
		if mongo.SessionFromContext(ctx) != nil {
			return fmt.Errorf("activity task %s: claims: %w", taskID, translate(err))
		}
		s.log.Warn("chronicle mongo: clean up activity claims", "task", taskID, "err", err)
	}
	return nil
}

// CompleteActivity implements provider.Store: the result first, then the
// task marked done (conditional on the token).
func (s *Store) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	if _, err := s.claimed(ctx, p.TaskID, p.Token); err != nil {
		return err
	}
	if _, err := s.enqueueMessages(ctx, []provider.Message{p.Result}, p.Now); err != nil {
		return err
	}
	if err := s.finishTask(ctx, p.TaskID, p.Token); err != nil {
		return err
	}
	s.notify(provider.QueueOrchestration)
	return nil
}

// RetryActivity implements provider.Store (one write of the task's
// document).
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	d, err := s.claimed(ctx, p.TaskID, p.Token)
	if err != nil {
		return err
	}
	t, err := d.task()
	if err != nil {
		return err
	}
	t.Attempt++
	t.VisibleAt, t.LastError = p.VisibleAt, p.Error
	data, err := provider.MarshalActivityTask(&t)
	if err != nil {
		return err
	}
	if err := updateHeld(ctx, s.c.tasks, filter("_id", p.TaskID, "tok", p.Token, "d", false),
		set("t", data, "tok", "", "own", "", "u", int64(0), "ca", provider.UnixNanos(p.VisibleAt)), "activity task "+p.TaskID); err != nil {
		return err
	}
	s.notify(provider.QueueActivity)
	return nil
}

// DeadLetterActivity implements provider.Store: the letter and the
// incident first, the task marked done last.
func (s *Store) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
	d, err := s.claimed(ctx, p.TaskID, p.Token)
	if err != nil {
		return err
	}
	l := p.Letter
	if l.Activity == nil {
		t, err := d.task()
		if err != nil {
			return err
		}
		l.Activity = &t
	}
	if err := s.deadLetterWrites(ctx, d.Instance, []provider.DeadLetter{l}); err != nil {
		return err
	}
	return s.finishTask(ctx, p.TaskID, p.Token)
}

// CancelActivities implements provider.Steps: the tasks are chosen when
// the fence is checked and marked done by id, one at a time.
func (s *Store) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	f := filter("i", p.InstanceID, "d", false, "x", p.ExecutionID)
	if p.OtherThan != "" {
		f = filter("i", p.InstanceID, "d", false, "x", filter("$ne", p.OtherThan))
	}
	cur, err := s.c.tasks.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetProjection(filter("_id", 1)))
	if err != nil {
		return translate(err)
	}
	var docs []taskDoc
	if err := cur.All(ctx, &docs); err != nil {
		return translate(err)
	}
	if s.afterFirstRead != nil {
		s.afterFirstRead()
	}
	// The fence comes after the tasks are chosen: when it holds, the
	// lease was held when they were read, so no successor's task is
	// among them.
	if err := s.fence(ctx, p.Lease); err != nil {
		return err
	}
	for _, d := range docs {
		if _, err := s.c.tasks.UpdateOne(ctx, filter("_id", d.ID, "d", false), set("d", true, "tok", "", "own", "", "u", int64(0), "ca", never)); err != nil {
			return fmt.Errorf("cancel activity task %s: %w", d.ID, translate(err))
		}
		if err := s.dropClaims(ctx, d.ID); err != nil {
			return err
		}
	}
	return nil
}

// ListQueuedActivities implements provider.InspectStore.
func (s *Store) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	cur, err := s.c.tasks.Find(ctx, filter("i", p.InstanceID, "d", false), options.Find().SetSort(filter("o", 1, "_id", 1)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []taskDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.QueuedActivity, 0, len(docs))
	for i := range docs {
		t, err := docs[i].task()
		if err != nil {
			return nil, err
		}
		q := provider.QueuedActivity{Task: t}
		if docs[i].Token != "" {
			q.Owner, q.LockedUntil = docs[i].Owner, provider.FromUnixNanos(docs[i].Until)
		}
		out = append(out, q)
	}
	return out, nil
}

// requeueTask puts a dead-lettered task back, claimable at now, keeping
// its claim count.
func (s *Store) requeueTask(ctx context.Context, t provider.ActivityTask, now time.Time) error {
	data, err := provider.MarshalActivityTask(&t)
	if err != nil {
		return err
	}
	_, err = s.c.tasks.UpdateOne(ctx, filter("_id", t.ID),
		bson.D{
			{Key: "$set", Value: filter("i", t.InstanceID, "x", t.ExecutionID, "q", t.Queue, "ca", provider.UnixNanos(now), "o", nextOrder(now),
				"tok", "", "own", "", "u", int64(0), "d", false, "t", data)},
			{Key: "$setOnInsert", Value: filter("n", int64(0))},
		}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("requeue activity task %s: %w", t.ID, translate(err))
	}
	s.notify(provider.QueueActivity)
	return nil
}
