package fuzz_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// The "program" workflow interprets its input, a random program of steps,
// with the real workflow API of replay.Context. It never fails by itself:
// activity failures and signal timeouts are caught and recorded in its
// output, a list with one outcome per step of the program.

const wfName = "program"

// Step kinds of a program.
const (
	wfActivity   = "activity"   // CallActivity(Name) + Get
	wfFanOut     = "fanout"     // Count coroutines calling Name, then WhenAll
	wfTimer      = "timer"      // Sleep(Seconds)
	wfSignal     = "signal"     // WaitEvent(Name), with a timeout of Seconds when > 0
	wfWaits      = "waits"      // a coroutine per signal step of Child, then WhenAll
	wfRace       = "race"       // WhenAny (or Select, when Count is 1) of Timer(Seconds) and WaitEvent(Name)
	wfChild      = "child"      // CallSubWorkflow(program Child), as instance ID when set
	wfSaga       = "saga"       // a saga of Count compensations calling Name, compensated
	wfAbandon    = "abandon"    // CallActivity(Name) without waiting for it
	wfBackground = "background" // a coroutine nobody joins: Sleep(Seconds), then CallActivity(Name)
	wfStatus     = "status"     // SetCustomStatus
	wfSideEffect = "sideeffect" // SideEffect returning a counter
	wfNewID      = "newid"      // NewID
	wfVersion    = "version"    // Version
	wfContinue   = "continue"   // ContinueAsNew with the rest of the program
	wfTask       = "task"       // CreateTask(Name) for Roles or Assignee, due in Count minutes, then WaitTask; raced with a timer of Seconds when > 0, and cancelled when the timer wins; with Escalate, an escalation reassigns it to managers after a minute
	wfSend       = "send"       // SignalWorkflow to the instance itself, a signal of its own that nobody waits for, then Get
)

// wfStep is one step of a program.
type wfStep struct {
	Kind    string `msgpack:"k"`
	Name    string `msgpack:"n,omitempty"`
	Count   int    `msgpack:"c,omitempty"`
	Seconds int    `msgpack:"s,omitempty"`
	// Attempts bounds the attempts of activities; 0 keeps the default.
	Attempts int      `msgpack:"a,omitempty"`
	Child    []wfStep `msgpack:"ch,omitempty"`
	// Roles and Assignee are those of a task.
	Roles    []string `msgpack:"r,omitempty"`
	Assignee string   `msgpack:"u,omitempty"`
	// Escalate gives a task an escalation step: after wfEscalateAfter
	// it goes, unassigned, to managers.
	Escalate bool `msgpack:"e,omitempty"`
	// ID is the explicit instance id of a child step, one of
	// wfSharedChildIDs, so that steps of several parents (or two steps of
	// one) name the same child; empty: the default child id.
	ID string `msgpack:"id,omitempty"`
}

// wfSharedChildIDs are the explicit child ids programs draw from: a small
// set, so that two parents often name the same child while it runs.
var wfSharedChildIDs = []string{"shared-child-1", "shared-child-2"}

// wfProgram is the input of the program workflow. Done holds the outcomes
// of the steps that earlier executions ran before they continued as new;
// Steps are the steps still to run.
type wfProgram struct {
	Steps []wfStep `msgpack:"steps"`
	Done  []string `msgpack:"done,omitempty"`
}

func (s wfStep) String() string {
	switch s.Kind {
	case wfActivity:
		return fmt.Sprintf("%s(%s/%d)", s.Kind, s.Name, s.Attempts)
	case wfFanOut, wfSaga:
		return fmt.Sprintf("%s(%s/%d×%d)", s.Kind, s.Name, s.Attempts, s.Count)
	case wfTimer, wfRace, wfSignal, wfBackground:
		return fmt.Sprintf("%s(%s %ds)", s.Kind, s.Name, s.Seconds)
	case wfChild, wfWaits:
		if s.ID != "" {
			return fmt.Sprintf("%s(%s)%v", s.Kind, s.ID, s.Child)
		}
		return fmt.Sprintf("%s%v", s.Kind, s.Child)
	case wfTask:
		if s.Escalate {
			return fmt.Sprintf("%s(%s %v@%s %ds escalated)", s.Kind, s.Name, s.Roles, s.Assignee, s.Seconds)
		}
		return fmt.Sprintf("%s(%s %v@%s %ds)", s.Kind, s.Name, s.Roles, s.Assignee, s.Seconds)
	}
	return s.Kind
}

