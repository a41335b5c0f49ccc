package round

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// DefaultRetryPolicy is the retry policy of activities that set none:
// 10 attempts, 1s doubling to at most 100s.
var DefaultRetryPolicy = history.RetryPolicy{
	MaxAttempts:     10,
	InitialInterval: time.Second,
	MaxInterval:     100 * time.Second,
	Multiplier:      2,
}

// WithRetryDefaults fills the zero fields of p from def.
func WithRetryDefaults(p, def history.RetryPolicy) history.RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = def.InitialInterval
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = def.MaxInterval
	}
	if p.MaxInterval < p.InitialInterval {
		p.MaxInterval = p.InitialInterval
	}
	if p.Multiplier < 1 {
		p.Multiplier = def.Multiplier
	}
	if p.Multiplier < 1 {
		p.Multiplier = 1
	}
	return p
}

// RetryDelay returns whether a task that failed its attempt-th attempt with
// failure is retried, and after how long: InitialInterval ×
// Multiplier^(attempt-1), capped at MaxInterval, of which a random half is
// jitter (jitter is a number in [0,1]: 1 keeps the whole delay, 0 halves
// it).
func RetryDelay(p history.RetryPolicy, attempt int, failure *history.Failure, jitter float64) (bool, time.Duration) {
	if failure.NonRetryable || slices.Contains(p.NonRetryable, failure.Type) || attempt >= p.MaxAttempts {
		return false, 0
	}
	d := float64(p.InitialInterval) * math.Pow(p.Multiplier, float64(attempt-1))
	if d > float64(p.MaxInterval) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(p.MaxInterval)
	}
	return true, time.Duration(d/2 + d/2*jitter)
}

// NonRetryableError is implemented by errors that retrying cannot fix.
type NonRetryableError interface {
	NonRetryable() bool
}

// TypedError is implemented by errors that name their type for retry
// policies ([history.RetryPolicy.NonRetryable]).
type TypedError interface {
	ErrorType() string
}

// FailureOf describes an activity error for history.
func FailureOf(err error) history.Failure {
	f := history.Failure{Message: err.Error(), Type: fmt.Sprintf("%T", err)}
	var typed TypedError
	if errors.As(err, &typed) {
		f.Type = typed.ErrorType()
	}
	var nr NonRetryableError
	if errors.As(err, &nr) {
		f.NonRetryable = nr.NonRetryable()
	}
	return f
}

// ActivityFunc runs one attempt of an activity task. ctx is cancelled when
// the lease is lost, the lease runs out without a heartbeat, or the worker
// stops.
type ActivityFunc func(ctx context.Context, lease *provider.ActivityLease, hb *Heartbeat) ([]byte, error)

// ActivityWorkerOptions configure an [ActivityWorker].
type ActivityWorkerOptions struct {
	// Node names this process. Required.
	Node string
	// Partitions, when set, returns the partitions a claim looks in, in
	// order (provider.ClaimActivityParams.Partitions); nil, or a nil
	// result, means every partition.
	Partitions func() []int
	// Resolve finds the function of an activity name. Required.
	Resolve func(name string) (ActivityFunc, bool)
	// Queues lists the activity queues served; empty means the default queue.
	Queues []string
	// Rates are the rate limits every claim obeys (counted by the store
	// for every node; see [provider.RateLimit]).
	Rates []provider.RateLimit
	// Clock defaults to the wall clock.
	Clock Clock
	// LeaseDuration is the claim's lease, renewed by heartbeats; a task's
	// Timeout overrides it when longer. Default 30s.
	LeaseDuration time.Duration
	// DefaultRetry fills zero fields of tasks' retry policies. Default
	// [DefaultRetryPolicy].
	DefaultRetry history.RetryPolicy
	// Jitter returns numbers in [0,1] for retry jitter (see RetryDelay);
	// default math/rand.
	Jitter func() float64
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Rounds, when set, completes tasks with [Runner.CompleteActivity]
	// where its store can ([Runner.CompletesActivities]): the round of the
	// task's instance runs in the completion's transaction, and the
	// report's Rounds tell what it did. Nil, or a store that cannot,
	// completes tasks with [provider.Store.CompleteActivity], leaving the
	// round to an orchestration worker.
	Rounds *Runner
	// Eager, with Rounds, asks for an activity task that the round run
	// with a completion schedules to be enqueued already claimed by this
	// worker, when the store can ([provider.ClaimingTx]) and the task is
	// of a served queue, due, without a concurrency key and matched by
	// none of Rates: the report's Next, which the caller runs with
	// [ActivityWorker.RunLease]. The workflow's next activity then needs
	// no claim of its own, and goes ahead of older tasks of the queue.
	Eager bool
}

