// Command rounds shows what Chronicle's rounds do on the embedded memory
// provider: a scripted claim workflow is started, resumed round by round as
// its activities, timer and signal complete, and its hash-chained history
// is printed and verified at the end.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	store := memory.New(memory.Options{})
	clock := round.NewManualClock(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))
	runner, err := round.NewRunner(store, round.RunnerOptions{Node: "demo", Turn: scripted.Turn, Clock: clock})
	if err != nil {
		return err
	}
	worker, err := round.NewActivityWorker(store, round.ActivityWorkerOptions{Node: "demo", Resolve: scripted.Resolve, Clock: clock})
	if err != nil {
		return err
	}

	const id = "claim-2026-0042"
	start, err := scripted.StartMessage(id, scripted.Script{Steps: []scripted.Step{
		{Kind: scripted.Activity, Name: "credit-check"},
		{Kind: scripted.Timer, Delay: 48 * time.Hour},
		{Kind: scripted.Signal, Name: "documents-uploaded"},
		{Kind: scripted.Activity, Name: "payout"},
	}})
	if err != nil {
		return err
	}
	fmt.Printf("Starting %s: credit check, 48h cooling-off timer, wait for documents, payout.\n\n", id)
	if err := store.EnqueueMessages(ctx, &round.EnqueueMessagesParams{Messages: []round.Message{start}, Now: clock.Now()}); err != nil {
		return err
	}
	if err := drive(ctx, runner, worker, clock); err != nil {
		return err
	}

	fmt.Printf("\n%s  48 hours pass\n", clock.Advance(48*time.Hour).Format(time.DateTime))
	if err := drive(ctx, runner, worker, clock); err != nil {
		return err
	}

	signal, err := scripted.SignalMessage(id, "documents-uploaded", "upload-7781")
	if err != nil {
		return err
	}
	fmt.Printf("\n%s  the customer uploads documents (signal raised twice, same idempotency key)\n", clock.Now().Format(time.DateTime))
	dup := signal
	dup.ID = history.NewID()
	if err := store.EnqueueMessages(ctx, &round.EnqueueMessagesParams{Messages: []round.Message{signal, dup}, Now: clock.Now()}); err != nil {
		return err
	}
	if err := drive(ctx, runner, worker, clock); err != nil {
		return err
	}

	rec, err := store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	fmt.Printf("\nInstance %s is %s: %s\n\nHistory:\n", id, rec.Status, rec.Output)
	events, err := store.LoadHistory(ctx, &round.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	if err != nil {
		return err
	}
	fmt.Printf("  %3s  %-19s  %-18s  %s\n", "seq", "time (UTC)", "kind", "detail")
	for _, e := range events {
		fmt.Printf("  %3d  %-19s  %-18s  %s\n", e.Seq, e.At.Format(time.DateTime), e.Kind, detail(&e))
	}
	if err := history.Verify(events); err != nil {
		return err
	}
	fmt.Printf("\nHash chain verified: %d events, last hash %x…\n", len(events), events[len(events)-1].Hash[:8])
	return nil
}

// drive runs rounds and activities until nothing is visible, printing each.
func drive(ctx context.Context, r *round.Runner, w *round.ActivityWorker, clock *round.ManualClock) error {
	for {
		rep, err := r.RunOnce(ctx)
		if err != nil {
			return err
		}
		if rep != nil {
			fmt.Printf("%s  round of %s: %d message(s) processed, %d duplicate(s) dropped, %d event(s) appended\n",
				clock.Now().Format(time.DateTime), rep.InstanceID, rep.Processed, rep.Duplicates, rep.Appended)
		}
		arep, err := w.RunOnce(ctx)
		if err != nil {
			return err
		}
		if arep != nil {
			fmt.Printf("%s  activity %s attempt %d: %s\n", clock.Now().Format(time.DateTime), arep.Name, arep.Attempt, arep.Outcome)
		}
		if rep == nil && arep == nil {
			return nil
		}
	}
}

func detail(e *history.Event) string {
	a, err := e.Attributes()
	if err != nil {
		return err.Error()
	}
	switch a := a.(type) {
	case *history.ExecutionStarted:
		return "workflow " + a.Name
	case *history.ActivityScheduled:
		return "activity " + a.Name
	case *history.ActivityCompleted:
		return fmt.Sprintf("result of #%s: %s", e.CorrelationID, a.Result)
	case *history.TimerCreated:
		return "fires at " + a.FireAt.Format(time.DateTime)
	case *history.TimerFired:
		return "timer #" + e.CorrelationID
	case *history.EventRaised:
		return fmt.Sprintf("%s (key %s)", a.Name, a.IdempotencyKey)
	case *history.ExecutionCompleted:
		return string(a.Output)
	}
	return ""
}
