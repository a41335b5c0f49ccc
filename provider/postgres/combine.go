package postgres

import (
	"context"
	"sync"
)

// combiner merges concurrent calls of one kind (activity claims,
// activity completions) into one statement and one commit: the first
// caller to find no write in flight leads, running every call queued by
// then in one go, while the calls that arrive meanwhile wait and the
// oldest of them leads the next. An uncontended call runs at once, alone;
// under load, calls share the round trip and the commit they would
// otherwise queue for. A waiting call does not give up when its ctx
// ends: the statement in flight may already have done its work (claimed
// a task for it, say), which must reach the caller.
type combiner[In, Out any] struct {
	mu      sync.Mutex
	pending []*combined[In, Out]
	busy    bool
	// max bounds the calls of one run; zero means no bound.
	max int
}

// combined is one call in a combiner.
type combined[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
	lead chan struct{}
}

// do runs in with the calls queued alongside it: run gets their inputs,
// in arrival order, and sets each call's outcome through its index.
func (c *combiner[In, Out]) do(ctx context.Context, in In, run func(ctx context.Context, calls []*combined[In, Out])) (Out, error) {
	call := &combined[In, Out]{ctx: ctx, in: in, done: make(chan struct{}), lead: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, call)
	if c.busy {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.out, call.err
		case <-call.lead:
		}
		c.mu.Lock()
	}
	c.busy = true
	n := len(c.pending)
	if c.max > 0 {
		n = min(n, c.max)
	}
	batch := c.pending[:n:n]
	c.pending = c.pending[n:]
	c.mu.Unlock()

	run(ctx, batch)
	for _, o := range batch {
		if o != call {
			close(o.done)
		}
	}

	c.mu.Lock()
	if len(c.pending) == 0 {
		c.busy = false
		c.pending = nil
	} else {
		close(c.pending[0].lead)
	}
	c.mu.Unlock()
	return call.out, call.err
}
