package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/query"
)

// This file is the order workflow. An order reserves stock and takes the
// payment, each step registering how to undo it (a saga); a large order
// then waits for a sales manager's approval, a human task with a due time
// and an auto-cancel timer; the customer may cancel until the order
// ships; and a shipped order is settled with the seller once its 14-day
// return window has passed.

// Order is the input of the order workflow.
type Order struct {
	ID       string // business reference, also the instance id
	Customer string
	Address  string
	Items    []Item
	Total    int // cents
	// Express orders go ahead of standard ones in the queues
	// (expressPriority).
	Express bool `msgpack:",omitempty"`
	// Windows. Zero takes the shop's defaults (approvalDue,
	// approvalTimeout, returnWindow); the demo shortens them.
	ApprovalDue     time.Duration
	ApprovalTimeout time.Duration
	ReturnWindow    time.Duration
}

// Item is one line of an order.
type Item struct {
	SKU      string
	Quantity int
}

// Result is the outcome of an order. Cancellations and rejections are
// business outcomes, not errors: the workflow completes with them.
type Result struct {
	Status   string // settled, cancelled, rejected, expired or payment-failed
	Reason   string `msgpack:",omitempty"`
	Payment  string `msgpack:",omitempty"`
	Tracking string `msgpack:",omitempty"`
}

// Approval is the result a sales manager gives the approval task.
type Approval struct {
	Approved bool
	Note     string
}

// ApprovalRequest is the payload of the approval task: what the manager
// sees.
type ApprovalRequest struct {
	Order    string
	Customer string
	Total    int
}

// Cancellation is the payload of the cancel-order signal.
type Cancellation struct {
	Reason string
}

// Outcomes of an order.
const (
	statusSettled       = "settled"
	statusCancelled     = "cancelled"
	statusRejected      = "rejected"
	statusExpired       = "expired"
	statusPaymentFailed = "payment-failed"
)

// The order workflow, the customer's cancellation signal and the sales
// manager's approval task, with the types they exchange: starting an
// order with anything but an Order, raising a cancellation with anything
// but a Cancellation or completing the approval with anything but an
// Approval does not compile. Their names are recorded in history.
const (
	orderWorkflow = chronicle.Workflow[Order, Result]("order")
	cancelSignal  = chronicle.Signal[Cancellation]("cancel-order")
	approvalTask  = chronicle.HumanTask[ApprovalRequest, Approval]("approve-order")
)

// searchAttributes are the search attributes the shop declares
// (Options.SearchAttributes): the shop sets customer (its customer
// number, not a name: attributes are stored in plaintext to be indexed),
// amount (in euros) and region when it starts an order, and the workflow
// sets tracking once the order has shipped. Every engine that runs or
// replays the workflow declares them; the shop finds orders with them
// (ListInstances with Where, CountInstances), as main.go does.
var searchAttributes = map[string]query.Type{
	"customer": query.Keyword,
	"amount":   query.Float,
	"region":   query.Keyword,
	"tracking": query.Keyword,
}

// The shop's flow control. At most customerLimit orders of one customer
// are processed at once: an order takes a slot of its customer's
// concurrency key when it starts and gives it back when it ends, and a
// customer's further orders wait, in the order they were placed, while
// other customers' orders run (a large order awaiting approval, or a
// shipped one in its return window, holds its slot). Express orders have a
// higher priority: their work goes ahead of standard orders' in the
// queues, each level moving it a minute ahead, so a standard order is
// never held back for good.
const (
	customerLimit   = 2
	expressPriority = 10
)

// customerKey is the concurrency key of a customer's orders: the customer
// number, or the name for a customer the shop has no number for.
func customerKey(o Order) string {
	if n, ok := customers[o.Customer]; ok {
		return "customer:" + n
	}
	return "customer:" + o.Customer
}

// orderStartOptions are the options the shop starts an order with: its
// id, business key and actor, its search attributes, its customer's
// concurrency limit and, for an express order, a higher priority.
func orderStartOptions(o Order) *chronicle.StartOptions {
	opts := &chronicle.StartOptions{InstanceID: o.ID, BusinessKey: o.ID, Actor: o.Customer,
		SearchAttributes: orderAttributes(o),
		Concurrency:      &chronicle.Concurrency{Key: customerKey(o), Limit: customerLimit}}
	if o.Express {
		opts.Priority = expressPriority
	}
	return opts
}

// The custom statuses the order sets as its saga goes, as strings, so
// that they can be queried (custom_status = 'shipped').
const (
	customReserving = "reserving stock"
	customCharging  = "charging"
	customPaid      = "paid"
	customApproval  = "awaiting approval"
	customShipping  = "shipping"
	customShipped   = "shipped"
	customRefunded  = "refunded"
)

