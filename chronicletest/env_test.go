package chronicletest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

const day = 24 * time.Hour

// sleeper waits d, then calls "after-sleep" with its input.
func sleeper(ctx *chronicle.Context, d time.Duration) (string, error) {
	if err := ctx.Sleep(d); err != nil {
		return "", err
	}
	return chronicle.CallActivity[string](ctx, "after-sleep", d.String(), nil)
}

func TestFourteenDaySleepSkipsTime(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "sleeper", sleeper))
	var calledAt time.Duration
	chronicletest.MockActivity[string, string](env, "after-sleep").
		Do(func(context.Context, string) (string, error) {
			calledAt = env.Elapsed()
			return "woke", nil
		}).Once()

	start := time.Now()
	id := env.Start("sleeper", 14*day, nil)
	env.RunUntilIdle()
	t.Logf("14 virtual days in %s of wall time", time.Since(start))

	env.AssertStatus(id, chronicle.StatusCompleted)
	if got := chronicletest.Result[string](env, id); got != "woke" {
		t.Fatalf("result %q, want woke", got)
	}
	if calledAt != 14*day {
		t.Fatalf("activity ran %s after the start, want 14 days", calledAt)
	}
	if env.Elapsed() != 14*day {
		t.Fatalf("clock moved %s, want exactly 14 days", env.Elapsed())
	}
	env.AssertHistory(id,
		history.KindExecutionStarted, history.KindTimerCreated, history.KindTimerFired,
		history.KindActivityScheduled, history.KindActivityCompleted, history.KindExecutionCompleted)
}

func TestRunForStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "sleeper", sleeper))
	mock := chronicletest.MockActivity[string, string](env, "after-sleep").Return("woke")

	id := env.Start("sleeper", 3*day, nil)
	env.RunFor(2 * day)
	if env.Elapsed() != 2*day {
		t.Fatalf("clock at %s, want 2 days", env.Elapsed())
	}
	env.AssertStatus(id, chronicle.StatusRunning)
	if mock.Calls() != 0 {
		t.Fatalf("activity ran before the timer fired")
	}
	env.RunFor(day)
	env.AssertStatus(id, chronicle.StatusCompleted)
	if env.Elapsed() != 3*day {
		t.Fatalf("clock at %s, want 3 days", env.Elapsed())
	}
}

// charge is a workflow that calls a flaky activity with a retry policy.
func charge(ctx *chronicle.Context, amount int) (string, error) {
	return chronicle.CallActivity[string](ctx, "charge", amount, &chronicle.ActivityOptions{Retry: chronicle.RetryPolicy{
		MaxAttempts: 4, InitialInterval: time.Minute, Multiplier: 3, MaxInterval: 5 * time.Minute,
	}})
}

func TestRetriesWaitTheNominalDelay(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
	var at []time.Duration
	record := func(out string, err error) func(context.Context, int) (string, error) {
		return func(ctx context.Context, amount int) (string, error) {
			at = append(at, env.Elapsed())
			return out, err
		}
	}
	down := errors.New("gateway down")
	failing := chronicletest.MockActivity[int, string](env, "charge").Do(record("", down)).Times(3)
	ok := chronicletest.MockActivity[int, string](env, "charge").WithInput(42).Do(record("R-1", nil)).Once()

	id := env.Start("charge", 42, nil)
	inst := env.Wait(id)
	if inst.Status != chronicle.StatusCompleted {
		t.Fatalf("status %s", inst.Status)
	}
	// Delays: 1m, 3m, then 9m capped at 5m.
	want := []time.Duration{0, time.Minute, 4 * time.Minute, 9 * time.Minute}
	if len(at) != len(want) {
		t.Fatalf("attempts at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("attempts at %v, want %v", at, want)
		}
	}
	if failing.Calls() != 3 || ok.Calls() != 1 || env.ActivityAttempts("charge") != 4 {
		t.Fatalf("calls: failing %d, ok %d, attempts %d", failing.Calls(), ok.Calls(), env.ActivityAttempts("charge"))
	}
	if got := ok.Inputs(); len(got) != 1 || got[0] != 42 {
		t.Fatalf("inputs %v", got)
	}
	var attempts int
	for _, e := range env.History(id) {
		if e.Kind == history.KindActivityCompleted {
			a, err := e.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			attempts = a.(*history.ActivityCompleted).Attempts
		}
	}
	if attempts != 4 {
		t.Fatalf("history records %d attempts, want 4", attempts)
	}
}

