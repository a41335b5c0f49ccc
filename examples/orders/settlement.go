package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
)

// This file is the nightly settlement report: a schedule starts the
// "settlement-report" workflow at 02:00 London time every night, and the
// workflow counts the orders created the day before (a London calendar
// day, 23 or 25 hours long when the clocks change) by their custom status
// and completes with the counts as its result.
//
// Workflow code must not call the engine, so the count runs as an
// activity, which calls CountInstances. The workflow reads the night it
// reports on from its instance id, "<schedule>@<nominal time>": a firing
// the schedule catches up after a downtime reports on the night it was
// due, not on the night it ran.

const (
	// settlementSchedule is the id of the schedule.
	settlementSchedule = "settlement"
	// settlementZone is the shop's time zone: nights and days are London's.
	settlementZone = "Europe/London"
	// settlementCron fires at 02:00 local time, GMT or BST.
	settlementCron = "0 2 * * *"
	// settlementCatchup is how late a report may still start after every
	// worker was down; older nights are recorded as missed.
	settlementCatchup = 4 * time.Hour

	settlementWorkflow  = chronicle.Workflow[SettlementInput, SettlementReport]("settlement-report")
	countOrdersActivity = "count-orders"
)

// SettlementInput is the input of the settlement report, the same for
// every night.
type SettlementInput struct {
	// TimeZone is the IANA zone whose calendar days the report counts.
	TimeZone string
}

// CountRequest is the input of the count-orders activity: the orders
// created in [From, To).
type CountRequest struct {
	From, To time.Time
}

// SettlementReport is the result of a night's report.
type SettlementReport struct {
	// Day is the local calendar day reported on (2006-01-02), From and To
	// its bounds (UTC), Nominal the night the schedule named.
	Day      string
	From, To time.Time
	Nominal  time.Time
	// ByStatus counts the day's orders by custom status.
	ByStatus map[string]int64
	// Settled counts the orders settled with the seller; Undone those the
	// saga undid (cancelled, rejected or expired: their payment, when
	// taken, was refunded).
	Settled, Undone int64
}

// settlementOptions are the options main creates the schedule with:
// 02:00 London time, a night skipped while the previous report still
// runs, a catch-up window of four hours.
func settlementOptions() chronicle.ScheduleOptions {
	return chronicle.ScheduleOptions{
		Spec:          chronicle.ScheduleSpec{Cron: settlementCron, TimeZone: settlementZone},
		Workflow:      string(settlementWorkflow),
		Input:         SettlementInput{TimeZone: settlementZone},
		Overlap:       chronicle.OverlapSkip,
		CatchupWindow: settlementCatchup,
		Actor:         "finance",
		Note:          "nightly settlement report",
	}
}

// registerSettlement registers the report workflow and its activity,
// which counts with e.
func registerSettlement(e *chronicle.Engine) error {
	if err := chronicle.RegisterActivity(e, countOrdersActivity, countOrders(e)); err != nil {
		return err
	}
	return settlementWorkflow.Register(e, settlementReport)
}

// settlementReport is the report workflow.
func settlementReport(ctx *chronicle.Context, in SettlementInput) (SettlementReport, error) {
	nominal, err := nominalTime(ctx)
	if err != nil {
		return SettlementReport{}, err
	}
	// The zone database is the system's, else the one chronicle compiles
	// in (time/tzdata): nodes that share one compute the same day on every
	// replay, as they compute the same nominal times.
	loc, err := time.LoadLocation(in.TimeZone)
	if err != nil {
		return SettlementReport{}, chronicle.NonRetryable(fmt.Errorf("settlement report: %w", err))
	}
	local := nominal.In(loc)
	to := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	from := to.AddDate(0, 0, -1)
	r := SettlementReport{Day: from.Format(time.DateOnly), From: from.UTC(), To: to.UTC(), Nominal: nominal}
	if err := ctx.CallActivity(countOrdersActivity, CountRequest{From: r.From, To: r.To}, nil).Get(&r.ByStatus); err != nil {
		return r, err
	}
	r.Settled = r.ByStatus[statusSettled]
	r.Undone = r.ByStatus[statusCancelled] + r.ByStatus[statusRejected] + r.ByStatus[statusExpired]
	return r, nil
}

// nominalTime returns the night a report is for: the nominal time in its
// instance id when a schedule started it, else the time it started.
func nominalTime(ctx *chronicle.Context) (time.Time, error) {
	_, at, ok := strings.Cut(ctx.InstanceID(), "@")
	if !ok {
		return ctx.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return time.Time{}, chronicle.NonRetryable(fmt.Errorf("settlement report: instance %s: nominal time: %w", ctx.InstanceID(), err))
	}
	return t, nil
}

// countOrders returns the count-orders activity: the orders created in
// the request's range, counted by custom status with the query API.
func countOrders(e *chronicle.Engine) func(context.Context, CountRequest) (map[string]int64, error) {
	return func(ctx context.Context, r CountRequest) (map[string]int64, error) {
		where := fmt.Sprintf("workflow = '%s' AND created_at >= '%s' AND created_at < '%s'",
			orderWorkflow, r.From.UTC().Format(time.RFC3339Nano), r.To.UTC().Format(time.RFC3339Nano))
		counts, err := e.CountInstances(ctx, chronicle.CountFilter{Where: where, By: "custom_status"})
		if err != nil {
			return nil, fmt.Errorf("count orders: %w", err)
		}
		out := make(map[string]int64, len(counts))
		for _, c := range counts {
			status, _ := c.Value.(string)
			out[status] += c.Count
		}
		return out, nil
	}
}
