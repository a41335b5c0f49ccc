package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/round"
)

// WorkflowFunc is a registered workflow in its encoded form: the engine
// wraps typed workflow functions into it with its codec.
type WorkflowFunc func(ctx *Context, input []byte) ([]byte, error)

// Options configure a [Replayer].
type Options struct {
	// Lookup finds a registered workflow by name. Required.
	Lookup func(name string) (WorkflowFunc, bool)
	// Codec encodes user payloads. Default [MsgpackCodec].
	Codec Codec
	// MaxPayloadSize bounds encoded payloads. Default 2 MiB.
	MaxPayloadSize int
	// DefaultRetry fills zero fields of activities' retry policies, so
	// history records the policy in effect. Default
	// [round.DefaultRetryPolicy].
	DefaultRetry history.RetryPolicy
	// QueuePriorities gives the activities of a queue a priority when
	// their options set none.
	QueuePriorities map[string]int
	// Logger receives workflow logs outside replay. Default discards.
	Logger *slog.Logger
	// SearchAttributes declares the search attributes workflow code may
	// set, by name ([Context.UpsertSearchAttributes]).
	SearchAttributes map[string]query.Type
	// Seal, when set, seals every payload a command of an execution with
	// a data subject records ([Context.Subject]); the Codec opens them.
	Seal func(subject, instanceID string, payload []byte) ([]byte, error)
}

// Replayer runs workflow code deterministically against history. Its
// [Replayer.Turn] is the turn function of Chronicle's round runner.
type Replayer struct {
	opts Options
}

// New returns a replayer.
func New(opts Options) *Replayer {
	if opts.Codec == nil {
		opts.Codec = MsgpackCodec{}
	}
	if opts.MaxPayloadSize <= 0 {
		opts.MaxPayloadSize = 2 << 20
	}
	opts.DefaultRetry = round.WithRetryDefaults(opts.DefaultRetry, round.DefaultRetryPolicy)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Replayer{opts: opts}
}

// executor is the replayed state of one execution: its coroutines, futures
// and buffered signals. It is cached between rounds of its instance.
type executor struct {
	r           *Replayer
	instanceID  string
	executionID string
	start       *history.ExecutionStarted
	startEvent  history.Event
	fn          WorkflowFunc
	ctx         *Context

	coroutines []*coroutine
	current    *coroutine
	yielded    chan struct{}
	main       *coroutine

	// the turn being run
	now       time.Time
	turnSeq   int64
	nextSeq   int64 // seq of the next event of the log
	replaying bool
	recorded  []history.Event // the turn's command events, when replaying
	produced  []history.Event // the turn's commands so far
	ids       int

	futures  map[int64]*future  // by the seq of the scheduling command
	tasks    map[string]*future // open human tasks by task id
	signals  []*signal          // raised and not yet consumed, in arrival order
	waiters  []*signalWaiter    // waits for signals, in call order
	resolved int64              // resolution counter for WhenAny

	// attrs are the execution's search attributes: its start's, changed
	// by its upserts.
	attrs history.SearchAttributeMap

	suspended bool
	ended     bool // an end event is in history
	finished  bool // the main coroutine returned
	fatal     error
	closed    bool
}

type signal struct {
	event history.Event
	attrs *history.EventRaised
}

type signalWaiter struct {
	name  string
	f     *future
	timer int64 // seq of the timeout timer, 0 without one
}

