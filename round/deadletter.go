package round

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
)

// DeadLetterError is returned by a turn function to dead-letter the round's
// messages at once instead of retrying them.
type DeadLetterError struct {
	Reason provider.Reason
	Err    error
}

// Error implements error.
func (e *DeadLetterError) Error() string { return fmt.Sprintf("%s: %v", e.Reason, e.Err) }

// Unwrap returns the underlying error.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// ReasonOf returns the dead-letter reason carried by err, or fallback.
func ReasonOf(err error, fallback provider.Reason) provider.Reason {
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		return dl.Reason
	}
	return fallback
}
