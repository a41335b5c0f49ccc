// Package scripted is a deterministic turn function for tests of the round
// runner: a workflow is a script of steps (activities, fan-outs, timers,
// signals, children) carried in its input, so tests can generate random
// workflows without workflow code.
package scripted

import (
	"context"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Step kinds.
const (
	Activity = "activity" // one activity named Name
	FanOut   = "fanout"   // Count activities in parallel
	Timer    = "timer"    // sleep Delay
	Signal   = "signal"   // wait for an event named Name
	Child    = "child"    // run Child as a sub-workflow
)

// WorkflowName is the name scripted workflows start with.
const WorkflowName = "script"

// Step is one step of a script.
type Step struct {
	Kind  string        `msgpack:"kind"`
	Name  string        `msgpack:"name,omitempty"`
	Count int           `msgpack:"count,omitempty"`
	Delay time.Duration `msgpack:"delay,omitempty"`
	Child []Step        `msgpack:"child,omitempty"`
	// ChildID names a Child step's instance; default: the parent's id
	// followed by "/child-" and the scheduling seq. Steps of several
	// instances naming one ChildID share the child: while it runs, the
	// later starts are refused and their parents fail.
	ChildID string `msgpack:"child_id,omitempty"`
}

// Script is a scripted workflow's input.
type Script struct {
	Steps []Step `msgpack:"steps"`
}

// StartMessage builds the message that starts a scripted instance.
func StartMessage(instanceID string, s Script) (provider.Message, error) {
	return StartRunMessage(instanceID, "", s)
}

// StartRunMessage builds the message that starts run of a scripted
// instance: runs of one instance id (started again after a purge, say) get
// their own execution and message ids. The run "" is StartMessage's.
func StartRunMessage(instanceID, run string, s Script) (provider.Message, error) {
	input, err := history.Encode(&s)
	if err != nil {
		return provider.Message{}, err
	}
	exec := history.DeterministicID(instanceID, 0, "execution"+run)
	return provider.NewMessage(history.DeterministicID(instanceID, 0, "start"+run), instanceID, exec, exec,
		&history.ExecutionStarted{Name: WorkflowName, Input: input})
}

// SignalMessage builds a message raising the event name with an
// idempotency key.
func SignalMessage(instanceID, name, key string) (provider.Message, error) {
	return provider.NewMessage(history.NewID(), instanceID, "", key, &history.EventRaised{Name: name, IdempotencyKey: key})
}

// state is what a script's history says: where it is and what is pending.
type state struct {
	script   Script
	pos      int           // index of the current step
	pending  map[int64]int // schedule seq → outstanding results of the current step
	sched    bool          // the current step was scheduled
	signals  map[string]int
	consumed map[string]int
	failed   *history.Failure
	done     bool
	nextSeq  int64
}

// Turn is the round.TurnFunc of scripted workflows.
func Turn(_ context.Context, in *round.TurnInput) (*round.TurnOutput, error) {
	events := in.History
	if cached, ok := in.Cached.([]history.Event); ok {
		events = append(cached[:len(cached):len(cached)], in.NewEvents...)
		// A new run of the instance (its id reused after the end of the
		// cached one) starts from its own ExecutionStarted.
		for i := len(in.NewEvents) - 1; i >= 0; i-- {
			if in.NewEvents[i].Kind == history.KindExecutionStarted {
				events = in.NewEvents[i:]
				break
			}
		}
	}
	st, err := replay(events)
	if err != nil {
		return nil, err
	}
	if in.Snapshot.Status == provider.StatusSuspended {
		return &round.TurnOutput{Cached: events}, nil
	}
	out := decide(st, in.Snapshot, in.Now)
	all := append(events[:len(events):len(events)], out...)
	return &round.TurnOutput{Events: out, Cached: all}, nil
}

// Replay checks that events are a history scripted code would write and
// returns the events the code would add now (none for a parked instance).
func Replay(events []history.Event, snap *round.Snapshot, now time.Time) ([]history.Event, error) {
	st, err := replay(events)
	if err != nil {
		return nil, err
	}
	if snap.Status == provider.StatusSuspended {
		return nil, nil
	}
	return decide(st, snap, now), nil
}

func replay(events []history.Event) (*state, error) {
	if len(events) == 0 || events[0].Kind != history.KindExecutionStarted {
		return nil, fmt.Errorf("scripted: history does not open with ExecutionStarted")
	}
	a, err := events[0].Attributes()
	if err != nil {
		return nil, err
	}
	start := a.(*history.ExecutionStarted)
	st := &state{pending: map[int64]int{}, signals: map[string]int{}, consumed: map[string]int{}}
	if err := history.Decode(start.Input, &st.script); err != nil {
		return nil, fmt.Errorf("scripted: input: %w", err)
	}
	st.nextSeq = events[len(events)-1].Seq + 1
	st.advance()
	for i := 1; i < len(events); i++ {
		e := &events[i]
		attrs, err := e.Attributes()
		if err != nil {
			return nil, err
		}
		switch a := attrs.(type) {
		case *history.ActivityScheduled, *history.TimerCreated, *history.SubWorkflowScheduled:
			if st.done || st.pos >= len(st.script.Steps) {
				return nil, fmt.Errorf("scripted: seq %d schedules after the script ended", e.Seq)
			}
			want := map[string]history.Kind{Activity: history.KindActivityScheduled, FanOut: history.KindActivityScheduled, Timer: history.KindTimerCreated, Child: history.KindSubWorkflowScheduled}[st.step().Kind]
			if want != e.Kind {
				return nil, fmt.Errorf("scripted: nondeterminism at seq %d: history has %s, step %d is %s", e.Seq, e.Kind, st.pos, st.step().Kind)
			}
			st.sched = true
			st.pending[e.Seq] = 1
		case *history.ActivityCompleted, *history.TimerFired, *history.SubWorkflowCompleted:
			st.complete(e)
		case *history.ActivityFailed:
			st.complete(e)
			st.failed = &a.Failure
		case *history.SubWorkflowFailed:
			st.complete(e)
			st.failed = &a.Failure
		case *history.EventRaised:
			st.signals[a.Name]++
		case *history.ExecutionCompleted, *history.ExecutionFailed, *history.ExecutionTerminated:
			st.done = true
		}
		st.advance()
	}
	return st, nil
}

func (st *state) step() Step { return st.script.Steps[st.pos] }

func (st *state) complete(e *history.Event) {
	seq, err := history.ParseSeqCorrelation(e.CorrelationID)
	if err != nil {
		return
	}
	delete(st.pending, seq)
}

// advance moves past finished steps and consumes buffered signals.
func (st *state) advance() {
	for !st.done && st.failed == nil && st.pos < len(st.script.Steps) {
		s := st.step()
		switch {
		case s.Kind == Signal && st.signals[s.Name] > st.consumed[s.Name]:
			st.consumed[s.Name]++
		case s.Kind != Signal && st.sched && len(st.pending) == 0:
		default:
			return
		}
		st.pos++
		st.sched = false
	}
}

// decide emits what the code does next.
func decide(st *state, snap *round.Snapshot, now time.Time) []history.Event {
	if st.done {
		return nil
	}
	var out []history.Event
	add := func(corr string, attrs history.Attributes) {
		if len(out) == 0 {
			out = append(out, event(st.nextSeq, "", &history.TurnStarted{}))
		}
		out = append(out, event(st.nextSeq+int64(len(out)), corr, attrs))
	}
	switch {
	case st.failed != nil:
		add(snap.ExecutionID, &history.ExecutionFailed{Failure: *st.failed})
	case st.pos >= len(st.script.Steps):
		add(snap.ExecutionID, &history.ExecutionCompleted{Output: []byte(fmt.Sprintf("done after %d steps", len(st.script.Steps)))})
	case !st.sched:
		s := st.step()
		switch s.Kind {
		case Activity:
			add("", &history.ActivityScheduled{Name: s.Name, Input: []byte(s.Name)})
		case FanOut:
			for i := 0; i < max(s.Count, 1); i++ {
				add("", &history.ActivityScheduled{Name: s.Name, Input: []byte(fmt.Sprintf("%s-%d", s.Name, i))})
			}
		case Timer:
			add("", &history.TimerCreated{FireAt: now.Add(s.Delay)})
		case Child:
			input, err := history.Encode(&Script{Steps: s.Child})
			if err != nil {
				panic(err) // a Script always encodes, like the attributes of event
			}
			seq := st.nextSeq + int64(max(len(out), 1))
			child := s.ChildID
			if child == "" {
				child = fmt.Sprintf("%s/child-%d", snap.InstanceID, seq)
			}
			add("", &history.SubWorkflowScheduled{
				Name: WorkflowName, InstanceID: child,
				ExecutionID: round.ChildExecutionID(snap.InstanceID, snap.ExecutionID, seq), Input: input,
			})
		}
	}
	return out
}

func event(seq int64, corr string, attrs history.Attributes) history.Event {
	payload, err := history.EncodeAttributes(attrs)
	if err != nil {
		panic(err) // attributes built here always encode
	}
	return history.Event{Seq: seq, Kind: attrs.EventKind(), CorrelationID: corr, Payload: payload}
}

// CheckReplay replays a whole history the way the runner would and checks
// that at every turn the script produces exactly the events recorded after
// it, and that it produces nothing more at the end (a parked or ended
// instance).
func CheckReplay(instanceID string, events []history.Event) error {
	start := 0
	for k := range events {
		e := &events[k]
		if e.Kind == history.KindExecutionStarted {
			start = k
		}
		if e.Kind != history.KindTurnStarted {
			continue
		}
		snap, err := round.Fold(instanceID, events[:k])
		if err != nil {
			return err
		}
		out, err := Replay(events[start:k], snap, e.At)
		if err != nil {
			return fmt.Errorf("replay to seq %d: %w", e.Seq, err)
		}
		if len(out) == 0 {
			return fmt.Errorf("seq %d: history has a turn where replay produces none", e.Seq)
		}
		for i := range out {
			if k+i >= len(events) {
				return fmt.Errorf("seq %d: replay produces more events than history holds", e.Seq)
			}
			got := &events[k+i]
			if got.Kind != out[i].Kind || got.CorrelationID != out[i].CorrelationID || string(got.Payload) != string(out[i].Payload) {
				return fmt.Errorf("seq %d: history has %s %q, replay produces %s %q", got.Seq, got.Kind, got.CorrelationID, out[i].Kind, out[i].CorrelationID)
			}
		}
	}
	if len(events) == 0 {
		return nil
	}
	snap, err := round.Fold(instanceID, events)
	if err != nil {
		return err
	}
	if snap.Ended {
		return nil
	}
	out, err := Replay(events[snap.ExecutionStartSeq-1:], snap, events[len(events)-1].At)
	if err != nil {
		return err
	}
	if len(out) > 0 {
		return fmt.Errorf("replay of the final history produces %d more events", len(out))
	}
	return nil
}
