package history

import (
	"fmt"
	"strconv"
	"time"
)

// Event is one entry of an instance's history.
type Event struct {
	// Seq numbers the events of one instance, contiguous from 1.
	Seq int64
	// InstanceID names the workflow instance the event belongs to.
	InstanceID string
	// ExecutionID names the execution of the instance; continue-as-new starts
	// a new execution in the same log.
	ExecutionID string
	// Kind says what happened and which [Attributes] type Payload holds.
	Kind Kind
	// CorrelationID ties a completion to what scheduled it: the decimal Seq of
	// the scheduling event for activities, timers and sub-workflows, the
	// idempotency key of a raised event, the action id of a task action, the
	// execution id for the start and end of an execution.
	CorrelationID string
	// At is the clock reading (UTC) of the round that wrote the event.
	At time.Time
	// Actor is who caused the event: "system", "worker:<node>",
	// "user:<id>" or, for a signal another workflow sent,
	// "workflow:<instance id>".
	Actor string
	// Payload holds the encoded attributes of Kind (see [DecodeAttributes]).
	Payload []byte
	// PrevHash is the Hash of the previous event, empty for Seq 1.
	PrevHash []byte
	// Hash is SHA-256(PrevHash ‖ canonical(event without Hash)).
	Hash []byte
}

// Attributes decodes the event's payload into its typed attributes.
func (e *Event) Attributes() (Attributes, error) {
	return DecodeAttributes(e.Kind, e.Payload)
}

// Key returns the event's idempotency key and whether it has one.
func (e *Event) Key() (Key, bool) {
	class := e.Kind.Class()
	if class == "" {
		return Key{}, false
	}
	return Key{ExecutionID: e.ExecutionID, Class: class, CorrelationID: e.CorrelationID}, true
}

// String renders the event for logs and error messages.
func (e *Event) String() string {
	return fmt.Sprintf("#%d %s %s", e.Seq, e.Kind, e.CorrelationID)
}

// Key is the idempotency key of a completion-like event within one instance:
// at most one event of a log has a given key.
type Key struct {
	ExecutionID   string
	Class         string
	CorrelationID string
}

// String renders the key as execution/class/correlation.
func (k Key) String() string { return k.ExecutionID + "/" + k.Class + "/" + k.CorrelationID }

// Actors of events.
const (
	// ActorSystem is the actor of events the engine writes on its own.
	ActorSystem = "system"
	// ActorWorkerPrefix prefixes the node id of a worker.
	ActorWorkerPrefix = "worker:"
	// ActorUserPrefix prefixes a user id.
	ActorUserPrefix = "user:"
	// ActorWorkflowPrefix prefixes the instance id of a workflow that sent
	// a signal (Context.SignalWorkflow).
	ActorWorkflowPrefix = "workflow:"
	// ActorEscalation is the actor of the TaskEscalated events a task's
	// escalation policy writes at its due time.
	ActorEscalation = "system:escalation"
	// ActorRetention is the actor of the purges a retention policy makes,
	// recorded on their tombstones.
	ActorRetention = "system:retention"
)

// WorkerActor returns the actor string of a worker node.
func WorkerActor(node string) string { return ActorWorkerPrefix + node }

// UserActor returns the actor string of a user.
func UserActor(user string) string { return ActorUserPrefix + user }

// WorkflowActor returns the actor string of a workflow instance that sent
// a signal.
func WorkflowActor(instanceID string) string { return ActorWorkflowPrefix + instanceID }

// SeqCorrelation formats the Seq of a scheduling event as the CorrelationID
// of its completion.
func SeqCorrelation(seq int64) string { return strconv.FormatInt(seq, 10) }

// ParseSeqCorrelation parses a CorrelationID written by [SeqCorrelation].
func ParseSeqCorrelation(c string) (int64, error) {
	seq, err := strconv.ParseInt(c, 10, 64)
	if err != nil || seq < 1 {
		return 0, fmt.Errorf("%w: correlation id %q is not a sequence number", ErrInvalid, c)
	}
	return seq, nil
}
