package chronicleotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/chronicleflow/chronicle"
)

// QueueReading is what a [QueueFunc] read of one queue.
type QueueReading struct {
	// Queue names the queue: the chronicle.queue attribute of its gauges.
	// An engine's queues are "orchestration" and "activity".
	Queue string
	// OldestAge is how long the work that has waited longest for a worker
	// has been due (see [chronicle.QueueStat]).
	OldestAge time.Duration
	// Depth counts the messages or tasks queued, due or not; it is
	// reported only when Counted.
	Depth   int64
	Counted bool
}

// QueueFunc reads queues for the queue gauges, at each metric collection.
type QueueFunc func(ctx context.Context) ([]QueueReading, error)

// EngineQueues returns a QueueFunc that reads the engine's
// [chronicle.Engine.QueueStats]: the oldest ages of the "orchestration"
// and "activity" queues, one store call each. Their depths are not
// counted, as the store contract has no count across instances; a store
// that can count (a SQL count on PostgreSQL, say) can add them by
// wrapping this function.
func EngineQueues(e *chronicle.Engine) QueueFunc {
	return func(ctx context.Context) ([]QueueReading, error) {
		s, err := e.QueueStats(ctx)
		if err != nil {
			return nil, err
		}
		return []QueueReading{
			{Queue: "orchestration", OldestAge: s.Orchestration.OldestAge},
			{Queue: "activity", OldestAge: s.Activity.OldestAge},
		}, nil
	}
}

// ObserveQueues reports the readings of read as the chronicle.queue.depth
// and chronicle.queue.oldest_age gauges at each metric collection, until
// the returned registration is unregistered. A collection whose read
// fails reports no queue gauges and hands the error to the meter
// provider. Every call adds a callback: readings of one Queue name from
// two callbacks are the same series, so observe each store once.
func (o *Observer) ObserveQueues(read QueueFunc) (metric.Registration, error) {
	return o.meter.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		readings, err := read(ctx)
		if err != nil {
			return err
		}
		for _, r := range readings {
			set := metric.WithAttributes(keyQueue.String(r.Queue))
			obs.ObserveFloat64(o.oldestAge, r.OldestAge.Seconds(), set)
			if r.Counted {
				obs.ObserveInt64(o.depth, r.Depth, set)
			}
		}
		return nil
	}, o.depth, o.oldestAge)
}
