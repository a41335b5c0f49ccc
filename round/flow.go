package round

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// takeSlot takes the concurrency slot a start asks for, before the start
// is applied. It returns true when the instance must wait: it is then
// parked (see [provider.FlowSteps]) and the start stays queued until a
// release wakes it. A start followed in the batch by a terminate does not
// wait: it leaves the waiters and the instance starts and ends in the
// round.
func (r *Runner) takeSlot(ctx context.Context, rs *roundState, m *provider.Message, after []provider.Message) (bool, error) {
	c := startConcurrency(m)
	if c == nil {
		return false, nil
	}
	flow, lease := rs.ops.flow()
	if flow == nil {
		return false, fmt.Errorf("start of %s with concurrency key %q: %w: the store keeps no concurrency slots", rs.id, c.Key, provider.ErrUnsupported)
	}
	for i := range after {
		if after[i].Kind == history.KindExecutionTerminated {
			wake, err := flow.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: c.Key, Holder: rs.id, Lease: lease})
			if err != nil {
				return false, fmt.Errorf("leave the waiters of %q: %w", c.Key, err)
			}
			return false, wakeWaiters(ctx, flow, lease, wake)
		}
	}
	acquire := &provider.AcquireSlotParams{Key: c.Key, Limit: c.Limit, Holder: rs.id, Now: rs.now, Lease: lease}
	ok, err := flow.AcquireSlot(ctx, acquire)
	if err != nil || ok {
		return false, wrapSlot(c.Key, err)
	}
	if err := flow.ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: rs.id, Lease: lease}); err != nil {
		return false, fmt.Errorf("park %s: %w", rs.id, err)
	}
	// A release between the acquire and the park found the instance not
	// parked yet and could not wake it: acquire again now that it is.
	if ok, err = flow.AcquireSlot(ctx, acquire); err != nil {
		return false, wrapSlot(c.Key, err)
	}
	if ok {
		return false, flow.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{rs.id}, Lease: lease})
	}
	rs.rep.Waiting = c.Key
	r.log.DebugContext(ctx, "start waits for a concurrency slot", slog.String("instance_id", rs.id), slog.String("key", c.Key), slog.Int("limit", c.Limit))
	return true, nil
}

func wrapSlot(key string, err error) error {
	if err != nil {
		return fmt.Errorf("concurrency slot of %q: %w", key, err)
	}
	return nil
}

// releaseSlots gives back the slot of an execution the round ended (and,
// on a cold peek-lock round, of one that had ended: its round may have
// died before the release) and the waiting place of a start the round
// dead-lettered, and wakes the waiters that may take the freed slots. A
// release is idempotent and always wakes the first waiters the free slots
// allow, so a repeated one repairs a wake a crash cut short.
func (r *Runner) releaseSlots(ctx context.Context, rs *roundState) error {
	snap := rs.snap
	var keys []string
	if c := snap.Concurrency; c != nil && snap.Ended && snap.Status.Terminal() &&
		(len(rs.appended) > 0 || (rs.cold && rs.ops.repairsOpenWork())) {
		keys = append(keys, c.Key)
	}
	for i := range rs.letters {
		c := startConcurrency(rs.letters[i].Message)
		if c == nil {
			continue
		}
		if held := snap.Concurrency; held != nil && held.Key == c.Key && snap.Started() && !snap.Ended {
			continue // the running execution holds it
		}
		keys = append(keys, c.Key)
	}
	if len(keys) == 0 {
		return nil
	}
	flow, lease := rs.ops.flow()
	if flow == nil {
		return fmt.Errorf("release the concurrency slot of %s: %w: the store keeps no concurrency slots", rs.id, provider.ErrUnsupported)
	}
	for _, key := range keys {
		wake, err := flow.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: key, Holder: rs.id, Lease: lease})
		if err != nil {
			return fmt.Errorf("release the concurrency slot of %s: %w", rs.id, err)
		}
		if err := wakeWaiters(ctx, flow, lease, wake); err != nil {
			return err
		}
	}
	return nil
}

func wakeWaiters(ctx context.Context, flow provider.FlowSteps, lease *provider.Lease, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := flow.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: ids, Lease: lease}); err != nil {
		return fmt.Errorf("wake the waiters of a concurrency slot: %w", err)
	}
	return nil
}

// startConcurrency returns the concurrency a start message asks for, or
// nil (for any other message, and one that does not decode).
func startConcurrency(m *provider.Message) *history.Concurrency {
	if m == nil || m.Kind != history.KindExecutionStarted || !bytes.Contains(m.Payload, concurrencyField) {
		return nil
	}
	a, err := history.DecodeAttributes(m.Kind, m.Payload)
	if err != nil {
		return nil
	}
	if s, ok := a.(*history.ExecutionStarted); ok && s.Concurrency != nil && s.Concurrency.Key != "" {
		return s.Concurrency
	}
	return nil
}

// concurrencyField is the key of ExecutionStarted.Concurrency in its
// encoding: a start without it is not decoded twice.
var concurrencyField = []byte("concurrency")

// prioritize gives the messages without a priority the instance's.
func prioritize(msgs []provider.Message, priority int) {
	if priority == 0 {
		return
	}
	for i := range msgs {
		if msgs[i].Priority == 0 {
			msgs[i].Priority = priority
		}
	}
}
