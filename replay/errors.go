package replay

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Sentinel errors of workflow code.
var (
	// ErrTimeout is returned by a wait whose timeout fired first.
	ErrTimeout = errors.New("chronicle: wait timed out")
	// ErrPayloadTooLarge is returned when an encoded payload exceeds the
	// engine's limit.
	ErrPayloadTooLarge = errors.New("chronicle: payload too large")
	// ErrUnknownWorkflow is returned for a workflow name nobody registered.
	ErrUnknownWorkflow = errors.New("chronicle: unknown workflow")
	// ErrTimerCancelled is returned by the future of a cancelled timer.
	ErrTimerCancelled = errors.New("chronicle: timer cancelled")
	// ErrTaskCancelled is returned by the future of a task the workflow
	// cancelled.
	ErrTaskCancelled = errors.New("chronicle: task cancelled")
	// ErrSubWorkflowAlreadyStarted is matched by the *SubWorkflowError of a
	// child whose start was refused because its instance id is taken by a
	// running instance (Temporal's ChildWorkflowExecutionAlreadyStarted).
	ErrSubWorkflowAlreadyStarted = errors.New("chronicle: sub-workflow instance already started")
	// ErrSignalNotDelivered is matched by the *SignalError of a signal
	// sent with [Context.SignalWorkflow] that could not be delivered: the
	// receiving instance does not exist or has ended.
	ErrSignalNotDelivered = errors.New("chronicle: signal not delivered")
)

// NondeterminismError reports that workflow code no longer matches its
// history: at Seq, history holds one thing and the code asked for another.
// The round is rolled back, retried, and finally dead-lettered; history is
// not touched.
type NondeterminismError struct {
	InstanceID string
	Seq        int64
	// History describes what history holds at Seq ("nothing" past its end).
	History string
	// Code describes what the workflow code asked for ("nothing" when it
	// stopped short of a recorded step).
	Code string
}

// Error implements error.
func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("chronicle: nondeterminism in %s at seq %d: history holds %s, code asked for %s", e.InstanceID, e.Seq, e.History, e.Code)
}

// DeadLetterReason implements round.Reasoner.
func (e *NondeterminismError) DeadLetterReason() provider.Reason {
	return provider.ReasonNondeterminism
}

// PanicError reports that workflow code panicked.
type PanicError struct {
	InstanceID string
	Value      any
	Stack      string
}

// Error implements error.
func (e *PanicError) Error() string {
	// Stores keep this text: NUL bytes and invalid UTF-8 are replaced.
	return CleanText(fmt.Sprintf("chronicle: workflow %s panicked: %v", e.InstanceID, e.Value))
}

// DeadLetterReason implements round.Reasoner.
func (e *PanicError) DeadLetterReason() provider.Reason { return provider.ReasonPanic }

// ActivityError is returned by an activity's future when the activity
// failed for good.
type ActivityError struct {
	Name     string
	Attempts int
	Failure  history.Failure
}

// Error implements error.
func (e *ActivityError) Error() string {
	return fmt.Sprintf("chronicle: activity %s failed after %d attempt(s): %s", e.Name, e.Attempts, e.Failure.Message)
}

// ErrorType returns the failure's type.
func (e *ActivityError) ErrorType() string { return e.Failure.Type }

// SubWorkflowError is returned by a sub-workflow's future when the child
// failed or was terminated, or never ran: its start was refused because
// its instance id is taken by a running instance (Failure.Type
// round.FailureSubWorkflowAlreadyStarted; the error matches
// [ErrSubWorkflowAlreadyStarted]) or an operator discarded the dead letter
// of its start (round.FailureDeadLetterDiscarded).
type SubWorkflowError struct {
	Name       string
	InstanceID string
	Failure    history.Failure
}

// Error implements error.
func (e *SubWorkflowError) Error() string {
	return fmt.Sprintf("chronicle: sub-workflow %s (%s) failed: %s", e.Name, e.InstanceID, e.Failure.Message)
}

// ErrorType returns the failure's type.
func (e *SubWorkflowError) ErrorType() string { return e.Failure.Type }

// Is reports whether target is [ErrSubWorkflowAlreadyStarted] and the
// child's start was refused for that reason.
func (e *SubWorkflowError) Is(target error) bool {
	return target == ErrSubWorkflowAlreadyStarted && e.Failure.Type == round.FailureSubWorkflowAlreadyStarted
}

// SignalError is returned by the future of [Context.SignalWorkflow] when
// the signal could not be delivered: no instance has the receiver's id
// (Failure.Type round.FailureSignalTargetNotFound) or its execution had
// ended when the signal reached it (round.FailureSignalTargetEnded). It
// matches [ErrSignalNotDelivered].
type SignalError struct {
	// InstanceID names the receiver; Name is the signal's name.
	InstanceID string
	Name       string
	Failure    history.Failure
}

// Error implements error.
func (e *SignalError) Error() string {
	return fmt.Sprintf("chronicle: signal %s to %s not delivered: %s", e.Name, e.InstanceID, e.Failure.Message)
}

// ErrorType returns the failure's type.
func (e *SignalError) ErrorType() string { return e.Failure.Type }

// Is reports whether target is [ErrSignalNotDelivered].
func (e *SignalError) Is(target error) bool { return target == ErrSignalNotDelivered }

// ContinueAsNewError is returned by [Context.ContinueAsNew]; a workflow
// function returns it to end its execution and start the next one.
type ContinueAsNewError struct {
	Input []byte
}

// Error implements error.
func (e *ContinueAsNewError) Error() string { return "chronicle: continue as new" }

// InputError reports that a workflow's input could not be decoded; the
// start message is dead-lettered as undecodable.
type InputError struct {
	Workflow string
	Err      error
}

// Error implements error.
func (e *InputError) Error() string {
	return fmt.Sprintf("chronicle: decode input of workflow %s: %v", e.Workflow, e.Err)
}

// Unwrap returns the decoding error.
func (e *InputError) Unwrap() error { return e.Err }
