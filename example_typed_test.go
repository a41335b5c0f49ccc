package chronicle_test

import (
	"context"
	"fmt"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

type Order struct {
	ID    string
	Items int
}

type Receipt struct {
	OrderID string
	Total   int
}

// Typed handles are declared once, next to the types, and used by the
// worker and by clients alike.
var (
	Orders   = chronicle.Workflow[Order, Receipt]("order")
	Shipped  = chronicle.Signal[string]("shipped")
	Approval = chronicle.HumanTask[Order, bool]("approve-order")
)

// fulfilOrder asks a manager to approve big orders, then waits until the
// order has shipped.
func fulfilOrder(ctx *chronicle.Context, o Order) (Receipt, error) {
	if o.Items > 10 {
		task := Approval.Create(ctx, o, &chronicle.TaskOptions{TaskID: "approve-" + o.ID, Roles: []string{"manager"}})
		ok, err := Approval.Wait(ctx, task)
		if err != nil || !ok {
			return Receipt{OrderID: o.ID}, err
		}
	}
	if _, err := Shipped.Wait(ctx, nil); err != nil {
		return Receipt{}, err
	}
	return Receipt{OrderID: o.ID, Total: 5 * o.Items}, nil
}

// drainExample runs the engine until nothing is left to do, as tests do.
func drainExample(ctx context.Context, e *chronicle.Engine) {
	for worked, _ := e.RunOnce(ctx); worked; worked, _ = e.RunOnce(ctx) {
	}
}

// A typed workflow: Start takes an Order and Wait returns a Receipt, so
// passing anything else does not compile.
func ExampleWorkflow() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	if err := Orders.Register(engine, fulfilOrder); err != nil {
		panic(err)
	}

	run, err := Orders.Start(ctx, engine, Order{ID: "ORD-1", Items: 3}, &chronicle.StartOptions{InstanceID: "ORD-1"})
	if err != nil {
		panic(err)
	}
	drainExample(ctx, engine)
	_ = Shipped.Raise(ctx, engine, run.ID, "DHL 0042", nil)
	drainExample(ctx, engine)

	receipt, err := run.Wait(ctx)
	fmt.Printf("%s: %+v %v\n", run.ID, receipt, err)

	// The untyped call checks the input against the registered type when
	// the program runs.
	_, err = engine.Start(ctx, "order", "ORD-2", nil)
	fmt.Println(err)
	// Output:
	// ORD-1: {OrderID:ORD-1 Total:15} <nil>
	// chronicle: invalid argument: workflow order takes input of type chronicle_test.Order, not string
}

// A typed human task: the workflow reads the result as a bool, and the
// client completes it with one.
func ExampleHumanTask() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = Orders.Register(engine, fulfilOrder)

	run, _ := Orders.Start(ctx, engine, Order{ID: "ORD-3", Items: 40}, &chronicle.StartOptions{InstanceID: "ORD-3"})
	drainExample(ctx, engine)

	manager := chronicle.User{ID: "mia", Roles: []string{"manager"}}
	order, _ := Approval.Payload(ctx, engine, "approve-ORD-3")
	fmt.Printf("mia sees %+v\n", order)
	if err := Approval.Complete(ctx, engine, "approve-ORD-3", false, manager); err != nil {
		panic(err)
	}
	drainExample(ctx, engine)
	receipt, _ := run.Wait(ctx)
	fmt.Printf("%+v\n", receipt)
	// Output:
	// mia sees {ID:ORD-3 Items:40}
	// {OrderID:ORD-3 Total:0}
}

// A client process starts, signals and waits for orders without the
// workflow's code, which a worker process (here an engine on the same
// store) runs.
func ExampleNewClient() {
	ctx := context.Background()
	store := memory.New(memory.Options{})

	worker, _ := chronicle.New(store, chronicle.Options{NodeID: "worker"})
	defer worker.Close()
	_ = Orders.Register(worker, fulfilOrder)

	client, err := chronicle.NewClient(store, chronicle.ClientOptions{})
	if err != nil {
		panic(err)
	}
	run, _ := Orders.Start(ctx, client, Order{ID: "ORD-4", Items: 2}, &chronicle.StartOptions{InstanceID: "ORD-4"})
	// The untyped call starts a name the client does not know.
	_, _ = client.Start(ctx, "order", Order{ID: "ORD-5", Items: 1}, &chronicle.StartOptions{InstanceID: "ORD-5"})
	drainExample(ctx, worker)

	for _, id := range []string{"ORD-4", "ORD-5"} {
		_ = Shipped.Raise(ctx, client, id, "parcel", nil)
	}
	drainExample(ctx, worker)
	r4, _ := run.Wait(ctx)
	r5, _ := Orders.Wait(ctx, client, "ORD-5")
	fmt.Println(r4.Total, r5.Total)
	// Output:
	// 10 5
}