// ActivityWorker claims activity tasks and settles them: complete, retry
// with backoff, fail for good or dead-letter.
type ActivityWorker struct {
	store provider.Store
	opts  ActivityWorkerOptions
}

// NewActivityWorker returns an activity worker for store.
func NewActivityWorker(store provider.Store, opts ActivityWorkerOptions) (*ActivityWorker, error) {
	var problems []string
	if opts.Node == "" {
		problems = append(problems, "Node is required")
	}
	if opts.Resolve == nil {
		problems = append(problems, "Resolve is required")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("round: invalid activity worker options: %s", strings.Join(problems, "; "))
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 30 * time.Second
	}
	opts.DefaultRetry = WithRetryDefaults(opts.DefaultRetry, DefaultRetryPolicy)
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &ActivityWorker{store: store, opts: opts}, nil
}

// ActivityOutcomeKind says how an attempt was settled.
type ActivityOutcomeKind string

// Outcomes of an attempt.
const (
	OutcomeCompleted    ActivityOutcomeKind = "completed"
	OutcomeRetry        ActivityOutcomeKind = "retry"
	OutcomeFailed       ActivityOutcomeKind = "failed"
	OutcomeDeadLettered ActivityOutcomeKind = "dead-lettered"
	OutcomeLeaseLost    ActivityOutcomeKind = "lease-lost"
)

// ActivityReport tells what one [ActivityWorker.RunOnce] did.
type ActivityReport struct {
	TaskID string
	// InstanceID and ExecutionID are the instance and execution that
	// scheduled the task.
	InstanceID  string
	ExecutionID string
	Name        string
	Attempt     int
	Outcome     ActivityOutcomeKind
	// Err is the attempt's error, if any.
	Err error
	// RetryAt is when a retried task becomes visible.
	RetryAt time.Time
	// Rounds are the reports of the rounds that ran in the completion's
	// transaction (see ActivityWorkerOptions.Rounds), and RoundErr their
	// errors as [Runner.RunGroup] returns them; the worker reports and
	// logs nothing of them itself.
	Rounds   []*Report
	RoundErr error
	// Next is a task the completion's round scheduled, claimed for this
	// worker (ActivityWorkerOptions.Eager): an attempt in flight, which
	// the caller runs with [ActivityWorker.RunLease]. Left unrun, it
	// stays claimed until its claim runs out and that attempt counts as
	// lost, as a dead worker's does.
	Next *provider.ActivityLease
}

// RunOnce claims one visible task, runs it and settles it. It returns a nil
// report when no task was visible. Errors of the store are returned; an
// activity's own error is in the report.
func (w *ActivityWorker) RunOnce(ctx context.Context) (*ActivityReport, error) {
	now := roundNow(w.opts.Clock)
	cp := &provider.ClaimActivityParams{
		Queues: w.opts.Queues, Owner: w.opts.Node, Now: now, LockedUntil: now.Add(w.leaseFor(nil)), Rates: w.opts.Rates,
	}
	if w.opts.Partitions != nil {
		cp.Partitions = w.opts.Partitions()
	}
	lease, err := w.store.ClaimActivity(ctx, cp)
	if err != nil {
		return nil, fmt.Errorf("claim activity: %w", err)
	}
	if lease == nil {
		return nil, nil
	}
	if lease.Expired != nil {
		return w.settleExpired(ctx, lease)
	}
	if lease.Task.Timeout > w.opts.LeaseDuration {
		if err := w.store.HeartbeatActivity(ctx, &provider.HeartbeatActivityParams{TaskID: lease.Task.ID, Token: lease.Token, LockedUntil: now.Add(lease.Task.Timeout), InstanceID: lease.Task.InstanceID}); err != nil {
			return w.lost(lease, err)
		}
	}
	return w.run(ctx, lease)
}

