package memory

import (
	"context"

	"github.com/chronicleflow/chronicle/provider"
)

// writes applies the record writes of one store step. In peek-lock mode
// each write takes s.mu on its own, as a document store whose atomic unit
// is one record applies them, and a fault with AfterWrites ends the step
// after that many writes: a crash between two writes. In transactional
// mode the step holds s.mu throughout and is atomic.
type writes struct {
	s      *Store
	op     Op
	atomic bool
	fault  *Fault
	n      int
}

// read runs fn, which reads records or checks a fence and writes nothing,
// under s.mu.
func (w *writes) read(fn func() error) error {
	if !w.atomic {
		w.s.mu.Lock()
		defer w.s.mu.Unlock()
	}
	return fn()
}

// write runs fn, which writes one record (a message, an activity task, a
// dead letter, a projection record, the instance's own record), under s.mu
// and counts it; it returns the planned fault's error after the
// AfterWrites-th write, and the step must then return it at once.
func (w *writes) write(fn func() error) error {
	if !w.atomic && w.s.between != nil {
		w.s.between(w.op, w.n)
	}
	if err := w.read(fn); err != nil {
		return err
	}
	w.n++
	if w.fault != nil && w.n == w.fault.AfterWrites {
		f := w.fault
		w.fault = nil
		return f.Err
	}
	return nil
}

// step runs a store operation whose effect is a sequence of record writes,
// with fault injection: a fault before the effect returns its error without
// running fn; one with AfterWrites k (peek-lock mode only) returns it after
// the k-th write, or after the whole effect when fn writes fewer; one after
// the effect runs fn and then returns the fault's error.
func (s *Store) step(ctx context.Context, op Op, fn func(w *writes) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f := s.faultFor(op)
	if f != nil && !f.AfterEffect && f.AfterWrites <= 0 {
		return f.Err
	}
	w := &writes{s: s, op: op, atomic: s.mode != provider.ModePeekLock}
	if f != nil && f.AfterWrites > 0 && !w.atomic {
		w.fault = f
	}
	if w.atomic {
		s.mu.Lock()
	}
	err := fn(w)
	if w.atomic {
		s.mu.Unlock()
	}
	if err != nil {
		return err
	}
	if f != nil {
		return f.Err
	}
	return nil
}
