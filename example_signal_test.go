package chronicle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// A shipment tells the order it belongs to that it left the warehouse: a
// workflow signals another instance. The receiver records the signal as
// an EventRaised from "workflow:<sender>"; the sender's future resolves
// once it is recorded, or fails with a *SignalError when no running
// instance has that id.
func ExampleContext_SignalWorkflow() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "order", func(ctx *chronicle.Context, id string) (string, error) {
		return chronicle.WaitEvent[string](ctx, "shipped", nil)
	})
	_ = chronicle.RegisterWorkflow(engine, "shipment", func(ctx *chronicle.Context, order string) (string, error) {
		err := ctx.SignalWorkflow(order, "shipped", "parcel 7 left the warehouse").Get(nil)
		var se *chronicle.SignalError
		if errors.As(err, &se) && errors.Is(err, chronicle.ErrSignalNotDelivered) {
			return "not delivered: " + se.Failure.Type, nil
		}
		return "delivered", err
	})
	drain := func() {
		for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
		}
	}
	_, _ = engine.Start(ctx, "order", "O-7", &chronicle.StartOptions{InstanceID: "order-7"})
	_, _ = engine.Start(ctx, "shipment", "order-7", &chronicle.StartOptions{InstanceID: "shipment-7"})
	_, _ = engine.Start(ctx, "shipment", "order-8", &chronicle.StartOptions{InstanceID: "shipment-8"})
	drain()

	for _, id := range []string{"order-7", "shipment-7", "shipment-8"} {
		inst, _ := engine.Describe(ctx, id)
		var out string
		_ = inst.Result(&out)
		fmt.Printf("%s: %s\n", id, out)
	}
	events, _ := engine.History(ctx, "order-7")
	for _, e := range events {
		if e.Kind == history.KindEventRaised {
			fmt.Println(e.Kind, e.Actor)
		}
	}
	// Output:
	// order-7: parcel 7 left the warehouse
	// shipment-7: delivered
	// shipment-8: not delivered: SignalTargetNotFound
	// EventRaised workflow:shipment-7
}