// drawWfSteps draws a program; child programs hold only activities and
// timers, so their outcome is known in advance.
func drawWfSteps(t *rapid.T, label string, child bool) []wfStep {
	n := rapid.IntRange(1, 5).Draw(t, label+" steps")
	if child {
		n = rapid.IntRange(1, 3).Draw(t, label+" steps")
	}
	kinds := []string{wfActivity, wfActivity, wfFanOut, wfTimer, wfSignal, wfSignal, wfWaits, wfRace, wfChild, wfChild, wfSaga, wfAbandon, wfBackground, wfStatus, wfSideEffect, wfNewID, wfVersion, wfContinue, wfTask, wfTask, wfSend}
	if child {
		kinds = []string{wfActivity, wfFanOut, wfTimer}
	}
	continued := false
	steps := make([]wfStep, 0, n)
	for len(steps) < n {
		s := wfStep{Kind: rapid.SampledFrom(kinds).Draw(t, label+" kind")}
		switch s.Kind {
		case wfActivity, wfFanOut, wfSaga, wfAbandon, wfBackground:
			s.Name = rapid.SampledFrom([]string{"ok", "ok", "flaky", "fail"}).Draw(t, label+" activity")
			if s.Kind != wfActivity {
				s.Count = rapid.IntRange(2, 3).Draw(t, label+" count")
			}
			s.Attempts = rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, label+" attempts")
			if s.Kind == wfBackground {
				s.Seconds = rapid.IntRange(0, 120).Draw(t, label+" delay")
			}
		case wfTimer:
			s.Seconds = rapid.IntRange(0, 120).Draw(t, label+" delay")
		case wfSignal:
			s = drawWfWait(t, label)
		case wfWaits:
			for i := rapid.IntRange(2, 3).Draw(t, label+" waits"); i > 0; i-- {
				s.Child = append(s.Child, drawWfWait(t, label))
			}
		case wfRace:
			s.Name = rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, label+" signal")
			s.Seconds = rapid.IntRange(1, 120).Draw(t, label+" delay")
			s.Count = rapid.IntRange(0, 1).Draw(t, label+" select")
		case wfChild:
			s.Child = drawWfSteps(t, label+" child", true)
			if rapid.Bool().Draw(t, label+" shared child") {
				s = drawWfSharedChild(t, label)
			}
		case wfTask:
			s.Name = rapid.SampledFrom([]string{"review", "approve"}).Draw(t, label+" task")
			s.Roles = rapid.SampledFrom([][]string{{wfRoleClerk}, {wfRoleManager}, {wfRoleClerk, wfRoleManager}}).Draw(t, label+" roles")
			if rapid.IntRange(0, 3).Draw(t, label+" assigned") == 0 {
				s.Assignee = rapid.SampledFrom(wfUsers).Draw(t, label+" assignee").ID
			}
			if rapid.Bool().Draw(t, label+" task timeout") {
				s.Seconds = rapid.IntRange(1, 120).Draw(t, label+" task timeout seconds")
			}
			s.Count = rapid.SampledFrom([]int{0, 0, 30, 1440}).Draw(t, label+" due minutes")
			s.Escalate = rapid.IntRange(0, 2).Draw(t, label+" escalate") == 0
		case wfContinue:
			if continued {
				continue
			}
			continued = true
		}
		steps = append(steps, s)
	}
	return steps
}

// drawWfSharedChild draws a child step with an explicit id from
// wfSharedChildIDs. The child first sleeps a while, so that another
// parent's start often finds it running.
func drawWfSharedChild(t *rapid.T, label string) wfStep {
	s := wfStep{Kind: wfChild, ID: rapid.SampledFrom(wfSharedChildIDs).Draw(t, label+" child id")}
	s.Child = append([]wfStep{{Kind: wfTimer, Seconds: rapid.IntRange(30, 240).Draw(t, label+" shared child delay")}},
		drawWfSteps(t, label+" child", true)...)
	return s
}

func drawWfWait(t *rapid.T, label string) wfStep {
	s := wfStep{Kind: wfSignal, Name: rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, label+" signal")}
	if rapid.Bool().Draw(t, label+" with timeout") {
		s.Seconds = rapid.IntRange(1, 120).Draw(t, label+" timeout")
	}
	return s
}

// wfEnv is what a process's copy of the workflow code sees of the outside
// world: where side effects get their values.
type wfEnv struct {
	sideEffect func() int64
}

func (env *wfEnv) lookup(name string) (replay.WorkflowFunc, bool) {
	if name != wfName {
		return nil, false
	}
	return env.run, true
}

// newWfReplayer returns a replayer of the program workflow, as one process
// would have it.
func newWfReplayer(env *wfEnv) *replay.Replayer {
	return replay.New(replay.Options{Lookup: env.lookup})
}

// counterSideEffects returns side-effect values from a shared counter, so
// no two side effects ever return the same value.
func counterSideEffects(c *atomic.Int64) func() int64 {
	return func() int64 { return c.Add(1) * 1000 }
}

