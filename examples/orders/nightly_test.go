package main

import (
	"maps"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// newNightlyEnv returns an environment on store whose clock starts at
// start: one node of the shop, with the order workflow (its activities
// mocked, any number of orders) and the settlement report registered.
// Environments on one store, one after the other, play a worker that
// stops and another that starts later: between them nothing runs.
func newNightlyEnv(t *testing.T, store provider.Store, start time.Time, prefix string) *chronicletest.Env {
	t.Helper()
	env := chronicletest.New(t, chronicletest.Store(store), chronicletest.StartAt(start), chronicletest.IDPrefix(prefix),
		chronicletest.EngineOptions(chronicle.Options{SearchAttributes: searchAttributes}))
	if err := orderWorkflow.Register(env.Engine(), (&workflows{}).order); err != nil {
		t.Fatal(err)
	}
	if err := registerSettlement(env.Engine()); err != nil {
		t.Fatal(err)
	}
	chronicletest.MockActivity[StockRequest, string](env, reserveStockActivity).Return("STK").Maybe()
	chronicletest.MockActivity[string, string](env, releaseStockActivity).Return("released").Maybe()
	chronicletest.MockActivity[PaymentRequest, string](env, chargePaymentActivity).Return("PAY").Maybe()
	chronicletest.MockActivity[string, string](env, refundPaymentActivity).Return("refunded").Maybe()
	chronicletest.MockActivity[Notice, string](env, notifyActivity).Return("sent").Maybe()
	chronicletest.MockActivity[ShipRequest, string](env, shipOrderActivity).Return("TRK").Maybe()
	chronicletest.MockActivity[SettleRequest, string](env, settleOrderActivity).Return("settled").Maybe()
	return env
}

// orderAt starts an order at the virtual time at: a small order (no
// approval) with a one-hour return window settles an hour later; a large
// one waits for an approval until the customer cancels it half an hour
// in.
func orderAt(t *testing.T, env *chronicletest.Env, at time.Time, id string, settles bool) {
	t.Helper()
	o := smallOrder
	if !settles {
		o = largeOrder
	}
	o.ID, o.ReturnWindow = id, time.Hour
	env.At(at.Sub(env.StartTime()), func() { startOrder(t, env, o) })
	if !settles {
		cancelAt(t, env, at.Add(30*time.Minute).Sub(env.StartTime()), id, Cancellation{Reason: "changed my mind"}, nil)
	}
}

// utcTime parses an RFC 3339 time.
func utcTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNightlySettlementAcrossDSTAndDowntime runs the settlement schedule
// for four nights around the end of British Summer Time (01:00 UTC on
// Sunday 2026-10-25): the nominal times stay at 02:00 London time (01:00
// UTC in BST, 02:00 UTC in GMT), each report counts one London calendar
// day (the 25th has 25 hours), orders created just after local midnight
// count for the next day. No worker runs from 00:45 UTC on the 25th to
// 04:30: the report due at 02:00 starts at 04:30, inside the 4h catch-up
// window, under its nominal time's id. No worker runs from 01:00 UTC on
// the 27th to 07:00: the night due at 02:00 is five hours late, past the
// window, and is recorded as missed, never started.
func TestNightlySettlementAcrossDSTAndDowntime(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	store := memory.New(memory.Options{})

	// The first worker: Friday the 23rd, 09:00 UTC, until just after
	// midnight UTC on the 25th.
	env := newNightlyEnv(t, store, utcTime(t, "2026-10-23T09:00:00Z"), "a-")
	if err := env.Engine().CreateSchedule(env.Context(), settlementSchedule, settlementOptions()); err != nil {
		t.Fatal(err)
	}
	// Friday the 23rd (BST): two settled, one cancelled.
	orderAt(t, env, utcTime(t, "2026-10-23T10:00:00Z"), "ORD-23A", true)
	orderAt(t, env, utcTime(t, "2026-10-23T11:00:00Z"), "ORD-23B", false)
	orderAt(t, env, utcTime(t, "2026-10-23T12:00:00Z"), "ORD-23C", true)
	// 00:30 BST on Saturday the 24th: Saturday's.
	orderAt(t, env, utcTime(t, "2026-10-23T23:30:00Z"), "ORD-24A", true)
	orderAt(t, env, utcTime(t, "2026-10-24T10:00:00Z"), "ORD-24B", false)
	// 00:30 BST on Sunday the 25th: Sunday's.
	orderAt(t, env, utcTime(t, "2026-10-24T23:30:00Z"), "ORD-25A", true)
	env.RunUntil(utcTime(t, "2026-10-25T00:45:00Z"))

	night1 := chronicle.ScheduleInstanceID(settlementSchedule, utcTime(t, "2026-10-24T01:00:00Z"))
	if night1 != "settlement@2026-10-24T01:00:00Z" {
		t.Fatalf("instance id %s", night1)
	}
	checkReport(t, env, night1, SettlementReport{
		Day: "2026-10-23", From: utcTime(t, "2026-10-22T23:00:00Z"), To: utcTime(t, "2026-10-23T23:00:00Z"),
		Nominal: utcTime(t, "2026-10-24T01:00:00Z"), ByStatus: map[string]int64{"settled": 2, "cancelled": 1}, Settled: 2, Undone: 1,
	}, utcTime(t, "2026-10-24T01:00:00Z"))

	// Nothing runs until 04:30 UTC on the 25th: the second worker.
	env = newNightlyEnv(t, store, utcTime(t, "2026-10-25T04:30:00Z"), "b-")
	// Sunday the 25th, 23:30 GMT: still Sunday's.
	orderAt(t, env, utcTime(t, "2026-10-25T23:30:00Z"), "ORD-25B", false)
	env.RunUntil(utcTime(t, "2026-10-27T01:00:00Z"))

	night2 := "settlement@2026-10-25T02:00:00Z" // 02:00 GMT
	checkReport(t, env, night2, SettlementReport{
		Day: "2026-10-24", From: utcTime(t, "2026-10-23T23:00:00Z"), To: utcTime(t, "2026-10-24T23:00:00Z"),
		Nominal: utcTime(t, "2026-10-25T02:00:00Z"), ByStatus: map[string]int64{"settled": 1, "cancelled": 1}, Settled: 1, Undone: 1,
	}, utcTime(t, "2026-10-25T04:30:00Z")) // caught up when the worker came back
	night3 := "settlement@2026-10-26T02:00:00Z"
	checkReport(t, env, night3, SettlementReport{
		Day: "2026-10-25", From: utcTime(t, "2026-10-24T23:00:00Z"), To: utcTime(t, "2026-10-26T00:00:00Z"),
		Nominal: utcTime(t, "2026-10-26T02:00:00Z"), ByStatus: map[string]int64{"settled": 1, "cancelled": 1}, Settled: 1, Undone: 1,
	}, utcTime(t, "2026-10-26T02:00:00Z"))

	// Nothing runs until 07:00 UTC on the 27th: five hours after the
	// night due at 02:00, past the window.
	env = newNightlyEnv(t, store, utcTime(t, "2026-10-27T07:00:00Z"), "c-")
	env.RunUntil(utcTime(t, "2026-10-27T08:00:00Z"))
	night4 := "settlement@2026-10-27T02:00:00Z"
	if _, err := env.Engine().Describe(env.Context(), night4); err == nil {
		t.Fatalf("%s was started, five hours late, past the catch-up window", night4)
	}

	d, err := env.Engine().DescribeSchedule(env.Context(), settlementSchedule)
	if err != nil {
		t.Fatal(err)
	}
	type firing struct{ id, outcome string }
	var got []firing
	for _, f := range d.Recent {
		got = append(got, firing{f.InstanceID, f.Outcome})
	}
	want := []firing{{night1, "started"}, {night2, "started"}, {night3, "started"}, {night4, "missed"}}
	if len(got) != len(want) {
		t.Fatalf("firings %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("firings %v, want %v", got, want)
		}
	}
	if d.Started != 3 || d.Skipped != 1 {
		t.Fatalf("started %d, skipped %d; want 3 and 1", d.Started, d.Skipped)
	}
	// One report per night: the schedule started no other instance.
	reports, err := env.Engine().ListInstances(env.Context(), chronicle.InstanceFilter{Workflow: string(settlementWorkflow)})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports, want 3", len(reports))
	}
	// The next night is 02:00 GMT on the 28th.
	if len(d.Next) == 0 || !d.Next[0].Equal(utcTime(t, "2026-10-28T02:00:00Z")) {
		t.Fatalf("next firings %v", d.Next)
	}
	t.Logf("four nights of the schedule in %s", time.Since(wall))
}

// checkReport checks that the night's report completed with want, and
// started at started.
func checkReport(t *testing.T, env *chronicletest.Env, id string, want SettlementReport, started time.Time) {
	t.Helper()
	inst, err := env.Engine().Describe(env.Context(), id)
	if err != nil {
		t.Fatalf("report %s: %v", id, err)
	}
	if inst.Status != chronicle.StatusCompleted {
		t.Fatalf("report %s is %s", id, inst.Status)
	}
	if !inst.CreatedAt.Equal(started) {
		t.Errorf("report %s started at %s, want %s", id, inst.CreatedAt, started)
	}
	got, err := settlementWorkflow.Result(inst)
	if err != nil {
		t.Fatalf("report %s: %v", id, err)
	}
	if got.Day != want.Day || !got.From.Equal(want.From) || !got.To.Equal(want.To) || !got.Nominal.Equal(want.Nominal) ||
		!maps.Equal(got.ByStatus, want.ByStatus) || got.Settled != want.Settled || got.Undone != want.Undone {
		t.Errorf("report %s:\n got %+v\nwant %+v", id, got, want)
	}
}
