package replay

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// coroutine is one goroutine of workflow code. The executor runs exactly
// one coroutine at a time and hands control back and forth over channels,
// so workflow code is deterministic and needs no locks.
type coroutine struct {
	x       *executor
	name    string
	resume  chan struct{}
	started bool
	done    bool
	killed  bool
	// ready reports whether a blocked coroutine can go on.
	ready func() bool
}

func (x *executor) spawn(name string, fn func()) *coroutine {
	c := &coroutine{x: x, name: name, resume: make(chan struct{})}
	x.coroutines = append(x.coroutines, c)
	go c.main(fn)
	return c
}

func (c *coroutine) main(fn func()) {
	defer func() {
		if r := recover(); r != nil && c.x.fatal == nil {
			c.x.fatal = &PanicError{InstanceID: c.x.instanceID, Value: r, Stack: string(debug.Stack())}
		}
		c.done = true
		c.x.yielded <- struct{}{}
	}()
	<-c.resume
	if c.killed {
		return
	}
	fn()
}

// wait blocks the calling coroutine until ready reports true.
func (c *coroutine) wait(ready func() bool) {
	for !ready() {
		c.ready = ready
		c.x.yielded <- struct{}{}
		<-c.resume
		if c.killed {
			runtime.Goexit()
		}
	}
	c.ready = nil
}

// step runs the coroutine until it blocks or ends.
func (c *coroutine) step() {
	c.started = true
	c.x.current = c
	c.resume <- struct{}{}
	<-c.x.yielded
	c.x.current = nil
}

// runnable reports whether the scheduler should step the coroutine.
func (c *coroutine) runnable() bool {
	return !c.done && (!c.started || (c.ready != nil && c.ready()))
}

// kill ends a coroutine that has not finished, running its deferred calls.
func (c *coroutine) kill() {
	if c.done {
		return
	}
	c.killed = true
	c.x.current = c
	c.resume <- struct{}{}
	<-c.x.yielded
	c.x.current = nil
}

// abort stops the current coroutine after a fatal error (nondeterminism,
// bad use of the API); the executor reports x.fatal.
func (x *executor) abort(err error) {
	if x.fatal == nil {
		x.fatal = err
	}
	if x.current == nil {
		panic(fmt.Sprintf("chronicle: workflow API used outside workflow code: %v", err))
	}
	runtime.Goexit()
}
