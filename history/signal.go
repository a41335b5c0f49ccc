package history

// EventRaised records an external signal delivered to the instance. Signals
// are recorded when they arrive and buffered until workflow code waits for
// them.
type EventRaised struct {
	Name    string `msgpack:"name" json:"name"`
	Payload []byte `msgpack:"payload,omitempty" json:"payload,omitempty"`
	// IdempotencyKey deduplicates the signal; it is also the event's
	// CorrelationID.
	IdempotencyKey string `msgpack:"idempotency_key" json:"idempotency_key"`
	// Sender identifies who raised the signal.
	Sender string `msgpack:"sender,omitempty" json:"sender,omitempty"`
	// Source names the workflow that sent the signal with
	// Context.SignalWorkflow (its SignalSent event); nil for a signal a
	// client raised.
	Source *SignalSource `msgpack:"source,omitempty" json:"source,omitempty"`
}

// SignalSource names the SignalSent event of the workflow that sent a
// signal: the receiving round tells that instance, execution and seq
// whether the signal was delivered.
type SignalSource struct {
	InstanceID  string `msgpack:"instance_id" json:"instance_id"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Seq         int64  `msgpack:"seq" json:"seq"`
}

// SignalSent records that workflow code sent a signal to another instance.
// Its completion is a SignalDelivered or a SignalFailed correlated with its
// Seq.
type SignalSent struct {
	// InstanceID names the receiving instance.
	InstanceID string `msgpack:"instance_id" json:"instance_id"`
	Name       string `msgpack:"name" json:"name"`
	Payload    []byte `msgpack:"payload,omitempty" json:"payload,omitempty"`
	// IdempotencyKey is the key the receiver records the signal under; it
	// is derived from the sender's instance, execution and seq, so a
	// replayed or redone sender never sends twice.
	IdempotencyKey string `msgpack:"idempotency_key" json:"idempotency_key"`
}

// SignalDelivered records that the receiving instance recorded the signal
// (its EventRaised).
type SignalDelivered struct {
	// ExecutionID is the receiver's execution that recorded the signal.
	ExecutionID string `msgpack:"execution_id,omitempty" json:"execution_id,omitempty"`
}

// SignalFailed records that the signal could not be delivered: the
// receiving instance does not exist or has ended.
type SignalFailed struct {
	Failure Failure `msgpack:"failure" json:"failure"`
}

// EventKind implements [Attributes].
func (*EventRaised) EventKind() Kind { return KindEventRaised }

// EventKind implements [Attributes].
func (*SignalSent) EventKind() Kind { return KindSignalSent }

// EventKind implements [Attributes].
func (*SignalDelivered) EventKind() Kind { return KindSignalDelivered }

// EventKind implements [Attributes].
func (*SignalFailed) EventKind() Kind { return KindSignalFailed }
