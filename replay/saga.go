package replay

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
)

// Saga collects compensations as a workflow makes changes it may have to
// undo, and runs them in reverse order when it must.
//
//	saga := ctx.NewSaga()
//	if err := ctx.CallActivity("reserve-funds", req, nil).Get(nil); err != nil {
//		return nil, err
//	}
//	saga.AddCompensation("release-funds", func(ctx *chronicle.Context) error {
//		return ctx.CallActivity("release-funds", req, nil).Get(nil)
//	})
//	...
//	if rejected {
//		return nil, saga.Compensate("application rejected")
//	}
type Saga struct {
	c     *Context
	steps []compensation
}

type compensation struct {
	name string
	fn   func(ctx *Context) error
}

// NewSaga returns an empty saga.
func (c *Context) NewSaga() *Saga { return &Saga{c: c} }

// AddCompensation registers fn to undo a step; name labels it in errors.
func (s *Saga) AddCompensation(name string, fn func(ctx *Context) error) {
	s.steps = append(s.steps, compensation{name: name, fn: fn})
}

// Compensate runs every registered compensation once, last first, even when
// some fail; it records CompensationStarted and CompensationCompleted in
// history and returns the failures joined, or nil.
func (s *Saga) Compensate(reason string) error {
	x := s.c.x
	x.command(&history.CompensationStarted{Steps: len(s.steps), Reason: reason}, "")
	var errs []error
	var failures []string
	for i := len(s.steps) - 1; i >= 0; i-- {
		step := s.steps[i]
		if err := step.fn(s.c); err != nil {
			errs = append(errs, fmt.Errorf("compensation %s: %w", step.name, err))
			failures = append(failures, step.name+": "+err.Error())
		}
	}
	s.steps = nil
	x.command(&history.CompensationCompleted{Failures: failures}, "")
	return errors.Join(errs...)
}
