package round

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// TurnFunc runs workflow code for one round: given the events the round
// appended so far, it returns the events the code produces next. It must
// be deterministic in its input; it may keep state between rounds of an
// instance in TurnOutput.Cached.
type TurnFunc func(ctx context.Context, in *TurnInput) (*TurnOutput, error)

// TurnInput is what a turn sees.
type TurnInput struct {
	InstanceID string
	// Snapshot is the state after NewEvents. Read only.
	Snapshot *Snapshot
	// History holds the current execution's events, NewEvents included,
	// when Cached is nil; it is nil otherwise.
	History []history.Event
	// NewEvents are the events this round appended before the turn.
	NewEvents []history.Event
	// Now is the round's clock reading.
	Now  time.Time
	Node string
	// Cached is what the previous turn of this instance returned, when this
	// runner still holds it and nobody else wrote the instance since.
	Cached any
}

// TurnOutput is what a turn produces.
type TurnOutput struct {
	// Events continue the log from Snapshot.LastSeq+1. Kind, Payload and
	// CorrelationID are required; an empty ExecutionID means the current
	// one and an empty Actor the worker; the runner sets At and the hashes.
	Events []history.Event
	// Cached is handed to the next turn of the instance on this runner.
	Cached any
}

// ProjectFunc folds a round's events into the product projections (tasks,
// task events, custom projections); the runner itself writes the snapshot
// and the instance record.
type ProjectFunc func(ctx context.Context, in *ProjectInput) (*ProjectOutput, error)

// ProjectInput is what a projection step sees.
type ProjectInput struct {
	InstanceID string
	Snapshot   *Snapshot
	// History returns the stored history from seq from on, followed by
	// NewEvents: a projection without Cached state folds from the start of
	// the current execution (Snapshot.ExecutionStartSeq) when it can, and
	// from seq 1 when it folds every execution.
	History   func(from int64) ([]history.Event, error)
	NewEvents []history.Event
	Cached    any
}

// ProjectOutput is what a projection step produces.
type ProjectOutput struct {
	Tasks      []provider.TaskRecord
	TaskEvents []provider.TaskEventRecord
	Custom     []provider.CustomRecord
	// Attributes are search attributes derived from the projections'
	// states; the runner sets them in the instance record over those of
	// the snapshot.
	Attributes map[string]query.Value
	Cached     any
}

// Reasoner is implemented by errors that know their dead-letter reason
// (a nondeterminism error, a panic).
type Reasoner interface {
	DeadLetterReason() provider.Reason
}

