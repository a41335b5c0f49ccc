package chronicle

import (
	"context"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// QueueStats tell how long work has waited in the engine's two queues,
// as [Engine.QueueStats] read them.
type QueueStats struct {
	// At is the engine's clock reading the ages are measured from.
	At time.Time
	// Orchestration is the queue of messages to instances, all of the
	// store's; Activity is the queue of activity tasks of the engine's
	// Options.ActivityQueues.
	Orchestration, Activity QueueStat
}

// QueueStat tells how long work has waited in one queue.
type QueueStat struct {
	// Queued is true when the queue holds work, due or not.
	Queued bool
	// Next is the earliest time a worker can take work from the queue;
	// zero when nothing is queued.
	Next time.Time
	// OldestAge is how long the work that has waited longest for a worker
	// has been due: At minus Next when Next is past, zero otherwise.
	OldestAge time.Duration
}

// QueueStats reads how long the oldest due work of each queue has waited
// for a worker: one store call per queue (NextVisibleAt), cheap enough for
// every metrics collection. A message or activity task is due from its
// VisibleAt; an instance held after a failed round or leased by a
// running round, and a claimed task, is not due before its hold, lease or
// claim ends, so work in progress does not age. A transactional store may
// count an instance that a round of another process has locked as due
// (see [provider.Store.NextVisibleAt]): its age then includes that
// round's time.
//
// It does not count the queued messages or tasks: the store contract has
// no count across instances, and listing every instance's queue would
// cost a store call per instance and still miss the starts of instances
// whose first round has not run.
func (e *Engine) QueueStats(ctx context.Context) (QueueStats, error) {
	s := QueueStats{At: e.now()}
	for _, q := range []struct {
		queue provider.Queue
		stat  *QueueStat
	}{
		{provider.QueueOrchestration, &s.Orchestration},
		{provider.QueueActivity, &s.Activity},
	} {
		next, ok, err := e.store.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: q.queue, Queues: e.opts.ActivityQueues})
		if err != nil {
			return QueueStats{}, err
		}
		if !ok {
			continue
		}
		q.stat.Queued, q.stat.Next = true, next
		if next.Before(s.At) {
			q.stat.OldestAge = s.At.Sub(next)
		}
	}
	return s, nil
}
