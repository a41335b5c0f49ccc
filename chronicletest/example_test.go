package chronicletest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
)

// Renewal is the input of the subscription-renewal workflow below.
type Renewal struct {
	Customer string
	Plan     string
}

// renewal charges a subscription 14 days after it starts, unless the
// customer cancels first.
func renewal(ctx *chronicle.Context, r Renewal) (string, error) {
	_, err := chronicle.WaitEvent[string](ctx, "cancel", &chronicle.WaitOptions{Timeout: 14 * 24 * time.Hour})
	switch {
	case err == nil:
		return "cancelled", nil
	case !errors.Is(err, chronicle.ErrTimeout):
		return "", err
	}
	receipt, err := chronicle.CallActivity[string](ctx, "charge", r, &chronicle.ActivityOptions{
		Retry: chronicle.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Hour, Multiplier: 2},
	})
	if err != nil {
		return "", err
	}
	return "renewed: " + receipt, nil
}

// The example tests a workflow that waits 14 days and retries a failing
// charge: it runs in milliseconds on the virtual clock. In a test, pass
// the test's *testing.T to New; the example passes a stand-in that prints
// what a test would report.
func Example() {
	t := &exampleT{}
	defer t.end()

	env := chronicletest.New(t)
	if err := chronicle.RegisterWorkflow(env.Engine(), "renewal", renewal); err != nil {
		t.Fatal(err)
	}
	// The payment gateway fails once, then charges.
	chronicletest.MockActivity[Renewal, string](env, "charge").ReturnError(errors.New("gateway timeout")).Once()
	charge := chronicletest.MockActivity[Renewal, string](env, "charge").
		With(func(r Renewal) bool { return r.Plan == "pro" }).
		Return("R-1001").
		Once()

	id := env.Start("renewal", Renewal{Customer: "ada", Plan: "pro"}, nil)
	inst := env.Wait(id)

	fmt.Println(inst.Status, chronicletest.Result[string](env, id))
	fmt.Println("virtual time:", env.Elapsed())
	fmt.Println("charged with:", charge.Inputs())
	env.AssertHistory(id,
		history.KindExecutionStarted,
		history.KindTimerCreated, history.KindTimerFired, // the 14 days
		history.KindActivityScheduled, history.KindActivityCompleted, // two attempts, one hour apart
		history.KindExecutionCompleted)
	// Output:
	// completed renewed: R-1001
	// virtual time: 337h0m0s
	// charged with: [{ada pro}]
}

// A retry sequence: the first expectation answers the first call with an
// error, the engine retries after the policy's nominal delay, and the
// second expectation answers.
func ExampleMockActivity() {
	t := &exampleT{}
	defer t.end()
	env := chronicletest.New(t)
	err := chronicle.RegisterWorkflow(env.Engine(), "greet", func(ctx *chronicle.Context, name string) (string, error) {
		return chronicle.CallActivity[string](ctx, "hello", name, &chronicle.ActivityOptions{
			Retry: chronicle.RetryPolicy{InitialInterval: 10 * time.Second},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	chronicletest.MockActivity[string, string](env, "hello").ReturnError(errors.New("busy")).Once()
	hello := chronicletest.MockActivity[string, string](env, "hello").
		Do(func(ctx context.Context, name string) (string, error) {
			info, _ := chronicle.ActivityInfoFrom(ctx)
			return fmt.Sprintf("hello %s (attempt %d, %s in)", name, info.Attempt, env.Elapsed()), nil
		}).
		Once()

	id := env.Start("greet", "ada", nil)
	env.Wait(id)
	fmt.Println(chronicletest.Result[string](env, id))
	fmt.Println(hello.Calls(), env.ActivityAttempts("hello"))
	// Output:
	// hello ada (attempt 2, 10s in)
	// 1 2
}

// A signal that arrives three days in, and what the instance shows before
// and after.
func ExampleEnv_RaiseEventAt() {
	t := &exampleT{}
	defer t.end()
	env := chronicletest.New(t)
	err := chronicle.RegisterWorkflow(env.Engine(), "approval", func(ctx *chronicle.Context, _ string) (string, error) {
		if err := ctx.SetCustomStatus("waiting"); err != nil {
			return "", err
		}
		return chronicle.WaitEvent[string](ctx, "decision", &chronicle.WaitOptions{Timeout: 7 * 24 * time.Hour})
	})
	if err != nil {
		t.Fatal(err)
	}
	id := env.Start("approval", "", &chronicle.StartOptions{InstanceID: "REQ-1"})
	env.RaiseEventAt(72*time.Hour, id, "decision", "approved", nil)

	env.RunFor(24 * time.Hour)
	status, _ := chronicletest.CustomStatus[string](env, id)
	fmt.Println(env.Elapsed(), env.Describe(id).Status, status)
	inst := env.Wait(id)
	fmt.Println(inst.CompletedAt.Sub(env.StartTime()), inst.Status, chronicletest.Result[string](env, id))
	// Output:
	// 24h0m0s running waiting
	// 72h0m0s completed approved
}

// exampleT stands in for a *testing.T in the example: it prints failures
// and runs the cleanups (which check the mocks' expectations) at the end.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Log(args ...any)                   {}
func (t *exampleT) Logf(format string, args ...any)   {}
func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (t *exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