// RunLease runs a task already claimed for this worker (an
// [ActivityReport]'s Next) and settles it, as RunOnce does after its
// claim.
func (w *ActivityWorker) RunLease(ctx context.Context, lease *provider.ActivityLease) (*ActivityReport, error) {
	return w.run(ctx, lease)
}

// eager returns the claim of ActivityWorkerOptions.Eager, or nil.
func (w *ActivityWorker) eager() *EagerClaim {
	if !w.opts.Eager {
		return nil
	}
	return &EagerClaim{Owner: w.opts.Node, LeaseFor: w.leaseFor, Accept: w.accepts}
}

// accepts reports whether the worker may take a task claimed without a
// claim of its own: one of its queues, and no rate limit of its.
func (w *ActivityWorker) accepts(t *provider.ActivityTask) bool {
	served := len(w.opts.Queues) == 0 && t.Queue == "" || slices.Contains(w.opts.Queues, t.Queue)
	if !served {
		return false
	}
	for i := range w.opts.Rates {
		if w.opts.Rates[i].Matches(t) {
			return false
		}
	}
	return true
}

func (w *ActivityWorker) leaseFor(task *provider.ActivityTask) time.Duration {
	if task != nil && task.Timeout > w.opts.LeaseDuration {
		return task.Timeout
	}
	return w.opts.LeaseDuration
}

func (w *ActivityWorker) lost(lease *provider.ActivityLease, err error) (*ActivityReport, error) {
	rep := &ActivityReport{TaskID: lease.Task.ID, InstanceID: lease.Task.InstanceID, ExecutionID: lease.Task.ExecutionID, Name: lease.Task.Name, Attempt: lease.Task.Attempt, Outcome: OutcomeLeaseLost, Err: err}
	if errors.Is(err, provider.ErrLeaseLost) {
		return rep, nil
	}
	return rep, err
}

func (w *ActivityWorker) run(ctx context.Context, lease *provider.ActivityLease) (*ActivityReport, error) {
	task := &lease.Task
	rep := &ActivityReport{TaskID: task.ID, InstanceID: task.InstanceID, ExecutionID: task.ExecutionID, Name: task.Name, Attempt: task.Attempt}
	fn, ok := w.opts.Resolve(task.Name)
	if !ok {
		now := roundNow(w.opts.Clock)
		tc := *task
		err := w.store.DeadLetterActivity(ctx, &provider.DeadLetterActivityParams{TaskID: task.ID, Token: lease.Token, Letter: provider.DeadLetter{
			ID: provider.DeadLetterID(task.ID, task.EnqueuedAt), InstanceID: task.InstanceID, Activity: &tc,
			Reason: provider.ReasonUnknownActivity, Error: fmt.Sprintf("no activity named %q is registered", task.Name),
			Node: w.opts.Node, At: now, Attempts: task.Attempt, Status: provider.DeadLetterDead,
		}})
		if err != nil {
			return w.lost(lease, err)
		}
		w.opts.Logger.WarnContext(ctx, "activity dead-lettered", slog.String("activity", task.Name), slog.String("task_id", task.ID), slog.Int("attempt", task.Attempt),
			slog.String("instance_id", task.InstanceID), slog.String("execution_id", task.ExecutionID), slog.String("reason", string(provider.ReasonUnknownActivity)))
		rep.Outcome = OutcomeDeadLettered
		return rep, nil
	}

	hb := newHeartbeat(ctx, w, lease)
	defer hb.stop()
	result, runErr := callActivity(hb.ctx, fn, lease, hb)
	if hb.lostErr() != nil {
		return w.lost(lease, hb.lostErr())
	}
	return w.settle(ctx, lease, rep, result, runErr)
}

