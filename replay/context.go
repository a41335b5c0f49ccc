package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Context is what workflow code gets instead of a context.Context: every
// call that touches the outside world goes through it, so that replaying
// the code against its history makes the same calls in the same order.
//
// Workflow code must be deterministic: it may not read the clock, random
// numbers, the network or files, nor start goroutines of its own; it uses
// [Context.Now], [Context.NewID], [Context.SideEffect] and [Context.Go]
// instead, and iterates over maps in sorted order.
type Context struct {
	x *executor
}

// ActivityOptions configure one activity call; a nil *ActivityOptions, like
// the zero value, means the default queue, the engine's retry policy and
// no per-attempt timeout.
type ActivityOptions struct {
	// Queue routes the activity task to workers serving that queue.
	Queue string
	// Retry overrides the engine's default retry policy; zero fields keep
	// the defaults.
	Retry history.RetryPolicy
	// Timeout bounds one attempt; zero means the worker's lease.
	Timeout time.Duration
	// Priority orders the task among claimable tasks: higher first (see
	// docs/operations.md, "Priority"). Zero takes the queue's priority
	// (the engine's QueuePriorities), else the instance's.
	Priority int
	// Concurrency, when set, bounds how many tasks of its key run at
	// once, across every node and instance.
	Concurrency *history.Concurrency
}

// SubWorkflowOptions configure one sub-workflow call; a nil
// *SubWorkflowOptions, like the zero value, means a derived instance id and
// no version.
type SubWorkflowOptions struct {
	// InstanceID names the child; default: the parent's instance id, its
	// execution id and the scheduling Seq joined by "/" (see
	// [round.DefaultChildID]), unique even when a purged parent id is
	// reused. An explicit id taken by a running instance fails the call
	// with a *SubWorkflowError that matches [ErrSubWorkflowAlreadyStarted];
	// the id of an ended instance is reused (a new execution starts).
	InstanceID string
	// Version is recorded with the child's start.
	Version string
}

// StartWorkflowOptions configure a detached start (see
// [Context.StartWorkflow]). InstanceID is required.
type StartWorkflowOptions struct {
	// InstanceID names the instance to start; a start of an id that has
	// been started before is a no-op.
	InstanceID string
	// Version is recorded with the start.
	Version string
	// Tags are free-form labels recorded with the start.
	Tags map[string]string
	// Priority orders the started instance's work in the queues, as
	// StartOptions.Priority does; zero is the default priority (the
	// starter's is not inherited).
	Priority int
	// Concurrency, when set, bounds how many instances of its key run at
	// once, as StartOptions.Concurrency does.
	Concurrency *history.Concurrency
	// Due, when set, is when the start was due (a schedule passes its
	// firing time): the queue orders the start as if it had been sent
	// then, so under a backlog it goes before work that came due after
	// it. A time after the round's is taken as the round's: Due never
	// delays a start.
	Due time.Time
}

// WaitOptions configure a wait for a signal; a nil *WaitOptions, like the
// zero value, waits without a timeout.
type WaitOptions struct {
	// Timeout, when positive, ends the wait with ErrTimeout.
	Timeout time.Duration
}

// TimerOptions configure a timer; a nil *TimerOptions, like the zero value,
// makes an unnamed timer.
type TimerOptions struct {
	// Name labels the timer in history and timelines.
	Name string
}

// InstanceID returns the instance's id.
func (c *Context) InstanceID() string { return c.x.instanceID }

// ExecutionID returns the current execution's id.
func (c *Context) ExecutionID() string { return c.x.executionID }

// WorkflowName returns the registered name of the workflow.
func (c *Context) WorkflowName() string { return c.x.start.Name }

// BusinessKey returns the instance's business reference key.
func (c *Context) BusinessKey() string { return c.x.start.BusinessKey }

// Now returns the workflow's deterministic time: the time of the current
// turn, the same on every replay.
func (c *Context) Now() time.Time { return c.x.now }

// IsReplaying reports whether the code is being replayed from history
// rather than running for the first time.
func (c *Context) IsReplaying() bool { return c.x.replaying }

// Logger returns a logger that is silent while the code is replayed, so
// each line is logged once. Its records carry the instance_id,
// execution_id and workflow attributes.
func (c *Context) Logger() *slog.Logger {
	if c.x.replaying {
		return slog.New(slog.DiscardHandler)
	}
	return c.x.r.opts.Logger.With(slog.String("instance_id", c.x.instanceID), slog.String("execution_id", c.x.executionID), slog.String("workflow", c.x.start.Name))
}