// RunnerOptions configure a [Runner]. Zero values take the defaults.
type RunnerOptions struct {
	// Node names this process in history and dead letters. Required.
	Node string
	// Turn runs workflow code. Required.
	Turn TurnFunc
	// Project folds product projections; nil writes only the snapshot and
	// the instance record.
	Project ProjectFunc
	// Clock defaults to the wall clock.
	Clock Clock
	// MaxDeliveries is how many failed deliveries a message may have before
	// it is dead-lettered. Default 10.
	MaxDeliveries int
	// BatchLimit bounds the messages of one round. Default 100. A round
	// that takes a full batch leaves the timers due after its latest
	// arrival for the next round, which sees what was queued behind them
	// (docs/semantics.md, "Order of an instance's messages").
	BatchLimit int
	// Partitions, when set, returns the partitions a round's dequeue
	// looks in, in order (provider.DequeueParams.Partitions); nil, or a
	// nil result, means every partition.
	Partitions func() []int
	// GroupSize is how many instances' rounds a transactional store runs
	// in one transaction (group commit): each instance is dequeued,
	// processed and, when its round fails, rolled back to its own
	// savepoint, without holding back the others. Default 1; peek-lock
	// stores ignore it.
	GroupSize int
	// LeaseDuration is the peek-lock lease of a round. Default 30s.
	LeaseDuration time.Duration
	// RetryDelay is the delay before a message whose round failed is
	// delivered again, given its failed deliveries so far. Default:
	// exponential from 1s, capped at 1 min.
	RetryDelay func(attempts int) time.Duration
	// CacheSize bounds the instances whose state is kept between rounds.
	// Default 1000; negative disables the cache.
	CacheSize int
	// Hooks interrupt rounds in tests.
	Hooks Hooks
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Runner drives rounds on a store: one call of [Runner.RunOnce] is one
// round of one instance, in the store's mode.
type Runner struct {
	store provider.Store
	tx    provider.TxStore
	lease provider.LeaseStore
	opts  RunnerOptions
	cache *cache
	log   *slog.Logger
	// actor is the Actor of the events this runner's worker writes.
	actor string
}

// NewRunner returns a runner for store.
func NewRunner(store provider.Store, opts RunnerOptions) (*Runner, error) {
	var problems []string
	if opts.Node == "" {
		problems = append(problems, "Node is required")
	}
	if opts.Turn == nil {
		problems = append(problems, "Turn is required")
	}
	r := &Runner{store: store}
	switch store.Mode() {
	case provider.ModeTransactional:
		tx, ok := store.(provider.TxStore)
		if !ok {
			problems = append(problems, "store reports transactional mode but does not implement TxStore")
		}
		r.tx = tx
	case provider.ModePeekLock:
		ls, ok := store.(provider.LeaseStore)
		if !ok {
			problems = append(problems, "store reports peek-lock mode but does not implement LeaseStore")
		}
		r.lease = ls
	default:
		problems = append(problems, fmt.Sprintf("store has unknown mode %d", store.Mode()))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("round: invalid runner options: %s", strings.Join(problems, "; "))
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.MaxDeliveries <= 0 {
		opts.MaxDeliveries = 10
	}
	if opts.BatchLimit <= 0 {
		opts.BatchLimit = 100
	}
	if opts.GroupSize <= 0 {
		opts.GroupSize = 1
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 30 * time.Second
	}
	if opts.RetryDelay == nil {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = 1000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r.opts, r.cache, r.log = opts, newCache(opts.CacheSize), opts.Logger
	r.actor = history.WorkerActor(opts.Node)
	return r, nil
}

// DefaultRetryDelay doubles from 1s per failed delivery, capped at 1 min.
func DefaultRetryDelay(attempts int) time.Duration {
	if attempts > 6 {
		return time.Minute
	}
	return time.Second << max(attempts, 0)
}

// Forget drops the cached state of every instance, as a restart would, and
// releases what it held (executors' goroutines).
func (r *Runner) Forget() { r.cache.clear() }

// ForgetInstance drops the cached state of one instance (purged, say).
// Rounds never trust a cached state whose seq and hash the store no longer
// holds, so forgetting is an economy, not a safeguard.
func (r *Runner) ForgetInstance(instanceID string) { r.cache.take(instanceID).close() }

// Cached returns how many instances' state the runner holds.
func (r *Runner) Cached() int { return r.cache.len() }

// Report tells what one round did.
type Report struct {
	InstanceID string
	// ExecutionID is the instance's current execution after a round that
	// committed (the new one after a continue-as-new); for a round that
	// failed or dead-lettered its batch, the execution its messages name
	// when they name one and the same (a start names its new execution,
	// a client's signal names none), and empty otherwise.
	ExecutionID string
	// Appended counts the events appended.
	Appended int
	// Processed counts messages turned into events; Duplicates and Stale
	// those acked without an event; DeadLettered those moved to the
	// dead-letter store.
	Processed, Duplicates, Stale, DeadLettered int
	// Refused counts child starts acked without an event because the
	// child's id is taken by a running instance; each parent was sent a
	// SubWorkflowFailed instead.
	Refused int
	// Cold is true when the instance's history was loaded whole.
	Cold bool
	// Status is the instance's status after the round (empty before its
	// start).
	Status provider.Status
	// Failed is true when the round did not commit; RunOnce then also
	// returns its error.
	Failed bool
	// Head is the instance's last stored event after a round that
	// committed (nil before its first event, and for a failed round):
	// what a signed checkpoint commits to.
	Head *provider.Head
	// Waiting names the concurrency key whose slot the instance's start
	// waits for: the round parked the instance and left the start queued.
	Waiting string
}

// RunOnce runs the rounds of one group of instances with visible work
// (one instance unless GroupSize is larger) and returns their reports
// summed (see [Runner.RunGroup]). It returns a nil report when there was
// no work, and a nil report with an error when the store could not be
// asked for work. A round that fails is rolled back (or, in peek-lock
// mode, abandoned) and its instance retried later: RunOnce then returns a
// report with Failed set and the error, which callers log and otherwise
// ignore. Messages that cannot be processed are dead-lettered and
// reported, not returned as errors.
func (r *Runner) RunOnce(ctx context.Context) (*Report, error) {
	reps, err := r.RunGroup(ctx)
	if len(reps) == 0 {
		return nil, err
	}
	sum := *reps[0]
	for _, o := range reps[1:] {
		sum.Appended += o.Appended
		sum.Processed += o.Processed
		sum.Duplicates += o.Duplicates
		sum.Stale += o.Stale
		sum.DeadLettered += o.DeadLettered
		sum.Refused += o.Refused
		sum.Cold = sum.Cold || o.Cold
		sum.Failed = sum.Failed || o.Failed
	}
	return &sum, err
}

// RunGroup runs rounds as RunOnce does and returns one report per
// instance, in the order they ran; the error joins those of the rounds
// that failed.
func (r *Runner) RunGroup(ctx context.Context) ([]*Report, error) {
	if r.tx != nil {
		return r.runTx(ctx)
	}
	rep, err := r.runLease(ctx)
	if rep == nil {
		return nil, err
	}
	return []*Report{rep}, err
}

// member is one instance's round in a transactional group.
type member struct {
	batch *provider.Batch
	entry *cacheEntry
	rep   *Report
	// failed is the error of a round rolled back to its savepoint inside
	// the group; the group committed only the record of its failure.
	failed error
}

func (r *Runner) runTx(ctx context.Context) ([]*Report, error) {
	reps, _, err := r.runTxGroup(ctx, nil, nil)
	return reps, err
}

// runTxGroup runs a transactional group. With c set the transaction first
// completes that activity task, then runs the round of its instance alone
// when no other round holds it. committed tells whether the transaction
// committed (a round abandoned inside it included).
func (r *Runner) runTxGroup(ctx context.Context, c *provider.CompleteActivityParams, e *eagerClaim) (_ []*Report, committed bool, _ error) {
	now := roundNow(r.opts.Clock)
	var (
		group []*member
		// culprit is the member whose error ended the transaction.
		culprit *member
	)
	size, dp := r.opts.GroupSize, provider.DequeueParams{Now: now, Owner: r.opts.Node, Limit: r.opts.BatchLimit}
	if c != nil {
		size, dp.InstanceID = 1, c.Result.InstanceID
	} else if r.opts.Partitions != nil {
		dp.Partitions = r.opts.Partitions()
	}
	err := r.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		group, culprit = group[:0], nil
		if c != nil {
			at, ok := tx.(provider.ActivityTx)
			if !ok {
				return errNoActivityTx
			}
			if err := at.CompleteActivity(ctx, c); err != nil {
				return err
			}
			if err := r.opts.Hooks.crash(ctx, AfterCompletion, c.Result.InstanceID); err != nil {
				return err
			}
		}
		// next is the batch a FlushDequeuer dequeued with the writes of
		// the round before.
		var next *provider.Batch
		fd, _ := tx.(provider.FlushDequeuer)
		for len(group) < size {
			b := next
			next = nil
			var err error
			if b == nil {
				if b, err = tx.DequeueInstance(ctx, &dp); err != nil || b == nil {
					return err
				}
			}
			b.Messages = effectOrder(b.Messages, r.opts.BatchLimit)
			m := &member{batch: b}
			group = append(group, m)
			if err := r.opts.Hooks.crash(ctx, AfterDequeue, b.InstanceID); err != nil {
				return err
			}
			var ops roundOps = txOps{tx}
			if ct, ok := tx.(provider.ClaimingTx); ok && e != nil {
				e.lease = nil
				ops = eagerOps{txOps{tx}, ct, e}
			}
			m.entry, m.rep, err = r.process(ctx, ops, b.InstanceID, b.Messages, b.Head, now)
			if f, ok := tx.(provider.TxFlusher); ok && err == nil {
				// The round's deferred writes fail as the round's own;
				// sent with the next dequeue, that dequeue's failure is
				// the transaction's.
				if fd != nil && len(group) < size {
					next, err = fd.FlushAndDequeue(ctx, &dp)
					switch {
					case err != nil && !errors.Is(err, provider.ErrFlush):
						return err
					case err == nil && next == nil:
						return nil // the group ends: nothing more to dequeue
					}
				} else {
					err = f.Flush(ctx)
				}
				if err != nil {
					m.entry.close()
					m.entry, m.rep = nil, nil
				}
			}
			if err == nil {
				continue
			}
			culprit = m
			if IsCrash(err) || ctx.Err() != nil {
				return err
			}
			// Undo this instance's writes while it is still locked,
			// keeping the other instances' rounds: after a rollback
			// another worker could take its messages before the hold is
			// set. A dead-lettered batch is not held; it is moved once
			// the group commits.
			p := r.abandonParams(b.InstanceID, b.Messages, now, err)
			var dl *DeadLetterError
			if errors.As(err, &dl) {
				p = &provider.AbandonMessagesParams{InstanceID: b.InstanceID, VisibleAt: now}
			}
			if tx.AbandonMessages(ctx, p) != nil {
				return err // the whole group rolls back, then failed records each
			}
			m.failed, culprit = err, nil
		}
		return nil
	})
	if len(group) == 0 {
		if err != nil && c == nil {
			return nil, false, fmt.Errorf("dequeue: %w", err)
		}
		return nil, err == nil, err
	}
	reps := make([]*Report, 0, len(group))
	var errs []error
	for i, m := range group {
		if err == nil && m.failed == nil {
			if cerr := r.opts.Hooks.crash(ctx, AfterCommit, m.batch.InstanceID); cerr != nil {
				// The process died after its commit: the rest of the
				// group loses its cache too.
				for _, o := range group[i:] {
					o.entry.close()
				}
				return append(reps, &Report{InstanceID: m.batch.InstanceID, ExecutionID: batchExecution(m.batch.Messages), Failed: true}), true, cerr
			}
		}
		switch {
		case err != nil:
			m.entry.close()
			merr := err
			if culprit != nil && culprit != m && !IsCrash(err) {
				// Rolled back for another instance's round: retried, never
				// dead-lettered for that round's reason.
				merr = fmt.Errorf("rolled back with the round of %s in its group: %v", culprit.batch.InstanceID, err)
			}
			rep, ferr := r.failed(ctx, m.batch.InstanceID, m.batch.Messages, now, merr, nil)
			reps, errs = append(reps, rep), append(errs, ferr)
		case m.failed != nil:
			var dl *DeadLetterError
			if errors.As(m.failed, &dl) {
				rep, ferr := r.failed(ctx, m.batch.InstanceID, m.batch.Messages, now, m.failed, nil)
				reps, errs = append(reps, rep), append(errs, ferr)
				continue
			}
			r.log.WarnContext(ctx, "round failed", slog.String("instance_id", m.batch.InstanceID),
				slog.String("execution_id", batchExecution(m.batch.Messages)), slog.Any("error", m.failed))
			reps = append(reps, &Report{InstanceID: m.batch.InstanceID, ExecutionID: batchExecution(m.batch.Messages), Failed: true})
			errs = append(errs, fmt.Errorf("round of %s: %w", m.batch.InstanceID, m.failed))
		default:
			r.cache.put(m.entry)
			reps = append(reps, m.rep)
		}
	}
	if e != nil && (err != nil || len(group) != 1 || group[0].failed != nil) {
		e.lease = nil // the claimed task did not commit
	}
	return reps, err == nil, errors.Join(errs...)
}

// errNoActivityTx: the store's transactions cannot complete activities.
var errNoActivityTx = errors.New("round: the store's transactions do not complete activity tasks")

// CompletesActivities reports whether [Runner.CompleteActivity] can
// complete activity tasks on the runner's store: a transactional store
// whose transactions implement [provider.ActivityTx].
func (r *Runner) CompletesActivities() bool {
	a, ok := r.tx.(provider.ActivityTxStore)
	return ok && a.CompletesInRound()
}

// CompleteActivity completes a claimed activity task as
// [provider.Store.CompleteActivity] does and, in the same transaction,
// runs the next round of the task's instance when it can take the
// instance at once: not held, and not locked by another round (it never
// waits for one). The round is the one [Runner.RunOnce] would run, with
// the result among its messages: appended, projected, enqueued and acked
// with one commit, or, when it fails, abandoned (held and retried) while
// the completion still commits. When the instance cannot be taken the
// completion commits alone and the result waits for a round as usual.
//
// With claim set, an activity task that the round schedules and
// claim.Accept takes is enqueued already claimed by claim.Owner, on a
// store whose transactions can ([provider.ClaimingTx]), and handed back
// in Completion.Next once the transaction committed.
//
// Completion.Done is false, with a nil error, when the store cannot
// complete tasks in its transactions ([Runner.CompletesActivities]);
// with an error when the transaction did not commit:
// [provider.ErrLeaseLost] when the claim is no longer the task's, a
// [CrashError] when a crash hook stopped it (after [AfterCompletion] or
// in the round), another error when the store failed, after which the
// caller may complete the task on its own. With Done true the error
// joins those of the rounds that failed, as [Runner.RunGroup] returns
// them.
func (r *Runner) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams, claim *EagerClaim) (*Completion, error) {
	if !r.CompletesActivities() {
		return &Completion{}, nil
	}
	var e *eagerClaim
	if claim != nil && claim.Accept != nil && claim.LeaseFor != nil {
		e = &eagerClaim{EagerClaim: *claim}
	}
	reps, done, err := r.runTxGroup(ctx, p, e)
	if errors.Is(err, errNoActivityTx) {
		return &Completion{Reports: reps}, nil
	}
	c := &Completion{Reports: reps, Done: done}
	if done && e != nil {
		c.Next = e.lease
	}
	return c, err
}

