package chronicletest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/chronicleflow/chronicle"
)

// ErrUnexpectedCall is matched by the error a mock returns to the engine
// for a call no expectation matches; the call also fails the test.
var ErrUnexpectedCall = errors.New("chronicletest: unexpected activity call")

// Expectation is one expected behaviour of a mocked activity, made by
// [MockActivity]: what it returns, for which inputs and how often. Its
// methods return the expectation, to be chained:
//
//	chronicletest.MockActivity[Charge, Receipt](env, "charge").
//		With(func(c Charge) bool { return c.Amount > 0 }).
//		Return(Receipt{ID: "R-1"}).
//		Once()
//
// Configure an expectation before the environment runs; reading its
// counts (Calls, Inputs) is safe at any time.
type Expectation[In, Out any] struct {
	mock *activityMock[In, Out]

	// Guarded by mock.mu.
	match    []func(In) bool
	out      Out
	err      error
	do       func(ctx context.Context, in In) (Out, error)
	times    int // 0: no limit
	optional bool
	inputs   []In
}

// MockActivity adds an expectation to the mock of the activity name,
// registering the mock on the environment's engine the first time: each
// call of the activity is answered by the first expectation, in the order
// they were added, whose input checks pass and whose Times are not used up.
// Without Return, ReturnError or Do an expectation returns the zero Out.
//
// By default an expectation must match at least one call, any number of
// times; Times(n) makes it exactly n, Maybe makes it optional. When the
// test ends, expectations that were not met fail it. A call no
// expectation matches fails the test, and the activity attempt fails
// for good (an error matching [ErrUnexpectedCall]).
//
// In and Out are the activity's input and result types, as the workflow
// calls it; every expectation of one name must use the same types.
func MockActivity[In, Out any](env *Env, name string) *Expectation[In, Out] {
	env.t.Helper()
	env.mu.Lock()
	existing, ok := env.mocks[name]
	env.mu.Unlock()
	var m *activityMock[In, Out]
	if ok {
		m, ok = existing.(*activityMock[In, Out])
		if !ok {
			env.t.Fatalf("chronicletest: activity %s is mocked as %s; MockActivity[%s, %s] cannot add to it",
				name, existing.types(), typeName[In](), typeName[Out]())
		}
	} else {
		m = &activityMock[In, Out]{env: env, name: name}
		if err := chronicle.RegisterActivity(env.engine, name, m.call); err != nil {
			env.t.Fatalf("chronicletest: mock activity %s: %v (a mock takes the place of the activity: do not register both)", name, err)
		}
		env.mu.Lock()
		env.mocks[name] = m
		env.order = append(env.order, name)
		env.mu.Unlock()
	}
	x := &Expectation[In, Out]{mock: m}
	m.mu.Lock()
	m.expected = append(m.expected, x)
	m.mu.Unlock()
	return x
}

// Return makes the expectation return out.
func (x *Expectation[In, Out]) Return(out Out) *Expectation[In, Out] {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	x.out, x.err, x.do = out, nil, nil
	return x
}

// ReturnError makes the expectation fail the attempt with err: the engine
// retries the activity by its retry policy, unless err is
// [chronicle.NonRetryable] or its type is listed as not retryable.
func (x *Expectation[In, Out]) ReturnError(err error) *Expectation[In, Out] {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	var zero Out
	x.out, x.err, x.do = zero, err, nil
	return x
}

// Do makes the expectation call fn, which gets the activity's context
// ([chronicle.ActivityInfoFrom] works on it) and input.
func (x *Expectation[In, Out]) Do(fn func(ctx context.Context, in In) (Out, error)) *Expectation[In, Out] {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	x.do = fn
	return x
}

// With makes the expectation match only inputs for which match returns
// true. Several With all have to pass.
func (x *Expectation[In, Out]) With(match func(in In) bool) *Expectation[In, Out] {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	x.match = append(x.match, match)
	return x
}

// WithInput makes the expectation match only inputs equal to want
// (reflect.DeepEqual of the decoded input, so times compare by location
// too: prefer With for them).
func (x *Expectation[In, Out]) WithInput(want In) *Expectation[In, Out] {
	return x.With(func(in In) bool { return reflect.DeepEqual(in, want) })
}

