package chronicletest_test

import (
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
