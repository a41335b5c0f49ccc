package main

import (
	"context"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
)

// TestCustomerLimitHoldsTheThirdOrder covers the per-customer limit: Ada
// places three orders at once (the first express) and Grace one. Ada's
// first two are
// processed (the first, a large one, awaits approval; the second ships
// and sits in its return window) while her third waits for a slot of her
// key, and Grace's order runs beside them. When Ada cancels her first
// order, the third starts, while the second still holds its slot.
func TestCustomerLimitHoldsTheThirdOrder(t *testing.T) {
	t.Parallel()
	env, m := newOrderEnv(t)
	first := Order{ID: "ORD-A1", Customer: "Ada", Address: "12 Analytical Row", Items: []Item{{SKU: "LATHE-200", Quantity: 1}}, Total: 129900, Express: true}
	second := Order{ID: "ORD-A2", Customer: "Ada", Address: "12 Analytical Row", Items: []Item{{SKU: "NOTEBOOK-A5", Quantity: 1}}, Total: 2990}
	third := Order{ID: "ORD-A3", Customer: "Ada", Address: "12 Analytical Row", Items: []Item{{SKU: "PENCIL-HB", Quantity: 12}}, Total: 1490}
	grace := Order{ID: "ORD-G1", Customer: "Grace", Address: "7 Compiler Close", Items: []Item{{SKU: "TERMINAL-3270", Quantity: 1}}, Total: 9900}
	// newOrderEnv expects one reservation; these orders make four.
	chronicletest.MockActivity[StockRequest, string](env, reserveStockActivity).
		Do(func(_ context.Context, r StockRequest) (string, error) { return "STK-" + r.Order, nil }).Times(3)
	for _, o := range []Order{first, second, third, grace} {
		mockPayment(env, o).Once()
	}
	for _, o := range []Order{first, second, third, grace} {
		startOrder(t, env, o)
	}
	cancelAt(t, env, 2*time.Hour, first.ID, Cancellation{Reason: "ordered the wrong lathe"}, nil)

	env.RunFor(time.Hour)
	env.AssertCustomStatus(first.ID, customApproval)
	env.AssertCustomStatus(second.ID, customShipped)
	env.AssertCustomStatus(grace.ID, customShipped)
	waiting := env.Describe(third.ID)
	if waiting.Status != chronicle.StatusPending || waiting.Waiting == nil {
		t.Fatalf("after an hour %s is %s, waiting %+v; want pending, waiting for a slot", third.ID, waiting.Status, waiting.Waiting)
	}
	w := waiting.Waiting
	if w.Key != "customer:C-0815" || w.Limit != customerLimit || w.Position != 1 || !equal(sorted(w.Holders), []string{first.ID, second.ID}) {
		t.Fatalf("%s waits %+v; want first behind %s and %s on customer:C-0815", third.ID, w, first.ID, second.ID)
	}
	if g := env.Describe(grace.ID); g.Status != chronicle.StatusRunning || g.Waiting != nil {
		t.Fatalf("Grace's order is %s, waiting %+v; want running", g.Status, g.Waiting)
	}

	// Ada cancels her first order at two hours: its slot goes to the
	// third, which runs while the second is in its return window.
	env.RunFor(2 * time.Hour)
	cancelled := env.Describe(first.ID)
	if r := result(t, env, first.ID); r.Status != statusCancelled {
		t.Fatalf("%s: %+v", first.ID, r)
	}
	running := env.Describe(third.ID)
	if running.Status != chronicle.StatusRunning || running.Waiting != nil {
		t.Fatalf("after the cancellation %s is %s, waiting %+v; want running", third.ID, running.Status, running.Waiting)
	}
	env.AssertCustomStatus(third.ID, customShipped)
	env.AssertStatus(second.ID, chronicle.StatusRunning)
	events := env.History(third.ID)
	if started := events[0].At; started.Before(cancelled.CompletedAt) {
		t.Fatalf("%s started at %s, before %s ended at %s", third.ID, started, first.ID, cancelled.CompletedAt)
	}
	// The first order is express: its start records its priority; the
	// third's none. Both record the key and limit whose slot they hold.
	for _, o := range []Order{first, third} {
		a, err := env.History(o.ID)[0].Attributes()
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if o.Express {
			want = expressPriority
		}
		if s := a.(*history.ExecutionStarted); s.Priority != want || s.Concurrency == nil ||
			*s.Concurrency != (history.Concurrency{Key: "customer:C-0815", Limit: customerLimit}) {
			t.Fatalf("start of %s: priority %d, concurrency %+v", o.ID, s.Priority, s.Concurrency)
		}
	}

	for _, o := range []Order{second, third, grace} {
		env.Wait(o.ID)
		if r := result(t, env, o.ID); r.Status != statusSettled {
			t.Fatalf("%s: %+v", o.ID, r)
		}
	}
	if m.refund.Calls() != 1 || m.release.Calls() != 1 {
		t.Fatalf("refunds %d, releases %d; want the first order's one each", m.refund.Calls(), m.release.Calls())
	}
	set, err := env.Engine().Concurrency(env.Context(), "customer:C-0815")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Holders) != 0 || len(set.Waiters) != 0 {
		t.Fatalf("Ada's key after every order ended: %+v", set)
	}
}

// sorted returns a sorted copy of ids.
func sorted(ids []string) []string {
	out := append([]string(nil), ids...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