// Completion is what [Runner.CompleteActivity] did.
type Completion struct {
	// Reports are those of the rounds it ran (none when it ran none).
	Reports []*Report
	// Done is true when the completion committed.
	Done bool
	// Next is a task the round scheduled, claimed for the caller (see
	// EagerClaim): an attempt in flight from the commit on, which the
	// caller runs and settles with its Token as if it had claimed it. A
	// caller that does not leaves the task claimed until LockedUntil,
	// after which the attempt counts as lost, as a worker's that died.
	Next *provider.ActivityLease
}

// EagerClaim asks [Runner.CompleteActivity] to hand back, claimed, an
// activity task that the round it runs schedules (eager dispatch): the
// worker runs the workflow's next activity without a claim of its own.
type EagerClaim struct {
	// Owner is the claimer's name.
	Owner string
	// Accept reports whether the worker takes a task: one of its queues,
	// and no concurrency key or rate limit, whose claims the store
	// counts (an eager claim bypasses them).
	Accept func(task *provider.ActivityTask) bool
	// LeaseFor is the claim's duration for a task.
	LeaseFor func(task *provider.ActivityTask) time.Duration
}

// eagerClaim is an EagerClaim during one transaction.
type eagerClaim struct {
	EagerClaim
	lease *provider.ActivityLease
}

