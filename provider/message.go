package provider

import (
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// Message is an orchestration work item addressed to one instance. Each
// message turns into exactly one history event when its round processes it:
// Kind and Payload are that event's kind and encoded attributes, so an
// activity result arrives as an ActivityCompleted or ActivityFailed message.
type Message struct {
	// ID is stable across retries; enqueueing an ID that is already queued
	// does nothing.
	ID string
	// InstanceID addresses the instance.
	InstanceID string
	// ExecutionID names the execution the message is for. Empty means the
	// current execution (signals, control requests from clients). A Start
	// message (Kind ExecutionStarted) carries the new execution's id.
	ExecutionID string
	// Kind is the history kind the message becomes (see [MessageKinds]).
	Kind history.Kind
	// CorrelationID becomes the event's CorrelationID.
	CorrelationID string
	// Actor becomes the event's Actor; empty means the processing worker.
	Actor string
	// Payload holds the encoded attributes of Kind.
	Payload []byte
	// VisibleAt delays delivery (timers, retry backoff).
	VisibleAt time.Time
	// EnqueuedAt is when the message was first enqueued; providers keep
	// messages of one instance in enqueue order. A round applies the
	// messages of its batch in the order they took effect: when they
	// arrived (EnqueuedAt) or, when delayed, came due (VisibleAt); so a
	// provider returns both as they were enqueued.
	EnqueuedAt time.Time
	// Attempts counts earlier deliveries whose round failed and was
	// abandoned. A round whose process died is not counted: its
	// transaction rolled back or its lease ran out.
	Attempts int
	// LastError is the error of the last failed delivery.
	LastError string
	// Priority orders the message among visible work (see [OrderAt]): a
	// store dequeues first the instance whose message comes first by
	// OrderAt(VisibleAt, Priority), then by enqueue order.
	Priority int
}

// StartsNextRun reports whether m starts a run of its instance after the
// one whose last execution is exec: a client's restart of an ended
// instance, or a parent starting a child under an ended child's id. A
// purge of the ended run must not delete such a message (see
// [PurgeStore.PurgeInstance]).
func StartsNextRun(m *Message, exec string) bool {
	return m.Kind == history.KindExecutionStarted && m.ExecutionID != exec
}

// MessageKinds lists the history kinds a message may carry: Start, activity
// and sub-workflow results, fired timers, raised events, the outcome of a
// signal a workflow sent, task actions and the control requests terminate,
// suspend, resume and rerun, and the records of a legal hold. Every other kind is
// written by workflow code during a turn (TaskCancelled included: only the
// workflow closes a task without a result).
func MessageKinds() []history.Kind {
	return []history.Kind{
		history.KindExecutionStarted,
		history.KindActivityCompleted, history.KindActivityFailed,
		history.KindTimerFired,
		history.KindEventRaised,
		history.KindSubWorkflowCompleted, history.KindSubWorkflowFailed,
		history.KindTaskAssigned, history.KindTaskReleased, history.KindTaskReassigned,
		history.KindTaskCompleted,
		history.KindExecutionTerminated, history.KindExecutionSuspended, history.KindExecutionResumed,
		history.KindSignalDelivered, history.KindSignalFailed,
		history.KindExecutionRerun,
		history.KindHoldPlaced, history.KindHoldReleased,
	}
}

var messageKinds = func() map[history.Kind]bool {
	m := map[history.Kind]bool{}
	for _, k := range MessageKinds() {
		m[k] = true
	}
	return m
}()

// Validate checks the envelope's fields and that Payload decodes as the
// attributes of Kind. The error wraps [ErrInvalidMessage].
func (m *Message) Validate() error {
	if err := history.ValidateID("message id", m.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err := history.ValidateID("instance id", m.InstanceID); err != nil {
		return fmt.Errorf("%w: message %s: %w", ErrInvalidMessage, m.ID, err)
	}
	if !messageKinds[m.Kind] {
		return fmt.Errorf("%w: message %s has kind %q, which no message may carry", ErrInvalidMessage, m.ID, m.Kind)
	}
	if m.Kind == history.KindExecutionStarted && m.ExecutionID == "" {
		return fmt.Errorf("%w: start message %s has no execution id", ErrInvalidMessage, m.ID)
	}
	if _, err := history.DecodeAttributes(m.Kind, m.Payload); err != nil {
		return fmt.Errorf("%w: message %s: %w", ErrInvalidMessage, m.ID, err)
	}
	return nil
}

// envelope is the stored form of a message: times as Unix nanoseconds so the
// encoding does not depend on time zones.
type envelope struct {
	Format        int    `msgpack:"f"`
	ID            string `msgpack:"id"`
	InstanceID    string `msgpack:"instance"`
	ExecutionID   string `msgpack:"execution,omitempty"`
	Kind          string `msgpack:"kind"`
	CorrelationID string `msgpack:"correlation,omitempty"`
	Actor         string `msgpack:"actor,omitempty"`
	Payload       []byte `msgpack:"payload,omitempty"`
	VisibleAt     int64  `msgpack:"visible_at,omitempty"`
	EnqueuedAt    int64  `msgpack:"enqueued_at,omitempty"`
	Attempts      int    `msgpack:"attempts,omitempty"`
	LastError     string `msgpack:"last_error,omitempty"`
	Priority      int    `msgpack:"priority,omitempty"`
}

// MarshalMessage encodes a message as a self-contained envelope, the form
// kept in dead letters and in queues that store opaque payloads.
func MarshalMessage(m *Message) ([]byte, error) {
	return history.Encode(&envelope{
		Format: 1, ID: m.ID, InstanceID: m.InstanceID, ExecutionID: m.ExecutionID,
		Kind: string(m.Kind), CorrelationID: m.CorrelationID, Actor: m.Actor, Payload: m.Payload,
		VisibleAt: UnixNanos(m.VisibleAt), EnqueuedAt: UnixNanos(m.EnqueuedAt), Attempts: m.Attempts, LastError: m.LastError,
		Priority: m.Priority,
	})
}

// UnmarshalMessage decodes an envelope written by [MarshalMessage]. It never
// panics; bad input yields an error wrapping [history.ErrCorrupt]. It does
// not validate the message: see [Message.Validate].
func UnmarshalMessage(data []byte) (Message, error) {
	var e envelope
	if err := history.Decode(data, &e); err != nil {
		return Message{}, fmt.Errorf("decode message envelope: %w", err)
	}
	if e.Format != 1 {
		return Message{}, fmt.Errorf("decode message envelope: %w: format %d", history.ErrCorrupt, e.Format)
	}
	return Message{
		ID: e.ID, InstanceID: e.InstanceID, ExecutionID: e.ExecutionID, Kind: history.Kind(e.Kind),
		CorrelationID: e.CorrelationID, Actor: e.Actor, Payload: e.Payload,
		VisibleAt: FromUnixNanos(e.VisibleAt), EnqueuedAt: FromUnixNanos(e.EnqueuedAt), Attempts: e.Attempts, LastError: e.LastError,
		Priority: e.Priority,
	}, nil
}

// UnixNanos is how the contract's encodings (and stores that keep times as
// integers) write a time: Unix nanoseconds, the zero time as 0.
func UnixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromUnixNanos reads a time UnixNanos wrote, in UTC.
func FromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// NewMessage builds a message carrying attrs. The message id is required;
// use [history.NewID] for client requests and a deterministic id for
// messages a round produces.
func NewMessage(id, instanceID, executionID, correlationID string, attrs history.Attributes) (Message, error) {
	payload, err := history.EncodeAttributes(attrs)
	if err != nil {
		return Message{}, err
	}
	return Message{
		ID: id, InstanceID: instanceID, ExecutionID: executionID,
		Kind: attrs.EventKind(), CorrelationID: correlationID, Payload: payload,
	}, nil
}

// SetDefaults applies the defaults of an enqueue: a zero EnqueuedAt or
// VisibleAt takes now.
func (m *Message) SetDefaults(now time.Time) {
	if m.EnqueuedAt.IsZero() {
		m.EnqueuedAt = now
	}
	if m.VisibleAt.IsZero() {
		m.VisibleAt = now
	}
}