func (env *wfEnv) run(ctx *replay.Context, input []byte) ([]byte, error) {
	var p wfProgram
	if err := history.Decode(input, &p); err != nil {
		return nil, &replay.InputError{Workflow: wfName, Err: err}
	}
	outs := slices.Clone(p.Done)
	for i, s := range p.Steps {
		gi := len(p.Done) + i // the step's index in the whole program
		var out string
		switch s.Kind {
		case wfActivity:
			out = "a:" + s.Name + "=" + wfCall(ctx, s, fmt.Sprintf("%s.%d", s.Name, gi))
		case wfFanOut:
			res := make([]string, s.Count)
			fs := make([]replay.Future, s.Count)
			for j := range res {
				fs[j] = ctx.Go(func(ctx *replay.Context) error {
					res[j] = wfCall(ctx, s, fmt.Sprintf("%s.%d.%d", s.Name, gi, j))
					return nil
				})
			}
			if err := ctx.WhenAll(fs...); err != nil {
				return nil, err
			}
			out = "f:" + s.Name + "=[" + strings.Join(res, ",") + "]"
		case wfSaga:
			// Each compensation undoes one of Count changes; they run last
			// first, and every one runs even when some fail.
			saga := ctx.NewSaga()
			var res []string
			for j := range s.Count {
				saga.AddCompensation(fmt.Sprintf("undo-%d", j), func(ctx *replay.Context) error {
					r := wfCall(ctx, s, fmt.Sprintf("%s.%d.%d", s.Name, gi, j))
					res = append(res, r)
					if r == "failed" {
						return errors.New("undo failed")
					}
					return nil
				})
			}
			err := saga.Compensate("rapid")
			out = "S:" + s.Name + "=[" + strings.Join(res, ",") + "]"
			if err != nil {
				out += " with " + strconv.Itoa(strings.Count(err.Error(), "undo failed")) + " failures"
			}
		case wfAbandon:
			ctx.CallActivity(s.Name, fmt.Sprintf("%s.%d", s.Name, gi), nil)
			out = "x:" + s.Name
		case wfBackground:
			ctx.Go(func(ctx *replay.Context) error {
				if err := ctx.Sleep(time.Duration(s.Seconds) * time.Second); err != nil {
					return err
				}
				wfCall(ctx, s, fmt.Sprintf("%s.%d", s.Name, gi))
				return nil
			})
			out = "bg"
		case wfTimer:
			if err := ctx.Sleep(time.Duration(s.Seconds) * time.Second); err != nil {
				return nil, err
			}
			out = "t=" + strconv.Itoa(s.Seconds)
		case wfSignal:
			key, err := wfWait(ctx, s)
			if err != nil {
				return nil, err
			}
			out = "w:" + s.Name + "=" + key
		case wfWaits:
			res := make([]string, len(s.Child))
			fs := make([]replay.Future, len(s.Child))
			for j, w := range s.Child {
				fs[j] = ctx.Go(func(ctx *replay.Context) error {
					key, err := wfWait(ctx, w)
					res[j] = w.Name + "=" + key
					return err
				})
			}
			if err := ctx.WhenAll(fs...); err != nil {
				return nil, err
			}
			out = "W=[" + strings.Join(res, ",") + "]"
		case wfRace:
			timer := ctx.Timer(time.Duration(s.Seconds)*time.Second, &replay.TimerOptions{Name: "race"})
			sig := ctx.WaitEvent(s.Name, nil)
			var err error
			if s.Count == 1 {
				ctx.Select(
					replay.SelectCase{Future: timer, Do: func(replay.Future) { out = "r:" + s.Name + "=timer" }},
					replay.SelectCase{Future: sig, Do: func(f replay.Future) {
						var key string
						err = f.Get(&key)
						out = "r:" + s.Name + "=" + key
					}},
				)
			} else if ctx.WhenAny(timer, sig) == 0 {
				out = "r:" + s.Name + "=timer"
			} else {
				var key string
				err = sig.Get(&key)
				out = "r:" + s.Name + "=" + key
			}
			if err != nil {
				return nil, err
			}
		case wfChild:
			var child []string
			if err := ctx.CallSubWorkflow(wfName, wfProgram{Steps: s.Child}, &replay.SubWorkflowOptions{InstanceID: s.ID}).Get(&child); err != nil {
				out = "c=error:" + err.Error()
			} else {
				out = "c=[" + strings.Join(child, ",") + "]"
			}
		case wfStatus:
			if err := ctx.SetCustomStatus(fmt.Sprintf("cs.%d", gi)); err != nil {
				return nil, err
			}
			out = "cs"
		case wfSideEffect:
			var n int64
			if err := ctx.SideEffect(func() (any, error) { return env.sideEffect(), nil }, &n); err != nil {
				return nil, err
			}
			out = "e=" + strconv.FormatInt(n, 10)
		case wfNewID:
			out = "id=" + ctx.NewID()
		case wfVersion:
			out = "v=" + strconv.Itoa(ctx.Version("program-change", replay.DefaultVersion, 1))
		case wfTask:
			res, err := wfTaskStep(ctx, s, gi)
			if err != nil {
				return nil, err
			}
			out = "k:" + s.Name + "=" + res
		case wfSend:
			// The name is the step's own: no wait takes the signal, which
			// is buffered (and recorded again by a continue-as-new). The
			// payload, the tag wfOnceEach checks, names the execution too:
			// another run of the instance (a restart) sends its own.
			name := fmt.Sprintf("self.%d", gi)
			if err := ctx.SignalWorkflow(ctx.InstanceID(), name, name+"@"+ctx.ExecutionID()).Get(nil); err != nil {
				out = "sd=error:" + err.Error()
			} else {
				out = "sd=delivered"
			}
		case wfContinue:
			return nil, ctx.ContinueAsNew(wfProgram{Steps: p.Steps[i+1:], Done: append(outs, "can")})
		default:
			return nil, fmt.Errorf("unknown step kind %q", s.Kind)
		}
		outs = append(outs, out)
	}
	return history.Encode(outs)
}

// wfTaskStep opens the human task of a step and waits for it: it returns
// the result the completing user gave, or "timeout" when the step's timer
// fired first (the task is then cancelled).
func wfTaskStep(ctx *replay.Context, s wfStep, gi int) (string, error) {
	opts := replay.TaskOptions{Roles: s.Roles, Assignee: s.Assignee}
	if s.Count > 0 {
		opts.Due = ctx.Now().Add(time.Duration(s.Count) * time.Minute)
	}
	if s.Escalate {
		opts.Escalation = []replay.TaskEscalation{{After: wfEscalateAfter, ReassignRoles: []string{wfRoleManager}}}
	}
	task := ctx.CreateTask(s.Name, fmt.Sprintf("%s.%d", s.Name, gi), &opts)
	done := ctx.WaitTask(task)
	if s.Seconds > 0 {
		timer := ctx.Timer(time.Duration(s.Seconds)*time.Second, &replay.TimerOptions{Name: wfTaskTimerPrefix + task.ID})
		if ctx.WhenAny(timer, done) == 0 {
			ctx.CancelTask(task, wfTaskTimeout)
			return wfTaskTimeout, nil
		}
		ctx.CancelTimer(timer)
	}
	var result string
	if err := done.Get(&result); err != nil {
		return "", err
	}
	return result, nil
}