// eagerOps enqueues the first task of a round that the claim accepts
// claimed (provider.ClaimingTx), the others as txOps does.
type eagerOps struct {
	txOps
	ct provider.ClaimingTx
	e  *eagerClaim
}

func (o eagerOps) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	if o.e.lease != nil {
		return o.txOps.EnqueueActivities(ctx, p)
	}
	for i := range p.Tasks {
		t := p.Tasks[i]
		t.SetDefaults(p.Now)
		if t.VisibleAt.After(p.Now) || t.ConcurrencyKey != "" || !o.e.Accept(&t) {
			continue
		}
		until := p.Now.Add(o.e.LeaseFor(&t))
		token := eagerToken()
		err := o.ct.EnqueueClaimedActivity(ctx, &provider.EnqueueClaimedActivityParams{Task: t, Now: p.Now, Token: token, Owner: o.e.Owner, LockedUntil: until})
		if errors.Is(err, provider.ErrUnsupported) {
			break
		}
		if err != nil {
			return err
		}
		o.e.lease = &provider.ActivityLease{Task: t, Token: token, Owner: o.e.Owner, LockedUntil: until}
		rest := slices.Delete(slices.Clone(p.Tasks), i, i+1)
		if len(rest) == 0 {
			return nil
		}
		q := *p
		q.Tasks = rest
		return o.txOps.EnqueueActivities(ctx, &q)
	}
	return o.txOps.EnqueueActivities(ctx, p)
}