// Activity names, recorded in history.
const (
	reserveStockActivity  = "reserve-stock"
	releaseStockActivity  = "release-stock"
	chargePaymentActivity = "charge-payment"
	refundPaymentActivity = "refund-payment"
	notifyActivity        = "notify"
	shipOrderActivity     = "ship-order"
	settleOrderActivity   = "settle-order"
)

// The shop's rules.
const (
	// approvalThreshold is the total from which a manager approves an
	// order: €1,000.00.
	approvalThreshold = 100000
	approvalDue       = 24 * time.Hour
	approvalTimeout   = 72 * time.Hour
	returnWindow      = 14 * 24 * time.Hour
)

// paymentRetry is the retry policy of the payment: five attempts, 30s,
// 1m, 2m and 4m apart (the engine takes up to half of each delay off at
// random; chronicletest waits the whole delay).
var paymentRetry = chronicle.RetryPolicy{
	MaxAttempts:     5,
	InitialInterval: 30 * time.Second,
	Multiplier:      2,
	MaxInterval:     10 * time.Minute,
}

// workflows holds the workflow and its settings.
type workflows struct {
	// say narrates for the demo; nil is silent.
	say func(format string, args ...any)
	// retry is the payment's retry policy; zero takes paymentRetry (the
	// demo retries sooner).
	retry chronicle.RetryPolicy
}

// note narrates a step when the code is not replaying.
func (w *workflows) note(ctx *chronicle.Context, format string, args ...any) {
	if w.say != nil && !ctx.IsReplaying() {
		w.say(ctx.InstanceID()+": "+format, args...)
	}
}

