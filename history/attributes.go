package history

import "time"

// Attributes is the typed payload of one event kind. Each kind has exactly
// one attributes type; [Attributes.EventKind] names it.
type Attributes interface {
	EventKind() Kind
}

// Failure describes an error recorded in history.
type Failure struct {
	// Message is the error text.
	Message string `msgpack:"message" json:"message"`
	// Type classifies the error (a Go type name or a user-chosen code).
	Type string `msgpack:"type,omitempty" json:"type,omitempty"`
	// NonRetryable marks errors that retries cannot fix.
	NonRetryable bool `msgpack:"non_retryable,omitempty" json:"non_retryable,omitempty"`
	// Details holds optional encoded details.
	Details []byte `msgpack:"details,omitempty" json:"details,omitempty"`
}

// Error returns the failure's message.
func (f *Failure) Error() string { return f.Message }

// RetryPolicy says how often and how fast a failed activity is retried.
// Zero fields take the engine's defaults.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts, the first one included; 1 means no
	// retry.
	MaxAttempts int `msgpack:"max_attempts,omitempty" json:"max_attempts,omitempty"`
	// InitialInterval is the delay before the first retry.
	InitialInterval time.Duration `msgpack:"initial_interval,omitempty" json:"initial_interval,omitempty"`
	// MaxInterval caps the delay between retries.
	MaxInterval time.Duration `msgpack:"max_interval,omitempty" json:"max_interval,omitempty"`
	// Multiplier grows the delay after each retry.
	Multiplier float64 `msgpack:"multiplier,omitempty" json:"multiplier,omitempty"`
	// NonRetryable lists error types ([Failure.Type]) never retried.
	NonRetryable []string `msgpack:"non_retryable,omitempty" json:"non_retryable,omitempty"`
}

// utcNormalizer is implemented by attributes holding times, which decode in
// the local zone and are normalized to UTC.
type utcNormalizer interface {
	normalizeUTC()
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