// wfWait waits for the signal of a step: it returns the signal's key, or
// "timeout".
func wfWait(ctx *replay.Context, s wfStep) (string, error) {
	var opts *replay.WaitOptions
	if s.Seconds > 0 {
		opts = &replay.WaitOptions{Timeout: time.Duration(s.Seconds) * time.Second}
	}
	var key string
	err := ctx.WaitEvent(s.Name, opts).Get(&key)
	switch {
	case errors.Is(err, replay.ErrTimeout):
		return "timeout", nil
	case err != nil:
		return "", err
	}
	return key, nil
}

// wfCall calls the activity of a step and describes its outcome.
func wfCall(ctx *replay.Context, s wfStep, input string) string {
	var out string
	err := ctx.CallActivity(s.Name, input, &replay.ActivityOptions{Retry: history.RetryPolicy{MaxAttempts: s.Attempts}}).Get(&out)
	var ae *replay.ActivityError
	switch {
	case errors.As(err, &ae):
		return "failed"
	case err != nil:
		return "error:" + err.Error()
	}
	return out
}

// wfResolve resolves the activities of programs: "ok" returns "ok:" +
// input, "flaky" fails its first attempt, "fail" fails without retry.
func wfResolve(name string) (round.ActivityFunc, bool) {
	switch name {
	case "ok", "flaky", "fail":
	default:
		return nil, false
	}
	return func(_ context.Context, l *provider.ActivityLease, _ *round.Heartbeat) ([]byte, error) {
		return wfAttempt(&l.Task)
	}, true
}

// wfAttempt is one attempt of an activity task.
func wfAttempt(task *provider.ActivityTask) ([]byte, error) {
	var in string
	if err := history.Decode(task.Input, &in); err != nil {
		return nil, wfPermanent{err}
	}
	switch {
	case task.Name == "fail":
		return nil, wfPermanent{fmt.Errorf("fail refused %q", in)}
	case task.Name == "flaky" && task.Attempt == 1:
		return nil, errors.New("flaky first attempt")
	}
	return history.Encode("ok:" + in)
}

type wfPermanent struct{ error }

func (wfPermanent) NonRetryable() bool { return true }

// wfFacts are what history says about the nondeterministic steps of a
// program.
type wfFacts struct {
	raised      map[string]map[string]bool // signal name → payloads raised ("key#message")
	sideEffects []int64                    // side-effect values recorded, in order
	continued   int                        // ContinuedAsNew events
	tasks       []*wfTaskFact              // human tasks created, in order
	sent        int                        // SignalSent events
	delivered   int                        // SignalDelivered events
}

// wfTaskFact is what history says about one human task and the timer of
// its step.
type wfTaskFact struct {
	name, assignee string
	roles          []string
	// completed is the Seq of TaskCompleted, with its result, actor and
	// correlation (the action's message id); 0 while not completed.
	completed          int64
	result             []byte
	actor, correlation string
	// cancelled is the Seq of TaskCancelled, with its reason.
	cancelled int64
	reason    string
	// fired is the Seq of the TimerFired of the step's timer;
	// timerCancelled tells that the workflow cancelled that timer.
	fired          int64
	timerCancelled bool
	// escalated is the Seq of the TaskEscalated of the task, with its
	// actor; 0 when it did not escalate.
	escalated      int64
	escalatedActor string
}

