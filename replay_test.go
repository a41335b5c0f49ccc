package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// loan is a workflow that touches most of the context API, used to compare
// runs with and without the executor cache and across restarts.
func loan(ctx *chronicle.Context, amount int) (string, error) {
	score, err := chronicle.CallActivity[int](ctx, "score", amount, nil)
	if err != nil {
		return "", err
	}
	if err := ctx.SetCustomStatus("waiting for documents"); err != nil {
		return "", err
	}
	docs, err := chronicle.WaitEvent[string](ctx, "documents", &chronicle.WaitOptions{Timeout: 72 * time.Hour})
	if err != nil {
		return "", err
	}
	id := ctx.NewID()
	a := ctx.CallActivity("notify", docs, nil)
	c := ctx.CallSubWorkflow("audit", amount, nil)
	if err := ctx.WhenAll(a, c); err != nil {
		return "", err
	}
	if err := ctx.Sleep(time.Hour); err != nil {
		return "", err
	}
	// NewID derives from the execution id, which Start draws at random.
	return fmt.Sprint(len(id), " ", docs, " ", ctx.Now().Format(time.RFC3339), " ", score), nil
}

func registerLoan(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	activity(t, e, "score", func(_ context.Context, amount int) (int, error) { return amount / 100, nil })
	activity(t, e, "notify", func(_ context.Context, docs string) (string, error) { return "sent " + docs, nil })
	register(t, e, "audit", func(ctx *chronicle.Context, amount int) (int, error) {
		return amount, ctx.Sleep(time.Minute)
	})
	register(t, e, "loan", loan)
}

// runLoan drives a loan instance through its whole life; restart, when
// set, is called between steps and may replace the engine.
func runLoan(t *testing.T, b *bundle, restart func(step int)) []history.Event {
	t.Helper()
	steps := []func(){
		func() { b.start(t, "loan", "loan-1", 4200) },
		func() { b.drain(t) },
		func() {
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "loan-1", "documents", "payslips", &chronicle.RaiseOptions{IdempotencyKey: "u1"}))
			b.drain(t)
		},
		func() { b.advance(t, time.Minute) },
		func() { b.advance(t, time.Hour) },
	}
	for i, step := range steps {
		step()
		if restart != nil {
			restart(i)
		}
	}
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "loan-1").Status)
	return b.history(t, "loan-1")
}

// comparable strips what differs between two runs by construction: the
// execution ids Start draws at random, the ids of children derived from
// them, and the hashes covering them.
func comparable(events []history.Event) []history.Event {
	out := make([]history.Event, len(events))
	for i, e := range events {
		if e.Kind == history.KindSubWorkflowScheduled {
			a, err := e.Attributes()
			if err != nil {
				panic(err)
			}
			child := *a.(*history.SubWorkflowScheduled)
			child.InstanceID = strings.ReplaceAll(child.InstanceID, e.ExecutionID, "<execution>")
			child.ExecutionID = ""
			if e.Payload, err = history.EncodeAttributes(&child); err != nil {
				panic(err)
			}
		}
		e.ExecutionID, e.PrevHash, e.Hash = "", nil, nil
		if e.Kind == history.KindExecutionStarted || e.Kind.Terminal() {
			e.CorrelationID = ""
		}
		out[i] = e
	}
	return out
}

func TestReplayColdCacheEqualsWarm(t *testing.T) {
	t.Parallel()
	warm := setup(t)
	registerLoan(t, warm.engine)
	cold := setup(t, chronicle.Options{CacheSize: -1})
	registerLoan(t, cold.engine)
	want := runLoan(t, warm, nil)
	got := runLoan(t, cold, nil)
	require.Equal(t, comparable(want), comparable(got))
	require.Equal(t, result[string](t, warm, "loan-1"), result[string](t, cold, "loan-1"))
	require.GreaterOrEqual(t, len(want), 20)
}

func TestRestartMidWorkflowFinishesWithSameHistory(t *testing.T) {
	t.Parallel()
	ref := setup(t)
	registerLoan(t, ref.engine)
	want := runLoan(t, ref, nil)

	b := setup(t)
	registerLoan(t, b.engine)
	got := runLoan(t, b, func(step int) {
		// After every step the node dies; a new engine on the same store
		// takes over with nothing cached.
		b.engine = b.newEngine(t)
		registerLoan(t, b.engine)
	})
	require.Equal(t, comparable(want), comparable(got))
	require.Equal(t, result[string](t, ref, "loan-1"), result[string](t, b, "loan-1"))
}

func TestNondeterminismIsReportedWithItsSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	activity(t, b.engine, "score", func(context.Context, int) (int, error) { return 1, nil })
	activity(t, b.engine, "verify-identity", func(context.Context, int) (int, error) { return 1, nil })
	register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) {
		if _, err := chronicle.CallActivity[int](ctx, "score", n, nil); err != nil {
			return 0, err
		}
		return chronicle.WaitEvent[int](ctx, "go", nil)
	})
	b.start(t, "wf", "i", 1)
	b.drain(t)
	before := b.history(t, "i")

	// The code changes between runs: the first activity is now another.
	b.engine = b.newEngine(t)
	activity(t, b.engine, "score", func(context.Context, int) (int, error) { return 1, nil })
	activity(t, b.engine, "verify-identity", func(context.Context, int) (int, error) { return 1, nil })
	register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) {
		if _, err := chronicle.CallActivity[int](ctx, "verify-identity", n, nil); err != nil {
			return 0, err
		}
		return chronicle.WaitEvent[int](ctx, "go", nil)
	})
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", 1, nil))
	var roundErr error
	for i := 0; i < 10 && roundErr == nil; i++ {
		_, roundErr = b.engine.RunOnce(b.ctx)
	}
	// The engine logs failed rounds; the error shows in the instance's
	// dead letter once the retries are spent.
	for i := 0; i < 5; i++ {
		b.advance(t, time.Minute)
	}
	require.Equal(t, kinds(before), kinds(b.history(t, "i")), "history is not touched")
	letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "i"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, provider.ReasonNondeterminism, letters[0].Reason)
	require.Contains(t, letters[0].Error, `at seq 3: history holds ActivityScheduled "score", code asked for ActivityScheduled "verify-identity"`)
	require.Equal(t, 3, letters[0].Attempts)
	require.Contains(t, b.describe(t, "i").Incident, "nondeterminism")
}

func TestVersionKeepsOldHistoriesReplaying(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := func(ctx *chronicle.Context, _ int) (string, error) {
		if _, err := chronicle.CallActivity[string](ctx, "a", 0, nil); err != nil {
			return "", err
		}
		return chronicle.WaitEvent[string](ctx, "go", nil)
	}
	v2 := func(ctx *chronicle.Context, _ int) (string, error) {
		if _, err := chronicle.CallActivity[string](ctx, "a", 0, nil); err != nil {
			return "", err
		}
		// The change: new instances run an extra check before waiting.
		version := ctx.Version("extra-check", chronicle.DefaultVersion, 1)
		if version == 1 {
			if _, err := chronicle.CallActivity[string](ctx, "check", 0, nil); err != nil {
				return "", err
			}
		}
		v, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return fmt.Sprintf("%s after version %d", v, version), err
	}
	activities := func(e *chronicle.Engine) {
		activity(t, e, "a", func(context.Context, int) (string, error) { return "a", nil })
		activity(t, e, "check", func(context.Context, int) (string, error) { return "c", nil })
	}
	activities(b.engine)
	register(t, b.engine, "wf", v1)
	b.start(t, "wf", "old", 0)
	b.drain(t)

	b.engine = b.newEngine(t)
	activities(b.engine)
	register(t, b.engine, "wf", v2)
	b.start(t, "wf", "new", 0)
	b.drain(t)
	for _, id := range []string{"old", "new"} {
		require.NoError(t, b.engine.RaiseEvent(b.ctx, id, "go", "done", nil))
	}
	b.drain(t)
	// The old instance passed the change point before the change: it keeps
	// the old path. The new one records the version it took.
	require.Equal(t, "done after version -1", result[string](t, b, "old"))
	require.Equal(t, "done after version 1", result[string](t, b, "new"))
	require.Equal(t, 1, count(b.history(t, "new"), history.KindMarkerRecorded))
	require.Equal(t, 0, count(b.history(t, "old"), history.KindMarkerRecorded))
}

func TestHeartbeatAndCancellationWhenInstanceEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, chronicle.Options{ActivityLease: 30 * time.Second, ActivityHeartbeat: 10 * time.Second, ActivityWorkers: 1, OrchestrationWorkers: 1})
	started := make(chan struct{})
	beat := make(chan struct{})
	outcome := make(chan error, 1)
	activity(t, b.engine, "long", func(ctx context.Context, _ int) (int, error) {
		close(started)
		for {
			<-beat
			if err := chronicle.Heartbeat(ctx); err != nil {
				outcome <- errors.Join(err, ctx.Err())
				return 0, err
			}
			outcome <- nil
		}
	})
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ int) (int, error) {
		return chronicle.CallActivity[int](ctx, "long", 0, nil)
	})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.engine.Run(ctx) }()

	b.start(t, "wf", "i", 0)
	waitFor(t, started, "activity start")
	// Heartbeats keep the lease while the clock moves past it.
	for i := 0; i < 3; i++ {
		b.clock.Advance(20 * time.Second)
		beat <- struct{}{}
		require.NoError(t, receive(t, outcome))
	}
	require.NoError(t, b.engine.Terminate(b.ctx, "i", "customer withdrew", nil))
	inst, err := b.engine.Wait(b.ctx, "i")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusTerminated, inst.Status)
	// The next heartbeat finds the lease gone and the context cancelled.
	b.clock.Advance(20 * time.Second)
	beat <- struct{}{}
	err = receive(t, outcome)
	require.ErrorIs(t, err, provider.ErrLeaseLost)
	require.ErrorIs(t, err, context.Canceled)
	cancel()
	require.NoError(t, receive(t, done))
	events := b.history(t, "i")
	require.Equal(t, 0, count(events, history.KindActivityCompleted)+count(events, history.KindActivityFailed), "the late result is discarded")
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting on a channel")
	}
	var zero T
	return zero
}
