package mongo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// taskDoc is an activity task, by task id. It stays, marked done, when the
// task completes, is cancelled or dead-lettered, so that its id is
// remembered until the instance is purged.
//
// Its claim fields (ClaimableAt, Token, Owner, Until, Done) and Task are
// a hint for finding claimable tasks: the task's steps (stepDoc) are its
// state. A hint may be stale (a writer died before it wrote it) or
// overwritten by a concurrent writer (the test server replaces a whole
// document on an update), so every reader that acts on one checks the
// task's newest step first, and a claimer that finds a stale hint
// rewrites it.
type taskDoc struct {
	ID        string `bson:"_id"`
	Instance  string `bson:"i"`
	Execution string `bson:"x"`
	Queue     string `bson:"q"`
	// ClaimableAt is VisibleAt, or the end of a live claim; never once
	// done.
	ClaimableAt int64 `bson:"ca"`
	// OrderAt is provider.OrderAt(ClaimableAt, the task's priority), the
	// time claims order by (schema 5); written with ClaimableAt.
	OrderAt int64  `bson:"po"`
	Order   int64  `bson:"o"`
	Token   string `bson:"tok"`
	Owner   string `bson:"own"`
	Until   int64  `bson:"u"`
	Done    bool   `bson:"d"`
	// Step is the newest step known to the hint's writer: the task's
	// steps are read from it on, by _id, so a reader needs no query
	// over the steps. It is never past the newest step, since steps
	// are never removed while the task stays.
	Step int64 `bson:"sk"`
	// Task is the provider.MarshalActivityTask encoding as enqueued.
	Task []byte `bson:"t"`
	// Name, Priority and ConcurrencyKey are the task's, for queries
	// (schema 5).
	Name           string `bson:"an"`
	Priority       int    `bson:"pr,omitempty"`
	ConcurrencyKey string `bson:"ck,omitempty"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// Kinds of a task's steps.
const (
	// stepClaim: a claim was won (a takeover, when it follows a claim).
	stepClaim = "claim"
	// stepRetry, stepComplete and stepDeadLetter settle the claim
	// before them.
	stepRetry      = "retry"
	stepComplete   = "complete"
	stepDeadLetter = "dead"
	// stepCancel: the task was cancelled.
	stepCancel = "cancel"
	// stepRequeue: a dead-lettered task was redriven.
	stepRequeue = "requeue"
)

// stepDoc is step K of an activity task, by (task, K), in the
// activity_claims collection: every change of a task's claim is the
// insert of its next step, so of two workers that change one claim (its
// owner settling it, another taking it over, a round cancelling the task)
// exactly one wins, on every server, and the other writes nothing. Only
// a claim step's owner updates it afterwards (heartbeats extend Until).
type stepDoc struct {
	ID   string `bson:"_id"`
	Task string `bson:"t"`
	K    int64  `bson:"k"`
	Kind string `bson:"s"`
	// Token is a claim's token; for a settlement, the token of the claim
	// it settles.
	Token string `bson:"tok,omitempty"`
	Owner string `bson:"own,omitempty"`
	// Until is the end of a claim.
	Until int64 `bson:"u,omitempty"`
	// ExpiredOwner and ExpiredUntil describe the claim a claim took
	// over.
	ExpiredOwner string `bson:"xo,omitempty"`
	ExpiredUntil int64  `bson:"xu,omitempty"`
	// Activity is the task (provider.MarshalActivityTask) as of this
	// step: set on claims, retries and requeues.
	Activity []byte `bson:"a,omitempty"`
	// VisibleAt is when a retried or requeued task may be claimed again.
	VisibleAt int64 `bson:"v,omitempty"`
	// Result is a completion's result message and Letter a dead-letter
	// step's letter: what the step still has to write.
	Result *messageDoc `bson:"m,omitempty"`
	Letter *letterDoc  `bson:"l,omitempty"`
	// Key and Slot are the concurrency key of a claim's task and the
	// slot of it the claim took (activity_slots).
	Key  string `bson:"ck,omitempty"`
	Slot int    `bson:"sl,omitempty"`
}

func stepID(taskID string, k int64) string { return id(taskID, pad(k)) }

// claimToken is the token of claim step k: the step number, then a random
// part, so a settlement finds its claim step by _id.
func claimToken(k int64) string { return strconv.FormatInt(k, 10) + "." + newToken() }

// tokenStep returns the step number of a claim token; ok is false for a
// token of another form (a claim from before migration 3).
func tokenStep(token string) (k int64, ok bool) {
	n, _, found := strings.Cut(token, ".")
	if !found {
		return 0, false
	}
	k, err := strconv.ParseInt(n, 10, 64)
	return k, err == nil && k > 0
}

// terminal reports whether the step ends its task.
func (st *stepDoc) terminal() bool {
	return st.Kind == stepComplete || st.Kind == stepDeadLetter || st.Kind == stepCancel
}

// claimableAt is when the task may be claimed after the step; never
// after a terminal one.
func (st *stepDoc) claimableAt() int64 {
	switch st.Kind {
	case stepClaim:
		return st.Until
	case stepRetry, stepRequeue:
		return st.VisibleAt
	}
	return never
}

func (st *stepDoc) task() (provider.ActivityTask, error) {
	t, err := provider.UnmarshalActivityTask(st.Activity)
	if err != nil {
		return t, fmt.Errorf("activity task %s, step %d: %w", st.Task, st.K, err)
	}
	return t, nil
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
	var ids []string
	for _, t := range p.Tasks {
		t.SetDefaults(p.Now)
		data, err := provider.MarshalActivityTask(&t)
		if err != nil {
			return fmt.Errorf("enqueue activity task %s: %w", t.ID, err)
		}
		ok, err := insertIgnoringDuplicate(ctx, s.c.tasks, t.ID, &taskDoc{
			Part: s.part(t.InstanceID), ID: t.ID, Instance: t.InstanceID, Execution: t.ExecutionID, Queue: t.Queue,
			ClaimableAt: provider.UnixNanos(t.VisibleAt), OrderAt: orderAt(provider.UnixNanos(t.VisibleAt), t.Priority),
			Order: nextOrder(p.Now), Task: data,
			Name: t.Name, Priority: t.Priority, ConcurrencyKey: t.ConcurrencyKey,
		})
		if err != nil {
			return fmt.Errorf("enqueue activity task %s: %w", t.ID, err)
		}
		wrote = wrote || ok
		ids = append(ids, t.InstanceID)
	}
	if wrote {
		s.notifyOf(provider.QueueActivity, ids...)
	}
	return nil
}

// latestStep returns a task's newest step, nil when it has none (it was
// never claimed since it was enqueued), reading by _id from step known
// on (the hint's Step). When step known is gone (a purge under way), the
// steps are queried.
func (s *Store) latestStep(ctx context.Context, taskID string, known int64) (*stepDoc, error) {
	var last *stepDoc
	if known > 0 {
		st, err := s.stepAt(ctx, taskID, known)
		if err != nil {
			return nil, err
		}
		if st == nil {
			return s.queryLatestStep(ctx, taskID)
		}
		last = st
	}
	for {
		st, err := s.stepAt(ctx, taskID, known+1)
		if err != nil || st == nil {
			return last, err
		}
		last, known = st, known+1
	}
}

// queryLatestStep returns a task's newest step by a query over its
// steps.
func (s *Store) queryLatestStep(ctx context.Context, taskID string) (*stepDoc, error) {
	var st stepDoc
	err := s.c.claims.FindOne(ctx, filter("t", taskID), options.FindOne().SetSort(filter("t", 1, "k", -1))).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("activity task %s: steps: %w", taskID, translate(err))
	}
	return &st, nil
}

// stepAt returns step k of a task, nil when there is none.
func (s *Store) stepAt(ctx context.Context, taskID string, k int64) (*stepDoc, error) {
	var st stepDoc
	err := s.c.claims.FindOne(ctx, filter("_id", stepID(taskID, k))).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("activity task %s: step %d: %w", taskID, k, translate(err))
	}
	return &st, nil
}

// ClaimActivity implements provider.Store. Tasks whose hint says
// claimable are read in claim order (OrderAt, then enqueue order), a page
// at a time; for each, its newest step says whether it is (never
// claimed, retried or requeued and visible, or claimed and expired: a
// takeover). A task that a rate limit matches takes a token of the
// limit, and one with a concurrency key a slot of the key (see flow.go),
// before its claim; a task whose limit has no token left or whose key is
// full is passed over, and so are the other tasks of that limit or key
// for the rest of the call. The first task whose next step this call
// inserts as its claim is won; the hint is written after. A task whose
// step says otherwise gets its hint rewritten, and a settlement whose
// writer died before its last writes is finished (see CompleteActivity).
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	if err := validateRates(p.Rates); err != nil {
		return nil, err
	}
	c := &claimCall{p: p, full: map[string]bool{}, exhausted: map[string]bool{}}
	var after *taskDoc
	for {
		f := filter("q", filter("$in", queuesOf(p.Queues)), "d", false, "ca", filter("$lte", provider.UnixNanos(p.Now)))
		f = s.partFilter(f, p.Partitions)
		f = c.exclusions(f)
		if after != nil {
			f = append(f, bson.E{Key: "$or", Value: bson.A{
				filter("po", filter("$gt", after.OrderAt)),
				filter("po", after.OrderAt, "o", filter("$gt", after.Order)),
				filter("po", after.OrderAt, "o", after.Order, "_id", filter("$gt", after.ID)),
			}})
		}
		cur, err := s.c.tasks.Find(ctx, f, options.Find().SetSort(filter("po", 1, "o", 1, "_id", 1)).SetLimit(claimPage))
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
		last := &taskDoc{ID: docs[len(docs)-1].ID, OrderAt: docs[len(docs)-1].OrderAt, Order: docs[len(docs)-1].Order}
		// In order; a claimer that finds a task taken by another
		// claimer tries the rest of the page in a random order, so that
		// the claimers that lost it do not all race again for the next
		// one.
		shuffled := false
		for i := range docs {
			l, lost, err := s.tryClaim(ctx, &docs[i], c)
			if l != nil || err != nil {
				return l, err
			}
			if lost && !shuffled {
				rest := docs[i+1:]
				rand.Shuffle(len(rest), func(a, b int) { rest[a], rest[b] = rest[b], rest[a] })
				shuffled = true
			}
		}
		if len(docs) < claimPage {
			return nil, nil
		}
		after = last
	}
}

// claimPage is how many candidate tasks ClaimActivity reads at a time.
const claimPage = 16

// tryClaim claims d unless a limit or key stops it, or another worker
// changed its claim since its hint was read or changes it first (lost).
func (s *Store) tryClaim(ctx context.Context, d *taskDoc, c *claimCall) (_ *provider.ActivityLease, lost bool, _ error) {
	p := c.p
	if c.full[d.ConcurrencyKey] {
		return nil, false, nil
	}
	last, err := s.latestStep(ctx, d.ID, d.Step)
	if err != nil {
		return nil, false, err
	}
	next := &stepDoc{Task: d.ID, K: 1, Kind: stepClaim, Owner: p.Owner, Until: provider.UnixNanos(p.LockedUntil), Activity: d.Task}
	var expired *provider.ExpiredClaim
	if last != nil {
		switch {
		case last.terminal():
			// Its settler died before its last writes, or a
			// concurrent writer overwrote the hint.
			return nil, true, s.finish(ctx, d.Instance, last, p.Now)
		case last.claimableAt() > provider.UnixNanos(p.Now):
			// Claimed or settled since the hint was read: lost.
			s.writeHint(ctx, last)
			return nil, true, nil
		case last.Kind == stepClaim:
			expired = &provider.ExpiredClaim{Owner: last.Owner, LockedUntil: provider.FromUnixNanos(last.Until)}
			next.ExpiredOwner, next.ExpiredUntil = last.Owner, last.Until
		}
		next.K, next.Activity = last.K+1, last.Activity
	}
	t, err := next.task()
	if err != nil {
		return nil, false, err
	}
	next.ID, next.Token = stepID(d.ID, next.K), claimToken(next.K)
	tokens, ok, err := s.gate(ctx, c, &t, next)
	if err != nil || !ok {
		return nil, false, err
	}
	if s.beforeClaimWrite != nil {
		s.beforeClaimWrite(d.ID)
	}
	ok, err = insertIgnoringDuplicate(ctx, s.c.claims, next.ID, next)
	if err != nil {
		return nil, false, fmt.Errorf("claim activity task %s: %w", d.ID, err)
	}
	if !ok {
		// Another worker changed the claim since it was read: a
		// claimer, the owner settling it, a cancel. The slot taken
		// names a claim that was not made, so it is free again.
		s.giveBack(ctx, tokens)
		return nil, true, nil
	}
	s.writeHint(ctx, next)
	return &provider.ActivityLease{Task: t, Token: next.Token, Owner: p.Owner, LockedUntil: p.LockedUntil, Expired: expired}, false, nil
}

// writeHint writes what a non-terminal step says into its task's hint.
// A failure is only logged: the step is written, and claimers that find
// the hint stale rewrite it.
func (s *Store) writeHint(ctx context.Context, st *stepDoc) {
	ca := st.claimableAt()
	po := orderAt(ca, activityPriority(st.Activity))
	upd := set("ca", ca, "po", po, "tok", "", "own", "", "u", int64(0), "t", st.Activity, "sk", st.K)
	if st.Kind == stepClaim {
		upd = set("ca", ca, "po", po, "tok", st.Token, "own", st.Owner, "u", st.Until, "t", st.Activity, "sk", st.K)
	}
	if st.Kind == stepRequeue {
		upd = set("ca", ca, "po", po, "tok", "", "own", "", "u", int64(0), "t", st.Activity, "sk", st.K, "d", false)
	}
	if _, err := s.c.tasks.UpdateOne(ctx, filter("_id", st.Task), upd); err != nil {
		s.log.Warn("chronicle mongo: write activity task hint", "task", st.Task, "step", st.K, "err", err)
	}
}

// finish makes the writes a terminal step stands for, each idempotent:
// a completion's result message, a dead letter's letter and incident,
// then the task marked done. A requeue that follows a dead letter while
// the task is marked done is seen by the read after the mark, which then
// writes the requeue's hint again.
func (s *Store) finish(ctx context.Context, instanceID string, st *stepDoc, now time.Time) error {
	switch {
	case st.Result != nil:
		if _, err := s.enqueueMessages(ctx, []provider.Message{st.Result.message()}, now); err != nil {
			return err
		}
		s.notifyOf(provider.QueueOrchestration, st.Result.Instance)
	case st.Letter != nil:
		// A letter an operator resolved already is not raised again.
		var cur letterDoc
		err := s.c.letters.FindOne(ctx, filter("_id", st.Letter.ID)).Decode(&cur)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("dead letter %s: %w", st.Letter.ID, translate(err))
		}
		if err != nil || cur.Status == string(provider.DeadLetterDead) {
			l, err := st.Letter.letter()
			if err != nil {
				return err
			}
			if err := s.deadLetterWrites(ctx, instanceID, []provider.DeadLetter{l}); err != nil {
				return err
			}
		}
	}
	if err := s.markDone(ctx, st.Task, st.K); err != nil {
		return err
	}
	last, err := s.latestStep(ctx, st.Task, st.K)
	if err != nil {
		return err
	}
	if last != nil && !last.terminal() {
		s.writeHint(ctx, last)
	}
	return nil
}

// markDone marks a task done in its hint, after its terminal step k.
func (s *Store) markDone(ctx context.Context, taskID string, k int64) error {
	_, err := s.c.tasks.UpdateOne(ctx, filter("_id", taskID, "d", false), set("d", true, "tok", "", "own", "", "u", int64(0), "ca", never, "po", never, "sk", k))
	if err != nil {
		return fmt.Errorf("activity task %s: %w", taskID, translate(err))
	}
	return nil
}

// claimStep returns the claim step whose token is token, else
// ErrLeaseLost.
func (s *Store) claimStep(ctx context.Context, taskID, token string) (*stepDoc, error) {
	if k, ok := tokenStep(token); ok {
		c, err := s.stepAt(ctx, taskID, k)
		if err != nil {
			return nil, err
		}
		if c == nil || c.Kind != stepClaim || c.Token != token {
			return nil, fmt.Errorf("activity task %s: %w", taskID, provider.ErrLeaseLost)
		}
		return c, nil
	}
	var c stepDoc
	err := s.c.claims.FindOne(ctx, filter("t", taskID, "tok", token, "s", stepClaim)).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && token == "") {
		return nil, fmt.Errorf("activity task %s: %w", taskID, provider.ErrLeaseLost)
	}
	if err != nil {
		return nil, fmt.Errorf("activity task %s: %w", taskID, translate(err))
	}
	return &c, nil
}

// HeartbeatActivity implements provider.Store: the claim step is
// extended while no step follows it, then the hint.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	c, err := s.claimStep(ctx, p.TaskID, p.Token)
	if err != nil {
		return err
	}
	if next, err := s.stepAt(ctx, p.TaskID, c.K+1); err != nil {
		return err
	} else if next != nil {
		return fmt.Errorf("activity task %s: %w", p.TaskID, provider.ErrLeaseLost)
	}
	if err := updateHeld(ctx, s.c.claims, filter("_id", c.ID, "tok", p.Token), set("u", provider.UnixNanos(p.LockedUntil)), "activity task "+p.TaskID); err != nil {
		return err
	}
	if c.Key != "" {
		// The slot is read after the claim is extended: a claimer that
		// took the slot of this claim once it ran out reads the claim
		// after its insert, so one of the two sees the other (see
		// takeActivitySlot).
		held, err := s.holdsSlot(ctx, c.Key, c.Slot, p.Token)
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("activity task %s: its concurrency slot was taken once the claim ran out: %w", p.TaskID, provider.ErrLeaseLost)
		}
	}
	if _, err := s.c.tasks.UpdateOne(ctx, filter("_id", p.TaskID, "tok", p.Token, "d", false),
		set("u", provider.UnixNanos(p.LockedUntil), "ca", provider.UnixNanos(p.LockedUntil),
			"po", orderAt(provider.UnixNanos(p.LockedUntil), activityPriority(c.Activity)))); err != nil {
		s.log.Warn("chronicle mongo: write activity task hint", "task", p.TaskID, "err", err)
	}
	return nil
}

// settle settles the claim whose token is token by inserting the step
// after it, which build fills in from the claim step: the settlement's
// only exclusive write. It returns the settlement step, which may be one
// an earlier call of the same settlement wrote, or ErrLeaseLost when
// another step (a takeover, another settlement, a cancel) took its place
// or the claim is unknown.
func (s *Store) settle(ctx context.Context, taskID, token, kind string, build func(c *stepDoc, st *stepDoc) error) (*stepDoc, error) {
	c, err := s.claimStep(ctx, taskID, token)
	if err != nil {
		return nil, err
	}
	st := &stepDoc{ID: stepID(taskID, c.K+1), Task: taskID, K: c.K + 1, Kind: kind, Token: token}
	if err := build(c, st); err != nil {
		return nil, err
	}
	if s.beforeSettleWrite != nil {
		s.beforeSettleWrite(taskID)
	}
	ok, err := insertIgnoringDuplicate(ctx, s.c.claims, st.ID, st)
	if err != nil {
		return nil, fmt.Errorf("activity task %s: %w", taskID, err)
	}
	if ok {
		if s.afterSettleStep != nil {
			if err := s.afterSettleStep(taskID); err != nil {
				return nil, err
			}
		}
		return st, nil
	}
	got, err := s.stepAt(ctx, taskID, st.K)
	if err != nil {
		return nil, err
	}
	if got == nil || got.Kind != kind || got.Token != token {
		return nil, fmt.Errorf("activity task %s: %w", taskID, provider.ErrLeaseLost)
	}
	// The same settlement again. Once its writes are done the claim is
	// simply gone, as after any settlement; until then this call makes
	// them, for an earlier call that failed before it did.
	var d taskDoc
	if err := s.c.tasks.FindOne(ctx, filter("_id", taskID)).Decode(&d); err != nil {
		return nil, fmt.Errorf("activity task %s: %w", taskID, translate(err))
	}
	if d.Done || d.Token != token {
		return nil, fmt.Errorf("activity task %s: %w", taskID, provider.ErrLeaseLost)
	}
	return got, nil
}

// CompleteActivity implements provider.Store, in three writes: the
// settlement step carrying the result (the one a takeover or another
// settlement of the claim collides with), the result message, the task
// marked done. A crash after the first leaves the settlement to finish:
// the same call again finishes it, and so does the first claimer that
// finds the task once the claim ran out; the result keeps its id
// (provider.ActivityResultID), so it is queued once. An owner that lost
// its claim writes nothing.
func (s *Store) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	m := p.Result
	res := newMessageDoc(&m, p.Now, s.part(m.InstanceID))
	st, err := s.settle(ctx, p.TaskID, p.Token, stepComplete, func(_, st *stepDoc) error {
		st.Result = &res
		return nil
	})
	if err != nil {
		return err
	}
	return s.finish(ctx, p.Result.InstanceID, st, p.Now)
}

// RetryActivity implements provider.Store: the settlement step carrying
// the task's next attempt (Attempt+1, VisibleAt, LastError) is the
// exclusive write, the hint follows. A takeover after it takes the next
// attempt, not before VisibleAt.
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	st, err := s.settle(ctx, p.TaskID, p.Token, stepRetry, func(c, st *stepDoc) error {
		t, err := c.task()
		if err != nil {
			return err
		}
		t.Attempt++
		t.VisibleAt, t.LastError = p.VisibleAt, p.Error
		if st.Activity, err = provider.MarshalActivityTask(&t); err != nil {
			return err
		}
		st.VisibleAt = provider.UnixNanos(p.VisibleAt)
		return nil
	})
	if err != nil {
		return err
	}
	s.writeHint(ctx, st)
	s.notify(provider.QueueActivity)
	return nil
}

// DeadLetterActivity implements provider.Store: the settlement step
// carrying the letter first, then the letter and the instance's incident,
// the task marked done last; a crash after the first write is finished
// as CompleteActivity's.
func (s *Store) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
	var instanceID string
	st, err := s.settle(ctx, p.TaskID, p.Token, stepDeadLetter, func(c, st *stepDoc) error {
		t, err := c.task()
		if err != nil {
			return err
		}
		instanceID = t.InstanceID
		l := p.Letter
		if l.Activity == nil {
			l.Activity = &t
		}
		st.Letter, err = newLetterDoc(&l, s.part(l.InstanceID))
		return err
	})
	if err != nil {
		return err
	}
	return s.finish(ctx, instanceID, st, p.Letter.At)
}

// CancelActivities implements provider.Steps: the tasks are chosen when
// the fence is checked, and each is cancelled by inserting its next step
// (after the newest one read; read again when another worker's step took
// that place), then marked done.
func (s *Store) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	f := filter("i", p.InstanceID, "d", false, "x", p.ExecutionID)
	if p.OtherThan != "" {
		f = filter("i", p.InstanceID, "d", false, "x", filter("$ne", p.OtherThan))
	}
	cur, err := s.c.tasks.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetProjection(filter("_id", 1, "sk", 1)))
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
		if err := s.cancelTask(ctx, d.ID, d.Step); err != nil {
			return fmt.Errorf("cancel activity task %s: %w", d.ID, err)
		}
	}
	return nil
}

// cancelSteps bounds how often a cancel reads a task's steps again after
// losing the next step to another worker.
const cancelSteps = 16

func (s *Store) cancelTask(ctx context.Context, taskID string, known int64) error {
	for range cancelSteps {
		last, err := s.latestStep(ctx, taskID, known)
		if err != nil {
			return err
		}
		if last != nil && last.terminal() {
			// Ended since it was read.
			return s.markDone(ctx, taskID, last.K)
		}
		st := &stepDoc{Task: taskID, K: 1, Kind: stepCancel}
		if last != nil {
			st.K, known = last.K+1, last.K
		}
		st.ID = stepID(taskID, st.K)
		ok, err := insertIgnoringDuplicate(ctx, s.c.claims, st.ID, st)
		if err != nil {
			return err
		}
		if ok {
			return s.markDone(ctx, taskID, st.K)
		}
	}
	return &Error{Err: errors.New("activity task changed by other workers throughout"), Retryable: true}
}

// ListQueuedActivities implements provider.InspectStore: each task as
// its newest step says.
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
		last, err := s.latestStep(ctx, docs[i].ID, docs[i].Step)
		if err != nil {
			return nil, err
		}
		if last == nil {
			t, err := docs[i].task()
			if err != nil {
				return nil, err
			}
			out = append(out, provider.QueuedActivity{Task: t})
			continue
		}
		if last.terminal() {
			continue
		}
		t, err := last.task()
		if err != nil {
			return nil, err
		}
		q := provider.QueuedActivity{Task: t}
		if last.Kind == stepClaim {
			q.Owner, q.LockedUntil = last.Owner, provider.FromUnixNanos(last.Until)
		}
		out = append(out, q)
	}
	return out, nil
}

// requeueTask puts a dead-lettered task back, claimable at now: the
// requeue step after the task's terminal one, then the hint. A task
// already requeued (a redrive interrupted before the letter's status was
// written, and run again) only gets its hint written again; a task with
// no steps (its instance was purged) is written anew.
func (s *Store) requeueTask(ctx context.Context, t provider.ActivityTask, now time.Time) error {
	data, err := provider.MarshalActivityTask(&t)
	if err != nil {
		return err
	}
	var d taskDoc
	if err := s.c.tasks.FindOne(ctx, filter("_id", t.ID)).Decode(&d); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("requeue activity task %s: %w", t.ID, translate(err))
	}
	for range cancelSteps {
		last, err := s.latestStep(ctx, t.ID, d.Step)
		if err != nil {
			return err
		}
		if last == nil {
			break
		}
		if !last.terminal() {
			s.writeHint(ctx, last)
			return nil
		}
		st := &stepDoc{ID: stepID(t.ID, last.K+1), Task: t.ID, K: last.K + 1, Kind: stepRequeue, Activity: data, VisibleAt: provider.UnixNanos(now)}
		ok, err := insertIgnoringDuplicate(ctx, s.c.claims, st.ID, st)
		if err != nil {
			return fmt.Errorf("requeue activity task %s: %w", t.ID, err)
		}
		if ok {
			break
		}
	}
	// On a store of several partitions the upsert's filter holds the
	// shard key (docs/scaling.md): a sharded collection takes an upsert
	// only with it.
	f := filter("_id", t.ID)
	if s.partitions > 1 {
		f = append(f, filter("pt", s.part(t.InstanceID), "i", t.InstanceID)...)
	}
	_, err = s.c.tasks.UpdateOne(ctx, f,
		set("i", t.InstanceID, "x", t.ExecutionID, "q", t.Queue, "ca", provider.UnixNanos(now), "po", orderAt(provider.UnixNanos(now), t.Priority),
			"o", nextOrder(now), "tok", "", "own", "", "u", int64(0), "d", false, "t", data,
			"an", t.Name, "pr", t.Priority, "ck", t.ConcurrencyKey, "pt", s.part(t.InstanceID)), options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("requeue activity task %s: %w", t.ID, translate(err))
	}
	s.notify(provider.QueueActivity)
	return nil
}