// eagerToken returns a claim token no store hands out: "e-" and 128
// random bits.
func eagerToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "e-" + hex.EncodeToString(b[:])
}

func (r *Runner) runLease(ctx context.Context) (*Report, error) {
	now := roundNow(r.opts.Clock)
	lp := &provider.LeaseParams{Now: now, LockedUntil: now.Add(r.opts.LeaseDuration), Owner: r.opts.Node, Limit: r.opts.BatchLimit}
	if r.opts.Partitions != nil {
		lp.Partitions = r.opts.Partitions()
	}
	lease, err := r.lease.LeaseInstance(ctx, lp)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if lease == nil {
		return nil, nil
	}
	// The messages the round leaves for later are not part of its
	// delivery: neither acked, counted nor dead-lettered with it.
	lease.Messages = effectOrder(lease.Messages, r.opts.BatchLimit)
	roundCtx, release := r.keepLease(ctx, lease)
	err = r.opts.Hooks.crash(roundCtx, AfterDequeue, lease.InstanceID)
	var (
		entry *cacheEntry
		rep   *Report
	)
	if err == nil {
		entry, rep, err = r.process(roundCtx, leaseOps{r.lease, lease}, lease.InstanceID, lease.Messages, nil, now)
	}
	if cause := context.Cause(roundCtx); err != nil && errors.Is(cause, provider.ErrLeaseLost) && !errors.Is(err, provider.ErrLeaseLost) {
		err = fmt.Errorf("%w: %w", cause, err) // the renewal found the lease taken over
	}
	release()
	if err == nil {
		err = r.opts.Hooks.crash(ctx, AfterCommit, lease.InstanceID)
	}
	if err != nil {
		entry.close()
		return r.failed(ctx, lease.InstanceID, lease.Messages, now, err, lease)
	}
	r.cache.put(entry)
	return rep, nil
}

// keepLease renews a peek-lock round's lease every third of
// LeaseDuration while the round runs, so that a long round (a slow store,
// a long turn) is not taken over; when the lease is lost anyway the
// returned context is cancelled, so the round stops early instead of
// failing at its fenced steps. release stops the renewals and waits for
// one in flight. Clocks without timers get no renewals.
func (r *Runner) keepLease(ctx context.Context, lease *provider.Lease) (context.Context, func()) {
	tc, ok := r.opts.Clock.(TimerClock)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var (
		mu       sync.Mutex
		done     bool
		stop     func() bool
		inFlight sync.WaitGroup
		schedule func()
	)
	// halt stops the renewals; callers hold mu.
	halt := func() {
		if !done && stop() {
			inFlight.Done() // the pending renewal will never run
		}
		done = true
	}
	renew := func() {
		defer inFlight.Done()
		// The next renewal is due a third of a lease after this one
		// started, whether or not this one succeeds.
		mu.Lock()
		if !done {
			schedule()
		}
		mu.Unlock()
		until := r.opts.Clock.Now().Add(r.opts.LeaseDuration)
		err := r.lease.RenewLease(ctx, &provider.RenewLeaseParams{Lease: lease, LockedUntil: until})
		if errors.Is(err, provider.ErrLeaseLost) {
			r.log.WarnContext(ctx, "round lease lost", slog.String("instance_id", lease.InstanceID), slog.String("execution_id", batchExecution(lease.Messages)))
			mu.Lock()
			halt()
			mu.Unlock()
			cancel(err)
		}
	}
	schedule = func() {
		inFlight.Add(1)
		stop = tc.AfterFunc(r.opts.LeaseDuration/3, renew)
	}
	mu.Lock()
	schedule()
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		halt()
		mu.Unlock()
		inFlight.Wait()
		cancel(nil)
	}
}