// NewID returns an id that is the same on every replay.
func (c *Context) NewID() string {
	c.x.ids++
	return history.DeterministicID(c.x.executionID, c.x.turnSeq, "id:"+strconv.Itoa(c.x.ids))
}

// encode encodes a payload of a command and checks it against
// MaxPayloadSize: every payload that enters history passes here (or the
// client API's check), raw ones included.
func (c *Context) encode(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, raw := v.(RawPayload)
	if !raw {
		var err error
		if b, err = c.x.r.opts.Codec.Encode(v); err != nil {
			return nil, err
		}
	}
	if len(b) > c.x.r.opts.MaxPayloadSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrPayloadTooLarge, len(b), c.x.r.opts.MaxPayloadSize)
	}
	return c.seal(b)
}

// seal seals a payload of the execution when it has a data subject.
func (c *Context) seal(b []byte) ([]byte, error) {
	if s := c.x.start.Subject; s != "" && c.x.r.opts.Seal != nil {
		return c.x.r.opts.Seal(s, c.x.instanceID, b)
	}
	return b, nil
}

// Subject returns the data subject of the execution (StartOptions.Subject,
// inherited by sub-workflows and continue-as-new), "" when it has none.
func (c *Context) Subject() string { return c.x.start.Subject }

// RawPayload is a payload already encoded with the engine's codec; it is
// passed through unchanged.
type RawPayload []byte

// CallActivity schedules an activity and returns its future. The activity
// runs at least once; a failure after the retries is an *ActivityError.
// opts may be nil.
func (c *Context) CallActivity(name string, input any, opts *ActivityOptions) Future {
	var o ActivityOptions
	if opts != nil {
		o = *opts
	}
	if err := history.ValidateID("activity name", name); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: call activity: %w", err))
	}
	if o.Queue != "" {
		if err := history.ValidateID("activity queue", o.Queue); err != nil {
			return c.x.failedFuture(fmt.Errorf("chronicle: activity %s: %w", name, err))
		}
	}
	if err := provider.ValidatePriority(o.Priority); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: activity %s: %w", name, err))
	}
	var conc *history.Concurrency
	if o.Concurrency != nil {
		if err := provider.ValidateLimit(o.Concurrency.Key, o.Concurrency.Limit); err != nil {
			return c.x.failedFuture(fmt.Errorf("chronicle: activity %s: %w", name, err))
		}
		if o.Concurrency.Key != "" {
			conc = &history.Concurrency{Key: o.Concurrency.Key, Limit: o.Concurrency.Limit}
		}
	}
	priority := o.Priority
	if priority == 0 {
		priority = c.x.r.opts.QueuePriorities[o.Queue]
	}
	payload, err := c.encode(input)
	if err == nil && payload == nil && c.x.start.Subject != "" {
		// Sealed even when empty: the worker seals the result for the
		// subject the input names.
		payload, err = c.seal(nil)
	}
	if err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: activity %s input: %w", name, err))
	}
	e := c.x.command(&history.ActivityScheduled{
		Name: name, Input: payload, Queue: o.Queue, Timeout: o.Timeout,
		Retry:    round.WithRetryDefaults(o.Retry, c.x.r.opts.DefaultRetry),
		Priority: priority, Concurrency: conc,
	}, "")
	return c.x.newFuture(e.Seq, name)
}

// CallSubWorkflow starts a child workflow and returns the future of its
// result. The child is an instance of its own; its failure or termination
// is a *SubWorkflowError, and so is the refusal of its start when its
// instance id is taken by a running instance (it matches
// [ErrSubWorkflowAlreadyStarted]). opts may be nil.
func (c *Context) CallSubWorkflow(name string, input any, opts *SubWorkflowOptions) Future {
	var o SubWorkflowOptions
	if opts != nil {
		o = *opts
	}
	if err := history.ValidateID("sub-workflow name", name); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: call sub-workflow: %w", err))
	}
	if err := CheckText("sub-workflow version", o.Version); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: sub-workflow %s: %w", name, err))
	}
	payload, err := c.encode(input)
	if err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: sub-workflow %s input: %w", name, err))
	}
	seq := c.x.nextSeq
	child, exec := o.InstanceID, round.ChildExecutionID(c.x.instanceID, c.x.executionID, seq)
	if rec := c.x.recordedChild(name); rec != nil {
		// Replay keeps the ids history recorded: earlier versions derived
		// them differently, and a default id is not part of the call.
		exec = rec.ExecutionID
		if child == "" {
			child = rec.InstanceID
		}
	}
	if child == "" {
		child = round.DefaultChildID(c.x.instanceID, c.x.executionID, seq)
	}
	if err := history.ValidateID("sub-workflow instance id", child); err != nil {
		return c.x.failedFuture(err)
	}
	e := c.x.command(&history.SubWorkflowScheduled{
		Name: name, Version: o.Version, InstanceID: child, ExecutionID: exec, Input: payload,
	}, "")
	f := c.x.newFuture(e.Seq, name)
	f.child = child
	return f
}

