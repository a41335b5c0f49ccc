package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// Claims are kept for 90 days after they end, then purged by the
// retention policy, except a claim under a legal hold, which stays until
// counsel releases it; the hold and its release are events of the
// claim's history.
func ExampleEngine_Hold() {
	clock := round.NewManualClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{
		Logger: slog.New(slog.DiscardHandler), Clock: clock,
		Retention: map[string]chronicle.RetentionPolicy{"claim": {After: 90 * 24 * time.Hour}},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	claim := func(ctx *chronicle.Context, number string) (string, error) { return "paid " + number, nil }
	if err := chronicle.RegisterWorkflow(engine, "claim", claim); err != nil {
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
	for _, id := range []string{"CLM-1", "CLM-2"} {
		if _, err := engine.Start(ctx, "claim", id, &chronicle.StartOptions{InstanceID: id}); err != nil {
			panic(err)
		}
	}
	drain()

	if _, err := engine.Hold(ctx, "CLM-2", chronicle.HoldOptions{Reason: "coverage dispute", Actor: "counsel", Ticket: "LIT-7"}); err != nil {
		panic(err)
	}
	drain()
	_, err = engine.Purge(ctx, chronicle.PurgeOptions{InstanceIDs: []string{"CLM-2"}, By: "records-officer"})
	fmt.Println("purge CLM-2:", errors.Is(err, chronicle.ErrHeld))

	clock.Advance(91 * 24 * time.Hour)
	rep, err := engine.RunRetention(ctx) // what the built-in retention workflow runs
	if err != nil {
		panic(err)
	}
	for _, ts := range rep.Purged["claim"] {
		fmt.Println("purged", ts.InstanceID, "by", ts.PurgedBy)
	}
	fmt.Println("held", rep.Held)

	if err := engine.ReleaseHold(ctx, "CLM-2", chronicle.HoldOptions{Reason: "dispute settled", Actor: "counsel"}); err != nil {
		panic(err)
	}
	drain()
	events, err := engine.History(ctx, "CLM-2")
	if err != nil {
		panic(err)
	}
	for _, e := range events[len(events)-2:] {
		fmt.Println(e.Kind, e.Actor)
	}
	rep, err = engine.RunRetention(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("purged", rep.Purged["claim"][0].InstanceID)
	// Output:
	// purge CLM-2: true
	// purged CLM-1 by system:retention
	// held [CLM-2]
	// HoldPlaced user:counsel
	// HoldReleased user:counsel
	// purged CLM-2
}