// failed handles a round that did not finish: a crash leaves everything as
// it is, a dead-letter error moves the batch to the dead-letter store, any
// other error puts the messages back with a delay.
func (r *Runner) failed(ctx context.Context, instanceID string, msgs []provider.Message, now time.Time, err error, lease *provider.Lease) (*Report, error) {
	failed := &Report{InstanceID: instanceID, ExecutionID: batchExecution(msgs), Failed: true}
	if IsCrash(err) {
		r.cache.take(instanceID).close()
		return failed, err
	}
	r.log.WarnContext(ctx, "round failed", slog.String("instance_id", instanceID), slog.String("execution_id", failed.ExecutionID), slog.Any("error", err))
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		n, dlErr := r.deadLetterBatch(ctx, instanceID, msgs, dl, now, lease)
		if dlErr != nil {
			return failed, errors.Join(err, fmt.Errorf("dead-letter batch: %w", dlErr))
		}
		return &Report{InstanceID: instanceID, ExecutionID: failed.ExecutionID, DeadLettered: n}, nil
	}
	p := r.abandonParams(instanceID, msgs, now, err)
	var abandonErr error
	if lease != nil {
		abandonErr = r.lease.AbandonLease(ctx, &provider.AbandonLeaseParams{Lease: lease, VisibleAt: p.VisibleAt, Error: p.Error})
		if errors.Is(abandonErr, provider.ErrLeaseLost) {
			abandonErr = nil
		}
	} else {
		abandonErr = r.store.AbandonMessages(ctx, p)
	}
	if abandonErr != nil {
		err = errors.Join(err, fmt.Errorf("abandon: %w", abandonErr))
	}
	return failed, fmt.Errorf("round of %s: %w", instanceID, err)
}

// batchExecution returns the execution the messages of a batch name, when
// they name one and the same, and "" otherwise: what a report of a round
// that did not commit can tell of it.
func batchExecution(msgs []provider.Message) string {
	id := ""
	for i := range msgs {
		switch e := msgs[i].ExecutionID; {
		case e == "":
		case id == "":
			id = e
		case e != id:
			return ""
		}
	}
	return id
}

// messageExecution returns the execution a message names, or else the
// instance's current one, which it is judged against.
func messageExecution(m *provider.Message, snap *Snapshot) string {
	if m.ExecutionID != "" {
		return m.ExecutionID
	}
	return snap.ExecutionID
}

// abandonParams records the failed delivery of msgs: the instance is held
// for the retry delay of their most failed delivery.
func (r *Runner) abandonParams(instanceID string, msgs []provider.Message, now time.Time, err error) *provider.AbandonMessagesParams {
	attempts := 0
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
		attempts = max(attempts, m.Attempts+1)
	}
	text := history.CleanText(err.Error())
	var rs Reasoner
	if errors.As(err, &rs) {
		text = string(rs.DeadLetterReason()) + ": " + text
	}
	return &provider.AbandonMessagesParams{InstanceID: instanceID, MessageIDs: ids, VisibleAt: now.Add(r.opts.RetryDelay(attempts)), Error: text}
}

func (r *Runner) deadLetterBatch(ctx context.Context, instanceID string, msgs []provider.Message, dl *DeadLetterError, now time.Time, lease *provider.Lease) (int, error) {
	want := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		want[m.ID] = true
	}
	letters := func(queued []provider.Message) []provider.DeadLetter {
		var out []provider.DeadLetter
		for i := range queued {
			if want[queued[i].ID] {
				out = append(out, r.letter(&queued[i], dl.Reason, dl.Err.Error(), now))
			}
		}
		return out
	}
	if lease != nil {
		ls := letters(lease.Messages)
		if err := r.lease.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: lease, Letters: ls}); err != nil {
			return 0, err
		}
		return len(ls), r.lease.AbandonLease(ctx, &provider.AbandonLeaseParams{Lease: lease, VisibleAt: now})
	}
	n := 0
	err := r.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: r.opts.Node, Limit: r.opts.BatchLimit, InstanceID: instanceID})
		if err != nil || b == nil {
			return err
		}
		ls := letters(b.Messages)
		n = len(ls)
		if n == 0 {
			return nil
		}
		return tx.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: instanceID, Letters: ls})
	})
	return n, err
}

