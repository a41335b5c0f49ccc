package timeline

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

const (
	// messageWidth is roughly how many characters an error message or
	// reason keeps.
	messageWidth = 100
	// detailWidth bounds a whole detail, whatever a damaged history holds.
	detailWidth = 240
)

// Detail describes what an event records in a few words: the activity and
// its attempts, when a timer fires, which signal arrived with which key,
// which child was started, a task's name and assignee, failure messages,
// markers, custom status. Completions start with "→ #<seq>", the event that
// scheduled them. decode renders user payloads; nil means [DecodeMsgpack].
//
// Detail never panics, whatever the payload holds, and contains a panic of
// decode: what cannot be decoded is described by its bytes instead. The
// result is a single line.
func Detail(e *history.Event, decode func([]byte) string) string {
	if e == nil {
		return ""
	}
	if decode == nil {
		decode = DecodeMsgpack
	}
	d := describer{decode: decode}
	return Shorten(Clean(d.detail(e)), detailWidth)
}

type describer struct {
	decode func([]byte) string
}

// payload renders a user payload, shortened; "" when there is none.
func (d describer) payload(b []byte) (s string) {
	if len(b) == 0 {
		return ""
	}
	defer func() {
		if recover() != nil {
			s = Undecodable(b)
		}
	}()
	return Shorten(Clean(d.decode(b)), PayloadWidth)
}