// wfChain returns the executions of the instance's current run: the last
// execution that was not started by continue-as-new, and those that
// continued from it.
func wfChain(events []history.Event) ([]history.Event, error) {
	start := -1
	for i := range events {
		if events[i].Kind != history.KindExecutionStarted {
			continue
		}
		a, err := events[i].Attributes()
		if err != nil {
			return nil, err
		}
		if a.(*history.ExecutionStarted).ContinuedFrom == "" {
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no ExecutionStarted")
	}
	return events[start:], nil
}

func wfFactsOf(chain []history.Event) (*wfFacts, error) {
	f := &wfFacts{raised: map[string]map[string]bool{}}
	tasks := map[string]*wfTaskFact{}
	timers := map[int64]*wfTaskFact{} // by the Seq of the task timer's TimerCreated
	for i := range chain {
		e := &chain[i]
		a, err := e.Attributes()
		if err != nil {
			return nil, err
		}
		switch a := a.(type) {
		case *history.TaskCreated:
			t := &wfTaskFact{name: a.Name, assignee: a.Assignee, roles: a.Roles}
			tasks[a.TaskID] = t
			f.tasks = append(f.tasks, t)
		case *history.TaskCompleted:
			if t := tasks[a.TaskID]; t != nil {
				t.completed, t.result, t.actor, t.correlation = e.Seq, a.Result, e.Actor, e.CorrelationID
			}
		case *history.TaskCancelled:
			if t := tasks[a.TaskID]; t != nil {
				t.cancelled, t.reason = e.Seq, a.Reason
			}
		case *history.TaskEscalated:
			if t := tasks[a.TaskID]; t != nil {
				t.escalated, t.escalatedActor = e.Seq, e.Actor
			}
		case *history.TimerCreated:
			if id, ok := strings.CutPrefix(a.Name, wfTaskTimerPrefix); ok && tasks[id] != nil {
				timers[e.Seq] = tasks[id]
			}
		case *history.TimerFired:
			if t := timers[mustSeqOf(e)]; t != nil {
				t.fired = e.Seq
			}
		case *history.TimerCancelled:
			if t := timers[mustSeqOf(e)]; t != nil {
				t.timerCancelled = true
			}
		case *history.EventRaised:
			if f.raised[a.Name] == nil {
				f.raised[a.Name] = map[string]bool{}
			}
			var tag string
			if err := history.Decode(a.Payload, &tag); err != nil {
				return nil, fmt.Errorf("seq %d: signal payload: %w", e.Seq, err)
			}
			f.raised[a.Name][tag] = true
		case *history.MarkerRecorded:
			if a.Marker == history.MarkerSideEffect {
				var n int64
				if err := history.Decode(a.Value, &n); err != nil {
					return nil, fmt.Errorf("seq %d: side-effect value: %w", e.Seq, err)
				}
				f.sideEffects = append(f.sideEffects, n)
			}
		case *history.ContinuedAsNew:
			f.continued++
		case *history.SignalSent:
			f.sent++
		case *history.SignalDelivered:
			f.delivered++
		}
	}
	return f, nil
}

// wfTimeoutOf is the outcome of a signal wait that timed out; waits
// without a timeout cannot have it.
func wfTimeoutOf(s wfStep) string {
	if s.Seconds > 0 {
		return "timeout"
	}
	return "(no timeout)"
}

// wfExpectedActivity is the outcome of the activity of a step called with
// input.
func wfExpectedActivity(s wfStep, input string) string {
	if s.Name == "fail" || (s.Name == "flaky" && s.Attempts == 1) {
		return "failed"
	}
	return "ok:" + input
}

// wfActivityOptions are the outcomes the activity of a step called with
// input may have: the expected one, or "failed" when a claim of it ran out
// (lost names such inputs): a lost claim uses up an attempt.
func wfActivityOptions(s wfStep, input string, lost map[string]bool) []string {
	want := wfExpectedActivity(s, input)
	if want != "failed" && lost[input] {
		return []string{want, "failed"}
	}
	return []string{want}
}

// wfChoices returns every way of picking one option of each part.
func wfChoices(parts [][]string) [][]string {
	out := [][]string{nil}
	for _, opts := range parts {
		var next [][]string
		for _, prefix := range out {
			for _, o := range opts {
				next = append(next, append(slices.Clone(prefix), o))
			}
		}
		out = next
	}
	return out
}

// wfLostInputs returns the inputs of activities that failed because a
// claim of theirs ran out, in any of histories.
func wfLostInputs(histories map[string][]history.Event) (map[string]bool, error) {
	lost := map[string]bool{}
	for _, events := range histories {
		inputs := map[int64]string{}
		for i := range events {
			e := &events[i]
			switch e.Kind {
			case history.KindActivityScheduled, history.KindActivityFailed:
			default:
				continue
			}
			a, err := e.Attributes()
			if err != nil {
				return nil, err
			}
			switch a := a.(type) {
			case *history.ActivityScheduled:
				var in string
				if history.Decode(a.Input, &in) == nil {
					inputs[e.Seq] = in
				}
			case *history.ActivityFailed:
				if a.Failure.Type == round.FailureLeaseExpired {
					lost[inputs[mustSeqOf(e)]] = true
				}
			}
		}
	}
	return lost, nil
}

// wfPredict returns the outcomes a child program may have, known in
// advance but for lost claims.
func wfPredict(steps []wfStep, lost map[string]bool) [][]string {
	parts := make([][]string, len(steps))
	for i, s := range steps {
		parts[i] = wfPredictStep(s, i, lost)
	}
	return wfChoices(parts)
}

// wfPredictStep returns the outcomes an activity, fan-out, saga or timer
// step at index i of a program may have.
func wfPredictStep(s wfStep, i int, lost map[string]bool) []string {
	var out []string
	switch s.Kind {
	case wfActivity:
		for _, o := range wfActivityOptions(s, fmt.Sprintf("%s.%d", s.Name, i), lost) {
			out = append(out, "a:"+s.Name+"="+o)
		}
	case wfFanOut:
		parts := make([][]string, s.Count)
		for j := range parts {
			parts[j] = wfActivityOptions(s, fmt.Sprintf("%s.%d.%d", s.Name, i, j), lost)
		}
		for _, res := range wfChoices(parts) {
			out = append(out, "f:"+s.Name+"=["+strings.Join(res, ",")+"]")
		}
	case wfSaga:
		var parts [][]string
		for j := s.Count - 1; j >= 0; j-- {
			parts = append(parts, wfActivityOptions(s, fmt.Sprintf("%s.%d.%d", s.Name, i, j), lost))
		}
		for _, res := range wfChoices(parts) {
			o := "S:" + s.Name + "=[" + strings.Join(res, ",") + "]"
			if failures := wfCount(res, "failed"); failures > 0 {
				o += " with " + strconv.Itoa(failures) + " failures"
			}
			out = append(out, o)
		}
	case wfTimer:
		out = append(out, "t="+strconv.Itoa(s.Seconds))
	default:
		out = append(out, "unpredictable "+s.Kind)
	}
	return out
}

// wfCount counts v in xs.
func wfCount(xs []string, v string) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

// wfCheckOutput checks the output of a completed instance against its
// program and its history.
// lost names the activity inputs whose claims ran out (see wfLostInputs).
func wfCheckOutput(events []history.Event, output []byte, lost map[string]bool) error {
	chain, err := wfChain(events)
	if err != nil {
		return err
	}
	a, err := chain[0].Attributes()
	if err != nil {
		return err
	}
	var p wfProgram
	if err := history.Decode(a.(*history.ExecutionStarted).Input, &p); err != nil {
		return fmt.Errorf("program: %w", err)
	}
	facts, err := wfFactsOf(chain)
	if err != nil {
		return err
	}
	var outs []string
	if err := history.Decode(output, &outs); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if len(outs) != len(p.Steps) {
		return fmt.Errorf("%d outcomes for %d steps: %q", len(outs), len(p.Steps), outs)
	}
	sideEffects, continued, tasks, sends := 0, 0, 0, 0
	children, err := wfChildrenOf(chain)
	if err != nil {
		return err
	}
	child := 0
	ids := map[string]bool{}
	// One signal wakes one waiter: a signal message is consumed at most
	// once, also across continue-as-new.
	consumed := map[string]bool{}
	for i, s := range p.Steps {
		got := outs[i]
		bad := func(want string) error {
			return fmt.Errorf("step %d %s: outcome %q, want %s (program %v, outcomes %q)", i, s, got, want, p.Steps, outs)
		}
		signal := func(got, name, prefix, alternative string) error {
			key, ok := strings.CutPrefix(got, prefix)
			switch {
			case !ok:
				return bad(prefix + "…")
			case key == alternative:
				return nil
			case !facts.raised[name][key]:
				return bad("a signal raised as " + name + " (or " + alternative + ")")
			case consumed[key]:
				return bad("a signal not consumed before")
			}
			consumed[key] = true
			return nil
		}
		if s.Kind == wfChild {
			// The child steps schedule the children of the run in order.
			if child >= len(children) {
				return bad("the outcome of a child scheduled (history schedules " + strconv.Itoa(len(children)) + ")")
			}
			c := children[child]
			child++
			if want := cmp.Or(s.ID, c.id); c.id != want || c.id == "" {
				return bad("the outcome of child " + want + " (history schedules " + c.id + ")")
			}
			if c.refused {
				// The explicit id was taken by a running instance: the
				// call fails at once, and only explicit ids can be taken.
				if s.ID == "" || !strings.HasPrefix(got, "c=error:") {
					return bad("c=error:… for a child whose start was refused")
				}
				continue
			}
		}
		switch s.Kind {
		case wfActivity, wfFanOut, wfSaga, wfTimer:
			if want := wfPredictStep(s, i, lost); !slices.Contains(want, got) {
				return bad(fmt.Sprintf("one of %q", want))
			}
		case wfSignal:
			if err := signal(got, s.Name, "w:"+s.Name+"=", wfTimeoutOf(s)); err != nil {
				return err
			}
		case wfWaits:
			inner, ok := strings.CutPrefix(got, "W=[")
			inner, ok2 := strings.CutSuffix(inner, "]")
			parts := strings.Split(inner, ",")
			if !ok || !ok2 || len(parts) != len(s.Child) {
				return bad(fmt.Sprintf("W=[…] with %d waits", len(s.Child)))
			}
			for j, w := range s.Child {
				if err := signal(parts[j], w.Name, w.Name+"=", wfTimeoutOf(w)); err != nil {
					return err
				}
			}
		case wfRace:
			if err := signal(got, s.Name, "r:"+s.Name+"=", "timer"); err != nil {
				return err
			}
		case wfChild:
			var want []string
			for _, outs := range wfPredict(s.Child, lost) {
				want = append(want, "c=["+strings.Join(outs, ",")+"]")
			}
			if !slices.Contains(want, got) {
				return bad(fmt.Sprintf("one of %q", want))
			}
		case wfStatus:
			if got != "cs" {
				return bad(`"cs"`)
			}
		case wfVersion:
			if got != "v=1" {
				return bad(`"v=1"`)
			}
		case wfAbandon:
			if got != "x:"+s.Name {
				return bad(strconv.Quote("x:" + s.Name))
			}
		case wfBackground:
			if got != "bg" {
				return bad(`"bg"`)
			}
		case wfSideEffect:
			if sideEffects >= len(facts.sideEffects) {
				return bad("a recorded side effect (history has " + strconv.Itoa(len(facts.sideEffects)) + ")")
			}
			if want := "e=" + strconv.FormatInt(facts.sideEffects[sideEffects], 10); got != want {
				return bad(strconv.Quote(want) + " as recorded")
			}
			sideEffects++
		case wfNewID:
			id, ok := strings.CutPrefix(got, "id=")
			if !ok || id == "" || ids[id] {
				return bad("a new id")
			}
			ids[id] = true
		case wfSend:
			if got != "sd=delivered" {
				return bad(`"sd=delivered"`)
			}
			sends++
		case wfContinue:
			if got != "can" {
				return bad(`"can"`)
			}
			continued++
		case wfTask:
			if tasks >= len(facts.tasks) {
				return bad("the outcome of a task created (history has " + strconv.Itoa(len(facts.tasks)) + ")")
			}
			res, ok := strings.CutPrefix(got, "k:"+s.Name+"=")
			if !ok {
				return bad("k:" + s.Name + "=…")
			}
			if want := wfCheckTask(s, facts.tasks[tasks], res); want != "" {
				return bad(want)
			}
			tasks++
		}
	}
	if tasks != len(facts.tasks) {
		return fmt.Errorf("%d task steps in the program, %d tasks created", tasks, len(facts.tasks))
	}
	if sideEffects != len(facts.sideEffects) {
		return fmt.Errorf("%d side effects in the program, %d recorded", sideEffects, len(facts.sideEffects))
	}
	if sends != facts.sent || sends != facts.delivered {
		return fmt.Errorf("%d send steps, %d SignalSent and %d SignalDelivered events", sends, facts.sent, facts.delivered)
	}
	if continued != facts.continued {
		return fmt.Errorf("%d continue-as-new steps, %d ContinuedAsNew events", continued, facts.continued)
	}
	return nil
}

// wfCheckTask checks the outcome res of a task step against what history
// says of its task; it returns what the outcome should have been, or "".
func wfCheckTask(s wfStep, f *wfTaskFact, res string) string {
	switch {
	case f.name != s.Name || f.assignee != s.Assignee || !slices.Equal(f.roles, s.Roles):
		return fmt.Sprintf("the outcome of a task %s %v@%s (history has %s %v@%s)", s.Name, s.Roles, s.Assignee, f.name, f.roles, f.assignee)
	case f.escalated != 0 && !s.Escalate:
		return "no escalation: the task has no escalation policy"
	case f.escalated != 0 && f.escalatedActor != history.ActorEscalation:
		return "an escalation by " + history.ActorEscalation + ", not " + f.escalatedActor
	case f.escalated != 0 && ((f.completed != 0 && f.completed < f.escalated) || (f.cancelled != 0 && f.cancelled < f.escalated)):
		return "no escalation of a task closed before"
	case res == wfTaskTimeout:
		switch {
		case s.Seconds == 0:
			return "no timeout: the step has no timer"
		case f.fired == 0:
			return "no timeout: the task's timer has not fired"
		case f.completed != 0 && f.completed < f.fired:
			return "the result: the task was completed before its timer fired"
		case f.completed == 0 && (f.cancelled == 0 || f.reason != wfTaskTimeout):
			return "a task cancelled on timeout"
		}
		return ""
	case f.completed == 0:
		return "a completed task"
	case s.Seconds > 0 && f.fired != 0 && f.fired < f.completed:
		return "timeout: the timer fired before the completion"
	case s.Seconds > 0 && f.fired == 0 && !f.timerCancelled:
		return "the timer of a task completed in time cancelled"
	}
	var carried string
	if err := history.Decode(f.result, &carried); err != nil || carried != res {
		return fmt.Sprintf("the result the completion carried (%q)", carried)
	}
	// The machine's results name who completed the task with which
	// message: history must say the same.
	user, msgID, ok := wfParseTaskResult(res)
	if !ok || f.actor != history.UserActor(user) || f.correlation != msgID {
		return fmt.Sprintf("a result of the completion by %s with correlation %s", f.actor, f.correlation)
	}
	return ""
}

// wfTaskResult is the result a user completes a task with: it names the
// user and the action's message id.
func wfTaskResult(user, msgID string) string { return "done:" + user + "#" + msgID }

func wfParseTaskResult(res string) (user, msgID string, ok bool) {
	rest, ok := strings.CutPrefix(res, "done:")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "#")
}

