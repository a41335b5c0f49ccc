package main

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
)

// These tests run the order workflow with the chronicletest kit: the real
// workflow on a real engine with mocked activities and a virtual clock, so
// the shop's real windows (a 14-day return window, a 3-day auto-cancel)
// take milliseconds. Each test logs its wall time; the assertions are on
// the virtual clock.

const day = 24 * time.Hour

var (
	smallOrder = Order{ID: "ORD-1", Customer: "Ada", Address: "12 Analytical Row", Items: []Item{{SKU: "NOTEBOOK-A5", Quantity: 3}}, Total: 8990}
	largeOrder = Order{ID: "ORD-2", Customer: "Grace", Address: "7 Compiler Close", Items: []Item{{SKU: "TERMINAL-3270", Quantity: 2}}, Total: 245000}
	manager    = chronicle.User{ID: "mia", Roles: []string{"sales-manager"}}
)

// shopMocks are the mocks of the activities every order calls, and a
// journal of the calls that change the shop's books, in order.
type shopMocks struct {
	journal []string
	ship    *chronicletest.Expectation[ShipRequest, string]
	settle  *chronicletest.Expectation[SettleRequest, string]
	refund  *chronicletest.Expectation[string, string]
	release *chronicletest.Expectation[string, string]
}

// newOrderEnv returns an environment with the order workflow registered
// and every activity mocked but the payment, which each test mocks.
func newOrderEnv(t *testing.T) (*chronicletest.Env, *shopMocks) {
	t.Helper()
	env := chronicletest.New(t, chronicletest.EngineOptions(chronicle.Options{SearchAttributes: searchAttributes}))
	if err := orderWorkflow.Register(env.Engine(), (&workflows{}).order); err != nil {
		t.Fatal(err)
	}
	m := &shopMocks{}
	note := func(s string) { m.journal = append(m.journal, s) }
	chronicletest.MockActivity[StockRequest, string](env, reserveStockActivity).
		Do(func(_ context.Context, r StockRequest) (string, error) {
			note("reserve " + r.Order)
			return "STK-" + r.Order, nil
		}).Once()
	m.release = chronicletest.MockActivity[string, string](env, releaseStockActivity).
		Do(func(_ context.Context, id string) (string, error) { note("release " + id); return id, nil }).Maybe()
	m.refund = chronicletest.MockActivity[string, string](env, refundPaymentActivity).
		Do(func(_ context.Context, id string) (string, error) { note("refund " + id); return id, nil }).Maybe()
	chronicletest.MockActivity[Notice, string](env, notifyActivity).Return("sent").Maybe()
	m.ship = chronicletest.MockActivity[ShipRequest, string](env, shipOrderActivity).
		Do(func(_ context.Context, r ShipRequest) (string, error) {
			note("ship " + r.Order)
			return "TRK-" + r.Order, nil
		}).Maybe()
	m.settle = chronicletest.MockActivity[SettleRequest, string](env, settleOrderActivity).
		Do(func(_ context.Context, r SettleRequest) (string, error) {
			note("settle " + r.Order)
			return "settled", nil
		}).Maybe()
	return env, m
}

// customStatuses returns the custom statuses an instance's history set,
// in order.
func customStatuses(t *testing.T, env *chronicletest.Env, id string) []string {
	t.Helper()
	var out []string
	for _, e := range env.History(id) {
		if e.Kind != history.KindCustomStatusSet {
			continue
		}
		a, err := history.DecodeAttributes(e.Kind, e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.(*history.CustomStatusSet).Text)
	}
	return out
}