// StartWorkflow starts an instance of the workflow name that runs on its
// own, not as a child: no parent link, nothing to wait for, and the
// instance outlives the caller. The round records the start as a
// SubWorkflowScheduled marked detached and queues the instance's start
// message with its own writes (in its transaction, or repaired by a
// later round after a peek-lock crash), so no crash loses it. The start
// happens at most once per instance id: when the id has been started
// before (by this call repeated, or by any other start), the message is
// dropped and nothing runs. The start's actor is
// "workflow:<this instance id>".
//
// It returns an error, and records nothing, when the options are
// invalid (a missing or bad instance id, priority or limit) or the input
// does not encode.
func (c *Context) StartWorkflow(name string, input any, opts *StartWorkflowOptions) error {
	var o StartWorkflowOptions
	if opts != nil {
		o = *opts
	}
	if err := history.ValidateID("workflow name", name); err != nil {
		return fmt.Errorf("chronicle: start workflow: %w", err)
	}
	if err := history.ValidateID("instance id", o.InstanceID); err != nil {
		return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
	}
	if err := CheckText("workflow version", o.Version); err != nil {
		return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
	}
	for k, v := range o.Tags {
		if err := CheckText("tag", k); err != nil {
			return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
		}
		if err := CheckText("tag", v); err != nil {
			return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
		}
	}
	if err := provider.ValidatePriority(o.Priority); err != nil {
		return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
	}
	var conc *history.Concurrency
	if o.Concurrency != nil {
		if err := provider.ValidateLimit(o.Concurrency.Key, o.Concurrency.Limit); err != nil {
			return fmt.Errorf("chronicle: start workflow %s: %w", name, err)
		}
		if o.Concurrency.Key != "" {
			conc = &history.Concurrency{Key: o.Concurrency.Key, Limit: o.Concurrency.Limit}
		}
	}
	payload, err := c.encode(input)
	if err != nil {
		return fmt.Errorf("chronicle: start workflow %s input: %w", name, err)
	}
	seq := c.x.nextSeq
	exec := round.ChildExecutionID(c.x.instanceID, c.x.executionID, seq)
	if rec := c.x.peekRecorded(); rec != nil && rec.Kind == history.KindSubWorkflowScheduled {
		if a, err := rec.Attributes(); err == nil {
			exec = a.(*history.SubWorkflowScheduled).ExecutionID
		}
	}
	c.x.command(&history.SubWorkflowScheduled{
		Name: name, Version: o.Version, InstanceID: o.InstanceID, ExecutionID: exec, Input: payload,
		Detached: true, Tags: o.Tags, Priority: o.Priority, Concurrency: conc, Due: o.Due.UTC(),
	}, "")
	return nil
}

// Timer returns a future that resolves after d of workflow time. A durable
// timer survives restarts; it is recorded in history and fires through the
// store's delayed delivery. opts may be nil; its Name labels the timer in
// timelines.
func (c *Context) Timer(d time.Duration, opts *TimerOptions) Future {
	label := ""
	if opts != nil {
		label = opts.Name
	}
	if err := CheckText("timer name", label); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: timer: %w", err))
	}
	_, f := c.timer(d, label)
	return f
}

func (c *Context) timer(d time.Duration, name string) (int64, *future) {
	e := c.x.command(&history.TimerCreated{FireAt: c.x.now.Add(max(d, 0)), Name: name}, "")
	f := c.x.newFuture(e.Seq, name)
	f.seq = e.Seq
	return e.Seq, f
}

