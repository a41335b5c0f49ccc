package history

import (
	"fmt"

	"github.com/chronicleflow/chronicle/query"
)

// ExecutionStarted starts an execution (a new instance, or a new execution
// after continue-as-new).
type ExecutionStarted struct {
	// Name and Version identify the workflow.
	Name    string `msgpack:"name" json:"name"`
	Version string `msgpack:"version,omitempty" json:"version,omitempty"`
	// Input is the encoded workflow input.
	Input []byte `msgpack:"input,omitempty" json:"input,omitempty"`
	// BusinessKey and BusinessParts are the product's reference of the
	// instance (a claim number, say), indexed for queries.
	BusinessKey   string            `msgpack:"business_key,omitempty" json:"business_key,omitempty"`
	BusinessParts map[string]string `msgpack:"business_parts,omitempty" json:"business_parts,omitempty"`
	// Parent is set when a workflow started the instance as a sub-workflow.
	Parent *ParentRef `msgpack:"parent,omitempty" json:"parent,omitempty"`
	// Tags are free-form labels.
	Tags map[string]string `msgpack:"tags,omitempty" json:"tags,omitempty"`
	// Trace carries a W3C traceparent of the caller.
	Trace string `msgpack:"trace,omitempty" json:"trace,omitempty"`
	// ContinuedFrom names the previous execution after continue-as-new.
	ContinuedFrom string `msgpack:"continued_from,omitempty" json:"continued_from,omitempty"`
	// SearchAttributes are the execution's first search attributes, by
	// declared name: those the start gave, or after continue-as-new those
	// the previous execution had when it ended. None is the zero Value.
	SearchAttributes SearchAttributeMap `msgpack:"search_attributes,omitempty" json:"search_attributes,omitempty"`
	// RerunOf is set on an execution an operator started from a point of
	// an earlier execution (a rerun): it names that execution, the seq
	// the rerun started from, who asked for it and why.
	RerunOf *RerunRef `msgpack:"rerun_of,omitempty" json:"rerun_of,omitempty"`
	// Priority orders the execution's work in the queues (see
	// docs/operations.md, "Priority"); continue-as-new carries it.
	Priority int `msgpack:"priority,omitempty" json:"priority,omitempty"`
	// Concurrency, when set, is the key whose slot the instance holds
	// while it runs; continue-as-new keeps the slot.
	Concurrency *Concurrency `msgpack:"concurrency,omitempty" json:"concurrency,omitempty"`
	// Once makes the start a no-op when the instance id has an execution
	// already, running or ended: a round drops its message as stale
	// instead of starting the next execution or refusing it. Detached
	// starts of workflow code (a schedule's firings) set it, so a start
	// repeated by any path never runs an id twice.
	Once bool `msgpack:"once,omitempty" json:"once,omitempty"`
	// Subject names the data subject whose data the instance carries:
	// its user payloads are sealed with the subject's key (see
	// docs/audit.md, "Erasure by key"). Continue-as-new, reruns and
	// sub-workflows keep it.
	Subject string `msgpack:"subject,omitempty" json:"subject,omitempty"`
}

// SubjectAttribute is the search attribute (a keyword) that mirrors an
// execution's Subject, so that the instances of a subject can be found.
const SubjectAttribute = "data_subject"

// SubjectAttributes returns the search attributes that record subject:
// none for "".
func SubjectAttributes(subject string) SearchAttributeMap {
	if subject == "" {
		return nil
	}
	return SearchAttributeMap{SubjectAttribute: {Type: query.Keyword, Str: subject}}
}

// ErasedError reports a payload of a data subject whose key was destroyed:
// it can no longer be read. The chronicle package returns it (as
// chronicle.ErasedError) from every read path.
type ErasedError struct {
	Subject string
}

// Error implements error.
func (e *ErasedError) Error() string {
	return fmt.Sprintf("chronicle: data subject %q is erased: its payloads can no longer be read", e.Subject)
}

// Concurrency names a concurrency key and its limit: at most Limit
// instances (or activities) of the key run at once.
type Concurrency struct {
	Key   string `msgpack:"key" json:"key"`
	Limit int    `msgpack:"limit" json:"limit"`
}

