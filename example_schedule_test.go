package chronicle_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// A schedule starts the workflow "report" at 02:00 Paris time every
// night; each firing's instance is named by the schedule and the nominal
// time, and pausing records who paused it and why.
func ExampleEngine_CreateSchedule() {
	clock := round.NewManualClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	report := func(ctx *chronicle.Context, region string) (string, error) { return "report for " + region, nil }
	if err := chronicle.RegisterWorkflow(engine, "report", report); err != nil {
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

	err = engine.CreateSchedule(ctx, "nightly", chronicle.ScheduleOptions{
		Spec:     chronicle.ScheduleSpec{Cron: "0 2 * * *", TimeZone: "Europe/Paris"},
		Workflow: "report", Input: "north", Actor: "ana",
	})
	if err != nil {
		panic(err)
	}
	drain()
	for range 48 { // two days, an hour at a time
		clock.Advance(time.Hour)
		drain()
	}
	if err := engine.PauseSchedule(ctx, "nightly", "quarter-end freeze", "ana"); err != nil {
		panic(err)
	}
	drain()

	d, err := engine.DescribeSchedule(ctx, "nightly")
	if err != nil {
		panic(err)
	}
	for _, f := range d.Recent {
		fmt.Println(f.InstanceID, f.Outcome)
	}
	last := d.Changes[len(d.Changes)-1]
	fmt.Println(last.Kind, "by", last.Actor+":", d.Note)
	// Output:
	// nightly@2026-01-06T01:00:00Z started
	// nightly@2026-01-07T01:00:00Z started
	// pause by user:ana: quarter-end freeze
}