// CancelTimer cancels a pending timer returned by Timer: it records
// TimerCancelled, its future fails with ErrTimerCancelled, and its fire
// message is dropped as stale when it comes due. It reports whether the
// timer was pending.
func (c *Context) CancelTimer(timer Future) bool {
	f, ok := timer.(*future)
	if !ok || f.done || f.seq == 0 {
		return false
	}
	if _, pending := c.x.futures[f.seq]; !pending {
		return false
	}
	delete(c.x.futures, f.seq)
	c.x.command(&history.TimerCancelled{}, history.SeqCorrelation(f.seq))
	c.x.settle(f, nil, ErrTimerCancelled)
	return true
}

// Sleep waits for d of workflow time.
func (c *Context) Sleep(d time.Duration) error { return c.Timer(d, nil).Get(nil) }

// WaitEvent returns a future resolved by the next signal named name raised
// on the instance; signals raised before the wait are buffered and consumed
// in arrival order. With a timeout the future fails with ErrTimeout when
// the timeout passes first. opts may be nil.
func (c *Context) WaitEvent(name string, opts *WaitOptions) Future {
	x := c.x
	if err := CheckText("event name", name); err != nil {
		return x.failedFuture(fmt.Errorf("chronicle: wait event: %w", err))
	}
	f := x.newFuture(0, name)
	for i, s := range x.signals {
		if s.attrs.Name == name {
			x.signals = append(x.signals[:i], x.signals[i+1:]...)
			x.settle(f, s.attrs.Payload, nil)
			return f
		}
	}
	w := &signalWaiter{name: name, f: f}
	if opts != nil && opts.Timeout > 0 {
		w.timer, _ = c.timer(opts.Timeout, "wait "+name)
		f.timer = w.timer
		f.onGet = func() {
			// The signal came first: cancel the timer so it does not wake
			// the instance later.
			if f.signalled {
				if _, pending := x.futures[f.timer]; pending {
					delete(x.futures, f.timer)
					x.command(&history.TimerCancelled{}, history.SeqCorrelation(f.timer))
				}
			}
		}
	}
	x.waiters = append(x.waiters, w)
	return f
}

// Go starts fn as a workflow coroutine and returns the future of its error.
// Coroutines run one at a time, in a deterministic order.
func (c *Context) Go(fn func(ctx *Context) error) Future {
	x := c.x
	f := x.newFuture(0, "coroutine")
	x.spawn("go", func() {
		err := fn(c)
		x.settle(f, nil, err)
	})
	return f
}

// WhenAll waits for every future and returns the first error in argument
// order.
func (c *Context) WhenAll(fs ...Future) error {
	c.x.current.wait(func() bool {
		for _, f := range fs {
			if !f.Ready() {
				return false
			}
		}
		return true
	})
	for _, f := range fs {
		if err := f.Get(nil); err != nil {
			return err
		}
	}
	return nil
}

// WhenAny waits until one of the futures is ready and returns the index of
// the one resolved first in history order.
func (c *Context) WhenAny(fs ...Future) int {
	if len(fs) == 0 {
		c.x.abort(fmt.Errorf("chronicle: WhenAny needs at least one future"))
	}
	c.x.current.wait(func() bool {
		for _, f := range fs {
			if f.Ready() {
				return true
			}
		}
		return false
	})
	best := -1
	var order int64
	for i, f := range fs {
		if !f.Ready() {
			continue
		}
		o := int64(0)
		if ff, ok := f.(*future); ok {
			o = ff.order
		}
		if best < 0 || o < order {
			best, order = i, o
		}
	}
	return best
}

// SelectCase pairs a future with what to do when it is the first ready.
type SelectCase struct {
	Future Future
	Do     func(f Future)
}

// Select waits for the first ready future among the cases, runs its Do and
// returns its index.
func (c *Context) Select(cases ...SelectCase) int {
	fs := make([]Future, len(cases))
	for i, sc := range cases {
		fs[i] = sc.Future
	}
	i := c.WhenAny(fs...)
	if cases[i].Do != nil {
		cases[i].Do(cases[i].Future)
	}
	return i
}

// ContinueAsNew returns the error that ends the execution and starts a new
// one with input, keeping the instance id; signals not yet consumed carry
// over. Workflow code returns it: `return out, ctx.ContinueAsNew(next)`.
func (c *Context) ContinueAsNew(input any) error {
	payload, err := c.encode(input)
	if err != nil {
		return fmt.Errorf("chronicle: continue-as-new input: %w", err)
	}
	return &ContinueAsNewError{Input: payload}
}

