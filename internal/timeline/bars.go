package timeline

import (
	"strconv"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// BarKind says what a [Bar] stands for.
type BarKind string

// Bar kinds.
const (
	BarExecution   BarKind = "execution"
	BarActivity    BarKind = "activity"
	BarTimer       BarKind = "timer"
	BarSubWorkflow BarKind = "sub-workflow"
	BarTask        BarKind = "task"
	// BarSignal is a moment, not a span: a signal that arrived.
	BarSignal BarKind = "signal"
	// BarSignalSent is a signal the workflow sent to another instance,
	// from its SignalSent to its SignalDelivered or SignalFailed.
	BarSignalSent BarKind = "signal-sent"
)

// Outcome says how a bar ended.
type Outcome string

// Outcomes.
const (
	// OutcomeOpen: nothing has ended the bar yet.
	OutcomeOpen Outcome = "open"
	// OutcomeCompleted: the activity, timer (fired), sub-workflow, task or
	// execution completed; a signal is always completed.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the activity, sub-workflow or execution failed.
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the timer or task was cancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeTerminated: the execution was terminated.
	OutcomeTerminated Outcome = "terminated"
	// OutcomeContinued: the execution continued as new.
	OutcomeContinued Outcome = "continued"
)

// Mark is a moment on a bar: a task assigned, released or reassigned, an
// execution suspended or resumed.
type Mark struct {
	Seq   int64
	At    time.Time
	Label string
}

// Bar is one thing of a history that took time, for drawing a timeline
// as a picture: an execution, an activity call, a timer, a sub-workflow or
// a human task, from the event that began it to the event that ended it;
// or a signal, which has no duration.
type Bar struct {
	Kind BarKind
	// Name is the workflow, activity, timer, sub-workflow or task name (a
	// timer without one is "timer"), or the signal's name.
	Name string
	// ExecutionID is the execution the bar belongs to.
	ExecutionID string
	// Seq is the event that began the bar, EndSeq the one that ended it
	// (0 while open).
	Seq, EndSeq int64
	// Start and End are the times of those events; End is zero while the
	// bar is open.
	Start, End time.Time
	// Due is when an open timer fires or a task is due; zero otherwise.
	Due time.Time
	// Outcome is how the bar ended.
	Outcome Outcome
	// Attempts is how many attempts an ended activity took (more than one
	// means it was retried).
	Attempts int
	// Detail says more in a few words: the failure's message, the reason
	// of a termination, a task's assignee, a child's instance id.
	Detail string
	// Marks are moments on the bar, in order.
	Marks []Mark
}

// Open reports whether nothing has ended the bar yet.
func (b *Bar) Open() bool { return b.Outcome == OutcomeOpen }

// Retried reports whether the bar is an activity that took more than one
// attempt.
func (b *Bar) Retried() bool { return b.Attempts > 1 }

// Bars turns a history into the bars of a timeline picture, in the order
// of the events that began them: one per execution, activity call, timer,
// sub-workflow and human task, ended by its completion, failure or
// cancellation (matched by correlation, as [Detail] does with "→ #n"), and
// one per signal. Events whose attributes do not decode are skipped, so a
// damaged history still gives a picture of what is readable. Texts are
// cleaned and shortened as in [Detail].
func Bars(events []history.Event) []Bar {
	var bars []Bar
	bySeq := map[int64]int{}  // scheduling seq → bar index
	tasks := map[string]int{} // execution id + task id → bar index
	execs := map[string]int{} // execution id → bar index
	add := func(e *history.Event, kind BarKind, name string) *Bar {
		bars = append(bars, Bar{Kind: kind, Name: Shorten(Clean(name), messageWidth), ExecutionID: e.ExecutionID,
			Seq: e.Seq, Start: e.At, Outcome: OutcomeOpen})
		return &bars[len(bars)-1]
	}
	end := func(b *Bar, e *history.Event, o Outcome, detail string) {
		if b.Open() {
			b.EndSeq, b.End, b.Outcome, b.Due = e.Seq, e.At, o, time.Time{}
			if detail != "" {
				b.Detail = detail
			}
		}
	}
	scheduled := func(e *history.Event) *Bar {
		seq, err := history.ParseSeqCorrelation(e.CorrelationID)
		if err != nil {
			return nil
		}
		if i, ok := bySeq[seq]; ok {
			return &bars[i]
		}
		return nil
	}
	task := func(e *history.Event, id string) *Bar {
		if i, ok := tasks[e.ExecutionID+"\x00"+id]; ok {
			return &bars[i]
		}
		return nil
	}
	exec := func(e *history.Event) *Bar {
		if i, ok := execs[e.ExecutionID]; ok {
			return &bars[i]
		}
		return nil
	}
	mark := func(b *Bar, e *history.Event, label string) {
		if b != nil {
			b.Marks = append(b.Marks, Mark{Seq: e.Seq, At: e.At, Label: Shorten(Clean(label), messageWidth)})
		}
	}
	for i := range events {
		e := &events[i]
		a, err := e.Attributes()
		if err != nil {
			continue
		}
		switch a := a.(type) {
		case *history.ExecutionStarted:
			name := a.Name
			if a.Version != "" {
				name += " v" + a.Version
			}
			execs[e.ExecutionID] = len(bars)
			add(e, BarExecution, name)
		case *history.ExecutionCompleted:
			if b := exec(e); b != nil {
				end(b, e, OutcomeCompleted, "")
			}
		case *history.ExecutionFailed:
			if b := exec(e); b != nil {
				end(b, e, OutcomeFailed, failure(&a.Failure))
			}
		case *history.ExecutionTerminated:
			if b := exec(e); b != nil {
				end(b, e, OutcomeTerminated, parts(reason(a.Reason), ticket(a.Ticket)))
			}
		case *history.ContinuedAsNew:
			if b := exec(e); b != nil {
				end(b, e, OutcomeContinued, "continued as "+a.NewExecutionID)
			}
		case *history.ExecutionRerun:
			mark(exec(e), e, "rerun as "+a.NewExecutionID)
		case *history.ExecutionSuspended:
			mark(exec(e), e, "suspended")
		case *history.ExecutionResumed:
			mark(exec(e), e, "resumed")
		case *history.HoldPlaced:
			mark(exec(e), e, "legal hold placed")
		case *history.HoldReleased:
			mark(exec(e), e, "legal hold released")
		case *history.ActivityScheduled:
			bySeq[e.Seq] = len(bars)
			add(e, BarActivity, a.Name)
		case *history.ActivityCompleted:
			if b := scheduled(e); b != nil && b.Kind == BarActivity {
				end(b, e, OutcomeCompleted, "")
				b.Attempts = a.Attempts
			}
		case *history.ActivityFailed:
			if b := scheduled(e); b != nil && b.Kind == BarActivity {
				end(b, e, OutcomeFailed, failure(&a.Failure))
				b.Attempts = a.Attempts
			}
		case *history.TimerCreated:
			name := a.Name
			if name == "" {
				name = "timer"
			}
			bySeq[e.Seq] = len(bars)
			add(e, BarTimer, name).Due = a.FireAt
		case *history.TimerFired:
			if b := scheduled(e); b != nil && b.Kind == BarTimer {
				end(b, e, OutcomeCompleted, "")
			}
		case *history.TimerCancelled:
			if b := scheduled(e); b != nil && b.Kind == BarTimer {
				end(b, e, OutcomeCancelled, "")
			}
		case *history.SubWorkflowScheduled:
			bySeq[e.Seq] = len(bars)
			add(e, BarSubWorkflow, a.Name).Detail = Shorten(Clean("child "+a.InstanceID), messageWidth)
		case *history.SubWorkflowCompleted:
			if b := scheduled(e); b != nil && b.Kind == BarSubWorkflow {
				end(b, e, OutcomeCompleted, "")
			}
		case *history.SubWorkflowFailed:
			if b := scheduled(e); b != nil && b.Kind == BarSubWorkflow {
				end(b, e, OutcomeFailed, failure(&a.Failure))
			}
		case *history.TaskCreated:
			tasks[e.ExecutionID+"\x00"+a.TaskID] = len(bars)
			b := add(e, BarTask, a.Name)
			b.Due = a.Due
			if a.Assignee != "" {
				b.Detail = Shorten(Clean("assigned to "+a.Assignee), messageWidth)
			}
		case *history.TaskAssigned:
			how := "assigned to "
			if a.Claimed {
				how = "claimed by "
			}
			if b := task(e, a.TaskID); b != nil && b.Open() {
				mark(b, e, how+a.Assignee)
				b.Detail = Shorten(Clean(how+a.Assignee), messageWidth)
			}
		case *history.TaskReleased:
			if b := task(e, a.TaskID); b != nil && b.Open() {
				mark(b, e, "released")
				b.Detail = ""
			}
		case *history.TaskReassigned:
			if b := task(e, a.TaskID); b != nil && b.Open() {
				mark(b, e, "reassigned to "+a.To)
				b.Detail = Shorten(Clean("assigned to "+a.To), messageWidth)
			}
		case *history.TaskCompleted:
			if b := task(e, a.TaskID); b != nil {
				by := e.Actor
				if by != "" {
					by = "completed by " + by
				}
				end(b, e, OutcomeCompleted, Shorten(Clean(by), messageWidth))
			}
		case *history.TaskCancelled:
			if b := task(e, a.TaskID); b != nil {
				end(b, e, OutcomeCancelled, message(a.Reason))
			}
		case *history.TaskEscalated:
			if b := task(e, a.TaskID); b != nil && b.Open() {
				switch {
				case a.Completed:
					end(b, e, OutcomeCompleted, Shorten(Clean("completed by escalation"), messageWidth))
				case a.Reassigned && a.Assignee != "":
					mark(b, e, "escalated to "+a.Assignee)
					b.Detail = Shorten(Clean("assigned to "+a.Assignee), messageWidth)
				case a.Reassigned:
					mark(b, e, "escalated to roles")
					b.Detail = ""
				default:
					mark(b, e, "escalated")
				}
			}
		case *history.SignalSent:
			bySeq[e.Seq] = len(bars)
			add(e, BarSignalSent, a.Name).Detail = Shorten(Clean("to "+a.InstanceID), messageWidth)
		case *history.SignalDelivered:
			if b := scheduled(e); b != nil && b.Kind == BarSignalSent {
				end(b, e, OutcomeCompleted, "")
			}
		case *history.SignalFailed:
			if b := scheduled(e); b != nil && b.Kind == BarSignalSent {
				end(b, e, OutcomeFailed, failure(&a.Failure))
			}
		case *history.EventRaised:
			b := add(e, BarSignal, a.Name)
			b.EndSeq, b.End, b.Outcome = e.Seq, e.At, OutcomeCompleted
			if a.Sender != "" {
				b.Detail = Shorten(Clean("from "+a.Sender), messageWidth)
			}
		}
	}
	return bars
}

// String renders a bar in one line, for tests and logs: "#3-#4 activity
// credit-check completed (2 attempts)".
func (b *Bar) String() string {
	s := "#" + strconv.FormatInt(b.Seq, 10)
	if b.EndSeq != 0 && b.EndSeq != b.Seq {
		s += "-#" + strconv.FormatInt(b.EndSeq, 10)
	}
	s += " " + string(b.Kind) + " " + b.Name + " " + string(b.Outcome)
	if b.Attempts > 1 {
		s += " (" + plural(b.Attempts, "attempt") + ")"
	}
	if b.Detail != "" {
		s += ": " + b.Detail
	}
	return s
}
