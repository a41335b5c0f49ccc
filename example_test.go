package chronicle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

type Application struct {
	Applicant string
	Amount    int
}

type Decision struct {
	Approved bool
	Reason   string
}

// An application is scored by an activity, then waits for the applicant's
// documents (a signal) before it is decided.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	if err != nil {
		panic(err)
	}
	_ = chronicle.RegisterActivity(engine, "score", func(ctx context.Context, app Application) (int, error) {
		return 700 + len(app.Applicant), nil
	})
	_ = chronicle.RegisterWorkflow(engine, "approve", func(ctx *chronicle.Context, app Application) (Decision, error) {
		score, err := chronicle.CallActivity[int](ctx, "score", app)
		if err != nil {
			return Decision{}, err
		}
		docs, err := chronicle.WaitEvent[string](ctx, "documents", chronicle.WaitOptions{Timeout: 7 * 24 * time.Hour})
		if err != nil {
			return Decision{Reason: "no documents"}, nil
		}
		return Decision{Approved: score > 700, Reason: fmt.Sprintf("score %d, %s", score, docs)}, nil
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = engine.Run(ctx)
	}()

	id, err := engine.Start(ctx, "approve", Application{Applicant: "Ada", Amount: 12000},
		chronicle.StartOptions{InstanceID: "application-42", BusinessKey: "APP-42"})
	if err != nil {
		panic(err)
	}
	if err := engine.RaiseEvent(ctx, id, "documents", "payslips",
		chronicle.RaiseOptions{IdempotencyKey: "upload-1"}); err != nil {
		panic(err)
	}
	inst, err := engine.Wait(ctx, id)
	if err != nil {
		panic(err)
	}
	var d Decision
	if err := inst.Result(&d); err != nil {
		panic(err)
	}
	fmt.Println(inst.ID, inst.Status, d.Approved, d.Reason)

	events, _ := engine.History(ctx, id)
	fmt.Println("first event:", events[0].Kind, "last event:", events[len(events)-1].Kind)
	cancel()
	<-done
	// Output:
	// application-42 completed true score 703, payslips
	// first event: ExecutionStarted last event: ExecutionCompleted
}
