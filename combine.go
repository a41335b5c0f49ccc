package chronicle

import (
	"context"
	"slices"
	"sync"

	"github.com/chronicleflow/chronicle/provider"
)

// combiner merges the enqueues of concurrent client calls (starts,
// signals, control and task requests) into one store write: the first
// caller to find no write in flight leads, writing every call queued by
// then in one EnqueueMessages, while the calls that arrive meanwhile wait
// and the first of them leads the next write. An uncontended call writes
// at once, alone; under load, calls share the commit they would otherwise
// queue for. When a shared write fails, each of its calls is written again
// on its own, so that one call's bad message fails only that call
// (enqueues are idempotent by message id).
type combiner struct {
	mu      sync.Mutex
	pending []*combinedCall
	busy    bool
}

// combinedCall is one client call's messages, and the waits of its
// starts (see provider.StartWaiter).
type combinedCall struct {
	ctx   context.Context
	msgs  []provider.Message
	waits []provider.SlotWait
	// done receives the call's outcome; lead is closed when the call is to
	// lead the next write.
	done chan error
	lead chan struct{}
}

// enqueue writes msgs to the store, combined with those of concurrent
// calls. A call whose ctx ends while it waits returns ctx's error; its
// messages may still be written by the write in flight.
func (e *Engine) enqueue(ctx context.Context, msgs ...provider.Message) error {
	return e.enqueueWaiting(ctx, msgs, nil)
}

// enqueueWaiting is enqueue with the waits of starts of new instances,
// which a provider.StartWaiter applies in the same write (others leave
// them to the instances' first rounds).
func (e *Engine) enqueueWaiting(ctx context.Context, msgs []provider.Message, waits []provider.SlotWait) error {
	c := &e.combine
	call := &combinedCall{ctx: ctx, msgs: msgs, waits: waits, done: make(chan error, 1), lead: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, call)
	if c.busy {
		c.mu.Unlock()
		select {
		case err := <-call.done:
			return err
		case <-call.lead:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			select {
			case <-call.lead:
				// Elected meanwhile: the calls behind it wait for it to lead.
			default:
				// Still waiting (it leaves the queue) or taken into the
				// write in flight (whose outcome it does not wait for).
				if i := slices.Index(c.pending, call); i >= 0 {
					c.pending = slices.Delete(c.pending, i, i+1)
				}
				c.mu.Unlock()
				return ctx.Err()
			}
		}
	}
	c.busy = true
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()

	e.write(batch)

	c.mu.Lock()
	if len(c.pending) == 0 {
		c.busy = false
	} else {
		// The next write is led by the oldest waiting call.
		close(c.pending[0].lead)
	}
	c.mu.Unlock()
	return <-call.done
}

// write enqueues the messages of calls in one store write, and each call's
// on its own when that fails; it reports every call's outcome.
func (e *Engine) write(calls []*combinedCall) {
	if len(calls) == 1 {
		calls[0].done <- e.writeMessages(calls[0].ctx, calls[0].msgs, calls[0].waits)
		return
	}
	var (
		all   []provider.Message
		waits []provider.SlotWait
	)
	ctx := calls[0].ctx
	for _, call := range calls {
		all = append(all, call.msgs...)
		waits = append(waits, call.waits...)
		if ctx.Err() != nil {
			ctx = call.ctx // a caller that gave up does not cancel the others' write
		}
	}
	if err := e.writeMessages(ctx, all, waits); err == nil {
		for _, call := range calls {
			call.done <- nil
		}
		return
	}
	for _, call := range calls {
		call.done <- e.writeMessages(call.ctx, call.msgs, call.waits)
	}
}

// writeMessages is one store write of msgs, with waits when the store
// applies them.
func (e *Engine) writeMessages(ctx context.Context, msgs []provider.Message, waits []provider.SlotWait) error {
	if len(waits) > 0 {
		if sw, ok := e.store.(provider.StartWaiter); ok {
			return sw.EnqueueWaiting(ctx, &provider.EnqueueWaitingParams{Messages: msgs, Now: e.now(), Waits: waits})
		}
	}
	return e.store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: e.now()})
}
