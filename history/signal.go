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
}

// EventKind implements [Attributes].
func (*EventRaised) EventKind() Kind { return KindEventRaised }
