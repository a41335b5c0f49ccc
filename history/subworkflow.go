package history

import "time"

// SubWorkflowScheduled records that workflow code started a child workflow.
type SubWorkflowScheduled struct {
	Name    string `msgpack:"name" json:"name"`
	Version string `msgpack:"version,omitempty" json:"version,omitempty"`
	// InstanceID and ExecutionID name the child; both are derived
	// deterministically from the parent.
	InstanceID  string `msgpack:"instance_id" json:"instance_id"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Input       []byte `msgpack:"input,omitempty" json:"input,omitempty"`
	// Detached marks a start without a parent link (workflow code's
	// StartWorkflow): the instance runs on its own, the starter waits for
	// nothing, and the start is dropped when the instance id has been
	// started before (see [ExecutionStarted.Once]).
	Detached bool `msgpack:"detached,omitempty" json:"detached,omitempty"`
	// Tags, Priority and Concurrency are the detached start's options,
	// recorded in its ExecutionStarted.
	Tags        map[string]string `msgpack:"tags,omitempty" json:"tags,omitempty"`
	Priority    int               `msgpack:"priority,omitempty" json:"priority,omitempty"`
	Concurrency *Concurrency      `msgpack:"concurrency,omitempty" json:"concurrency,omitempty"`
	// Due, on a detached start, is when the start was due (a schedule's
	// firing time): its start message is queued as visible since then
	// (never later than the round's time), so that the queue, which
	// serves the oldest visible work first, takes a start that is late
	// already before work that came due after it.
	Due time.Time `msgpack:"due,omitempty" json:"due,omitempty"`
}

// SubWorkflowCompleted records a child workflow's result.
type SubWorkflowCompleted struct {
	Output []byte `msgpack:"output,omitempty" json:"output,omitempty"`
}

// SubWorkflowFailed records that a child workflow failed or was terminated.
type SubWorkflowFailed struct {
	Failure Failure `msgpack:"failure" json:"failure"`
}

// EventKind implements [Attributes].
func (*SubWorkflowScheduled) EventKind() Kind { return KindSubWorkflowScheduled }

// EventKind implements [Attributes].
func (*SubWorkflowCompleted) EventKind() Kind { return KindSubWorkflowCompleted }

// EventKind implements [Attributes].
func (*SubWorkflowFailed) EventKind() Kind { return KindSubWorkflowFailed }