// SetCustomStatus records a status the instance shows to users.
func (c *Context) SetCustomStatus(status any) error {
	if text, ok := status.(string); ok {
		if err := CheckText("custom status", text); err != nil {
			return fmt.Errorf("chronicle: custom status: %w", err)
		}
	}
	payload, err := c.encode(status)
	if err != nil {
		return fmt.Errorf("chronicle: custom status: %w", err)
	}
	text, _ := status.(string)
	if c.x.start.Subject != "" {
		// The searchable text would be a plaintext copy of a sealed
		// payload.
		text = ""
	}
	c.x.command(&history.CustomStatusSet{Status: payload, Text: text}, "")
	return nil
}

// SideEffect runs fn once and records its result; replays return the
// recorded result without running fn. out receives the result.
func (c *Context) SideEffect(fn func() (any, error), out any) error {
	x := c.x
	var value []byte
	if rec := x.peekRecorded(); rec != nil {
		e := x.command(&history.MarkerRecorded{Marker: history.MarkerSideEffect}, "")
		a, err := e.Attributes()
		if err != nil {
			return err
		}
		value = a.(*history.MarkerRecorded).Value
	} else {
		v, err := fn()
		if err != nil {
			return err
		}
		if value, err = c.encode(v); err != nil {
			return fmt.Errorf("chronicle: side effect: %w", err)
		}
		x.command(&history.MarkerRecorded{Marker: history.MarkerSideEffect, Value: value}, "")
	}
	if out != nil && len(value) > 0 {
		return x.r.opts.Codec.Decode(value, out)
	}
	return nil
}

// DefaultVersion is what [Context.Version] returns for histories recorded
// before the change point existed.
const DefaultVersion = -1

// Version marks a change of workflow code. The first run records
// maxSupported; replays return what was recorded, or DefaultVersion for
// histories older than the change. Code branches on the result to keep old
// histories replaying. A recorded version outside [minSupported,
// maxSupported] is a nondeterminism error.
func (c *Context) Version(changeID string, minSupported, maxSupported int) int {
	x := c.x
	version := maxSupported
	if x.replaying {
		version = DefaultVersion
		if rec := x.peekRecorded(); rec != nil && rec.Kind == history.KindMarkerRecorded {
			if a, err := rec.Attributes(); err == nil {
				if m := a.(*history.MarkerRecorded); m.Marker == history.MarkerVersion && m.Name == changeID {
					version = m.Version
					x.command(&history.MarkerRecorded{Marker: history.MarkerVersion, Name: changeID, Version: version}, "")
				}
			}
		}
	} else {
		x.command(&history.MarkerRecorded{Marker: history.MarkerVersion, Name: changeID, Version: version}, "")
	}
	if version < minSupported || version > maxSupported {
		x.abort(&NondeterminismError{InstanceID: x.instanceID, Seq: x.nextSeq,
			History: fmt.Sprintf("version %d of change %q", version, changeID),
			Code:    fmt.Sprintf("a version in [%d, %d]", minSupported, maxSupported)})
	}
	return version
}

// Context returns a context.Context for helpers that need one (to carry
// values); it is never cancelled and must not be used for I/O.
func (c *Context) Context() context.Context { return context.Background() }

// ErrInvalidText is matched by a *TextError.
var ErrInvalidText = errors.New("chronicle: invalid text")

// TextError reports free text (a business key, a reason, a task name or
// role...) that no store can keep as text: it holds a NUL byte or is not
// valid UTF-8. It matches ErrInvalidText.
type TextError struct {
	// Field names the text.
	Field string
	// Offset is the byte offset of the first bad byte.
	Offset int
	// NUL is true for a NUL byte, false for invalid UTF-8.
	NUL bool
}

// Error implements error.
func (e *TextError) Error() string {
	what := "is not valid UTF-8"
	if e.NUL {
		what = "holds a NUL byte"
	}
	return fmt.Sprintf("%s %s at byte %d", e.Field, what, e.Offset)
}

// Is matches ErrInvalidText.
func (e *TextError) Is(target error) bool { return target == ErrInvalidText }

// CheckText returns a *TextError when s holds a NUL byte or is not valid
// UTF-8, and nil otherwise.
func CheckText(field, s string) error {
	for i, r := range s {
		switch {
		case r == 0:
			return &TextError{Field: field, Offset: i, NUL: true}
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return &TextError{Field: field, Offset: i}
			}
		}
	}
	return nil
}

// CleanText returns s with every NUL byte and invalid UTF-8 sequence
// replaced by U+FFFD: the form in which text the engine records from user
// errors (failures, panics) is stored.
func CleanText(s string) string { return history.CleanText(s) }