// startOrder starts an order as the shop does; it runs when the
// environment runs.
func startOrder(t *testing.T, env *chronicletest.Env, o Order) string {
	t.Helper()
	run, err := orderWorkflow.Start(env.Context(), env.Engine(), o, orderStartOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// result returns the result of a completed order.
func result(t *testing.T, env *chronicletest.Env, id string) Result {
	t.Helper()
	r, err := orderWorkflow.Result(env.Describe(id))
	if err != nil {
		t.Fatalf("result of %s: %v", id, err)
	}
	return r
}

// cancelAt has the customer cancel the order d into the test.
func cancelAt(t *testing.T, env *chronicletest.Env, d time.Duration, id string, c Cancellation, opts *chronicle.RaiseOptions) {
	env.At(d, func() {
		if err := cancelSignal.Raise(env.Context(), env.Engine(), id, c, opts); err != nil {
			t.Fatalf("cancel %s at %s: %v", id, env.Elapsed(), err)
		}
	})
}

// decideAt has the manager complete the order's approval task d into the
// test.
func decideAt(t *testing.T, env *chronicletest.Env, d time.Duration, id string, a Approval) {
	env.At(d, func() {
		task := env.Task(id, string(approvalTask))
		if err := approvalTask.Complete(env.Context(), env.Engine(), task.TaskID, a, manager); err != nil {
			t.Fatalf("decide %s at %s: %v", id, env.Elapsed(), err)
		}
	})
}

func mockPayment(env *chronicletest.Env, o Order) *chronicletest.Expectation[PaymentRequest, string] {
	return chronicletest.MockActivity[PaymentRequest, string](env, chargePaymentActivity).
		WithInput(PaymentRequest{Order: o.ID, Customer: o.Customer, Amount: o.Total}).
		Return("PAY-" + o.ID)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSettledAfterFourteenDayReturnWindow covers the 14-day wait and the
// retry sequence: the gateway times out twice, the policy retries after
// 30s and 1m, the order ships and is settled exactly 14 days later.
func TestSettledAfterFourteenDayReturnWindow(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	env, m := newOrderEnv(t)
	var attempts []time.Duration
	chronicletest.MockActivity[PaymentRequest, string](env, chargePaymentActivity).
		Do(func(ctx context.Context, r PaymentRequest) (string, error) {
			attempts = append(attempts, env.Elapsed())
			return "", errors.New("payment gateway timeout")
		}).Times(2)
	mockPayment(env, smallOrder).Once()

	id := startOrder(t, env, smallOrder)
	env.RunFor(day)
	env.AssertCustomStatus(id, customShipped)
	if !equal(m.journal, []string{"reserve ORD-1", "ship ORD-1"}) {
		t.Fatalf("journal after a day %v", m.journal)
	}
	inst := env.Wait(id)
	// The attributes of its start, and the tracking number the workflow
	// set once the order shipped.
	if want := map[string]any{"customer": "C-0815", "amount": 89.9, "tracking": "TRK-ORD-1"}; !maps.Equal(inst.SearchAttributes, want) {
		t.Fatalf("search attributes %v, want %v", inst.SearchAttributes, want)
	}
	t.Logf("14-day return window and retries: %s of virtual time in %s", env.Elapsed(), time.Since(wall))

	r := result(t, env, id)
	if r != (Result{Status: statusSettled, Payment: "PAY-ORD-1", Tracking: "TRK-ORD-1"}) {
		t.Fatalf("result %+v", r)
	}
	// Attempts at 0, 30s and 1m30s: the policy's nominal delays.
	want := []time.Duration{0, 30 * time.Second}
	if !equalDurations(attempts, want) {
		t.Fatalf("failed attempts at %v, want %v", attempts, want)
	}
	paid := 90 * time.Second
	if !inst.CompletedAt.Equal(env.StartTime().Add(paid + 14*day)) {
		t.Fatalf("settled at %s, want 14 days after the payment at %s", inst.CompletedAt, env.StartTime().Add(paid))
	}
	if !equal(m.journal, []string{"reserve ORD-1", "ship ORD-1", "settle ORD-1"}) || m.refund.Calls()+m.release.Calls() != 0 {
		t.Fatalf("journal %v", m.journal)
	}
	env.AssertHistoryContains(id,
		history.KindActivityScheduled, history.KindActivityCompleted, // the payment, attempt 3
		history.KindTimerCreated, history.KindTimerFired, // the return window
		history.KindExecutionCompleted)
	env.AssertGolden(id, "testdata/settled.golden")
}

// TestCustomerCancelsAwaitingApproval covers the cancellation signal and
// the compensation: the refund runs before the stock is released, the
// open task and the auto-cancel timer are cancelled.
func TestCustomerCancelsAwaitingApproval(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	env, m := newOrderEnv(t)
	mockPayment(env, largeOrder).Once()

	id := startOrder(t, env, largeOrder)
	env.At(time.Hour, func() {
		env.AssertCustomStatus(id, "awaiting approval")
		task := env.Task(id, string(approvalTask))
		if want := env.StartTime().Add(approvalDue); !task.Due.Equal(want) {
			t.Errorf("task due %s, want %s", task.Due, want)
		}
		// What the manager sees, decoded as the task's payload type.
		req, err := approvalTask.Payload(env.Context(), env.Engine(), task.TaskID)
		if want := (ApprovalRequest{Order: "ORD-2", Customer: "Grace", Total: 245000}); err != nil || req != want {
			t.Errorf("task payload %+v, %v; want %+v", req, err, want)
		}
	})
	cancelAt(t, env, 2*time.Hour, id, Cancellation{Reason: "found it cheaper"}, &chronicle.RaiseOptions{Actor: "grace"})
	inst := env.Wait(id)
	t.Logf("cancellation and compensation: %s of virtual time in %s", env.Elapsed(), time.Since(wall))

	r := result(t, env, id)
	if r.Status != statusCancelled || r.Reason != "cancelled by the customer: found it cheaper" {
		t.Fatalf("result %+v", r)
	}
	if !inst.CompletedAt.Equal(env.StartTime().Add(2 * time.Hour)) {
		t.Fatalf("cancelled at %s, want 2h in", inst.CompletedAt)
	}
	// The saga undoes last first: the payment, then the reservation.
	if !equal(m.journal, []string{"reserve ORD-2", "refund PAY-ORD-2", "release STK-ORD-2"}) || m.ship.Calls() != 0 {
		t.Fatalf("journal %v", m.journal)
	}
	env.AssertCustomStatus(id, statusCancelled)
	// The custom status follows the saga: refunded, then cancelled.
	if got, want := customStatuses(t, env, id), []string{customReserving, customCharging, customPaid, customApproval, customRefunded, statusCancelled}; !equal(got, want) {
		t.Fatalf("custom statuses %q, want %q", got, want)
	}
	env.AssertHistoryContains(id,
		history.KindTaskCreated, history.KindTimerCreated, history.KindEventRaised,
		history.KindTaskCancelled, history.KindTimerCancelled,
		history.KindCompensationStarted,
		history.KindActivityScheduled, history.KindActivityCompleted, // refund
		history.KindActivityScheduled, history.KindActivityCompleted, // release
		history.KindCompensationCompleted, history.KindExecutionCompleted)
	tasks, err := env.Engine().ListTasks(env.Context(), chronicle.TaskFilter{InstanceID: id})
	if err != nil || len(tasks) != 1 || tasks[0].Status != chronicle.TaskCancelled {
		t.Fatalf("tasks %+v, %v", tasks, err)
	}
}

// TestApprovalAutoCancelled covers the auto-cancel timer: nobody decides,
// and after three days the task is cancelled and the order undone.
func TestApprovalAutoCancelled(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	env, m := newOrderEnv(t)
	mockPayment(env, largeOrder).Once()

	id := startOrder(t, env, largeOrder)
	// The task is past due after a day, and still open.
	env.RunFor(2 * day)
	if task := env.Task(id, string(approvalTask)); !task.Due.Before(env.Now()) {
		t.Fatalf("task due %s, not past at %s", task.Due, env.Now())
	}
	inst := env.Wait(id)
	t.Logf("3-day auto-cancel: %s of virtual time in %s", env.Elapsed(), time.Since(wall))

	r := result(t, env, id)
	if r.Status != statusExpired || r.Reason != "not approved within 72h0m0s" {
		t.Fatalf("result %+v", r)
	}
	if !inst.CompletedAt.Equal(env.StartTime().Add(approvalTimeout)) {
		t.Fatalf("expired at %s, want 72h in", inst.CompletedAt)
	}
	if !equal(m.journal, []string{"reserve ORD-2", "refund PAY-ORD-2", "release STK-ORD-2"}) {
		t.Fatalf("journal %v", m.journal)
	}
	env.AssertHistoryContains(id, history.KindTimerFired, history.KindTaskCancelled, history.KindCompensationStarted, history.KindCompensationCompleted)
}

// TestManagerApproves: the approval arrives 3 hours in, before the task is
// due; the auto-cancel timer is cancelled and the order ships.
func TestManagerApproves(t *testing.T) {
	t.Parallel()
	env, m := newOrderEnv(t)
	mockPayment(env, largeOrder).Once()

	id := startOrder(t, env, largeOrder)
	env.ClaimTaskAt(2*time.Hour, id, string(approvalTask), manager)
	decideAt(t, env, 3*time.Hour, id, Approval{Approved: true, Note: "regular customer"})
	env.RunFor(4 * time.Hour)
	env.AssertCustomStatus(id, customShipped)
	inst := env.Wait(id)

	if r := result(t, env, id); r.Status != statusSettled {
		t.Fatalf("result %+v", r)
	}
	if !inst.CompletedAt.Equal(env.StartTime().Add(3*time.Hour + returnWindow)) {
		t.Fatalf("settled at %s", inst.CompletedAt)
	}
	if !equal(m.journal, []string{"reserve ORD-2", "ship ORD-2", "settle ORD-2"}) {
		t.Fatalf("journal %v", m.journal)
	}
	env.AssertHistoryContains(id, history.KindTaskAssigned, history.KindTaskCompleted, history.KindTimerCancelled, history.KindTimerCreated, history.KindTimerFired)
}

// TestManagerRejects: a rejection undoes the order like a cancellation.
func TestManagerRejects(t *testing.T) {
	t.Parallel()
	env, m := newOrderEnv(t)
	mockPayment(env, largeOrder).Once()
	id := startOrder(t, env, largeOrder)
	decideAt(t, env, time.Hour, id, Approval{Approved: false, Note: "address unverified"})
	env.Wait(id)
	r := result(t, env, id)
	if r.Status != statusRejected || r.Reason != "rejected by the sales manager: address unverified" {
		t.Fatalf("result %+v", r)
	}
	if !equal(m.journal, []string{"reserve ORD-2", "refund PAY-ORD-2", "release STK-ORD-2"}) {
		t.Fatalf("journal %v", m.journal)
	}
}

// TestPaymentFailsForGood covers a retry sequence that runs out: five
// attempts at 0, 30s, 1m30s, 3m30s and 7m30s, then the saga releases the
// stock (there is no payment to refund).
func TestPaymentFailsForGood(t *testing.T) {
	t.Parallel()
	env, m := newOrderEnv(t)
	var attempts []time.Duration
	chronicletest.MockActivity[PaymentRequest, string](env, chargePaymentActivity).
		Do(func(ctx context.Context, r PaymentRequest) (string, error) {
			attempts = append(attempts, env.Elapsed())
			return "", errors.New("card declined")
		}).Times(5)
	id := startOrder(t, env, smallOrder)
	env.Wait(id)

	r := result(t, env, id)
	if r.Status != statusPaymentFailed || r.Reason != "card declined" {
		t.Fatalf("result %+v", r)
	}
	want := []time.Duration{0, 30 * time.Second, 90 * time.Second, 210 * time.Second, 450 * time.Second}
	if !equalDurations(attempts, want) {
		t.Fatalf("attempts at %v, want %v", attempts, want)
	}
	if !equal(m.journal, []string{"reserve ORD-1", "release STK-ORD-1"}) || m.refund.Calls() != 0 {
		t.Fatalf("journal %v", m.journal)
	}
	env.AssertHistoryContains(id, history.KindActivityFailed, history.KindCompensationStarted, history.KindCompensationCompleted, history.KindExecutionCompleted)
}

// TestCancelledBeforeShipping: a small order needs no approval; a
// cancellation that arrives while the payment is retried is honoured
// before the order ships.
func TestCancelledBeforeShipping(t *testing.T) {
	t.Parallel()
	env, m := newOrderEnv(t)
	chronicletest.MockActivity[PaymentRequest, string](env, chargePaymentActivity).ReturnError(errors.New("payment gateway timeout")).Once()
	mockPayment(env, smallOrder).Once()
	id := startOrder(t, env, smallOrder)
	cancelAt(t, env, 10*time.Second, id, Cancellation{Reason: "changed my mind"}, nil)
	env.Wait(id)
	if r := result(t, env, id); r.Status != statusCancelled {
		t.Fatalf("result %+v", r)
	}
	if !equal(m.journal, []string{"reserve ORD-1", "refund PAY-ORD-1", "release STK-ORD-1"}) {
		t.Fatalf("journal %v", m.journal)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