// settleExpired settles the attempt of a task whose previous claim ran out
// without a result, as a failed attempt: the task is not run by this claim.
// Counting it is what bounds an activity that kills its worker.
func (w *ActivityWorker) settleExpired(ctx context.Context, lease *provider.ActivityLease) (*ActivityReport, error) {
	task := &lease.Task
	timedOut := &ActivityTimedOutError{
		TaskID: task.ID, Name: task.Name, Attempt: task.Attempt,
		Owner: lease.Expired.Owner, LockedUntil: lease.Expired.LockedUntil,
	}
	w.opts.Logger.WarnContext(ctx, "activity attempt timed out", slog.String("activity", task.Name), slog.String("task_id", task.ID), slog.Int("attempt", task.Attempt),
		slog.String("instance_id", task.InstanceID), slog.String("execution_id", task.ExecutionID), slog.String("owner", lease.Expired.Owner))
	rep := &ActivityReport{TaskID: task.ID, InstanceID: task.InstanceID, ExecutionID: task.ExecutionID, Name: task.Name, Attempt: task.Attempt}
	return w.settle(ctx, lease, rep, nil, timedOut)
}

// settle ends an attempt: completed with result when runErr is nil;
// otherwise retried after a backoff while the retry policy allows it, or
// failed for good.
func (w *ActivityWorker) settle(ctx context.Context, lease *provider.ActivityLease, rep *ActivityReport, result []byte, runErr error) (*ActivityReport, error) {
	task := &lease.Task
	now := roundNow(w.opts.Clock)
	var failure *history.Failure
	if runErr != nil {
		f := FailureOf(runErr)
		failure, rep.Err = &f, runErr
		policy := WithRetryDefaults(task.Retry, w.opts.DefaultRetry)
		if retry, delay := RetryDelay(policy, task.Attempt, failure, w.opts.Jitter()); retry {
			rep.Outcome, rep.RetryAt = OutcomeRetry, now.Add(delay)
			err := w.store.RetryActivity(ctx, &provider.RetryActivityParams{TaskID: task.ID, Token: lease.Token, VisibleAt: rep.RetryAt, Error: f.Message, InstanceID: task.InstanceID})
			if err != nil {
				return w.lost(lease, err)
			}
			return rep, nil
		}
	}
	msg, err := provider.ActivityOutcome(task, result, failure)
	if err != nil {
		return rep, err
	}
	p := &provider.CompleteActivityParams{TaskID: task.ID, Token: lease.Token, Result: msg, Now: now}
	done := false
	if w.opts.Rounds != nil {
		c, err := w.opts.Rounds.CompleteActivity(ctx, p, w.eager())
		rep.Rounds, done, rep.Next = c.Reports, c.Done, c.Next
		switch {
		case IsCrash(err):
			// The process died: before the commit the task stays claimed
			// until its claim runs out, and is tried again; after it, a
			// task claimed for the worker is left to run out.
			rep.RoundErr, rep.Next = err, nil
			if done {
				rep.Outcome = OutcomeCompleted
			}
			return rep, err
		case done:
			rep.RoundErr = err
		case err == nil:
			// The store cannot: complete it on its own below.
		case errors.Is(err, provider.ErrLeaseLost):
			lost, lerr := w.lost(lease, err)
			lost.Rounds, lost.RoundErr = rep.Rounds, err
			return lost, lerr
		default:
			// The transaction failed, the completion with it: the task is
			// still claimed, so completing it alone is safe.
			rep.RoundErr = err
			w.opts.Logger.WarnContext(ctx, "activity completion with its round failed; completing alone", slog.String("task_id", task.ID),
				slog.String("instance_id", task.InstanceID), slog.Any("error", err))
		}
	}
	if !done {
		if err := w.store.CompleteActivity(ctx, p); err != nil {
			lost, lerr := w.lost(lease, err)
			lost.Rounds, lost.RoundErr = rep.Rounds, rep.RoundErr
			return lost, lerr
		}
	}
	rep.Outcome = OutcomeCompleted
	if failure != nil {
		rep.Outcome = OutcomeFailed
	}
	return rep, nil
}

