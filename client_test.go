package chronicle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

func echo(ctx *chronicle.Context, s string) (string, error) {
	v, err := chronicle.WaitEvent[string](ctx, "go", nil)
	return s + v, err
}

func TestStartReusePolicies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	_, err := b.engine.Start(b.ctx, "echo", "a", &chronicle.StartOptions{InstanceID: "i"})
	require.NoError(t, err)
	// Pending (not yet run) counts as existing.
	_, err = b.engine.Start(b.ctx, "echo", "a", &chronicle.StartOptions{InstanceID: "i"})
	require.ErrorIs(t, err, chronicle.ErrInstanceExists)
	b.drain(t)
	_, err = b.engine.Start(b.ctx, "echo", "a", &chronicle.StartOptions{InstanceID: "i"})
	require.ErrorIs(t, err, chronicle.ErrInstanceExists)
	id, err := b.engine.Start(b.ctx, "echo", "b", &chronicle.StartOptions{InstanceID: "i", Reuse: chronicle.ReuseReturnExisting})
	require.NoError(t, err)
	require.Equal(t, "i", id)
	b.drain(t)
	first := b.describe(t, "i").ExecutionID

	_, err = b.engine.Start(b.ctx, "echo", "c", &chronicle.StartOptions{InstanceID: "i", Reuse: chronicle.ReuseTerminateAndRestart, Actor: "clerk-1"})
	require.NoError(t, err)
	b.drain(t)
	inst := b.describe(t, "i")
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	require.NotEqual(t, first, inst.ExecutionID)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "!", nil))
	b.drain(t)
	require.Equal(t, "c!", result[string](t, b, "i"))
	events := b.history(t, "i")
	require.Equal(t, 2, count(events, history.KindExecutionStarted))
	require.Equal(t, 1, count(events, history.KindExecutionTerminated))
	require.Equal(t, "user:clerk-1", events[len(events)-5].Actor, "the restart's start is recorded with its actor")

	// An ended instance restarts without a termination.
	_, err = b.engine.Start(b.ctx, "echo", "d", &chronicle.StartOptions{InstanceID: "i", Reuse: chronicle.ReuseTerminateAndRestart})
	require.NoError(t, err)
	b.drain(t)
	require.Equal(t, 3, count(b.history(t, "i"), history.KindExecutionStarted))
	require.Equal(t, 1, count(b.history(t, "i"), history.KindExecutionTerminated))
}

func TestBadInputGetsClearErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, chronicle.Options{MaxPayloadSize: 1024})
	register(t, b.engine, "echo", echo)
	ctx := b.ctx

	_, err := b.engine.Start(ctx, "no-such-workflow", "x", nil)
	require.ErrorIs(t, err, chronicle.ErrUnknownWorkflow)
	_, err = b.engine.Start(ctx, "echo", "x", &chronicle.StartOptions{InstanceID: "bad\nid"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.Contains(t, err.Error(), "instance id")
	_, err = b.engine.Start(ctx, "echo", strings.Repeat("x", 2000), nil)
	require.ErrorIs(t, err, chronicle.ErrPayloadTooLarge)
	_, err = b.engine.Start(ctx, "echo", func() {}, nil)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.ErrorIs(t, b.engine.RaiseEvent(ctx, "nobody", "go", "x", nil), chronicle.ErrInstanceNotFound)
	require.ErrorIs(t, b.engine.RaiseEvent(ctx, "nobody", "", "x", nil), chronicle.ErrInvalidArgument)
	require.ErrorIs(t, b.engine.Terminate(ctx, "nobody", "x", nil), chronicle.ErrInstanceNotFound)
	_, err = b.engine.Describe(ctx, "nobody")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	_, err = b.engine.History(ctx, "nobody")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	_, err = b.engine.Wait(ctx, "nobody")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	require.ErrorIs(t, b.engine.RedriveDeadLetter(ctx, "nope", "ops"), chronicle.ErrDeadLetterNotFound)

	require.ErrorIs(t, chronicle.RegisterWorkflow(b.engine, "echo", echo), chronicle.ErrAlreadyRegistered)
	require.ErrorIs(t, chronicle.RegisterWorkflow(b.engine, "", echo), chronicle.ErrInvalidArgument)
	require.ErrorIs(t, chronicle.RegisterActivity[int, int](b.engine, "a", nil), chronicle.ErrInvalidArgument)

	// Nothing was enqueued by the rejected calls.
	b.drain(t)
	letters, err := b.engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
	require.NoError(t, err)
	require.Empty(t, letters)
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := chronicle.Options{
		OrchestrationWorkers: -1, ActivityLease: time.Second, ActivityHeartbeat: 2 * time.Second,
		MaxDeliveries: -2, DefaultRetry: chronicle.RetryPolicy{Multiplier: 0.5}, NodeID: "has space ",
	}.Validate()
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	for _, want := range []string{"OrchestrationWorkers", "ActivityHeartbeat", "MaxDeliveries", "Multiplier", "NodeID"} {
		require.Contains(t, err.Error(), want)
	}
	require.NoError(t, chronicle.Options{}.Validate())
	d := chronicle.Options{}.WithDefaults()
	require.Equal(t, 10, d.MaxDeliveries)
	require.Equal(t, 5*time.Second, d.SafetyPoll)
	require.Equal(t, 10*time.Second, d.ActivityHeartbeat)
	require.NotEmpty(t, d.NodeID)
	_, err = chronicle.New(nil, chronicle.Options{})
	require.Error(t, err)
}

func TestDeadLettersEndToEnd(t *testing.T) {
	t.Parallel()

	t.Run("UnknownWorkflowThenRedrive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A client that knows the workflow starts it; the worker does not.
		client := b.newEngine(t)
		register(t, client, "echo", echo)
		_, err := client.Start(b.ctx, "echo", "x", &chronicle.StartOptions{InstanceID: "i"})
		require.NoError(t, err)
		b.drain(t)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonUnknownWorkflow, letters[0].Reason)
		require.Contains(t, letters[0].Error, `"echo"`)
		require.Equal(t, history.KindExecutionStarted, letters[0].Message.Kind)

		// Deploy the workflow and redrive: nothing was lost.
		register(t, b.engine, "echo", echo)
		require.NoError(t, b.engine.RedriveDeadLetter(b.ctx, letters[0].ID, "ops-ana"))
		b.drain(t)
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "!", nil))
		b.drain(t)
		require.Equal(t, "x!", result[string](t, b, "i"))
		dl, err := b.engine.GetDeadLetter(b.ctx, letters[0].ID)
		require.NoError(t, err)
		require.Equal(t, provider.DeadLetterRedriven, dl.Status)
		require.Equal(t, "user:ops-ana", dl.ResolvedBy)
		require.ErrorIs(t, b.engine.DiscardDeadLetter(b.ctx, dl.ID, "ops-ana"), chronicle.ErrDeadLetterResolved)
	})

	t.Run("UndecodableInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		type app struct{ Amount int }
		register(t, b.engine, "typed", func(_ *chronicle.Context, a app) (int, error) { return a.Amount, nil })
		_, err := b.engine.Start(b.ctx, "typed", chronicle.RawPayload("not msgpack of app"), &chronicle.StartOptions{InstanceID: "i"})
		require.NoError(t, err)
		b.start(t, "typed", "ok", app{Amount: 5})
		b.drain(t)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonUndecodable, letters[0].Reason)
		require.Contains(t, letters[0].Error, "decode input of workflow typed")
		require.Equal(t, 5, result[int](t, b, "ok"), "other instances go on")
	})

	t.Run("UndecodableMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "echo", echo)
		b.start(t, "echo", "i", "x")
		b.drain(t)
		bad := provider.Message{ID: "garbled", InstanceID: "i", Kind: history.KindEventRaised, CorrelationID: "k", Payload: []byte{0x92, 0xff}}
		require.NoError(t, b.store.EnqueueMessages(b.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{bad}, Now: t0}))
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "!", nil))
		b.drain(t)
		require.Equal(t, "x!", result[string](t, b, "i"), "the good message of the same round was processed")
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonUndecodable, letters[0].Reason)
		require.Equal(t, []byte{0x92, 0xff}, letters[0].Message.Payload, "the original envelope is kept")
	})

	t.Run("PanickingWorkflowAfterMaxDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "boom", func(ctx *chronicle.Context, _ string) (string, error) {
			var stages []string
			return stages[len(stages)], nil // a bug in workflow code
		})
		b.start(t, "boom", "i", "")
		for i := 0; i < 6; i++ {
			b.advance(t, time.Minute)
		}
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonPanic, letters[0].Reason)
		require.Contains(t, letters[0].Error, "index out of range")
		require.Equal(t, 3, letters[0].Attempts)
		_, err = b.engine.History(b.ctx, "i")
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "a start that never ran leaves no history")
		require.NoError(t, b.engine.DiscardDeadLetter(b.ctx, letters[0].ID, "ops-ana"))
		dl, err := b.engine.GetDeadLetter(b.ctx, letters[0].ID)
		require.NoError(t, err)
		require.Equal(t, provider.DeadLetterDiscarded, dl.Status)
	})

	t.Run("UnknownActivityThenRedrive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			return chronicle.CallActivity[string](ctx, "ocr", "scan.pdf", nil)
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonUnknownActivity, letters[0].Reason)
		require.NotNil(t, letters[0].Activity)
		require.Contains(t, b.describe(t, "i").Incident, "unknown-activity")

		activity(t, b.engine, "ocr", func(_ context.Context, f string) (string, error) { return "text of " + f, nil })
		require.NoError(t, b.engine.RedriveDeadLetter(b.ctx, letters[0].ID, "ops"))
		b.drain(t)
		require.Equal(t, "text of scan.pdf", result[string](t, b, "i"))
		require.Empty(t, b.describe(t, "i").Incident)
	})

	t.Run("WorkflowErrorIsAFailureNotADeadLetter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "wf", func(*chronicle.Context, string) (string, error) { return "", errors.New("policy expired") })
		b.start(t, "wf", "i", "")
		b.drain(t)
		inst := b.describe(t, "i")
		require.Equal(t, chronicle.StatusFailed, inst.Status)
		require.Equal(t, "policy expired", inst.Failure.Message)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.Empty(t, letters)
	})
}