// Turn implements round.TurnFunc: it brings the instance's executor up to
// date with the round's new events and runs workflow code to its next wait.
func (r *Replayer) Turn(ctx context.Context, in *round.TurnInput) (out *round.TurnOutput, err error) {
	x, _ := in.Cached.(*executor)
	if x != nil && (x.closed || x.fatal != nil) {
		x = nil
	}
	switch {
	case x != nil && in.Snapshot.ExecutionID != x.executionID:
		// The round started a new execution (after a termination, or on a
		// finished instance): its events are the round's from its start.
		x.Close()
		events := in.NewEvents[indexOfStart(in.NewEvents, in.Snapshot.ExecutionID):]
		if x, err = r.replay(in.InstanceID, events); err != nil {
			return nil, err
		}
	case x != nil:
		if err := x.applyAll(in.NewEvents); err != nil {
			x.Close()
			return nil, err
		}
	case in.Snapshot.Ended:
		// The execution has ended (terminated, say): no code runs after
		// its end, so none is replayed — its input may not even decode
		// any more (an erased data subject's).
		return &round.TurnOutput{}, nil
	default:
		if x, err = r.replay(in.InstanceID, in.History); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if x.nextSeq != in.Snapshot.LastSeq+1 {
		return nil, fmt.Errorf("chronicle: executor of %s is at seq %d, history at %d", in.InstanceID, x.nextSeq-1, in.Snapshot.LastSeq)
	}
	events, next, err := x.live(in.Now)
	if err != nil {
		return nil, err
	}
	if next != nil {
		x.Close()
		x = next
	}
	if x.ended {
		x.Close()
		return &round.TurnOutput{Events: events}, nil
	}
	return &round.TurnOutput{Events: events, Cached: x}, nil
}

func indexOfStart(events []history.Event, executionID string) int {
	for i, e := range events {
		if e.Kind == history.KindExecutionStarted && e.ExecutionID == executionID {
			return i
		}
	}
	return 0
}

// replay builds an executor from the events of one execution, running each
// recorded turn and checking that the code asks for exactly what history
// recorded.
func (r *Replayer) replay(instanceID string, events []history.Event) (*executor, error) {
	if len(events) == 0 || events[0].Kind != history.KindExecutionStarted {
		return nil, fmt.Errorf("chronicle: history of %s does not open with ExecutionStarted", instanceID)
	}
	x, err := r.newExecutor(instanceID, &events[0])
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(events); {
		e := &events[i]
		if e.Kind != history.KindTurnStarted {
			if isCommand(e.Kind) {
				x.Close()
				return nil, &NondeterminismError{InstanceID: instanceID, Seq: e.Seq, History: describe(e), Code: "nothing (no turn was running)"}
			}
			if err := x.apply(e); err != nil {
				x.Close()
				return nil, err
			}
			i++
			continue
		}
		j := i + 1
		for j < len(events) && isCommand(events[j].Kind) {
			j++
		}
		if err := x.runTurn(e.Seq, e.At, events[i+1:j]); err != nil {
			x.Close()
			return nil, err
		}
		for k := i + 1; k < j; k++ {
			// Commands that end the execution or change its state are
			// applied as the runner applied them.
			if err := x.applyCommand(&events[k]); err != nil {
				x.Close()
				return nil, err
			}
		}
		i = j
	}
	x.nextSeq = events[len(events)-1].Seq + 1
	return x, nil
}

func (r *Replayer) newExecutor(instanceID string, start *history.Event) (*executor, error) {
	a, err := start.Attributes()
	if err != nil {
		return nil, err
	}
	attrs := a.(*history.ExecutionStarted)
	fn, ok := r.opts.Lookup(attrs.Name)
	if !ok {
		return nil, &round.DeadLetterError{Reason: provider.ReasonUnknownWorkflow, Err: fmt.Errorf("%w: %q", ErrUnknownWorkflow, attrs.Name)}
	}
	x := &executor{
		r: r, instanceID: instanceID, executionID: start.ExecutionID, start: attrs, startEvent: *start, fn: fn,
		yielded: make(chan struct{}), futures: map[int64]*future{}, nextSeq: start.Seq + 1,
	}
	x.ctx = &Context{x: x}
	x.upsert(attrs.SearchAttributes)
	return x, nil
}

// applyAll applies the round's new events to a cached executor.
func (x *executor) applyAll(events []history.Event) error {
	for i := range events {
		e := &events[i]
		if e.Seq != x.nextSeq {
			return fmt.Errorf("chronicle: executor of %s expected seq %d, got %d", x.instanceID, x.nextSeq, e.Seq)
		}
		if err := x.apply(e); err != nil {
			return err
		}
		x.nextSeq = e.Seq + 1
	}
	return nil
}

// apply folds one input event (anything a message brings) into the
// executor: it resolves futures and buffers signals.
func (x *executor) apply(e *history.Event) error {
	if e.ExecutionID != x.executionID {
		return fmt.Errorf("chronicle: event %d of execution %s applied to %s", e.Seq, e.ExecutionID, x.executionID)
	}
	attrs, err := e.Attributes()
	if err != nil {
		return err
	}
	x.nextSeq = e.Seq + 1
	// Completions name what they complete by its seq.
	var seq int64
	switch e.Kind.Class() {
	case history.ClassActivity, history.ClassTimer, history.ClassSubWorkflow, history.ClassSignal:
		if seq, err = history.ParseSeqCorrelation(e.CorrelationID); err != nil {
			return fmt.Errorf("chronicle: event %d (%s): %w", e.Seq, e.Kind, err)
		}
	}
	switch a := attrs.(type) {
	case *history.ActivityCompleted:
		return x.resolve(e, seq, a.Result, nil)
	case *history.ActivityFailed:
		f := x.futures[seq]
		name := ""
		if f != nil {
			name = f.name
		}
		return x.resolve(e, seq, nil, &ActivityError{Name: name, Attempts: a.Attempts, Failure: a.Failure})
	case *history.SubWorkflowCompleted:
		return x.resolve(e, seq, a.Output, nil)
	case *history.SubWorkflowFailed:
		f := x.futures[seq]
		err := &SubWorkflowError{Failure: a.Failure}
		if f != nil {
			err.Name, err.InstanceID = f.name, f.child
		}
		return x.resolve(e, seq, nil, err)
	case *history.SignalDelivered:
		return x.resolve(e, seq, nil, nil)
	case *history.SignalFailed:
		f := x.futures[seq]
		err := &SignalError{Failure: a.Failure}
		if f != nil {
			err.Name, err.InstanceID = f.name, f.child
		}
		return x.resolve(e, seq, nil, err)
	case *history.TimerFired:
		for i, w := range x.waiters {
			if w.timer == seq {
				x.waiters = append(x.waiters[:i], x.waiters[i+1:]...)
				x.settle(w.f, nil, ErrTimeout)
				break
			}
		}
		return x.resolve(e, seq, nil, nil)
	case *history.EventRaised:
		s := &signal{event: *e, attrs: a}
		for i, w := range x.waiters {
			if w.name == a.Name {
				x.waiters = append(x.waiters[:i], x.waiters[i+1:]...)
				x.settle(w.f, a.Payload, nil)
				w.f.signalled = true
				return nil
			}
		}
		x.signals = append(x.signals, s)
	case *history.ExecutionTerminated:
		x.ended = true
		x.killAll()
	case *history.ExecutionRerun:
		// A record after the execution's end: its rerun runs in the next
		// execution.
	case *history.HoldPlaced, *history.HoldReleased:
		// A legal hold's record: workflow code never sees it.
	case *history.ExecutionSuspended:
		x.suspended = true
	case *history.ExecutionResumed:
		x.suspended = false
	case *history.TaskAssigned, *history.TaskReleased, *history.TaskReassigned:
		// Assignment does not wake workflow code.
	case *history.TaskCompleted:
		return x.resolveTask(e, a)
	case *history.ExecutionStarted:
		return fmt.Errorf("chronicle: second ExecutionStarted at seq %d in execution %s", e.Seq, x.executionID)
	default:
		return &NondeterminismError{InstanceID: x.instanceID, Seq: e.Seq, History: describe(e), Code: "nothing (no turn was running)"}
	}
	return nil
}

// applyCommand folds a replayed command event whose effect is on the
// executor rather than on a future.
func (x *executor) applyCommand(e *history.Event) error {
	switch e.Kind {
	case history.KindExecutionCompleted, history.KindExecutionFailed, history.KindContinuedAsNew:
		x.ended = true
		x.killAll()
	}
	return nil
}

func (x *executor) resolve(e *history.Event, seq int64, value []byte, err error) error {
	f, ok := x.futures[seq]
	if !ok {
		return &NondeterminismError{InstanceID: x.instanceID, Seq: e.Seq, History: describe(e), Code: fmt.Sprintf("nothing scheduled at seq %d", seq)}
	}
	delete(x.futures, seq)
	x.settle(f, value, err)
	return nil
}

func (x *executor) settle(f *future, value []byte, err error) {
	if f.done {
		return
	}
	x.resolved++
	f.done, f.value, f.err, f.order = true, value, err, x.resolved
}

// isCommand reports whether workflow code writes events of kind k during a
// turn (as opposed to messages, which bring the other kinds).
func isCommand(k history.Kind) bool {
	switch k {
	case history.KindActivityScheduled, history.KindTimerCreated, history.KindTimerCancelled,
		history.KindSubWorkflowScheduled, history.KindSignalSent, history.KindTaskCreated, history.KindTaskCancelled,
		history.KindMarkerRecorded, history.KindCustomStatusSet, history.KindCompensationStarted,
		history.KindCompensationCompleted, history.KindExecutionCompleted, history.KindExecutionFailed,
		history.KindContinuedAsNew, history.KindSearchAttributesUpserted, history.KindTaskEscalated:
		return true
	}
	return false
}

// runTurn runs every runnable coroutine until all wait. recorded holds the
// turn's command events when replaying, nil when live.
func (x *executor) runTurn(turnSeq int64, at time.Time, recorded []history.Event) error {
	x.now, x.turnSeq, x.nextSeq, x.ids = at, turnSeq, turnSeq+1, 0
	x.replaying, x.recorded, x.produced = recorded != nil, recorded, nil
	if x.main == nil {
		x.main = x.spawn("main", x.runMain)
	}
	for progress := true; progress && x.fatal == nil && !x.finished; {
		progress = false
		for i := 0; i < len(x.coroutines) && x.fatal == nil && !x.finished; i++ {
			if c := x.coroutines[i]; c.runnable() {
				c.step()
				progress = true
			}
		}
	}
	if x.fatal != nil {
		return x.fatal
	}
	if x.replaying && len(x.produced) < len(x.recorded) {
		e := &x.recorded[len(x.produced)]
		return &NondeterminismError{InstanceID: x.instanceID, Seq: e.Seq, History: describe(e), Code: "nothing (the code waits here)"}
	}
	return nil
}

func (x *executor) runMain() {
	result, err := x.fn(x.ctx, x.start.Input)
	x.finished = true
	var can *ContinueAsNewError
	switch {
	case errors.As(err, &can):
		x.command(&history.ContinuedAsNew{
			// Derived from the execution that continues, not from the
			// instance id alone: a purged id started again and continued
			// at the same seq gets an execution of its own, so no message
			// of the purged run's execution is taken for the new one.
			NewExecutionID: history.DeterministicID(x.instanceID+"\x00"+x.executionID, x.nextSeq, "execution"),
			Input:          can.Input, Version: x.start.Version,
		}, x.executionID)
	case err != nil:
		var inErr *InputError
		if errors.As(err, &inErr) {
			x.abort(&round.DeadLetterError{Reason: provider.ReasonUndecodable, Err: err})
		}
		x.command(&history.ExecutionFailed{Failure: failureOf(err)}, x.executionID)
	default:
		x.command(&history.ExecutionCompleted{Output: result}, x.executionID)
	}
}

func failureOf(err error) history.Failure {
	f := round.FailureOf(err)
	var ae *ActivityError
	if errors.As(err, &ae) {
		f.Type = "ActivityError"
	}
	return f
}

// command issues a command of workflow code: when replaying it must match
// the recorded event at the same position, else the code is
// nondeterministic. It returns the event.
func (x *executor) command(attrs history.Attributes, correlation string) *history.Event {
	payload, err := history.EncodeAttributes(attrs)
	if err != nil {
		x.abort(fmt.Errorf("chronicle: encode %s: %w", attrs.EventKind(), err))
	}
	e := history.Event{Seq: x.nextSeq, ExecutionID: x.executionID, Kind: attrs.EventKind(), CorrelationID: correlation, Payload: payload}
	if x.replaying {
		i := len(x.produced)
		if i >= len(x.recorded) {
			x.abort(&NondeterminismError{InstanceID: x.instanceID, Seq: e.Seq, History: "nothing (the turn ended)", Code: describeAttrs(attrs)})
		}
		rec := &x.recorded[i]
		if !matches(rec, attrs) {
			x.abort(&NondeterminismError{InstanceID: x.instanceID, Seq: rec.Seq, History: describe(rec), Code: describeAttrs(attrs)})
		}
		e = *rec
	}
	x.produced = append(x.produced, e)
	x.nextSeq++
	return &x.produced[len(x.produced)-1]
}

// peekRecorded returns the recorded command at the current position when
// replaying, or nil.
func (x *executor) peekRecorded() *history.Event {
	if !x.replaying || len(x.produced) >= len(x.recorded) {
		return nil
	}
	return &x.recorded[len(x.produced)]
}

// recordedChild returns the recorded SubWorkflowScheduled at the current
// position when replaying and it starts a child named name, or nil.
func (x *executor) recordedChild(name string) *history.SubWorkflowScheduled {
	rec := x.peekRecorded()
	if rec == nil || rec.Kind != history.KindSubWorkflowScheduled {
		return nil
	}
	a, err := rec.Attributes()
	if err != nil {
		return nil
	}
	if g := a.(*history.SubWorkflowScheduled); g.Name == name {
		return g
	}
	return nil
}

// matches reports whether a recorded command is what the code asks for
// now: same kind and same identity (activity, child or task name, marker,
// a signal's receiver and name).
func matches(rec *history.Event, attrs history.Attributes) bool {
	if rec.Kind != attrs.EventKind() {
		return false
	}
	got, err := rec.Attributes()
	if err != nil {
		return false
	}
	switch a := attrs.(type) {
	case *history.ActivityScheduled:
		return got.(*history.ActivityScheduled).Name == a.Name
	case *history.SubWorkflowScheduled:
		g := got.(*history.SubWorkflowScheduled)
		return g.Name == a.Name && g.InstanceID == a.InstanceID && g.Detached == a.Detached
	case *history.SignalSent:
		g := got.(*history.SignalSent)
		return g.Name == a.Name && g.InstanceID == a.InstanceID
	case *history.TaskCreated:
		g := got.(*history.TaskCreated)
		return g.Name == a.Name && g.TaskID == a.TaskID
	case *history.TaskEscalated:
		g := got.(*history.TaskEscalated)
		return g.TaskID == a.TaskID && g.Step == a.Step
	case *history.MarkerRecorded:
		g := got.(*history.MarkerRecorded)
		return g.Marker == a.Marker && g.Name == a.Name
	}
	return true
}

func describe(e *history.Event) string {
	a, err := e.Attributes()
	if err != nil {
		return string(e.Kind) + " (undecodable)"
	}
	return describeAttrs(a)
}

func describeAttrs(a history.Attributes) string {
	switch a := a.(type) {
	case *history.ActivityScheduled:
		return "ActivityScheduled " + strconv.Quote(a.Name)
	case *history.SubWorkflowScheduled:
		return fmt.Sprintf("SubWorkflowScheduled %q (%s)", a.Name, a.InstanceID)
	case *history.SignalSent:
		return fmt.Sprintf("SignalSent %q (%s)", a.Name, a.InstanceID)
	case *history.TaskCreated:
		return fmt.Sprintf("TaskCreated %q (%s)", a.Name, a.TaskID)
	case *history.TaskEscalated:
		return fmt.Sprintf("TaskEscalated %s step %d", a.TaskID, a.Step)
	case *history.MarkerRecorded:
		return fmt.Sprintf("MarkerRecorded %s %q", a.Marker, a.Name)
	case *history.TimerCreated:
		if a.Name != "" {
			return "TimerCreated " + strconv.Quote(a.Name)
		}
	case *history.EventRaised:
		return "EventRaised " + strconv.Quote(a.Name)
	}
	return string(a.EventKind())
}

// live runs the round's turn: it writes TurnStarted and the commands the
// code issues. When the code continues as new, it also starts the next
// execution and runs its first turn, returning its executor.
func (x *executor) live(now time.Time) ([]history.Event, *executor, error) {
	if x.ended || x.suspended {
		return nil, nil, nil
	}
	payload, err := history.EncodeAttributes(&history.TurnStarted{})
	if err != nil {
		return nil, nil, err
	}
	turn := history.Event{Seq: x.nextSeq, ExecutionID: x.executionID, Kind: history.KindTurnStarted, Payload: payload}
	if err := x.runTurn(turn.Seq, now, nil); err != nil {
		return nil, nil, err
	}
	events := append(append(make([]history.Event, 0, 1+len(x.produced)), turn), x.produced...)
	for i := range x.produced {
		if err := x.applyCommand(&x.produced[i]); err != nil {
			return nil, nil, err
		}
	}
	x.produced = nil
	last := &events[len(events)-1]
	if last.Kind != history.KindContinuedAsNew {
		return events, nil, nil
	}
	a, err := last.Attributes()
	if err != nil {
		return nil, nil, err
	}
	can := a.(*history.ContinuedAsNew)
	next, more, err := x.continueAsNew(last.Seq+1, can, now)
	if err != nil {
		return nil, nil, err
	}
	return append(events, more...), next, nil
}

// continueAsNew starts the next execution in the same round: its
// ExecutionStarted, the signals the old one had not consumed, and its
// first turn.
func (x *executor) continueAsNew(seq int64, can *history.ContinuedAsNew, now time.Time) (*executor, []history.Event, error) {
	start := *x.start
	start.Input, start.ContinuedFrom, start.Version = can.Input, x.executionID, can.Version
	start.RerunOf = nil // the lineage of a rerun is its own execution's
	start.SearchAttributes = maps.Clone(x.attrs)
	payload, err := history.EncodeAttributes(&start)
	if err != nil {
		return nil, nil, err
	}
	events := []history.Event{{Seq: seq, InstanceID: x.instanceID, ExecutionID: can.NewExecutionID, Kind: history.KindExecutionStarted,
		CorrelationID: can.NewExecutionID, Payload: payload, Actor: history.ActorSystem}}
	next, err := x.r.newExecutor(x.instanceID, &events[0])
	if err != nil {
		return nil, nil, err
	}
	for _, s := range x.signals {
		e := s.event
		e.Seq, e.ExecutionID, e.Hash, e.PrevHash = next.nextSeq, can.NewExecutionID, nil, nil
		events = append(events, e)
		if err := next.apply(&events[len(events)-1]); err != nil {
			next.Close()
			return nil, nil, err
		}
	}
	more, after, err := next.live(now)
	if err != nil {
		next.Close()
		return nil, nil, err
	}
	if after != nil {
		next.Close()
		next = after
	}
	return next, append(events, more...), nil
}

// killAll ends every coroutine.
func (x *executor) killAll() {
	for _, c := range x.coroutines {
		c.kill()
	}
}

// Close ends the executor's coroutines. The runner calls it when it drops
// the executor from its cache.
func (x *executor) Close() {
	if x == nil || x.closed {
		return
	}
	x.closed = true
	x.killAll()
}
