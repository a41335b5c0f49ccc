//go:build ignore

// This program does not compile, and is not meant to: each line marked
// ERROR misuses a typed handle, and the compiler reports the mistake there
// with a message matching the marked pattern. The test of this package
// builds it and checks that it fails with exactly these errors.
package main

import (
	"context"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

type Order struct{ ID string }

type Receipt struct{ Total int }

type Invoice struct{ Number string }

type Reason struct{ Text string }

type Decision struct{ Approved bool }

var (
	Orders   = chronicle.Workflow[Order, Receipt]("order")
	Cancel   = chronicle.Signal[Reason]("cancel")
	Approval = chronicle.HumanTask[Order, Decision]("approve-order")
)

// fulfil is workflow code.
func fulfil(ctx *chronicle.Context, o Order) (Receipt, error) {
	var text string
	text, _ = Cancel.Wait(ctx, nil)    // ERROR "Reason.* as string value in assignment"
	_, _ = Orders.Call(ctx, o.ID, nil) // ERROR "as Order value in argument to Orders.Call"
	task := Approval.Create(ctx, o, nil)
	var yes bool
	yes, _ = Approval.Wait(ctx, task)         // ERROR "Decision.* as bool value in assignment"
	_ = Cancel.Send(ctx, "ORD-2", "too slow") // ERROR "as Reason value in argument to Cancel.Send"
	_, _ = text, yes
	return Receipt{}, nil
}

func main() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
	_ = Orders.Register(engine, fulfil)

	// The function of another workflow does not register as an order's.
	_ = Orders.Register(engine, func(ctx *chronicle.Context, o Order) (Invoice, error) { return Invoice{}, nil }) // ERROR "as func\(ctx \*chronicle.Context, in Order\) \(Receipt, error\) value in argument to Orders.Register"

	// The input is an Order, not its id.
	run, _ := Orders.Start(ctx, engine, "ORD-1", nil) // ERROR "as Order value in argument to Orders.Start"

	// The output is a Receipt.
	var invoice Invoice
	invoice, _ = run.Wait(ctx)                    // ERROR "Receipt.* as Invoice value in assignment"
	invoice, _ = Orders.Wait(ctx, engine, run.ID) // ERROR "Receipt.* as Invoice value in assignment"

	// The payload of a cancellation is a Reason.
	_ = Cancel.Raise(ctx, engine, run.ID, "changed my mind", nil) // ERROR "as Reason value in argument to Cancel.Raise"

	// A manager decides with a Decision, not a yes.
	_ = Approval.Complete(ctx, engine, "approve-ORD-1", true, chronicle.User{ID: "ana"}) // ERROR "as Decision value in argument to Approval.Complete"
	_ = invoice
}