func callActivity(ctx context.Context, fn ActivityFunc, lease *provider.ActivityLease, hb *Heartbeat) (result []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, &activityPanic{value: p}
		}
	}()
	return fn(ctx, lease, hb)
}

type activityPanic struct{ value any }

// FailureLeaseExpired is the [history.Failure] type of an attempt whose
// claim ran out without a result; list it in
// [history.RetryPolicy.NonRetryable] to fail an activity at its first lost
// lease.
const FailureLeaseExpired = "lease-expired"

// ErrActivityTimedOut: an activity attempt ended without a result because
// its claim ran out (its worker died, stalled or missed its heartbeats).
var ErrActivityTimedOut = errors.New("round: activity attempt timed out")

// ActivityTimedOutError is the error of an attempt whose claim ran out
// without a result. It counts as a failed attempt of type
// [FailureLeaseExpired]: retried with backoff while the retry policy
// allows, then a failed result.
type ActivityTimedOutError struct {
	TaskID  string
	Name    string
	Attempt int
	// Owner is the worker whose claim ran out, at LockedUntil.
	Owner       string
	LockedUntil time.Time
}

// Error implements error.
func (e *ActivityTimedOutError) Error() string {
	return fmt.Sprintf("activity %s (%s) attempt %d: no result before the claim of %s ran out at %s",
		e.TaskID, e.Name, e.Attempt, e.Owner, e.LockedUntil.UTC().Format(time.RFC3339Nano))
}

// ErrorType implements [TypedError].
func (e *ActivityTimedOutError) ErrorType() string { return FailureLeaseExpired }

// Unwrap returns [ErrActivityTimedOut].
func (e *ActivityTimedOutError) Unwrap() error { return ErrActivityTimedOut }

func (e *activityPanic) Error() string     { return fmt.Sprintf("activity panicked: %v", e.value) }
func (e *activityPanic) ErrorType() string { return "panic" }

// Heartbeat renews the lease of a running activity.
type Heartbeat struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	w      *ActivityWorker
	lease  *provider.ActivityLease
	timer  *time.Timer
	mu     sync.Mutex
	lost   error
}

func newHeartbeat(parent context.Context, w *ActivityWorker, lease *provider.ActivityLease) *Heartbeat {
	ctx, cancel := context.WithCancelCause(parent)
	hb := &Heartbeat{ctx: ctx, cancel: cancel, w: w, lease: lease}
	// Without heartbeats the attempt ends when its lease would run out.
	hb.timer = time.AfterFunc(w.leaseFor(&lease.Task), func() {
		cancel(fmt.Errorf("activity %s: %w: no heartbeat within %s", lease.Task.ID, provider.ErrLeaseLost, w.leaseFor(&lease.Task)))
	})
	return hb
}

// Beat extends the lease. It returns ErrLeaseLost, and cancels the
// activity's context, when the task was taken over, cancelled or removed.
func (h *Heartbeat) Beat(ctx context.Context) error {
	d := h.w.leaseFor(&h.lease.Task)
	err := h.w.store.HeartbeatActivity(ctx, &provider.HeartbeatActivityParams{
		TaskID: h.lease.Task.ID, Token: h.lease.Token, LockedUntil: roundNow(h.w.opts.Clock).Add(d), InstanceID: h.lease.Task.InstanceID,
	})
	if errors.Is(err, provider.ErrLeaseLost) {
		h.mu.Lock()
		h.lost = err
		h.mu.Unlock()
		h.cancel(err)
		return err
	}
	if err == nil {
		h.timer.Reset(d)
	}
	return err
}

func (h *Heartbeat) lostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

func (h *Heartbeat) stop() {
	h.timer.Stop()
	h.cancel(nil)
}
