package provider

import (
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// ActivityTask is a unit of activity work: one call of an activity that a
// workflow scheduled. Its ID is derived from the scheduling event, so
// enqueueing it again after a crash is a no-op, even after it completed.
type ActivityTask struct {
	// ID identifies the task forever (see [ActivityTaskID]).
	ID string
	// InstanceID, ExecutionID and ScheduledSeq point at the ActivityScheduled
	// event.
	InstanceID   string
	ExecutionID  string
	ScheduledSeq int64
	// Name is the registered activity name.
	Name string
	// Queue routes the task to workers serving that queue ("" = default).
	Queue string
	// Input is the encoded activity input.
	Input []byte
	// Attempt is 1 for the first run and grows with each retry.
	Attempt int
	// Retry is the task's retry policy with defaults filled in.
	Retry history.RetryPolicy
	// Timeout bounds one attempt; it is also the claim's lease duration when
	// longer than the worker's.
	Timeout time.Duration
	// VisibleAt delays the task (retry backoff).
	VisibleAt time.Time
	// EnqueuedAt is when the task was first enqueued.
	EnqueuedAt time.Time
	// LastError is the error of the previous attempt.
	LastError string
	// Priority orders the task among claimable tasks (see [OrderAt]).
	Priority int
	// ConcurrencyKey and ConcurrencyLimit, when the key is set, bound the
	// live claims of tasks with that key: ClaimActivity passes over a
	// task whose key has ConcurrencyLimit claims that have not run out.
	ConcurrencyKey   string
	ConcurrencyLimit int
}

// ActivityTaskID derives the id of the task of an ActivityScheduled event.
func ActivityTaskID(instanceID, executionID string, scheduledSeq int64) string {
	return history.DeterministicID(instanceID+"\x00"+executionID, scheduledSeq, "activity")
}

// ActivityResultID derives the id of the message carrying a task's result.
func ActivityResultID(taskID string) string { return taskID + "/result" }

// ActivityLease is a claimed task. Token fences the claim: heartbeats and
// completions are accepted only while it is the task's current token.
type ActivityLease struct {
	Task        ActivityTask
	Token       string
	Owner       string
	LockedUntil time.Time
	// Expired is set when the claim took over an earlier claim that ran out
	// without being settled (its worker died or stalled): attempt
	// Task.Attempt timed out. The claimer settles that attempt (retry with
	// backoff, or fail) instead of running the task again at once; see
	// [github.com/chronicleflow/chronicle/round.ActivityTimedOutError].
	Expired *ExpiredClaim
}

// ExpiredClaim describes the claim an [ActivityLease] took over.
type ExpiredClaim struct {
	// Owner is the worker that held the claim.
	Owner string
	// LockedUntil is when the claim ran out.
	LockedUntil time.Time
}

// ActivityOutcome builds the result message of a task: completed with
// result when failure is nil, failed otherwise.
func ActivityOutcome(task *ActivityTask, result []byte, failure *history.Failure) (Message, error) {
	corr := history.SeqCorrelation(task.ScheduledSeq)
	id := ActivityResultID(task.ID)
	var attrs history.Attributes = &history.ActivityCompleted{Result: result, Attempts: task.Attempt}
	if failure != nil {
		attrs = &history.ActivityFailed{Failure: *failure, Attempts: task.Attempt}
	}
	m, err := NewMessage(id, task.InstanceID, task.ExecutionID, corr, attrs)
	if err != nil {
		return Message{}, fmt.Errorf("activity %s result: %w", task.ID, err)
	}
	// The result keeps the task's place in the queue (its VisibleAt, the
	// instance's creation unless a retry delayed it): a workflow in flight
	// goes on ahead of instances started after it.
	m.VisibleAt = task.VisibleAt
	m.Priority = task.Priority
	return m, nil
}

type taskEnvelope struct {
	Format       int                 `msgpack:"f"`
	ID           string              `msgpack:"id"`
	InstanceID   string              `msgpack:"instance"`
	ExecutionID  string              `msgpack:"execution"`
	ScheduledSeq int64               `msgpack:"scheduled_seq"`
	Name         string              `msgpack:"name"`
	Queue        string              `msgpack:"queue,omitempty"`
	Input        []byte              `msgpack:"input,omitempty"`
	Attempt      int                 `msgpack:"attempt"`
	Retry        history.RetryPolicy `msgpack:"retry"`
	Timeout      time.Duration       `msgpack:"timeout,omitempty"`
	VisibleAt    int64               `msgpack:"visible_at,omitempty"`
	EnqueuedAt   int64               `msgpack:"enqueued_at,omitempty"`
	LastError    string              `msgpack:"last_error,omitempty"`
	Priority     int                 `msgpack:"priority,omitempty"`
	ConcKey      string              `msgpack:"concurrency_key,omitempty"`
	ConcLimit    int                 `msgpack:"concurrency_limit,omitempty"`
}

// MarshalActivityTask encodes a task as a self-contained envelope.
func MarshalActivityTask(t *ActivityTask) ([]byte, error) {
	return history.Encode(&taskEnvelope{
		Format: 1, ID: t.ID, InstanceID: t.InstanceID, ExecutionID: t.ExecutionID, ScheduledSeq: t.ScheduledSeq,
		Name: t.Name, Queue: t.Queue, Input: t.Input, Attempt: t.Attempt, Retry: t.Retry, Timeout: t.Timeout,
		VisibleAt: UnixNanos(t.VisibleAt), EnqueuedAt: UnixNanos(t.EnqueuedAt), LastError: t.LastError,
		Priority: t.Priority, ConcKey: t.ConcurrencyKey, ConcLimit: t.ConcurrencyLimit,
	})
}

// UnmarshalActivityTask decodes an envelope written by
// [MarshalActivityTask]; it never panics.
func UnmarshalActivityTask(data []byte) (ActivityTask, error) {
	var e taskEnvelope
	if err := history.Decode(data, &e); err != nil {
		return ActivityTask{}, fmt.Errorf("decode activity task: %w", err)
	}
	if e.Format != 1 {
		return ActivityTask{}, fmt.Errorf("decode activity task: %w: format %d", history.ErrCorrupt, e.Format)
	}
	return ActivityTask{
		ID: e.ID, InstanceID: e.InstanceID, ExecutionID: e.ExecutionID, ScheduledSeq: e.ScheduledSeq,
		Name: e.Name, Queue: e.Queue, Input: e.Input, Attempt: e.Attempt, Retry: e.Retry, Timeout: e.Timeout,
		VisibleAt: FromUnixNanos(e.VisibleAt), EnqueuedAt: FromUnixNanos(e.EnqueuedAt), LastError: e.LastError,
		Priority: e.Priority, ConcurrencyKey: e.ConcKey, ConcurrencyLimit: e.ConcLimit,
	}, nil
}

// SetDefaults applies the defaults of an enqueue: a zero EnqueuedAt or
// VisibleAt takes now, and an Attempt below 1 is 1.
func (t *ActivityTask) SetDefaults(now time.Time) {
	if t.EnqueuedAt.IsZero() {
		t.EnqueuedAt = now
	}
	if t.VisibleAt.IsZero() {
		t.VisibleAt = now
	}
	if t.Attempt <= 0 {
		t.Attempt = 1
	}
}
