package chronicle

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/replay"
)

// Errors of the client API. Compare with errors.Is.
var (
	// ErrInstanceNotFound: no instance has this id (and no start is
	// pending for it).
	ErrInstanceNotFound = errors.New("chronicle: instance not found")
	// ErrInstanceExists: Start with ReuseError found the id taken.
	ErrInstanceExists = errors.New("chronicle: instance already exists")
	// ErrInstanceNotRunning: the instance has ended (or, for Resume, is not
	// suspended).
	ErrInstanceNotRunning = errors.New("chronicle: instance not running")
	// ErrInvalidArgument wraps every rejected argument; the message names
	// the field.
	ErrInvalidArgument = replay.ErrInvalidArgument
	// ErrUnknownWorkflow: no workflow of that name is registered.
	ErrUnknownWorkflow = replay.ErrUnknownWorkflow
	// ErrUnknownActivity: no activity of that name is registered.
	ErrUnknownActivity = errors.New("chronicle: unknown activity")
	// ErrAlreadyRegistered: a workflow or activity of that name exists.
	ErrAlreadyRegistered = errors.New("chronicle: already registered")
	// ErrPayloadTooLarge: an encoded payload exceeds Options.MaxPayloadSize.
	ErrPayloadTooLarge = replay.ErrPayloadTooLarge
	// ErrTimeout: a wait for a signal timed out.
	ErrTimeout = replay.ErrTimeout
	// ErrTimerCancelled: the workflow cancelled the timer waited for.
	ErrTimerCancelled = replay.ErrTimerCancelled
	// ErrTaskCancelled: the workflow cancelled the task waited for.
	ErrTaskCancelled = replay.ErrTaskCancelled
	// ErrSubWorkflowAlreadyStarted: a child's start was refused because
	// its instance id is taken by a running instance; the child's
	// *SubWorkflowError matches it.
	ErrSubWorkflowAlreadyStarted = replay.ErrSubWorkflowAlreadyStarted
	// ErrSignalNotDelivered: a signal sent with Context.SignalWorkflow
	// found no instance of that id, or found it ended; the *SignalError
	// of its future matches it.
	ErrSignalNotDelivered = replay.ErrSignalNotDelivered
	// ErrDeadLetterNotFound: no dead letter has this id.
	ErrDeadLetterNotFound = errors.New("chronicle: dead letter not found")
	// ErrDeadLetterResolved: the dead letter was already redriven or
	// discarded.
	ErrDeadLetterResolved = errors.New("chronicle: dead letter already resolved")
	// ErrConcurrencyKeyNotFound: no instance ever asked for a slot of this
	// concurrency key.
	ErrConcurrencyKeyNotFound = errors.New("chronicle: concurrency key not found")
	// ErrEngineRunning: Run was called on an engine that is running.
	ErrEngineRunning = errors.New("chronicle: engine already running")
	// ErrInvalidText is matched by a *TextError: free text that holds a
	// NUL byte or is not valid UTF-8. The client API also wraps it in
	// ErrInvalidArgument.
	ErrInvalidText = replay.ErrInvalidText
)

// TextError names free text that no store can keep as text (a NUL byte or
// invalid UTF-8) and where it goes wrong. The client API returns it for
// its text arguments (wrapped with ErrInvalidArgument); workflow commands
// fail with it (a task name or role, a custom status, a timer or event
// name).
type TextError = replay.TextError

// checkText checks a text argument of the client API.
func checkText(field, s string) error {
	if err := replay.CheckText(field, s); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// MaxTicketLength is the longest ticket reference, in bytes, that
// [ControlOptions] and [BatchOptions] accept.
const MaxTicketLength = 200

// checkTicket checks an optional ticket reference: at most
// [MaxTicketLength] bytes of valid text without control characters.
func checkTicket(t string) error {
	if err := checkText("ticket", t); err != nil {
		return err
	}
	if len(t) > MaxTicketLength {
		return invalid("ticket is %d bytes, at most %d allowed", len(t), MaxTicketLength)
	}
	for i, r := range t {
		if unicode.IsControl(r) {
			return invalid("ticket has a control character at byte %d", i)
		}
	}
	return nil
}

// checkTextMap checks the keys and values of a text map argument.
func checkTextMap(field string, m map[string]string) error {
	for k, v := range m {
		if err := checkText(field+" key", k); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("%s %q", field, k), v); err != nil {
			return err
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// WorkflowError is what [Instance.Result] returns for an instance that
// failed or was terminated.
type WorkflowError struct {
	InstanceID string
	Status     Status
	Failure    Failure
}

// Error implements error.
func (e *WorkflowError) Error() string {
	return fmt.Sprintf("chronicle: instance %s %s: %s", e.InstanceID, e.Status, e.Failure.Message)
}

// nonRetryable marks an error that retrying cannot fix.
type nonRetryable struct{ err error }

func (e *nonRetryable) Error() string      { return e.err.Error() }
func (e *nonRetryable) Unwrap() error      { return e.err }
func (e *nonRetryable) NonRetryable() bool { return true }

// NonRetryable marks an activity's error as one that retries cannot fix:
// the activity fails at once with it.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryable{err: err}
}

// typedError names an error's type for retry policies.
type typedError struct {
	typ string
	err error
}

func (e *typedError) Error() string     { return e.err.Error() }
func (e *typedError) Unwrap() error     { return e.err }
func (e *typedError) ErrorType() string { return e.typ }

// ErrorWithType gives an activity's error a type name that retry policies
// can list in RetryPolicy.NonRetryable.
func ErrorWithType(typ string, err error) error {
	if err == nil {
		return nil
	}
	return &typedError{typ: typ, err: err}
}

// boundedError keeps the chain of an error whose text is cut to a bound,
// so that a huge error message cannot make the failure recorded in
// history exceed the payload limit.
type boundedError struct {
	text string
	err  error
}

func (e *boundedError) Error() string { return e.text }
func (e *boundedError) Unwrap() error { return e.err }

// ErrorType names the cut error's type for retry policies and history:
// that of the original error.
func (e *boundedError) ErrorType() string {
	var typed interface{ ErrorType() string }
	if errors.As(e.err, &typed) {
		return typed.ErrorType()
	}
	return fmt.Sprintf("%T", e.err)
}

// boundError returns err as history may record it: when its text holds
// NUL bytes or invalid UTF-8 (which stores cannot keep as text) they are
// replaced by U+FFFD, and when it is longer than limit bytes it is cut to
// limit bytes (on a UTF-8 boundary) and marked as cut. errors.Is and
// errors.As see through it.
func boundError(err error, limit int) error {
	orig := err.Error()
	text := replay.CleanText(orig)
	if len(text) > limit {
		const mark = " … (error text cut to the payload limit)"
		cut := max(limit-len(mark), 0)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + mark
	}
	if text == orig {
		return err
	}
	return &boundedError{text: text, err: err}
}