// order is the "order" workflow.
func (w *workflows) order(ctx *chronicle.Context, o Order) (Result, error) {
	o = withDefaults(o)
	// The customer may cancel until the order ships. The wait is opened
	// first, so a cancellation is seen whenever it arrives: signals are
	// recorded when they arrive and this future holds the first one. (A
	// future, unlike cancelSignal.Wait, can be selected on; cancellation
	// decodes it.)
	cancelled := ctx.WaitEvent(string(cancelSignal), nil)

	saga := ctx.NewSaga()
	// undo runs the compensations registered so far, last first, then
	// sets the outcome as the custom status.
	undo := func(status, reason string) (Result, error) {
		w.note(ctx, "%s (%s): compensating", status, reason)
		if err := saga.Compensate(reason); err != nil {
			return Result{}, fmt.Errorf("compensate %s: %w", o.ID, err)
		}
		if err := ctx.SetCustomStatus(status); err != nil {
			return Result{}, err
		}
		return Result{Status: status, Reason: reason}, nil
	}

	// 1. Reserve the stock; releasing it undoes the reservation.
	if err := ctx.SetCustomStatus(customReserving); err != nil {
		return Result{}, err
	}
	reservation, err := chronicle.CallActivity[string](ctx, reserveStockActivity, StockRequest{Order: o.ID, Items: o.Items}, nil)
	if err != nil {
		return Result{}, err
	}
	saga.AddCompensation(releaseStockActivity, func(ctx *chronicle.Context) error {
		_, err := chronicle.CallActivity[string](ctx, releaseStockActivity, reservation, nil)
		return err
	})

	// 2. Take the payment, retried by paymentRetry; a refund undoes it.
	if err := ctx.SetCustomStatus(customCharging); err != nil {
		return Result{}, err
	}
	payment, err := chronicle.CallActivity[string](ctx, chargePaymentActivity, PaymentRequest{Order: o.ID, Customer: o.Customer, Amount: o.Total},
		&chronicle.ActivityOptions{Retry: w.paymentRetry()})
	if err != nil {
		var failed *chronicle.ActivityError
		if errors.As(err, &failed) {
			return undo(statusPaymentFailed, failed.Failure.Message)
		}
		return Result{}, err
	}
	saga.AddCompensation(refundPaymentActivity, func(ctx *chronicle.Context) error {
		if _, err := chronicle.CallActivity[string](ctx, refundPaymentActivity, payment, nil); err != nil {
			return err
		}
		return ctx.SetCustomStatus(customRefunded)
	})
	if err := ctx.SetCustomStatus(customPaid); err != nil {
		return Result{}, err
	}

	// 3. A large order waits for a manager: a task due in approvalDue,
	// cancelled with the order when nobody decides within approvalTimeout
	// or the customer cancels first.
	if o.Total >= approvalThreshold {
		if err := ctx.SetCustomStatus(customApproval); err != nil {
			return Result{}, err
		}
		task := approvalTask.Create(ctx, ApprovalRequest{Order: o.ID, Customer: o.Customer, Total: o.Total}, &chronicle.TaskOptions{
			Roles: []string{"sales-manager"},
			Due:   ctx.Now().Add(o.ApprovalDue),
		})
		autoCancel := ctx.Timer(o.ApprovalTimeout, &chronicle.TimerOptions{Name: "auto-cancel"})
		if _, err := chronicle.CallActivity[string](ctx, notifyActivity, Notice{
			Order: o.ID, To: "sales-manager", Subject: "approval needed", TaskID: task.ID,
		}, nil); err != nil {
			return Result{}, err
		}
		var outcome Result
		var decided Approval
		var waitErr error
		ctx.Select(
			chronicle.SelectCase{Future: ctx.WaitTask(task), Do: func(f chronicle.Future) {
				waitErr = f.Get(&decided)
				ctx.CancelTimer(autoCancel)
				if waitErr == nil && !decided.Approved {
					outcome = Result{Status: statusRejected, Reason: "rejected by the sales manager: " + decided.Note}
				}
			}},
			chronicle.SelectCase{Future: autoCancel, Do: func(chronicle.Future) {
				ctx.CancelTask(task, "not approved in time")
				outcome = Result{Status: statusExpired, Reason: fmt.Sprintf("not approved within %s", o.ApprovalTimeout)}
			}},
			chronicle.SelectCase{Future: cancelled, Do: func(f chronicle.Future) {
				ctx.CancelTask(task, "cancelled by the customer")
				ctx.CancelTimer(autoCancel)
				outcome = cancellation(f)
			}},
		)
		if waitErr != nil {
			return Result{}, waitErr
		}
		if outcome.Status != "" {
			return undo(outcome.Status, outcome.Reason)
		}
		w.note(ctx, "approved: %s", decided.Note)
	}
	if cancelled.Ready() {
		r := cancellation(cancelled)
		return undo(r.Status, r.Reason)
	}

	// 4. Ship. From here on the customer returns the goods instead of
	// cancelling, and the saga is done.
	if err := ctx.SetCustomStatus(customShipping); err != nil {
		return Result{}, err
	}
	tracking, err := chronicle.CallActivity[string](ctx, shipOrderActivity, ShipRequest{Order: o.ID, Address: o.Address, Items: o.Items}, nil)
	if err != nil {
		return undo(statusCancelled, "could not ship: "+err.Error())
	}
	// The parcel's tracking number becomes a search attribute, so support
	// finds the order from it (tracking = 'TRK-ORD-1001').
	if err := ctx.UpsertSearchAttributes(map[string]any{"tracking": tracking}); err != nil {
		return Result{}, err
	}

	// 5. Settle with the seller when the return window has passed: a
	// durable timer of 14 days.
	if err := ctx.SetCustomStatus(customShipped); err != nil {
		return Result{}, err
	}
	if err := ctx.Timer(o.ReturnWindow, &chronicle.TimerOptions{Name: "return window"}).Get(nil); err != nil {
		return Result{}, err
	}
	if _, err := chronicle.CallActivity[string](ctx, settleOrderActivity, SettleRequest{Order: o.ID, Payment: payment, Amount: o.Total}, nil); err != nil {
		return Result{}, err
	}
	if err := ctx.SetCustomStatus(statusSettled); err != nil {
		return Result{}, err
	}
	return Result{Status: statusSettled, Payment: payment, Tracking: tracking}, nil
}

func (w *workflows) paymentRetry() chronicle.RetryPolicy {
	if w.retry.MaxAttempts == 0 && w.retry.InitialInterval == 0 {
		return paymentRetry
	}
	return w.retry
}

// cancellation reads the cancel-order signal.
func cancellation(f chronicle.Future) Result {
	var c Cancellation
	if err := f.Get(&c); err != nil {
		return Result{Status: statusCancelled, Reason: err.Error()}
	}
	return Result{Status: statusCancelled, Reason: "cancelled by the customer: " + c.Reason}
}

// withDefaults fills in the shop's windows.
func withDefaults(o Order) Order {
	if o.ApprovalDue == 0 {
		o.ApprovalDue = approvalDue
	}
	if o.ApprovalTimeout == 0 {
		o.ApprovalTimeout = approvalTimeout
	}
	if o.ReturnWindow == 0 {
		o.ReturnWindow = returnWindow
	}
	return o
}