func TestRunWakesOnWorkWithoutPolling(t *testing.T) {
	t.Parallel()
	// SafetyPoll is an hour of manual-clock time that never passes: the
	// workers can only wake through hints and timers.
	b := setup(t, chronicle.Options{SafetyPoll: time.Hour})
	activity(t, b.engine, "a", func(context.Context, string) (string, error) { return "a", nil })
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		if _, err := chronicle.CallActivity[string](ctx, "a", "", nil); err != nil {
			return "", err
		}
		if err := ctx.Sleep(10 * time.Minute); err != nil {
			return "", err
		}
		return chronicle.WaitEvent[string](ctx, "go", nil)
	})
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- b.engine.Run(ctx) }()
	b.start(t, "wf", "i", "")
	// The workers sleep until the timer's fire time; wait until the timer
	// is created, then move the clock to it.
	waitUntil(t, b, func() bool {
		events, err := b.engine.History(b.ctx, "i")
		return err == nil && count(events, history.KindTimerCreated) == 1
	})
	b.clock.Advance(10 * time.Minute)
	waitUntil(t, b, func() bool {
		events, _ := b.engine.History(b.ctx, "i")
		return count(events, history.KindTimerFired) == 1
	})
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "done", nil))
	inst, err := b.engine.Wait(b.ctx, "i")
	require.NoError(t, err)
	var out string
	require.NoError(t, inst.Result(&out))
	require.Equal(t, "done", out)
	cancel()
	require.NoError(t, receive(t, done))
	require.NoError(t, b.engine.Run(ctx), "a stopped engine can run again")
}

// waitUntil waits for a condition that the engine's goroutines make true,
// woken by the store's work hints and the engine's reports of rounds and
// activity attempts (between them, every commit of the engine's) rather
// than by sleeping.
func waitUntil(t *testing.T, b *bundle, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		hint := b.store.(provider.Notifier).WorkHint(provider.QueueOrchestration)
		reported := b.progress.C()
		if cond() {
			return
		}
		select {
		case <-deadline:
			t.Fatal("condition not reached")
		case <-hint:
		case <-reported:
		}
	}
}
