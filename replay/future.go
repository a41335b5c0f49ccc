package replay

import "reflect"

// Future is the pending result of something workflow code started: an
// activity, a timer, a sub-workflow, a wait for a signal or a human task, a
// coroutine. Get blocks the calling workflow coroutine until the result is
// there; other coroutines run meanwhile.
type Future interface {
	// Get waits for the result and decodes it into out (a pointer, or nil
	// to ignore it). It returns the error of the work: an *ActivityError,
	// a *SubWorkflowError, ErrTimeout, or the error of a coroutine.
	Get(out any) error
	// Ready reports whether Get would return without waiting.
	Ready() bool
}

type future struct {
	x     *executor
	done  bool
	value []byte
	err   error
	order int64 // resolution order, for WhenAny
	// what the future waits for, for error messages
	name, child string
	// seq of a timer's TimerCreated
	seq int64
	// signal waits with a timeout cancel their timer once signalled
	signalled bool
	timer     int64
	onGet     func()
	// expect, when set, is told the out of the first Get (a task's
	// future records the result type).
	expect func(out any)
}

func (x *executor) newFuture(seq int64, name string) *future {
	f := &future{x: x, name: name}
	if seq > 0 {
		x.futures[seq] = f
	}
	return f
}

// failedFuture is a future that is already resolved with err.
func (x *executor) failedFuture(err error) *future {
	f := &future{x: x}
	x.settle(f, nil, err)
	return f
}

func (f *future) Ready() bool { return f.done }

func (f *future) Get(out any) error {
	x := f.x
	if x.current == nil {
		panic("chronicle: Future.Get called outside workflow code")
	}
	if f.expect != nil {
		expect := f.expect
		f.expect = nil
		if out != nil && reflect.TypeOf(out).Kind() == reflect.Pointer {
			expect(out)
		}
	}
	x.current.wait(func() bool { return f.done })
	if f.onGet != nil {
		hook := f.onGet
		f.onGet = nil
		hook()
	}
	if f.err != nil {
		return f.err
	}
	if out != nil && len(f.value) > 0 {
		if err := x.r.opts.Codec.Decode(f.value, out); err != nil {
			return err
		}
	}
	return nil
}

// Await waits for a future and returns its result as a T.
func Await[T any](f Future) (T, error) {
	var v T
	err := f.Get(&v)
	return v, err
}
