package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// deadStart adds to the demo data an instance, BOOM-1, whose first turn
// panics: its start is dead-lettered and it has no history.
func deadStart(t *testing.T) hooks {
	return hooks{afterSeed: func(s *memory.Store) {
		ctx := context.Background()
		clock := round.NewManualClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		e, err := chronicle.New(s, chronicle.Options{NodeID: "boom", MaxDeliveries: 2, Clock: clock,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		defer e.Close()
		require.NoError(t, chronicle.RegisterWorkflow(e, "boom", func(*chronicle.Context, string) (string, error) {
			var stages []string
			return stages[len(stages)], nil
		}))
		_, err = e.Start(ctx, "boom", "", &chronicle.StartOptions{InstanceID: "BOOM-1"})
		require.NoError(t, err)
		for range 10 {
			worked, err := e.RunOnce(ctx)
			require.NoError(t, err)
			if !worked {
				clock.Advance(time.Minute)
			}
		}
		in, err := e.Describe(ctx, "BOOM-1")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusPending, in.Status)
		require.Contains(t, in.Incident, "panic")
	}}
}

// TestAllSkipsDeadLetteredStart runs the --all commands on a store holding
// an instance whose start was dead-lettered: they report it as having no
// history yet and go on with the others, like Engine.VerifyAll.
func TestAllSkipsDeadLetteredStart(t *testing.T) {
	t.Parallel()
	const skipped = "BOOM-1     skipped: no history yet, its start was dead-lettered (redrive its dead letter to run it)"

	r := runTool(t, "", deadStart(t), "history", "verify", "--all")
	require.Equal(t, exitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "\n"+skipped+"\n")
	require.Contains(t, r.stdout, "CLM-1001   ok: 17 events")
	require.Contains(t, r.stdout, "8 histories verified: 8 ok, 0 broken; 1 instances without history skipped\n")

	r = runTool(t, "", deadStart(t), "--json", "history", "verify", "--all")
	require.Equal(t, exitOK, r.code, r.stderr)
	var verified []verifyJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &verified))
	require.Len(t, verified, 9)
	require.Equal(t, verifyJSON{InstanceID: "BOOM-1", OK: true, Skipped: "no history yet, its start was dead-lettered (redrive its dead letter to run it)"}, verified[0])

	r = runTool(t, "", deadStart(t), "projections", "check", "--all")
	require.Equal(t, exitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "skipped BOOM-1: no history yet, its start was dead-lettered (redrive its dead letter to run it)\n")
	require.Contains(t, r.stdout, "ok: the projections of CLM-1001 match its history\n")

	r = runTool(t, "", deadStart(t), "projections", "rebuild", "--all")
	require.Equal(t, exitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "skipped BOOM-1: no history yet, its start was dead-lettered (redrive its dead letter to run it)\n")
	require.Contains(t, r.stdout, "rebuilt the projections of CLM-1001 from 17 events\n")

	r = runTool(t, "", deadStart(t), "--json", "projections", "rebuild", "--all")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rebuilt []projectionsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rebuilt))
	require.Len(t, rebuilt, 9)
	require.Equal(t, projectionsJSON{InstanceID: "BOOM-1", OK: true, Skipped: "no history yet, its start was dead-lettered (redrive its dead letter to run it)"}, rebuilt[0])
}