func TestRetriesExhaustedFailTheWorkflow(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
	chronicletest.MockActivity[int, string](env, "charge").ReturnError(errors.New("card declined")).Times(4)

	id := env.Start("charge", 42, nil)
	env.RunUntilIdle()
	env.AssertStatus(id, chronicle.StatusFailed)
	var werr *chronicle.WorkflowError
	if err := env.Err(id); !errors.As(err, &werr) {
		t.Fatalf("Err = %v, want a *WorkflowError", err)
	}
	// 1m + 3m + 5m of backoff.
	if env.Elapsed() != 9*time.Minute {
		t.Fatalf("failed after %s, want 9m", env.Elapsed())
	}
	env.AssertHistory(id, history.KindExecutionStarted, history.KindActivityScheduled, history.KindActivityFailed, history.KindExecutionFailed)
}

// approval waits for a decision signal with a 7-day timeout, with a
// custom status while it waits.
func approval(ctx *chronicle.Context, _ string) (string, error) {
	if err := ctx.SetCustomStatus("waiting"); err != nil {
		return "", err
	}
	d, err := chronicle.WaitEvent[string](ctx, "decision", &chronicle.WaitOptions{Timeout: 7 * day})
	if errors.Is(err, chronicle.ErrTimeout) {
		return "expired", ctx.SetCustomStatus("expired")
	}
	if err != nil {
		return "", err
	}
	return d, ctx.SetCustomStatus("decided")
}

func TestSignalAtAVirtualTime(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "approval", approval))
	id := env.Start("approval", "x", &chronicle.StartOptions{InstanceID: "A-1"})
	env.RaiseEventAt(3*day, id, "decision", "approved", nil)

	env.RunFor(day)
	env.AssertCustomStatus(id, "waiting")
	env.Wait(id)
	env.AssertCustomStatus(id, "decided")
	if got := chronicletest.Result[string](env, id); got != "approved" {
		t.Fatalf("result %q", got)
	}
	if env.Elapsed() != 3*day {
		t.Fatalf("Wait returned at %s, want 3 days, when the instance ended", env.Elapsed())
	}
	kinds := env.Kinds(id)
	// The cancelled timeout's fire message stays queued until it is due
	// (cancels are logical): RunUntilIdle moves the clock there, and the
	// round acks it as stale without changing history.
	env.RunUntilIdle()
	if env.Elapsed() != 7*day {
		t.Fatalf("idle at %s, want 7 days", env.Elapsed())
	}
	env.AssertHistory(id, kinds...)
	env.AssertHistoryContains(id, history.KindTimerCreated, history.KindEventRaised, history.KindTimerCancelled, history.KindExecutionCompleted)
}

func TestTimeoutWhenNoSignalComes(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "approval", approval))
	id := env.Start("approval", "x", nil)
	if id != "id-1" {
		t.Fatalf("first generated id %q, want id-1", id)
	}
	inst := env.Wait(id)
	if got := chronicletest.Result[string](env, id); got != "expired" {
		t.Fatalf("result %q", got)
	}
	if !inst.CompletedAt.Equal(chronicletest.DefaultStart.Add(7 * day)) {
		t.Fatalf("completed at %s", inst.CompletedAt)
	}
	status, ok := chronicletest.CustomStatus[string](env, id)
	if !ok || status != "expired" {
		t.Fatalf("custom status %q %v", status, ok)
	}
}

func TestTerminateAt(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "approval", approval))
	id := env.Start("approval", "x", nil)
	env.TerminateAt(time.Hour, id, "customer left")
	env.Wait(id)
	env.AssertStatus(id, chronicle.StatusTerminated)
	if env.Elapsed() != time.Hour {
		t.Fatalf("Wait returned at %s, want 1h", env.Elapsed())
	}
	var werr *chronicle.WorkflowError
	if err := env.Err(id); !errors.As(err, &werr) || werr.Failure.Message == "" {
		t.Fatalf("Err = %v", err)
	}
}

// review opens a human task with a due time and waits for it, or for a
// 2-day auto-cancel timer.
func review(ctx *chronicle.Context, doc string) (string, error) {
	task := ctx.CreateTask("review", doc, &chronicle.TaskOptions{Roles: []string{"editor"}, Due: ctx.Now().Add(day)})
	timer := ctx.Timer(2*day, &chronicle.TimerOptions{Name: "auto-cancel"})
	var verdict string
	var err error
	ctx.Select(
		chronicle.SelectCase{Future: ctx.WaitTask(task), Do: func(f chronicle.Future) {
			err = f.Get(&verdict)
			ctx.CancelTimer(timer)
		}},
		chronicle.SelectCase{Future: timer, Do: func(chronicle.Future) {
			ctx.CancelTask(task, "nobody reviewed it")
			verdict = "cancelled"
		}},
	)
	return verdict, err
}

