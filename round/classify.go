package round

import (
	"fmt"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Verdict is what a round does with one dequeued message.
type Verdict int

const (
	// Accept: append the message's event.
	Accept Verdict = iota + 1
	// Duplicate: history already holds the message's event; ack only.
	Duplicate
	// Stale: the message is for a schedule, task or execution that is no
	// longer open (a cancelled timer, an old execution); ack only.
	Stale
	// Reject: the message can never be processed; dead-letter it.
	Reject
)

// String names the verdict.
func (v Verdict) String() string {
	return [...]string{"", "accept", "duplicate", "stale", "reject"}[v]
}

// Classify decides what a round does with m given the snapshot. It expects
// a message that passed [provider.Message.Validate]. For Stale and Reject it also
// says why; for Reject the reason is a dead-letter [provider.Reason].
func (s *Snapshot) Classify(m *provider.Message) (Verdict, provider.Reason, string) {
	if m.Kind == history.KindExecutionStarted {
		switch {
		case slices.Contains(s.Executions, m.ExecutionID):
			return Duplicate, "", ""
		case s.Started() && startsOnce(m):
			return Stale, "", fmt.Sprintf("instance %s was started before (execution %s); a start-once is dropped", s.InstanceID, s.ExecutionID)
		case s.Started() && !s.Ended:
			return Reject, provider.ReasonAlreadyRunning, fmt.Sprintf("execution %s of instance %s is still running", s.ExecutionID, s.InstanceID)
		case m.CorrelationID != m.ExecutionID:
			return Reject, provider.ReasonUndecodable, "start message must be correlated with its execution id"
		}
		return Accept, "", ""
	}
	if m.Kind.IsRecord() {
		// A legal hold's record: added to the current execution, ended
		// or not, once per correlation.
		switch k, _ := seenKey(m.Kind, m.CorrelationID); {
		case !s.Started():
			return Reject, provider.ReasonNotStarted, fmt.Sprintf("instance %s has not been started", s.InstanceID)
		case s.Seen[k]:
			return Duplicate, "", ""
		}
		return Accept, "", ""
	}
	switch {
	case !s.Started() && m.Kind.Class() == history.ClassSignal:
		// The outcome of a signal whose sender was purged since it sent
		// it: nobody waits for it any more.
		return Stale, "", fmt.Sprintf("instance %s, which sent the signal, no longer exists", s.InstanceID)
	case !s.Started():
		return Reject, provider.ReasonNotStarted, fmt.Sprintf("instance %s has not been started", s.InstanceID)
	case m.ExecutionID != "" && m.ExecutionID != s.ExecutionID:
		return Stale, "", fmt.Sprintf("message for execution %s, current is %s", m.ExecutionID, s.ExecutionID)
	case s.Ended:
		return Stale, "", fmt.Sprintf("execution %s has ended", s.ExecutionID)
	}
	if k, ok := seenKey(m.Kind, m.CorrelationID); ok && s.Seen[k] {
		return Duplicate, "", ""
	}
	switch m.Kind.Class() {
	case history.ClassActivity:
		return s.pending(m, func(seq int64) bool { _, ok := s.Activities[seq]; return ok })
	case history.ClassTimer:
		return s.pending(m, func(seq int64) bool { _, ok := s.Timers[seq]; return ok })
	case history.ClassSubWorkflow:
		return s.pending(m, func(seq int64) bool { _, ok := s.SubWorkflows[seq]; return ok })
	case history.ClassSignal:
		return s.pending(m, func(seq int64) bool { _, ok := s.Signals[seq]; return ok })
	case history.ClassTask:
		attrs, err := history.DecodeAttributes(m.Kind, m.Payload)
		if err != nil {
			return Reject, provider.ReasonUndecodable, err.Error()
		}
		t, ok := s.Tasks[taskIDOf(attrs)]
		if !ok {
			return Stale, "", fmt.Sprintf("task %s is not open", taskIDOf(attrs))
		}
		if why := taskConflict(t, attrs, m.Actor); why != "" {
			return Reject, provider.ReasonRejected, fmt.Sprintf("task %s: %s", taskIDOf(attrs), why)
		}
	}
	switch m.Kind {
	case history.KindExecutionSuspended:
		if s.Status == provider.StatusSuspended {
			return Stale, "", "already suspended"
		}
	case history.KindExecutionResumed:
		if s.Status != provider.StatusSuspended {
			return Stale, "", "not suspended"
		}
	case history.KindExecutionTerminated:
		// A termination ends the current execution; its correlation is
		// the execution id, set by the round.
	}
	return Accept, "", ""
}

// startsOnce reports whether the start message m sets
// [history.ExecutionStarted.Once]. It decodes the start, so it is asked
// only of a start to an instance that has an execution already.
func startsOnce(m *provider.Message) bool {
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return false // judged by the rest of Classify and the round
	}
	s, ok := a.(*history.ExecutionStarted)
	return ok && s.Once
}

func (s *Snapshot) pending(m *provider.Message, open func(int64) bool) (Verdict, provider.Reason, string) {
	seq, err := history.ParseSeqCorrelation(m.CorrelationID)
	if err != nil {
		return Reject, provider.ReasonUndecodable, err.Error()
	}
	if !open(seq) {
		// Either its completion is already in history or it was cancelled.
		return Stale, "", fmt.Sprintf("nothing pending at seq %d", seq)
	}
	return Accept, "", ""
}

// taskConflict re-checks a task action against the task's state when the
// round runs: the client checked it against a projection that another
// action may have changed since.
func taskConflict(t *OpenTask, a history.Attributes, actor string) string {
	switch a := a.(type) {
	case *history.TaskAssigned:
		if t.Assignee != "" && t.Assignee != a.Assignee {
			return "already assigned to " + t.Assignee
		}
	case *history.TaskReleased:
		if t.Assignee != a.Previous {
			return "no longer assigned to " + a.Previous
		}
	case *history.TaskReassigned:
		if t.Assignee != a.From {
			return "no longer assigned to " + a.From
		}
	case *history.TaskCompleted:
		if t.Assignee != "" && history.UserActor(t.Assignee) != actor {
			return "assigned to " + t.Assignee + ", completed by " + actor
		}
	}
	return ""
}

func taskIDOf(a history.Attributes) string {
	switch a := a.(type) {
	case *history.TaskAssigned:
		return a.TaskID
	case *history.TaskReleased:
		return a.TaskID
	case *history.TaskReassigned:
		return a.TaskID
	case *history.TaskCompleted:
		return a.TaskID
	}
	return ""
}
