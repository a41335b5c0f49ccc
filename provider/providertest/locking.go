package providertest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testLocking covers exclusive instance locking under concurrent workers,
// in the store's mode.
func testLocking(t *testing.T, factory Factory) {
	t.Run("ConcurrentWorkersHoldInstancesExclusively", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		const instances, perInstance, workers, limit = 24, 5, 8, 2
		want := map[string][]string{}
		var msgs []provider.Message
		for i := range instances {
			id := fmt.Sprintf("inst-%02d", i)
			for j := range perInstance {
				m := signal(t, fmt.Sprintf("m-%02d-%d", i, j), id)
				msgs = append(msgs, m)
				want[id] = append(want[id], m.ID)
			}
		}
		b.enqueue(t, base, msgs...)

		// A guard against a hang, not a speed: on the MongoDB wire server
		// of a loaded CI machine the 120 rounds take 18 s and more.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		var (
			mu        sync.Mutex
			held      = map[string]string{} // instance → worker holding it
			delivered = map[string][]string{}
			acked     = map[string]int{}
			errs      []error
			wg        sync.WaitGroup
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		finished := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) == len(msgs) || len(errs) > 0
		}
		// work runs while the instance is held: it checks no one else holds
		// it and appends one event per message, continuing the stored log.
		work := func(ctx context.Context, s provider.Steps, worker, instanceID string, batch []provider.Message) error {
			mu.Lock()
			if other, ok := held[instanceID]; ok {
				mu.Unlock()
				return fmt.Errorf("instance %s held by %s and %s at once", instanceID, other, worker)
			}
			held[instanceID] = worker
			delivered[instanceID] = append(delivered[instanceID], messageIDs(batch)...)
			mu.Unlock()
			defer func() {
				mu.Lock()
				delete(held, instanceID)
				mu.Unlock()
			}()
			stored, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: 1})
			if err != nil {
				return err
			}
			events := make([]history.Event, len(batch))
			for i, m := range batch {
				events[i] = history.Event{
					ExecutionID: execID, Kind: m.Kind, CorrelationID: m.CorrelationID,
					Actor: history.WorkerActor(worker), Payload: m.Payload,
				}
			}
			events = chain(instanceID, stored, events...)
			if err := s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: instanceID, Events: events}); err != nil {
				return fmt.Errorf("append to %s by %s: %w", instanceID, worker, err)
			}
			return nil
		}
		for w := range workers {
			worker := fmt.Sprintf("worker-%d", w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !finished() {
					if ctx.Err() != nil {
						fail(fmt.Errorf("%s: messages left unacked: %w", worker, ctx.Err()))
						return
					}
					ids, err := b.workRound(ctx, worker, limit, work)
					if err != nil {
						fail(fmt.Errorf("%s: %w", worker, err))
						return
					}
					if ids == nil {
						// Every instance with work may be held by others.
						runtime.Gosched()
						continue
					}
					mu.Lock()
					for _, id := range ids {
						acked[id]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))

		require.Len(t, acked, len(msgs))
		for id, n := range acked {
			require.Equal(t, 1, n, "message %s was acked %d times", id, n)
		}
		require.Equal(t, want, delivered, "messages of an instance were not delivered in enqueue order")
		require.Empty(t, b.drain(t, at(time.Hour)), "acked messages are still queued")
		for id, ids := range want {
			log := b.load(t, id, 1)
			require.NoError(t, history.Verify(log))
			require.Len(t, log, perInstance)
			for i, e := range log {
				require.Equal(t, ids[i], e.CorrelationID, "event %d of %s", i+1, id)
			}
		}
	})
}

// workRound runs one round as worker: it dequeues (transactional mode) or
// leases (peek-lock mode, for an hour) the messages of one instance visible
// at base, at most limit, runs work on them and acks them all. It returns
// the acked ids, or nil when no instance could be taken.
func (b *bundle) workRound(ctx context.Context, worker string, limit int,
	work func(ctx context.Context, s provider.Steps, worker, instanceID string, batch []provider.Message) error,
) ([]string, error) {
	var ids []string
	if b.tx != nil {
		err := b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: worker, Limit: limit})
			if err != nil || batch == nil {
				return err
			}
			if err := checkBatch(batch.InstanceID, batch.Messages, limit); err != nil {
				return err
			}
			if err := work(ctx, tx, worker, batch.InstanceID, batch.Messages); err != nil {
				return err
			}
			ids = messageIDs(batch.Messages)
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: batch.InstanceID, MessageIDs: ids})
		})
		if err != nil {
			return nil, err
		}
		return ids, nil
	}
	l, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: at(time.Hour), Owner: worker, Limit: limit})
	if err != nil || l == nil {
		return nil, err
	}
	if err := checkBatch(l.InstanceID, l.Messages, limit); err != nil {
		return nil, err
	}
	if err := work(ctx, b.lease, worker, l.InstanceID, l.Messages); err != nil {
		return nil, err
	}
	ids = messageIDs(l.Messages)
	if err := b.lease.AckLease(ctx, &provider.AckLeaseParams{Lease: l, MessageIDs: ids}); err != nil {
		return nil, fmt.Errorf("ack lease of %s: %w", l.InstanceID, err)
	}
	return ids, nil
}

// checkBatch checks what every dequeued batch must satisfy.
func checkBatch(instanceID string, msgs []provider.Message, limit int) error {
	if len(msgs) == 0 || len(msgs) > limit {
		return fmt.Errorf("batch of %s has %d messages, limit %d", instanceID, len(msgs), limit)
	}
	for _, m := range msgs {
		if m.InstanceID != instanceID {
			return fmt.Errorf("batch of %s holds message %s of %s", instanceID, m.ID, m.InstanceID)
		}
	}
	return nil
}