func TestTaskCompletedAtAVirtualTime(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "review", review))
	id := env.Start("review", "draft", nil)
	editor := chronicle.User{ID: "ed", Roles: []string{"editor"}}
	env.At(time.Hour, func() {
		task := env.Task(id, "review")
		if want := env.StartTime().Add(day); !task.Due.Equal(want) {
			t.Errorf("task due %s, want %s", task.Due, want)
		}
	})
	env.ClaimTaskAt(2*time.Hour, id, "review", editor)
	env.CompleteTaskAt(5*time.Hour, id, "review", "approved", editor)
	inst := env.Wait(id)
	if inst.Status != chronicle.StatusCompleted || chronicletest.Result[string](env, id) != "approved" {
		t.Fatalf("instance %+v", inst)
	}
	if env.Elapsed() != 5*time.Hour {
		t.Fatalf("ended at %s", env.Elapsed())
	}
	env.AssertHistory(id, history.KindExecutionStarted, history.KindTaskCreated, history.KindTimerCreated,
		history.KindTaskAssigned, history.KindTaskCompleted, history.KindTimerCancelled, history.KindExecutionCompleted)
}

func TestTaskAutoCancelled(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "review", review))
	id := env.Start("review", "draft", nil)
	env.RunUntilIdle()
	if got := chronicletest.Result[string](env, id); got != "cancelled" {
		t.Fatalf("result %q", got)
	}
	if env.Elapsed() != 2*day {
		t.Fatalf("ended at %s", env.Elapsed())
	}
	env.AssertHistoryContains(id, history.KindTimerFired, history.KindTaskCancelled, history.KindExecutionCompleted)
}

func TestWorkOnEveryStore(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			t.Parallel()
			env := chronicletest.New(t, chronicletest.Store(memory.New(memory.Options{Mode: mode})),
				chronicletest.EngineOptions(chronicle.Options{CacheSize: -1}))
			mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
			chronicletest.MockActivity[int, string](env, "charge").ReturnError(errors.New("down")).Once()
			chronicletest.MockActivity[int, string](env, "charge").Return("R-1")
			id := env.Start("charge", 1, nil)
			env.RunUntilIdle()
			if got := chronicletest.Result[string](env, id); got != "R-1" {
				t.Fatalf("result %q", got)
			}
			if env.Elapsed() != time.Minute {
				t.Fatalf("ended at %s", env.Elapsed())
			}
		})
	}
}

func mustRegister(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSignalAtTheTimeoutInstant: an action runs before the work due at
// its time, but a signal raised at the instant a wait times out still
// loses to the timer, which was queued first (docs/semantics.md); a
// microsecond earlier it wins.
func TestSignalAtTheTimeoutInstant(t *testing.T) {
	t.Parallel()
	for at, want := range map[time.Duration]string{7 * day: "expired", 7*day - time.Microsecond: "approved"} {
		env := chronicletest.New(t)
		mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "approval", approval))
		id := env.Start("approval", "x", nil)
		env.RaiseEventAt(at, id, "decision", "approved", nil)
		env.Wait(id)
		if got := chronicletest.Result[string](env, id); got != want {
			t.Errorf("signal at %s: result %q, want %q", at, got, want)
		}
	}
}

// TestProjection reads a custom projection the rounds keep.
func TestProjection(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
	type attempts struct{ Scheduled, Completed int }
	mustRegister(t, chronicle.RegisterProjection(env.Engine(), "activities", 1, func(s attempts, e *chronicle.Event) (attempts, error) {
		switch e.Kind {
		case history.KindActivityScheduled:
			s.Scheduled++
		case history.KindActivityCompleted:
			s.Completed++
		}
		return s, nil
	}))
	chronicletest.MockActivity[int, string](env, "charge").Return("R-1")
	id := env.Start("charge", 1, nil)
	env.RunUntilIdle()
	if got := chronicletest.Projection[attempts](env, "activities", id); got != (attempts{Scheduled: 1, Completed: 1}) {
		t.Fatalf("projection %+v", got)
	}
}
