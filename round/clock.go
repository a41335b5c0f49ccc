package round

import (
	"sync"
	"time"
)

// Clock tells the time. The engine reads it once per round and passes the
// reading to the store; providers and workflow code never read a clock.
type Clock interface {
	Now() time.Time
}

// TimerClock is a clock that can also wake a sleeper; workers sleep until
// the next visible work with it, so a [ManualClock] drives them in tests.
type TimerClock interface {
	Clock
	// AfterFunc calls f in its own goroutine once d has passed on the
	// clock; stop cancels the call and reports whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc implements TimerClock with time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// ManualClock is a clock that moves only when told, for tests.
type ManualClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

// NewManualClock returns a clock reading t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's reading.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d, fires the timers that are due, and
// returns the new reading.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	c.t = c.t.Add(d)
	now := c.t
	c.mu.Unlock()
	c.fire()
	return now
}

// Set moves the clock to t and fires the timers that are due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
	c.fire()
}

// AfterFunc implements TimerClock: f runs, in its own goroutine, when the
// clock is moved to or past now+d (at once when d <= 0).
func (c *ManualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	t := &manualTimer{at: c.t.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	if d <= 0 {
		c.fire()
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Timers returns how many timers wait on the clock; tests use it to know a
// sleeper is waiting before they advance the clock.
func (c *ManualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

func (c *ManualClock) fire() {
	c.mu.Lock()
	var due []*manualTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.t):
			t.stopped = true
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}

// roundNow reads a clock the way every round does: UTC, truncated to
// microseconds so that every store keeps the exact reading.
func roundNow(c Clock) time.Time {
	return c.Now().UTC().Truncate(time.Microsecond)
}
