package main

import (
	"bytes"
	"context"
	"maps"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

// TestDemo runs the demo on the wall clock (about two seconds: the
// shortened return window) and checks what it claims to show.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := demo(ctx, &out)
	if err != nil {
		t.Fatalf("%v; output so far:\n%s", err, out.String())
	}
	want := map[string]string{"ORD-1001": statusSettled, "ORD-1002": statusSettled, "ORD-1003": statusCancelled, "ORD-1004": statusExpired}
	for id, status := range want {
		if got := res.Results[id].Status; got != status {
			t.Errorf("%s is %q, want %q", id, got, status)
		}
	}
	// Only the settled orders keep their stock and payment.
	if !equal(res.Books.Reserved, []string{"STK-ORD-1001", "STK-ORD-1002"}) ||
		!equal(res.Books.Charged, []string{"PAY-ORD-1001", "PAY-ORD-1002"}) ||
		!equal(res.Books.Settled, []string{"ORD-1001", "ORD-1002"}) {
		t.Errorf("books %+v", res.Books)
	}
	// The search: the large orders that went through, and the count by
	// custom status.
	if !equal(res.Found, []string{"ORD-1002"}) {
		t.Errorf("%q found %v, want ORD-1002", bigOrdersQuery, res.Found)
	}
	if want := map[string]int64{"settled": 2, "cancelled": 1, "expired": 1}; !maps.Equal(res.ByStatus, want) {
		t.Errorf("orders by custom status %v, want %v", res.ByStatus, want)
	}
	// The nightly schedule: five next firings, each at 02:00 London time,
	// GMT or BST.
	if d := res.Nightly; d == nil || d.ID != settlementSchedule || d.Workflow != string(settlementWorkflow) ||
		d.Overlap != chronicle.OverlapSkip || d.CatchupWindow != settlementCatchup || len(d.Next) != 5 {
		t.Errorf("nightly schedule %+v", d)
	} else {
		london, err := time.LoadLocation(settlementZone)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range d.Next {
			if h, m, s := n.In(london).Clock(); h != 2 || m != 0 || s != 0 {
				t.Errorf("next firing %s is %s in London, not 02:00", n, n.In(london))
			}
			if line := chronicle.ScheduleInstanceID(settlementSchedule, n); !bytes.Contains(out.Bytes(), []byte(line)) {
				t.Errorf("output lacks the next firing %q", line)
			}
		}
	}
	for id, events := range res.Histories {
		if err := history.Verify(events); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for _, s := range []string{
		"attempt 1 to charge €89.90 for ORD-1001: timeout",
		"attempt 2: charged Ada €89.90",
		"Grace cancels ORD-1003",
		"ORD-1004  expired",
		"CompensationStarted",
		"ORD-1002  settled   €1,299.00  uk  TRK-ORD-1002",
		"settled    2",
		`Created schedule "settlement": workflow "settlement-report" at "0 2 * * *" in Europe/London, overlap skip, catch-up window 4h0m0s.`,
	} {
		if !bytes.Contains(out.Bytes(), []byte(s)) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}