// parts joins the non-empty parts with ", ".
func parts(ps ...string) string {
	out := ps[:0:0]
	for _, p := range ps {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
}

// labelled returns label+" "+value, or "" when value is empty.
func labelled(label, value string) string {
	if value == "" {
		return ""
	}
	return label + " " + value
}

func message(s string) string { return Shorten(Clean(s), messageWidth) }

func failure(f *history.Failure) string {
	m := message(f.Message)
	if m == "" {
		m = "no message"
	}
	if f.Type != "" {
		m += " [" + Shorten(Clean(f.Type), 40) + "]"
	}
	if f.NonRetryable {
		m += " (not retryable)"
	}
	return m
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + one + "s"
}

// ref points a completion at the event that scheduled it.
func ref(e *history.Event) string {
	if seq, err := history.ParseSeqCorrelation(e.CorrelationID); err == nil {
		return "→ #" + strconv.FormatInt(seq, 10)
	}
	if e.CorrelationID == "" {
		return "→ ?"
	}
	return "→ " + Shorten(Clean(e.CorrelationID), 40)
}

// then appends text to a completion's reference: "→ #5" + ": 742".
func then(head, sep, tail string) string {
	if tail == "" {
		return head
	}
	return head + sep + tail
}

func (d describer) detail(e *history.Event) string {
	if !e.Kind.Valid() {
		return "unknown kind, " + plural(len(e.Payload), "byte") + " of attributes"
	}
	a, err := e.Attributes()
	if err != nil {
		// The innermost cause ("empty input", "2 trailing bytes") says
		// enough; the kind is in its own column.
		msg := err.Error()
		msg = msg[strings.LastIndex(msg, ": ")+1:]
		return fmt.Sprintf("undecodable attributes %s:%s", Undecodable(e.Payload), Shorten(msg, PayloadWidth))
	}
	switch a := a.(type) {
	case *history.ExecutionStarted:
		var parent, from string
		if p := a.Parent; p != nil {
			parent = fmt.Sprintf("parent %s #%d", p.InstanceID, p.ScheduledSeq)
		}
		if a.ContinuedFrom != "" {
			from = "continued from " + a.ContinuedFrom
		}
		if r := a.RerunOf; r != nil {
			from = parts(fmt.Sprintf("rerun of %s from #%d", r.ExecutionID, r.FromSeq), activityRef(r.ActivitySeq), reason(r.Reason), ticket(r.Ticket))
		}
		name := a.Name
		if a.Version != "" {
			name += " v" + a.Version
		}
		return parts(name, labelled("key", a.BusinessKey), parent, from, labelled("input", d.payload(a.Input)),
			labelled("attributes", attributes(a.SearchAttributes)))
	case *history.ExecutionCompleted:
		if r := d.payload(a.Output); r != "" {
			return "result " + r
		}
		return "no result"
	case *history.ExecutionFailed:
		return "failed: " + failure(&a.Failure)
	case *history.ExecutionTerminated:
		return parts(reason(a.Reason), ticket(a.Ticket))
	case *history.ExecutionSuspended:
		return parts(reason(a.Reason), ticket(a.Ticket))
	case *history.ExecutionResumed:
		return parts(reason(a.Reason), ticket(a.Ticket))
	case *history.ExecutionRerun:
		return parts(fmt.Sprintf("rerun from #%d as execution %s", a.FromSeq, a.NewExecutionID), activityRef(a.ActivitySeq),
			labelled("input", d.payload(a.ActivityInput)), reason(a.Reason), ticket(a.Ticket))
	case *history.HoldPlaced:
		return parts("legal hold "+a.HoldID, reason(a.Reason), ticket(a.Ticket))
	case *history.HoldReleased:
		return parts("legal hold "+a.HoldID+" released", reason(a.Reason), ticket(a.Ticket))
	case *history.ContinuedAsNew:
		return parts("new execution "+a.NewExecutionID, labelled("version", a.Version), labelled("input", d.payload(a.Input)))
	case *history.TurnStarted:
		return ""
	case *history.ActivityScheduled:
		var attempts, timeout string
		if a.Retry.MaxAttempts > 0 {
			attempts = "up to " + plural(a.Retry.MaxAttempts, "attempt")
		}
		if a.Timeout > 0 {
			timeout = "timeout " + a.Timeout.String()
		}
		return parts(a.Name, labelled("queue", a.Queue), attempts, timeout, labelled("input", d.payload(a.Input)))
	case *history.ActivityCompleted:
		return then(ref(e)+" attempt "+strconv.Itoa(a.Attempts), ": ", d.payload(a.Result))
	case *history.ActivityFailed:
		return ref(e) + " failed after " + plural(a.Attempts, "attempt") + ": " + failure(&a.Failure)
	case *history.TimerCreated:
		return parts(a.Name, "fires at "+at(a.FireAt))
	case *history.TimerFired:
		return ref(e) + " fired, due " + at(a.FireAt)
	case *history.TimerCancelled:
		return ref(e) + " cancelled"
	case *history.EventRaised:
		return parts(a.Name, labelled("key", a.IdempotencyKey), labelled("from", a.Sender), labelled("payload", d.payload(a.Payload)))
	case *history.SignalSent:
		return parts(a.Name, labelled("to", a.InstanceID), labelled("key", a.IdempotencyKey), labelled("payload", d.payload(a.Payload)))
	case *history.SignalDelivered:
		return then(ref(e)+" delivered", " to execution ", a.ExecutionID)
	case *history.SignalFailed:
		return ref(e) + " failed: " + failure(&a.Failure)
	case *history.SubWorkflowScheduled:
		name := a.Name
		if a.Version != "" {
			name += " v" + a.Version
		}
		return parts(name, labelled("child", a.InstanceID), labelled("input", d.payload(a.Input)))
	case *history.SubWorkflowCompleted:
		return then(ref(e), ": ", d.payload(a.Output))
	case *history.SubWorkflowFailed:
		return ref(e) + " failed: " + failure(&a.Failure)
	case *history.TaskCreated:
		var due string
		if !a.Due.IsZero() {
			due = "due " + at(a.Due)
		}
		var escalation []string
		for _, st := range a.Escalation {
			escalation = append(escalation, "at "+at(st.At)+" "+st.Action)
		}
		return parts(a.Name, labelled("task", a.TaskID), labelled("roles", strings.Join(a.Roles, "|")),
			labelled("assignee", a.Assignee), due, labelled("payload", d.payload(a.Payload)),
			labelled("escalate", strings.Join(escalation, ", ")))
	case *history.TaskAssigned:
		how := "assigned to"
		if a.Claimed {
			how = "claimed by"
		}
		return "task " + a.TaskID + " " + how + " " + a.Assignee
	case *history.TaskReleased:
		return then("task "+a.TaskID+" released", " by ", a.Previous)
	case *history.TaskReassigned:
		from := a.From
		if from == "" {
			from = "nobody"
		}
		return "task " + a.TaskID + " from " + from + " to " + a.To
	case *history.TaskCompleted:
		return then("task "+a.TaskID, ", result ", d.payload(a.Result))
	case *history.TaskCancelled:
		return then("task "+a.TaskID+" cancelled", ": ", message(a.Reason))
	case *history.TaskEscalated:
		var did []string
		switch {
		case a.Reassigned && a.Assignee != "":
			did = append(did, "reassigned to "+a.Assignee)
		case a.Reassigned:
			did = append(did, "returned to roles "+strings.Join(a.Roles, "|"))
		}
		if a.Notify != "" {
			did = append(did, "notify "+a.Notify)
		}
		if a.Completed {
			did = append(did, "completed with default result "+d.payload(a.Result))
		}
		return then("task "+a.TaskID+" escalated ("+strings.Join(did, ", ")+")", ": ", message(a.Reason))
	case *history.MarkerRecorded:
		switch a.Marker {
		case history.MarkerSideEffect:
			return then(then("side effect", " ", a.Name), ": ", d.payload(a.Value))
		case history.MarkerVersion:
			return fmt.Sprintf("version of %s: %d", a.Name, a.Version)
		}
		return parts(labelled("marker", a.Marker), a.Name, labelled("value", d.payload(a.Value)))
	case *history.CustomStatusSet:
		if s := d.payload(a.Status); s != "" {
			return "status " + s
		}
		return "status cleared"
	case *history.SearchAttributesUpserted:
		if len(a.Attributes) == 0 {
			return "no attributes"
		}
		return "attributes " + attributes(a.Attributes)
	case *history.CompensationStarted:
		return then("undo "+plural(a.Steps, "step"), ": ", message(a.Reason))
	case *history.CompensationCompleted:
		if len(a.Failures) == 0 {
			return "every step undone"
		}
		return plural(len(a.Failures), "compensation") + " failed: " + message(strings.Join(a.Failures, "; "))
	}
	// A kind added to history without a case here still shows its name.
	return string(e.Kind)
}

// attributes lists search attribute values in name order, as query
// literals ("customer='c-7', amount=12.5"); an unset one is "NULL".
func attributes(m history.SearchAttributeMap) string {
	if len(m) == 0 {
		return ""
	}
	ps := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ps = append(ps, k+"="+m[k].String())
	}
	return message(strings.Join(ps, ", "))
}

func reason(r string) string {
	if r == "" {
		return "no reason given"
	}
	return "reason: " + message(r)
}

// activityRef names the activity whose input a rerun replaced, or is ""
// when it replaced none.
func activityRef(seq int64) string {
	if seq == 0 {
		return ""
	}
	return fmt.Sprintf("activity #%d with a new input", seq)
}

// ticket returns "ticket <t>", or "" when no ticket was given.
func ticket(t string) string {
	if t == "" {
		return ""
	}
	return "ticket " + message(t)
}

func at(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(TimeFormat)
}
