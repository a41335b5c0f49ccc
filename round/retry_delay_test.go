package round_test

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// TestRetryDelayJitterBounds checks the two ends of the jitter range: 1
// waits the policy's nominal delay exactly (what chronicletest relies on
// for retries at predictable times), 0 halves it.
func TestRetryDelayJitterBounds(t *testing.T) {
	p := history.RetryPolicy{MaxAttempts: 20, InitialInterval: 700 * time.Millisecond, Multiplier: 3, MaxInterval: 37 * time.Minute}
	nominal := p.InitialInterval
	for attempt := 1; attempt < p.MaxAttempts; attempt++ {
		_, full := round.RetryDelay(p, attempt, &history.Failure{}, 1)
		_, half := round.RetryDelay(p, attempt, &history.Failure{}, 0)
		if full != nominal || half != nominal/2 {
			t.Fatalf("attempt %d: delays %s (jitter 1) and %s (jitter 0), want %s and %s", attempt, full, half, nominal, nominal/2)
		}
		nominal = min(time.Duration(float64(nominal)*p.Multiplier), p.MaxInterval)
	}
}