func mustSeqOf(e *history.Event) int64 {
	seq, _ := history.ParseSeqCorrelation(e.CorrelationID)
	return seq
}

// wfIsCommand reports whether workflow code writes events of kind k in a
// turn.
func wfIsCommand(k history.Kind) bool {
	switch k {
	case history.KindActivityScheduled, history.KindTimerCreated, history.KindTimerCancelled,
		history.KindSubWorkflowScheduled, history.KindTaskCreated, history.KindTaskCancelled,
		history.KindMarkerRecorded, history.KindCustomStatusSet, history.KindCompensationStarted,
		history.KindCompensationCompleted, history.KindExecutionCompleted, history.KindExecutionFailed,
		history.KindContinuedAsNew, history.KindSignalSent, history.KindSearchAttributesUpserted, history.KindTaskEscalated:
		return true
	}
	return false
}

// wfReplayChecker replays stored histories with fresh workflow code.
type wfReplayChecker struct {
	env      *wfEnv
	replayer *replay.Replayer
	values   []int64 // side-effect values the next live turn returns
	turns    int     // turns checked
}

func newWfReplayChecker() *wfReplayChecker {
	c := &wfReplayChecker{}
	c.env = &wfEnv{sideEffect: func() int64 {
		if len(c.values) == 0 {
			return -1 // more side effects than history recorded: the turn will differ
		}
		v := c.values[0]
		c.values = c.values[1:]
		return v
	}}
	c.replayer = newWfReplayer(c.env)
	return c
}

