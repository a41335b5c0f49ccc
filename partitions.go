package chronicle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// partitionShare is the engine's share of a partitioned store's
// partitions: the partitions it holds leases on, which its workers look
// in first, and the time of its workers' last look at every partition.
//
// Leases are an affinity, never a correctness condition: a round's
// instance lock is what keeps two rounds off one instance. A worker looks
// at every partition when the engine holds no lease (the store has more
// nodes than partitions, or the leases are not taken yet) and once per
// SafetyPoll, so that the work of a partition whose owner died waits at
// most that long before the lease expires and another node takes it.
type partitionShare struct {
	partitions int
	held       atomic.Pointer[[]int]
	// next rotates the first partition of each look, so the engine's
	// workers start at different partitions.
	next atomic.Uint32

	mu        sync.Mutex
	lastSweep time.Time
}

// partitionsOf returns the store's partition count: 1 unless it
// implements provider.Partitioned.
func partitionsOf(s provider.Store) int {
	if p, ok := s.(provider.Partitioned); ok {
		return max(p.Partitions(), 1)
	}
	return 1
}

// lookIn returns the partitions a worker looks in now, in order: nil
// (every partition) with one partition, without leases, and once per
// sweep interval; otherwise the held partitions, rotated.
func (ps *partitionShare) lookIn(now time.Time, sweep time.Duration) []int {
	if ps == nil || ps.partitions <= 1 {
		return nil
	}
	hp := ps.held.Load()
	if hp == nil || len(*hp) == 0 {
		return nil
	}
	ps.mu.Lock()
	if now.Sub(ps.lastSweep) >= sweep {
		ps.lastSweep = now
		ps.mu.Unlock()
		return nil
	}
	ps.mu.Unlock()
	held := *hp
	i := int(ps.next.Add(1)) % len(held)
	return append(slices.Clone(held[i:]), held[:i]...)
}

// heldNow returns the partitions held (nil: none); the slice is not
// modified afterwards.
func (ps *partitionShare) heldNow() []int {
	if hp := ps.held.Load(); hp != nil {
		return *hp
	}
	return nil
}

// leasesChanged wakes one idle worker of each queue when the engine's
// partitions changed, through the queue's hint watcher when it has one
// (which watches the new partitions first): work announced in a
// partition before the engine took it woke no worker of it (see
// queueState.watchHints).
func (e *Engine) leasesChanged() {
	qs := e.queues.Load()
	if qs == nil {
		return
	}
	for _, s := range *qs {
		if s.leases == nil {
			s.arrived()
			continue
		}
		select {
		case s.leases <- struct{}{}:
		default:
		}
	}
}

// Partitions returns the partitions this engine holds leases on while it
// runs (nil for a store of one partition, or before the first lease):
// its workers look there first.
func (e *Engine) Partitions() []int {
	if e.share == nil {
		return nil
	}
	if hp := e.share.held.Load(); hp != nil {
		return slices.Clone(*hp)
	}
	return nil
}

// runPartitionLeases renews the engine's partition leases every third of
// PartitionLease until ctx ends, then gives them back.
func (e *Engine) runPartitionLeases(ctx context.Context, l provider.PartitionLeaser) {
	ttl := e.opts.PartitionLease
	for {
		held, err := l.LeasePartitions(ctx, &provider.LeasePartitionsParams{Node: e.opts.NodeID, Now: e.opts.Clock.Now(), TTL: ttl})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			e.log.WarnContext(ctx, "partition leases not renewed; workers look at every partition", slog.Any("error", err))
			held = nil
		}
		old := e.share.held.Swap(&held)
		if old == nil || !slices.Equal(*old, held) {
			e.log.InfoContext(ctx, "partition leases", slog.String("node", e.opts.NodeID), slog.Any("partitions", held))
			e.leasesChanged()
		}
		e.sleep(ctx, nil, ttl/3)
		if ctx.Err() != nil {
			break
		}
	}
	e.share.held.Store(nil)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.ReleasePartitions(rctx, e.opts.NodeID); err != nil {
		e.log.Warn("partition leases not given back; they expire", slog.Any("error", err))
	}
}
