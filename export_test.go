package chronicle

import (
	"context"

	"github.com/chronicleflow/chronicle/provider"
)

// PendingWrites returns how many client calls wait for a combined write.
func PendingWrites(e *Engine) int {
	e.combine.mu.Lock()
	defer e.combine.mu.Unlock()
	return len(e.combine.pending)
}

// StartRetention starts the retention workflow as Run does.
func StartRetention(e *Engine, ctx context.Context) error { return e.startRetention(ctx) }

// CheckNotHeld is checkNotHeld, which an erasure calls.
func CheckNotHeld(e *Engine, ctx context.Context, id string) error { return e.checkNotHeld(ctx, id) }

// SetScheduleVersion makes new schedule executions record version v of
// the schedule workflow's change, as older code did, until the returned
// function restores it.
func SetScheduleVersion(v int) (restore func()) {
	old := scheduleVersion
	scheduleVersion = v
	return func() { scheduleVersion = old }
}

// HintWakeups returns how many work hints of queue q woke a worker of
// the running engine, and how many it skipped as work of partitions other
// engines hold (zeros when it does not run).
func HintWakeups(e *Engine, q provider.Queue) (woke, skipped uint64) {
	if qs := e.queues.Load(); qs != nil {
		for _, s := range *qs {
			if s.q == q {
				return s.woke.Load(), s.skipped.Load()
			}
		}
	}
	return 0, 0
}
