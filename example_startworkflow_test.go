package chronicle_test

import (
	"context"
	"fmt"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An order starts its invoice as an instance of its own that outlives it:
// a detached start, queued with the order's round. The invoice's start is
// recorded from "workflow:<order>"; a second start of the same id (here
// the order asking twice) is dropped, so the invoice runs once.
func ExampleContext_StartWorkflow() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "invoice", func(ctx *chronicle.Context, order string) (string, error) {
		return "invoice for " + order, nil
	})
	_ = chronicle.RegisterWorkflow(engine, "order", func(ctx *chronicle.Context, id string) (string, error) {
		for range 2 {
			if err := ctx.StartWorkflow("invoice", id, &chronicle.StartWorkflowOptions{InstanceID: "invoice-" + id, Priority: 5}); err != nil {
				return "", err
			}
		}
		return "placed", nil
	})
	_, _ = engine.Start(ctx, "order", "O-7", &chronicle.StartOptions{InstanceID: "order-7"})
	for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
	}

	inst, _ := engine.Describe(ctx, "invoice-O-7")
	var out string
	_ = inst.Result(&out)
	events, _ := engine.History(ctx, "invoice-O-7")
	starts := 0
	for _, e := range events {
		if e.Kind == history.KindExecutionStarted {
			starts++
		}
	}
	fmt.Println(out)
	fmt.Println(events[0].Kind, events[0].Actor, "executions:", starts)
	// Output:
	// invoice for O-7
	// ExecutionStarted workflow:order-7 executions: 1
}
