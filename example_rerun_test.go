package chronicle_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An identity check failed for good because the passport on file had
// expired. Once the customer sends a renewed one, an operator reruns the
// failed activity with the new passport: the instance gets a new
// execution that keeps what happened before the failure, runs the
// activity again with the replaced input and completes. The failed
// execution stays in history, with a record of who reran it and why.
func ExampleEngine_Rerun() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example", Logger: slog.New(slog.DiscardHandler)})
	defer engine.Close()
	_ = chronicle.RegisterActivity(engine, "verify-passport", func(_ context.Context, passport string) (string, error) {
		if passport == "P-OLD" {
			return "", chronicle.NonRetryable(fmt.Errorf("passport %s expired", passport))
		}
		return "verified with " + passport, nil
	})
	_ = chronicle.RegisterWorkflow(engine, "kyc", func(ctx *chronicle.Context, passport string) (string, error) {
		return chronicle.CallActivity[string](ctx, "verify-passport", passport, nil)
	})
	drain := func() {
		for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
		}
	}
	_, _ = engine.Start(ctx, "kyc", "P-OLD", &chronicle.StartOptions{InstanceID: "kyc-1"})
	drain()
	inst, _ := engine.Describe(ctx, "kyc-1")
	fmt.Println("before:", inst.Status)

	// Rerun from the activity's failure, with the renewed passport.
	events, _ := engine.History(ctx, "kyc-1")
	var failed int64
	for _, e := range events {
		if e.Kind == history.KindActivityFailed {
			failed = e.Seq
		}
	}
	_, err := engine.Rerun(ctx, "kyc-1", chronicle.RerunOptions{
		FromSeq: failed, ActivityInput: "P-NEW",
		Reason: "customer sent a renewed passport", Actor: "ana", Ticket: "KYC-88",
	})
	if err != nil {
		fmt.Println(err)
	}
	drain()

	inst, _ = engine.Describe(ctx, "kyc-1")
	var out string
	_ = inst.Result(&out)
	fmt.Println("after:", inst.Status, "-", out)
	events, _ = engine.History(ctx, "kyc-1")
	for _, e := range events {
		a, _ := e.Attributes()
		switch a := a.(type) {
		case *history.ExecutionRerun:
			fmt.Printf("#%d %s by %s from #%d: %s (%s)\n", e.Seq, e.Kind, e.Actor, a.FromSeq, a.Reason, a.Ticket)
		case *history.ExecutionStarted:
			if a.RerunOf != nil {
				fmt.Printf("#%d %s, rerun from #%d\n", e.Seq, e.Kind, a.RerunOf.FromSeq)
			}
		}
	}
	fmt.Println("chain verifies:", engine.Verify(ctx, "kyc-1") == nil)
	// Output:
	// before: failed
	// after: completed - verified with P-NEW
	// #7 ExecutionRerun by user:ana from #4: customer sent a renewed passport (KYC-88)
	// #8 ExecutionStarted, rerun from #4
	// chain verifies: true
}