// check proves that the stored history of an instance is what its code
// writes: replay.Check accepts each execution, every recorded turn is
// exactly what a fresh executor produces from the history before it (the
// side effects it asks for return the recorded values), and at the end the
// code of a running execution has nothing more to do.
func (c *wfReplayChecker) check(id string, events []history.Event) error {
	for _, exec := range replay.Executions(events) {
		if len(exec) == 0 || exec[0].Kind != history.KindExecutionStarted {
			return fmt.Errorf("execution does not open with ExecutionStarted")
		}
		if err := c.replayer.Check(id, exec); err != nil {
			return fmt.Errorf("replay.Check of execution %s: %w", exec[0].ExecutionID, err)
		}
	}
	starts := map[string]int{}
	for k := range events {
		e := &events[k]
		if e.Kind == history.KindExecutionStarted {
			starts[e.ExecutionID] = k
			continue
		}
		if e.Kind != history.KindTurnStarted {
			continue
		}
		s, ok := starts[e.ExecutionID]
		if !ok {
			return fmt.Errorf("seq %d: turn of an execution that has not started", e.Seq)
		}
		snap, err := round.Fold(id, events[:k])
		if err != nil {
			return err
		}
		out, err := c.turn(id, snap, events[s:k], e.At, events[k:])
		if err != nil {
			return fmt.Errorf("replay to seq %d: %w", e.Seq, err)
		}
		if len(out) == 0 {
			return fmt.Errorf("seq %d: history has a turn where replay runs none", e.Seq)
		}
		for i := range out {
			if k+i >= len(events) {
				return fmt.Errorf("seq %d: replay produces %s beyond the end of history", out[i].Seq, out[i].Kind)
			}
			if err := wfSameEvent(&events[k+i], &out[i]); err != nil {
				return fmt.Errorf("turn at seq %d: %w", e.Seq, err)
			}
		}
		if next := k + len(out); next < len(events) && wfIsCommand(events[next].Kind) {
			return fmt.Errorf("turn at seq %d: history has %s at seq %d, replay ends the turn before it", e.Seq, events[next].Kind, events[next].Seq)
		}
		c.turns++
	}
	if len(events) == 0 {
		return nil
	}
	snap, err := round.Fold(id, events)
	if err != nil {
		return err
	}
	if snap.Ended {
		return nil
	}
	last := events[len(events)-1]
	out, err := c.turn(id, snap, events[snap.ExecutionStartSeq-1:], last.At, nil)
	if err != nil {
		return fmt.Errorf("replay of the whole history: %w", err)
	}
	switch {
	case snap.Status == provider.StatusSuspended && len(out) != 0:
		return fmt.Errorf("replay of the suspended history runs a turn: %d events", len(out))
	case snap.Status != provider.StatusSuspended && (len(out) != 1 || out[0].Kind != history.KindTurnStarted):
		kinds := make([]history.Kind, len(out))
		for i := range out {
			kinds[i] = out[i].Kind
		}
		return fmt.Errorf("replay of the whole history produces %v, want only a TurnStarted", kinds)
	}
	return nil
}