// RerunRef is the lineage of an execution started by a rerun: the
// execution it reran and the seq it reran from (its events before FromSeq
// were copied into the new execution), with the actor's reason and ticket.
// The actor is the event's.
type RerunRef struct {
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	FromSeq     int64  `msgpack:"from_seq" json:"from_seq"`
	Reason      string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	Ticket      string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
	// ActivitySeq is the seq, in the earlier execution, of the activity
	// whose input the rerun replaced; 0 when it replaced none.
	ActivitySeq int64 `msgpack:"activity_seq,omitempty" json:"activity_seq,omitempty"`
}

// ExecutionRerun is an operator's order to start a new execution of an
// instance from a point of its current execution (a control request), and
// the record of it in that execution, after its end: the execution ends
// (as terminated) first if it was running. The new execution's
// ExecutionStarted carries the same lineage ([RerunRef]).
type ExecutionRerun struct {
	// FromSeq is the seq the rerun started from: the new execution keeps
	// the events of this execution before it.
	FromSeq int64 `msgpack:"from_seq" json:"from_seq"`
	// NewExecutionID is the execution the rerun started.
	NewExecutionID string `msgpack:"new_execution_id" json:"new_execution_id"`
	Reason         string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
	// ActivitySeq is the seq of the ActivityScheduled whose input the
	// rerun replaced with ActivityInput; 0 when it replaced none.
	ActivitySeq   int64  `msgpack:"activity_seq,omitempty" json:"activity_seq,omitempty"`
	ActivityInput []byte `msgpack:"activity_input,omitempty" json:"activity_input,omitempty"`
}

// ParentRef points from a sub-workflow to the step of its parent that
// scheduled it.
type ParentRef struct {
	InstanceID   string `msgpack:"instance_id" json:"instance_id"`
	ExecutionID  string `msgpack:"execution_id" json:"execution_id"`
	ScheduledSeq int64  `msgpack:"scheduled_seq" json:"scheduled_seq"`
}

// ExecutionCompleted ends an execution with a result.
type ExecutionCompleted struct {
	Output []byte `msgpack:"output,omitempty" json:"output,omitempty"`
}

// ExecutionFailed ends an execution with an error.
type ExecutionFailed struct {
	Failure Failure `msgpack:"failure" json:"failure"`
}

// ExecutionTerminated ends an execution by an operator's or client's order.
type ExecutionTerminated struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
}

// ExecutionSuspended pauses an execution: events are recorded but the
// workflow code does not run until it is resumed.
type ExecutionSuspended struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
}

// ExecutionResumed ends a suspension.
type ExecutionResumed struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
}

// ContinuedAsNew ends an execution and starts the next one with new input.
type ContinuedAsNew struct {
	NewExecutionID string `msgpack:"new_execution_id" json:"new_execution_id"`
	Input          []byte `msgpack:"input,omitempty" json:"input,omitempty"`
	Version        string `msgpack:"version,omitempty" json:"version,omitempty"`
}

// TurnStarted opens a turn of workflow code; its event's At is the
// workflow's deterministic now for that turn.
type TurnStarted struct{}

// EventKind implements [Attributes].
func (*ExecutionStarted) EventKind() Kind { return KindExecutionStarted }

// EventKind implements [Attributes].
func (*ExecutionCompleted) EventKind() Kind { return KindExecutionCompleted }

// EventKind implements [Attributes].
func (*ExecutionFailed) EventKind() Kind { return KindExecutionFailed }

// EventKind implements [Attributes].
func (*ExecutionTerminated) EventKind() Kind { return KindExecutionTerminated }

// EventKind implements [Attributes].
func (*ExecutionSuspended) EventKind() Kind { return KindExecutionSuspended }

// EventKind implements [Attributes].
func (*ExecutionResumed) EventKind() Kind { return KindExecutionResumed }

// EventKind implements [Attributes].
func (*ContinuedAsNew) EventKind() Kind { return KindContinuedAsNew }

// EventKind implements [Attributes].
func (*ExecutionRerun) EventKind() Kind { return KindExecutionRerun }

// EventKind implements [Attributes].
func (*TurnStarted) EventKind() Kind { return KindTurnStarted }

func (a *ExecutionStarted) normalizeUTC() { normalizeValues(a.SearchAttributes) }