// letter builds the dead letter of a message whose current delivery failed;
// Attempts counts that delivery.
func (r *Runner) letter(m *provider.Message, reason provider.Reason, text string, now time.Time) provider.DeadLetter {
	mc := *m
	return provider.DeadLetter{
		ID: provider.DeadLetterID(m.ID, m.EnqueuedAt), InstanceID: m.InstanceID, Message: &mc,
		Reason: reason, Error: history.CleanText(text), Node: r.opts.Node, At: now, Attempts: m.Attempts + 1,
		Status: provider.DeadLetterDead,
	}
}

// roundOps are the steps of a round plus its mode's way to dead-letter,
// pin and ack, and whether a cold round repairs open work. The round's
// steps (steps.go) are the same in both modes; what differs between the
// modes is here: txOps writes in the round's transaction, leaseOps writes
// record by record and fences its append and queue writes with the
// round's lease.
type roundOps interface {
	provider.Steps
	deadLetter(ctx context.Context, instanceID string, letters []provider.DeadLetter) error
	// pin records the execution a message without one was judged against,
	// before the round appends: only peek-lock rounds need it, since their
	// ack does not commit with their append.
	pin(ctx context.Context, pins map[string]string) error
	ack(ctx context.Context, instanceID string, ids []string) error
	// repairsOpenWork reports whether a cold round enqueues again the work
	// its history still owes: only peek-lock rounds, which may have
	// crashed between their append and their enqueue; a transactional
	// round commits both or neither.
	repairsOpenWork() bool
	// flow returns the round's flow steps (nil when the store has none)
	// and the lease that fences them.
	flow() (provider.FlowSteps, *provider.Lease)
}

type txOps struct{ provider.Tx }

func (o txOps) flow() (provider.FlowSteps, *provider.Lease) {
	f, _ := o.Tx.(provider.FlowSteps)
	return f, nil
}

func (o leaseOps) flow() (provider.FlowSteps, *provider.Lease) {
	f, _ := o.LeaseStore.(provider.FlowSteps)
	return f, o.lease
}

func (txOps) pin(context.Context, map[string]string) error { return nil }

func (txOps) repairsOpenWork() bool { return false }

func (o txOps) deadLetter(ctx context.Context, instanceID string, letters []provider.DeadLetter) error {
	return o.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: instanceID, Letters: letters})
}

func (o txOps) ack(ctx context.Context, instanceID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return o.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: instanceID, MessageIDs: ids})
}

type leaseOps struct {
	provider.LeaseStore
	lease *provider.Lease
}

func (o leaseOps) deadLetter(ctx context.Context, _ string, letters []provider.DeadLetter) error {
	return o.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: o.lease, Letters: letters})
}

func (o leaseOps) ack(ctx context.Context, _ string, ids []string) error {
	return o.AckLease(ctx, &provider.AckLeaseParams{Lease: o.lease, MessageIDs: ids})
}

func (leaseOps) repairsOpenWork() bool { return true }

func (o leaseOps) pin(ctx context.Context, pins map[string]string) error {
	if len(pins) == 0 {
		return nil
	}
	return o.PinMessages(ctx, &provider.PinMessagesParams{Lease: o.lease, Pins: pins})
}

// AppendHistory fences the append with the round's lease: besides its
// expected seq, which tells nothing apart at seq 1 of a purged and
// restarted instance.
func (o leaseOps) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	q := *p
	q.Lease = o.lease
	return o.LeaseStore.AppendHistory(ctx, &q)
}

// SaveProjections fences the projection writes with the round's lease.
func (o leaseOps) SaveProjections(ctx context.Context, p *provider.Projections) error {
	q := *p
	q.Lease = o.lease
	return o.LeaseStore.SaveProjections(ctx, &q)
}

// EnqueueMessages fences the enqueue with the round's lease.
func (o leaseOps) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	q := *p
	q.Lease = o.lease
	return o.LeaseStore.EnqueueMessages(ctx, &q)
}

// CancelActivities fences the cancel with the round's lease.
func (o leaseOps) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	q := *p
	q.Lease = o.lease
	return o.LeaseStore.CancelActivities(ctx, &q)
}

// EnqueueActivities fences the enqueue with the round's lease.
func (o leaseOps) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	q := *p
	q.Lease = o.lease
	return o.LeaseStore.EnqueueActivities(ctx, &q)
}

// turn calls the turn function, turning a panic into an error.
func (r *Runner) turn(ctx context.Context, in *TurnInput) (out *TurnOutput, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &panicError{what: "turn", value: p}
		}
	}()
	out, err = r.opts.Turn(ctx, in)
	if err == nil && out == nil {
		out = &TurnOutput{}
	}
	return out, err
}