// turn runs one turn of fresh code on history; later holds the recorded
// events from the turn on, whose side-effect values the turn gets.
func (c *wfReplayChecker) turn(id string, snap *round.Snapshot, hist []history.Event, now time.Time, later []history.Event) ([]history.Event, error) {
	c.values = c.values[:0]
	for i := range later {
		if later[i].Kind != history.KindMarkerRecorded {
			continue
		}
		a, err := later[i].Attributes()
		if err != nil {
			return nil, err
		}
		if m := a.(*history.MarkerRecorded); m.Marker == history.MarkerSideEffect {
			var n int64
			if err := history.Decode(m.Value, &n); err != nil {
				return nil, err
			}
			c.values = append(c.values, n)
		}
	}
	out, err := c.replayer.Turn(context.Background(), &round.TurnInput{
		InstanceID: id, Snapshot: snap, History: hist, Now: now, Node: "checker",
	})
	if err != nil {
		return nil, err
	}
	if cl, ok := out.Cached.(interface{ Close() }); ok {
		cl.Close()
	}
	return out.Events, nil
}

// wfSameEvent compares a stored event with one a replayed turn produced:
// the runner fills in the instance, time, actor and hashes.
func wfSameEvent(stored, produced *history.Event) error {
	switch {
	case stored.Seq != produced.Seq || stored.Kind != produced.Kind:
		return fmt.Errorf("history has %s at seq %d, replay produces %s at seq %d", stored.Kind, stored.Seq, produced.Kind, produced.Seq)
	case stored.CorrelationID != produced.CorrelationID:
		return fmt.Errorf("seq %d %s: history has correlation %q, replay %q", stored.Seq, stored.Kind, stored.CorrelationID, produced.CorrelationID)
	case produced.ExecutionID != "" && stored.ExecutionID != produced.ExecutionID:
		return fmt.Errorf("seq %d %s: history has execution %s, replay %s", stored.Seq, stored.Kind, stored.ExecutionID, produced.ExecutionID)
	case string(stored.Payload) != string(produced.Payload):
		a, _ := stored.Attributes()
		b, _ := produced.Attributes()
		return fmt.Errorf("seq %d %s: history has %+v, replay produces %+v", stored.Seq, stored.Kind, a, b)
	}
	return nil
}

// wfChildFact is what history says about one child a run scheduled.
type wfChildFact struct {
	id string
	// refused: the child's start was refused because its id was taken
	// (SubWorkflowFailed of type round.FailureSubWorkflowAlreadyStarted).
	refused bool
}

// wfChildrenOf returns the children the executions of chain scheduled, in
// order.
func wfChildrenOf(chain []history.Event) ([]wfChildFact, error) {
	var out []wfChildFact
	bySeq := map[string]int{} // execution and seq of the schedule → index in out
	for i := range chain {
		e := &chain[i]
		switch e.Kind {
		case history.KindSubWorkflowScheduled, history.KindSubWorkflowFailed:
		default:
			continue
		}
		a, err := e.Attributes()
		if err != nil {
			return nil, err
		}
		switch a := a.(type) {
		case *history.SubWorkflowScheduled:
			bySeq[e.ExecutionID+"/"+strconv.FormatInt(e.Seq, 10)] = len(out)
			out = append(out, wfChildFact{id: a.InstanceID})
		case *history.SubWorkflowFailed:
			k, ok := bySeq[e.ExecutionID+"/"+strconv.FormatInt(mustSeqOf(e), 10)]
			if !ok {
				return nil, fmt.Errorf("seq %d: SubWorkflowFailed of no scheduled child", e.Seq)
			}
			out[k].refused = a.Failure.Type == round.FailureSubWorkflowAlreadyStarted
		}
	}
	return out, nil
}
