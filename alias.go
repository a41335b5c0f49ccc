package chronicle

import (
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// Context is what workflow code receives instead of a context.Context; see
// [replay.Context] for its methods.
type Context = replay.Context

// Future is the pending result of an activity, timer, sub-workflow, signal
// wait, human task or coroutine.
type Future = replay.Future

// Codec encodes user payloads; [MsgpackCodec] is the default, [JSONCodec]
// the alternative.
type Codec = replay.Codec

// MsgpackCodec encodes payloads as MessagePack.
type MsgpackCodec = replay.MsgpackCodec

// JSONCodec encodes payloads as JSON.
type JSONCodec = replay.JSONCodec

// ActivityOptions configure one activity call.
type ActivityOptions = replay.ActivityOptions

// Concurrency names a concurrency key and its limit: at most Limit
// instances (StartOptions.Concurrency) or activity tasks
// (ActivityOptions.Concurrency) of the key run at once, across every
// node (see docs/operations.md, "Flow control").
type Concurrency = history.Concurrency

// RateLimit bounds the activity tasks of a name or queue that every node
// together claims per interval (Options.RateLimits): Tokens claims in
// each window of Interval, counted by the store under Key.
type RateLimit = provider.RateLimit

// SubWorkflowOptions configure one sub-workflow call.
type SubWorkflowOptions = replay.SubWorkflowOptions

// StartWorkflowOptions configure a detached start from workflow code
// ([Context.StartWorkflow]).
type StartWorkflowOptions = replay.StartWorkflowOptions

// WaitOptions configure a wait for a signal.
type WaitOptions = replay.WaitOptions

// TimerOptions configure a timer.
type TimerOptions = replay.TimerOptions

// TaskOptions configure a human task.
type TaskOptions = replay.TaskOptions

// TaskEscalation is a step of a task's escalation policy
// (TaskOptions.Escalation): what happens when the task is still open at
// its due time.
type TaskEscalation = replay.TaskEscalation

// Task is a human task opened by workflow code.
type Task = replay.Task

// Saga runs registered compensations in reverse order.
type Saga = replay.Saga

// SelectCase pairs a future with what to do when it is ready first.
type SelectCase = replay.SelectCase

// RawPayload is a payload already encoded with the engine's codec.
type RawPayload = replay.RawPayload

// RetryPolicy says how often and how fast a failed activity is retried.
type RetryPolicy = history.RetryPolicy

// Failure describes an error recorded in history.
type Failure = history.Failure

// Event is one entry of an instance's history.
type Event = history.Event

// Clock tells the engine the time; [round.ManualClock] drives it in tests.
type Clock = round.Clock

// Status is an instance's lifecycle state.
type Status = provider.Status

// Instance statuses.
const (
	StatusRunning    = provider.StatusRunning
	StatusSuspended  = provider.StatusSuspended
	StatusCompleted  = provider.StatusCompleted
	StatusFailed     = provider.StatusFailed
	StatusTerminated = provider.StatusTerminated
)

// DeadLetter is a message or activity task that could not be processed.
type DeadLetter = provider.DeadLetter

// Typed errors of workflow code, see the replay package.
type (
	// NondeterminismError reports code that no longer matches its history.
	NondeterminismError = replay.NondeterminismError
	// ActivityError reports an activity that failed for good.
	ActivityError = replay.ActivityError
	// SubWorkflowError reports a child workflow that failed.
	SubWorkflowError = replay.SubWorkflowError
	// SignalError reports a signal sent with Context.SignalWorkflow that
	// could not be delivered.
	SignalError = replay.SignalError
	// PanicError reports workflow code that panicked.
	PanicError = replay.PanicError
)

// DefaultVersion is what [Context.Version] returns for histories recorded
// before a change point existed.
const DefaultVersion = replay.DefaultVersion

// Await waits for a future and returns its result as a T.
func Await[T any](f Future) (T, error) { return replay.Await[T](f) }

// CallActivity calls an activity and waits for its result; opts may be nil.
func CallActivity[Out any](ctx *Context, name string, input any, opts *ActivityOptions) (Out, error) {
	return replay.Await[Out](ctx.CallActivity(name, input, opts))
}

// CallSubWorkflow runs a child workflow and waits for its result; opts may
// be nil.
func CallSubWorkflow[Out any](ctx *Context, name string, input any, opts *SubWorkflowOptions) (Out, error) {
	return replay.Await[Out](ctx.CallSubWorkflow(name, input, opts))
}

// WaitEvent waits for the next signal named name and returns its payload;
// opts may be nil.
func WaitEvent[T any](ctx *Context, name string, opts *WaitOptions) (T, error) {
	return replay.Await[T](ctx.WaitEvent(name, opts))
}

// WaitTask waits for a human task's completion and returns its result.
func WaitTask[T any](ctx *Context, t *Task) (T, error) {
	return replay.Await[T](ctx.WaitTask(t))
}

// SideEffect runs fn once, records its result and returns it; replays
// return the recorded result without running fn.
func SideEffect[T any](ctx *Context, fn func() (T, error)) (T, error) {
	var out T
	err := ctx.SideEffect(func() (any, error) { return fn() }, &out)
	return out, err
}
