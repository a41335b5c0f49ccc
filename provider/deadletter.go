package provider

import (
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// Reason classifies why a work item was dead-lettered.
type Reason string

// Dead-letter reasons.
const (
	// ReasonUndecodable: the message's payload does not decode, or its
	// envelope is invalid.
	ReasonUndecodable Reason = "undecodable"
	// ReasonUnknownWorkflow: no workflow of that name is registered.
	ReasonUnknownWorkflow Reason = "unknown-workflow"
	// ReasonUnknownActivity: no activity of that name is registered.
	ReasonUnknownActivity Reason = "unknown-activity"
	// ReasonNondeterminism: workflow code no longer matches its history.
	ReasonNondeterminism Reason = "nondeterminism"
	// ReasonPanic: workflow code panicked.
	ReasonPanic Reason = "panic"
	// ReasonMaxDeliveries: the item failed more often than MaxDeliveries.
	ReasonMaxDeliveries Reason = "max-deliveries"
	// ReasonNotStarted: the message addresses an instance that was never
	// started.
	ReasonNotStarted Reason = "instance-not-started"
	// ReasonAlreadyRunning: a start message arrived for an instance whose
	// execution is still running.
	ReasonAlreadyRunning Reason = "instance-already-running"
	// ReasonRejected: the round rejected the message for another reason
	// given in the error text.
	ReasonRejected Reason = "rejected"
	// ReasonCorruptHistory: the instance's stored history does not decode,
	// its hash chain is broken, or it does not end where its stored
	// snapshot says; the instance does not run until an operator repairs it.
	ReasonCorruptHistory Reason = "corrupt-history"
)

// DeadLetterStatus says whether a dead letter awaits an operator.
type DeadLetterStatus string

// Dead-letter statuses.
const (
	DeadLetterDead      DeadLetterStatus = "dead"
	DeadLetterRedriven  DeadLetterStatus = "redriven"
	DeadLetterDiscarded DeadLetterStatus = "discarded"
)

// DeadLetter is a work item that could not be processed, kept with the
// reason until an operator redrives or discards it. Redriven and discarded
// dead letters are kept as a record of who resolved them.
type DeadLetter struct {
	// ID identifies the dead letter (see [DeadLetterID]).
	ID string
	// InstanceID is the instance the item belongs to.
	InstanceID string
	// Message is the original orchestration message, or nil.
	Message *Message
	// Activity is the original activity task, or nil.
	Activity *ActivityTask
	// Raw holds the stored bytes of an item that could not be decoded
	// (Reason is then ReasonUndecodable, and Message and Activity are nil);
	// such a letter can only be discarded.
	Raw []byte
	// Reason classifies the failure; Error has its text.
	Reason Reason
	Error  string
	// Node is the node that dead-lettered the item, At when, Attempts after
	// how many failed processing attempts.
	Node     string
	At       time.Time
	Attempts int
	// Status and the Resolved fields record an operator's decision.
	Status     DeadLetterStatus
	ResolvedBy string
	ResolvedAt time.Time
}

// DeadLetterID derives the id of the dead letter of a work item: the same
// item dead-lettered twice in one delivery gets the same id, a redriven item
// (enqueued anew) gets a new one.
func DeadLetterID(itemID string, enqueuedAt time.Time) string {
	return history.DeterministicID(itemID, UnixNanos(enqueuedAt), "dead-letter")
}

// ErrDeadLetteringUnfinished is why a redrive is refused (with
// [ErrInvalidState]) while the letter's message is still queued as it
// was lettered: the dead-lettering stopped before it removed the message
// (a peek-lock crash between its writes). The requeue would be a no-op
// and the next delivery would dead-letter the message again; redrive
// once that delivery has moved it, or the message runs on its own.
var ErrDeadLetteringUnfinished = errors.New("provider: the dead letter's message is still queued; its dead-lettering has not finished")

// ResolvedDeadLetterID is the id under which an item is dead-lettered
// when its [DeadLetterID] is taken by a letter that an operator resolved
// at resolvedAt (a message or task dead-lettered again without having
// been requeued since, as a dead-lettering cut short before it removed
// the item leaves it): a new letter, never the resolved one, so the item
// is not removed without a letter to redrive. It is deterministic, so a
// resumed dead-lettering finds its own letter.
func ResolvedDeadLetterID(id string, resolvedAt time.Time) string {
	return history.DeterministicID(id, UnixNanos(resolvedAt), "dead-letter-again")
}

// DiscardedActivityResult is the result message a store enqueues when an
// operator discards the dead letter of an activity task: the activity
// fails for good, so its workflow goes on (and may compensate) instead of
// waiting forever.
func DiscardedActivityResult(l *DeadLetter, by string) (Message, error) {
	if l.Activity == nil {
		return Message{}, fmt.Errorf("%w: dead letter %s holds no activity task", ErrInvalidState, l.ID)
	}
	return ActivityOutcome(l.Activity, nil, &history.Failure{
		Message:      fmt.Sprintf("dead letter discarded by %s (%s: %s)", by, l.Reason, l.Error),
		Type:         FailureDeadLetterDiscarded,
		NonRetryable: true,
	})
}