type panicError struct {
	what  string
	value any
}

func (e *panicError) Error() string                     { return fmt.Sprintf("%s panicked: %v", e.what, e.value) }
func (e *panicError) DeadLetterReason() provider.Reason { return provider.ReasonPanic }

func (r *Runner) projections(ctx context.Context, entry *cacheEntry, appended []history.Event, since func(from int64) ([]history.Event, error)) (*provider.Projections, error) {
	snap := entry.snap
	if !snap.Started() {
		return nil, nil
	}
	data, err := MarshalSnapshot(snap)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot of %s: %w", snap.InstanceID, err)
	}
	p := &provider.Projections{InstanceID: snap.InstanceID, Seq: snap.LastSeq, Snapshot: data, Instance: snap.Record()}
	if r.opts.Project == nil {
		return p, nil
	}
	in := &ProjectInput{InstanceID: snap.InstanceID, Snapshot: snap, NewEvents: appended, Cached: entry.projState, History: since}
	out, err := r.project(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", snap.InstanceID, err)
	}
	entry.projState = out.Cached
	p.Tasks, p.TaskEvents, p.Custom = out.Tasks, out.TaskEvents, out.Custom
	MergeAttributes(p.Instance, out.Attributes)
	if n := len(p.Instance.Attributes); n > history.MaxSearchAttributes {
		return nil, fmt.Errorf("project %s: %d search attributes with those the projections derive, at most %d allowed", snap.InstanceID, n, history.MaxSearchAttributes)
	}
	return p, nil
}

// project calls the projection function, turning a panic (a product's
// fold) into an error, so that the round fails and its messages are retried
// and dead-lettered like those of a panicking workflow.
func (r *Runner) project(ctx context.Context, in *ProjectInput) (out *ProjectOutput, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &panicError{what: "projection", value: p}
		}
	}()
	out, err = r.opts.Project(ctx, in)
	if err == nil && out == nil {
		out = &ProjectOutput{}
	}
	return out, err
}

func (r *Runner) seal(snap *Snapshot, e *history.Event) {
	e.PrevHash = snap.LastHash
	e.Hash = history.ComputeHash(e)
}

// normalize fills the defaults of a message's correlation: an end request is
// correlated with the execution it ends, and signals, task actions and
// control requests without a key are keyed by their message id.
func normalize(m *provider.Message, snap *Snapshot) {
	if m.Kind.Terminal() {
		m.CorrelationID = m.ExecutionID
		if m.CorrelationID == "" {
			m.CorrelationID = snap.ExecutionID
		}
		return
	}
	switch m.Kind.Class() {
	case history.ClassEvent, history.ClassTask, history.ClassControl:
		if m.CorrelationID == "" {
			m.CorrelationID = m.ID
		}
	}
}

// messageEvent turns an accepted message into the next event of the log.
func (r *Runner) messageEvent(snap *Snapshot, m *provider.Message, now time.Time) history.Event {
	e := history.Event{
		Seq: snap.LastSeq + 1, InstanceID: snap.InstanceID, ExecutionID: m.ExecutionID, Kind: m.Kind,
		CorrelationID: m.CorrelationID, At: now, Actor: m.Actor, Payload: m.Payload,
	}
	if e.ExecutionID == "" {
		e.ExecutionID = snap.ExecutionID
	}
	if e.Actor == "" {
		e.Actor = r.actor
	}
	r.seal(snap, &e)
	return e
}

// lastReason recovers the reason prefix a failed delivery recorded.
func lastReason(lastError string) provider.Reason {
	for _, reason := range []provider.Reason{provider.ReasonNondeterminism, provider.ReasonPanic, provider.ReasonUnknownWorkflow} {
		if strings.HasPrefix(lastError, string(reason)+": ") {
			return reason
		}
	}
	return provider.ReasonMaxDeliveries
}

func (w *Work) merge(o *Work) {
	seenMsg := map[string]bool{}
	for _, m := range w.Messages {
		seenMsg[m.ID] = true
	}
	for _, m := range o.Messages {
		if !seenMsg[m.ID] {
			w.Messages, seenMsg[m.ID] = append(w.Messages, m), true
		}
	}
	seenTask := map[string]bool{}
	for _, t := range w.Activities {
		seenTask[t.ID] = true
	}
	for _, t := range o.Activities {
		if !seenTask[t.ID] {
			w.Activities, seenTask[t.ID] = append(w.Activities, t), true
		}
	}
	seenCancel := map[provider.CancelActivitiesParams]bool{}
	for _, c := range w.Cancels {
		seenCancel[c] = true
	}
	for _, c := range o.Cancels {
		if !seenCancel[c] {
			w.Cancels, seenCancel[c] = append(w.Cancels, c), true
		}
	}
}
