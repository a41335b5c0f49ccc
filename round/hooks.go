package round

import (
	"context"
	"errors"
	"fmt"
)

// CrashPoint names a point of a round where tests can kill it.
type CrashPoint string

// Crash points, in the order a round passes them.
const (
	AfterDequeue CrashPoint = "AfterDequeue"
	AfterLoad    CrashPoint = "AfterLoad"
	AfterAppend  CrashPoint = "AfterAppend"
	AfterProject CrashPoint = "AfterProject"
	AfterEnqueue CrashPoint = "AfterEnqueue"
	BeforeAck    CrashPoint = "BeforeAck"
	AfterCommit  CrashPoint = "AfterCommit"
	// AfterCompletion follows the completion of an activity task inside
	// the transaction of [Runner.CompleteActivity], before the round of
	// its instance: a crash there loses the completion with the round,
	// and the task is retried once its claim runs out.
	AfterCompletion CrashPoint = "AfterCompletion"
)

// CrashPoints lists every crash point in order.
func CrashPoints() []CrashPoint {
	return []CrashPoint{AfterDequeue, AfterLoad, AfterAppend, AfterProject, AfterEnqueue, BeforeAck, AfterCommit}
}

// Hooks let tests observe and interrupt rounds.
type Hooks struct {
	// Crash is called at every crash point. When it returns an error the
	// round stops there as if its process died: nothing more is written, no
	// message is abandoned, and the runner forgets its cached state.
	Crash func(ctx context.Context, point CrashPoint, instanceID string) error
}

// CrashError reports a round stopped by [Hooks.Crash].
type CrashError struct {
	Point CrashPoint
	Err   error
}

// Error implements error.
func (e *CrashError) Error() string { return fmt.Sprintf("round crashed at %s: %v", e.Point, e.Err) }

// Unwrap returns the hook's error.
func (e *CrashError) Unwrap() error { return e.Err }

// IsCrash reports whether err comes from a crash hook.
func IsCrash(err error) bool {
	var c *CrashError
	return errors.As(err, &c)
}

func (h *Hooks) crash(ctx context.Context, p CrashPoint, instanceID string) error {
	if h.Crash == nil {
		return nil
	}
	if err := h.Crash(ctx, p, instanceID); err != nil {
		return &CrashError{Point: p, Err: err}
	}
	return nil
}
