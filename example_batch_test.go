package chronicle_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/query"
)

// A batch job terminates every running order of one region, recording
// the operator, the reason and the ticket in each order's history.
func ExampleEngine_StartBatch() {
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{
		Logger: slog.New(slog.DiscardHandler), SearchAttributes: map[string]query.Type{"region": query.Keyword},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	order := func(ctx *chronicle.Context, _ string) (string, error) {
		return "shipped", ctx.WaitEvent("ship", nil).Get(nil)
	}
	if err := chronicle.RegisterWorkflow(engine, "order", order); err != nil {
		panic(err)
	}
	ctx := context.Background()
	drain := func() {
		for {
			if worked, err := engine.RunOnce(ctx); err != nil || !worked {
				return
			}
		}
	}
	for _, o := range [][2]string{{"o-1", "uk"}, {"o-2", "fr"}, {"o-3", "uk"}} {
		_, err := engine.Start(ctx, "order", o[0], &chronicle.StartOptions{InstanceID: o[0], SearchAttributes: map[string]any{"region": o[1]}})
		if err != nil {
			panic(err)
		}
	}
	drain()

	id, err := engine.StartBatch(ctx, chronicle.BatchOptions{
		ID: "uk-closure", Action: chronicle.BatchTerminate, Workflow: "order",
		Where: "region = 'uk' AND status = 'running'", Reason: "uk warehouse closed", Ticket: "OPS-311", Actor: "ana",
	})
	if err != nil {
		panic(err)
	}
	drain()

	d, err := engine.DescribeBatch(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: matched %d, done %d, skipped %d, failed %d\n", d.State, d.Matched, d.Done, d.Skipped, d.Failed)
	for _, o := range []string{"o-1", "o-2", "o-3"} {
		inst, err := engine.Describe(ctx, o)
		if err != nil {
			panic(err)
		}
		if inst.Failure == nil {
			fmt.Println(o, inst.Status)
			continue
		}
		events, err := engine.History(ctx, o)
		if err != nil {
			panic(err)
		}
		fmt.Println(o, "by", events[len(events)-1].Actor+":", inst.Failure.Message)
	}
	// Output:
	// completed: matched 2, done 2, skipped 0, failed 0
	// o-1 by user:ana: terminated: uk warehouse closed (batch uk-closure, ticket OPS-311)
	// o-2 running
	// o-3 by user:ana: terminated: uk warehouse closed (batch uk-closure, ticket OPS-311)
}