// Times makes the expectation match exactly n calls: after n it matches
// no more, so the next expectation answers, and fewer than n fail the test
// when it ends (unless Maybe).
func (x *Expectation[In, Out]) Times(n int) *Expectation[In, Out] {
	if n <= 0 {
		x.mock.env.t.Fatalf("chronicletest: Times(%d) for activity %s; use Maybe for an optional expectation", n, x.mock.name)
	}
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	x.times = n
	return x
}

// Once is Times(1).
func (x *Expectation[In, Out]) Once() *Expectation[In, Out] { return x.Times(1) }

// Maybe makes the expectation optional: the test does not fail when it
// matched fewer calls than expected, none included.
func (x *Expectation[In, Out]) Maybe() *Expectation[In, Out] {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	x.optional = true
	return x
}

// Calls returns how many calls the expectation answered.
func (x *Expectation[In, Out]) Calls() int {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	return len(x.inputs)
}

// Inputs returns the inputs of the calls the expectation answered, in
// order.
func (x *Expectation[In, Out]) Inputs() []In {
	x.mock.mu.Lock()
	defer x.mock.mu.Unlock()
	return append([]In(nil), x.inputs...)
}

// met reports whether the expectation got the calls it expects.
func (x *Expectation[In, Out]) met() (bool, string) {
	n := len(x.inputs)
	switch {
	case x.optional:
		return true, ""
	case x.times > 0 && n != x.times:
		return false, fmt.Sprintf("expected %d call(s), got %d", x.times, n)
	case x.times == 0 && n == 0:
		return false, "expected at least one call, got none"
	}
	return true, ""
}

func (x *Expectation[In, Out]) matches(in In) bool {
	if x.times > 0 && len(x.inputs) >= x.times {
		return false
	}
	for _, m := range x.match {
		if !m(in) {
			return false
		}
	}
	return true
}

// mockChecker is what the environment keeps of a mock of any types.
type mockChecker interface {
	check() []string
	types() string
}

// activityMock is the activity registered under a mocked name.
type activityMock[In, Out any] struct {
	env  *Env
	name string

	mu       sync.Mutex
	expected []*Expectation[In, Out]
}

func (m *activityMock[In, Out]) call(ctx context.Context, in In) (Out, error) {
	m.mu.Lock()
	var x *Expectation[In, Out]
	for _, c := range m.expected {
		if c.matches(in) {
			x = c
			break
		}
	}
	if x == nil {
		m.mu.Unlock()
		var zero Out
		info, _ := chronicle.ActivityInfoFrom(ctx)
		m.env.t.Errorf("chronicletest: unexpected call of activity %s by %s (attempt %d) at %s with input %+v: no expectation matches",
			m.name, info.InstanceID, info.Attempt, m.env.Elapsed(), in)
		return zero, chronicle.NonRetryable(fmt.Errorf("%w: %s with input %+v", ErrUnexpectedCall, m.name, in))
	}
	x.inputs = append(x.inputs, in)
	out, err, do := x.out, x.err, x.do
	m.mu.Unlock()
	if do != nil {
		return do(ctx, in)
	}
	return out, err
}

func (m *activityMock[In, Out]) check() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var problems []string
	for i, x := range m.expected {
		if ok, why := x.met(); !ok {
			problems = append(problems, fmt.Sprintf("activity %s, expectation %d of %d: %s", m.name, i+1, len(m.expected), why))
		}
	}
	return problems
}

func (m *activityMock[In, Out]) types() string {
	return "[" + typeName[In]() + ", " + typeName[Out]() + "]"
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// checkMocks fails the test for every expectation that was not met.
func (e *Env) checkMocks() {
	e.mu.Lock()
	names := append([]string(nil), e.order...)
	mocks := make([]mockChecker, len(names))
	for i, n := range names {
		mocks[i] = e.mocks[n]
	}
	e.mu.Unlock()
	for _, m := range mocks {
		for _, p := range m.check() {
			e.t.Errorf("chronicletest: %s", p)
		}
	}
}
