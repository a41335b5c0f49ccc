package chronicle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

func TestActivities(t *testing.T) {
	t.Parallel()

	t.Run("ResultReachesWorkflow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		activity(t, b.engine, "double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
		register(t, b.engine, "wf", func(ctx *chronicle.Context, n int) (int, error) {
			return chronicle.CallActivity[int](ctx, "double", n, nil)
		})
		b.start(t, "wf", "i", 21)
		b.drain(t)
		require.Equal(t, 42, result[int](t, b, "i"))
	})

	t.Run("TransientFailureIsRetriedWithBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		activity(t, b.engine, "flaky", func(ctx context.Context, _ string) (string, error) {
			info, ok := chronicle.ActivityInfoFrom(ctx)
			require.True(t, ok)
			if calls.Add(1) < 3 {
				return "", fmt.Errorf("bureau unavailable (attempt %d)", info.Attempt)
			}
			return fmt.Sprintf("ok on attempt %d", info.Attempt), nil
		})
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			return chronicle.CallActivity[string](ctx, "flaky", "x", nil)
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		require.Equal(t, int32(1), calls.Load())
		b.advance(t, time.Second) // the first backoff is between 0.5s and 1s
		require.Equal(t, int32(2), calls.Load(), "second attempt after the first backoff")
		b.advance(t, 2*time.Second)
		require.Equal(t, "ok on attempt 3", result[string](t, b, "i"))
		events := b.history(t, "i")
		require.Equal(t, 1, count(events, history.KindActivityScheduled))
		require.Equal(t, 1, count(events, history.KindActivityCompleted), "retries are not in history, only the outcome")
	})

	t.Run("NonRetryableFailureFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		activity(t, b.engine, "check", func(context.Context, string) (string, error) {
			calls.Add(1)
			return "", chronicle.NonRetryable(errors.New("applicant blacklisted"))
		})
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			_, err := chronicle.CallActivity[string](ctx, "check", "x", nil)
			var ae *chronicle.ActivityError
			if errors.As(err, &ae) {
				return fmt.Sprintf("%s failed after %d: %s", ae.Name, ae.Attempts, ae.Failure.Message), nil
			}
			return "no error", nil
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		require.Equal(t, "check failed after 1: applicant blacklisted", result[string](t, b, "i"))
		require.Equal(t, int32(1), calls.Load())
	})

	t.Run("AttemptsAreBoundedByRetryPolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		activity(t, b.engine, "down", func(context.Context, string) (string, error) {
			calls.Add(1)
			panic("service crashed") // a panicking activity is a retryable failure
		})
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			_, err := chronicle.CallActivity[string](ctx, "down", "x", &chronicle.ActivityOptions{
				Retry: chronicle.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second},
			})
			return "", err
		})
		b.start(t, "wf", "i", "")
		for i := 0; i < 5; i++ {
			b.advance(t, time.Minute)
		}
		require.Equal(t, int32(3), calls.Load())
		inst := b.describe(t, "i")
		require.Equal(t, chronicle.StatusFailed, inst.Status)
		require.Contains(t, inst.Failure.Message, "activity down failed after 3 attempt(s): activity panicked: service crashed")
		var we *chronicle.WorkflowError
		require.ErrorAs(t, inst.Result(nil), &we)
	})

	t.Run("NonRetryableTypeListedInPolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		activity(t, b.engine, "validate", func(context.Context, string) (string, error) {
			calls.Add(1)
			return "", chronicle.ErrorWithType("ValidationError", errors.New("bad iban"))
		})
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			_, err := chronicle.CallActivity[string](ctx, "validate", "x", &chronicle.ActivityOptions{
				Retry: chronicle.RetryPolicy{NonRetryable: []string{"ValidationError"}},
			})
			var ae *chronicle.ActivityError
			require.ErrorAs(t, err, &ae)
			return ae.Failure.Type, nil
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		require.Equal(t, "ValidationError", result[string](t, b, "i"))
		require.Equal(t, int32(1), calls.Load())
	})
}

func TestTimers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		start := ctx.Now()
		if err := ctx.Sleep(48 * time.Hour); err != nil {
			return "", err
		}
		return ctx.Now().Sub(start).String(), nil
	})
	b.start(t, "wf", "i", "")
	b.drain(t)
	b.advance(t, 47*time.Hour)
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "i").Status)
	b.advance(t, time.Hour)
	require.Equal(t, "48h0m0s", result[string](t, b, "i"))
	events := b.history(t, "i")
	require.Equal(t, 1, count(events, history.KindTimerFired))
}

func TestSignals(t *testing.T) {
	t.Parallel()

	t.Run("BufferedUntilWaitedForInArrivalOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) ([]string, error) {
			if err := ctx.Sleep(time.Hour); err != nil {
				return nil, err
			}
			var got []string
			for i := 0; i < 3; i++ {
				v, err := chronicle.WaitEvent[string](ctx, "doc", nil)
				if err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, nil
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		for _, doc := range []string{"id-card", "payslip", "payslip", "bank-statement"} {
			// The second payslip repeats an idempotency key: dropped.
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "doc", doc, &chronicle.RaiseOptions{IdempotencyKey: "key-" + doc, Sender: "portal"}))
		}
		b.drain(t)
		require.Equal(t, chronicle.StatusRunning, b.describe(t, "i").Status, "still sleeping")
		b.advance(t, time.Hour)
		require.Equal(t, []string{"id-card", "payslip", "bank-statement"}, result[[]string](t, b, "i"))
		require.Equal(t, 3, count(b.history(t, "i"), history.KindEventRaised))
	})

	t.Run("TimeoutFiresWhenNoSignal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			_, err := chronicle.WaitEvent[string](ctx, "approval", &chronicle.WaitOptions{Timeout: 24 * time.Hour})
			if errors.Is(err, chronicle.ErrTimeout) {
				return "timed out", nil
			}
			return "approved", err
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		b.advance(t, 24*time.Hour)
		require.Equal(t, "timed out", result[string](t, b, "i"))
		// A signal after the timeout is recorded as stale at most, never
		// consumed.
		require.ErrorIs(t, b.engine.RaiseEvent(b.ctx, "i", "approval", "late", nil), chronicle.ErrInstanceNotRunning)
	})

	t.Run("SignalBeforeTimeoutCancelsTimer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			v, err := chronicle.WaitEvent[string](ctx, "approval", &chronicle.WaitOptions{Timeout: 24 * time.Hour})
			if err != nil {
				return "", err
			}
			return v, ctx.Sleep(time.Hour)
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "approval", "yes", nil))
		b.drain(t)
		b.advance(t, time.Hour)
		require.Equal(t, "yes", result[string](t, b, "i"))
		events := b.history(t, "i")
		require.Equal(t, 1, count(events, history.KindTimerCancelled))
		require.Equal(t, 1, count(events, history.KindTimerFired), "only the sleep fired")
		// The cancelled timer's message is acked as stale when it comes due.
		b.advance(t, 24*time.Hour)
		require.Len(t, b.history(t, "i"), len(events))
	})
}

func TestSubWorkflows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	activity(t, b.engine, "inspect", func(_ context.Context, car string) (int, error) {
		if car == "wreck" {
			return 0, chronicle.NonRetryable(errors.New("total loss"))
		}
		return 1200, nil
	})
	register(t, b.engine, "inspection", func(ctx *chronicle.Context, car string) (int, error) {
		return chronicle.CallActivity[int](ctx, "inspect", car, nil)
	})
	register(t, b.engine, "claim", func(ctx *chronicle.Context, cars []string) (string, error) {
		var parts []string
		for _, car := range cars {
			amount, err := chronicle.CallSubWorkflow[int](ctx, "inspection", car, nil)
			var se *chronicle.SubWorkflowError
			if errors.As(err, &se) {
				parts = append(parts, fmt.Sprintf("%s: %s", se.InstanceID, se.Failure.Message))
				continue
			}
			parts = append(parts, fmt.Sprint(amount))
		}
		return strings.Join(parts, ", "), nil
	})
	b.start(t, "claim", "c", []string{"sedan", "wreck"})
	b.drain(t)
	events := b.history(t, "c")
	require.Equal(t, 2, count(events, history.KindSubWorkflowScheduled))
	exec := b.describe(t, "c").ExecutionID
	children := childIDs(t, b, "c")
	require.Equal(t, []string{"c/" + exec + "/3", "c/" + exec + "/6"}, children, "default child ids: parent id, execution id, seq")
	require.Equal(t, "1200, "+children[1]+": chronicle: activity inspect failed after 1 attempt(s): total loss", result[string](t, b, "c"))
	child := b.describe(t, children[0])
	require.Equal(t, chronicle.StatusCompleted, child.Status)
	require.Equal(t, "c", child.ParentID)
	require.Equal(t, chronicle.StatusFailed, b.describe(t, children[1]).Status)
}

func TestContinueAsNewCarriesSignals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "counter", func(ctx *chronicle.Context, n int) (int, error) {
		if _, err := chronicle.WaitEvent[int](ctx, "tick", nil); err != nil {
			return 0, err
		}
		if n < 2 {
			return 0, ctx.ContinueAsNew(n + 1)
		}
		return n, nil
	})
	b.start(t, "counter", "i", 0)
	b.drain(t)
	// Three ticks in one round: the first is consumed by execution 0, the
	// other two carry over.
	for i := 0; i < 3; i++ {
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "tick", i, nil))
	}
	b.drain(t)
	require.Equal(t, 2, result[int](t, b, "i"))
	events := b.history(t, "i")
	require.Equal(t, 3, count(events, history.KindExecutionStarted))
	require.Equal(t, 2, count(events, history.KindContinuedAsNew))
	require.Equal(t, 3+2+1, count(events, history.KindEventRaised), "unconsumed signals are re-recorded in each new execution")
	execs := map[string]bool{}
	for _, e := range events {
		execs[e.ExecutionID] = true
	}
	require.Len(t, execs, 3)
}

func TestCustomStatusSideEffectAndIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var effects atomic.Int32
	type out struct {
		Random string
		ID1    string
		ID2    string
		Now    time.Time
	}
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (out, error) {
		if err := ctx.SetCustomStatus("collecting documents"); err != nil {
			return out{}, err
		}
		random, err := chronicle.SideEffect(ctx, func() (string, error) {
			effects.Add(1)
			return fmt.Sprintf("r-%d", time.Now().UnixNano()), nil
		})
		if err != nil {
			return out{}, err
		}
		o := out{Random: random, ID1: ctx.NewID(), ID2: ctx.NewID(), Now: ctx.Now()}
		if err := ctx.Sleep(time.Hour); err != nil {
			return out{}, err
		}
		return o, ctx.SetCustomStatus("decided")
	})
	b.start(t, "wf", "i", "")
	b.drain(t)
	var status string
	ok, err := b.describe(t, "i").CustomStatus(&status)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "collecting documents", status)

	// A new engine replays the instance from history: the side effect is
	// not run again and ids and time come out the same.
	b.engine = b.newEngine(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (out, error) {
		if err := ctx.SetCustomStatus("collecting documents"); err != nil {
			return out{}, err
		}
		random, err := chronicle.SideEffect(ctx, func() (string, error) {
			effects.Add(1)
			return "replayed side effect ran", nil
		})
		if err != nil {
			return out{}, err
		}
		o := out{Random: random, ID1: ctx.NewID(), ID2: ctx.NewID(), Now: ctx.Now()}
		if err := ctx.Sleep(time.Hour); err != nil {
			return out{}, err
		}
		return o, ctx.SetCustomStatus("decided")
	})
	b.advance(t, time.Hour)
	got := result[out](t, b, "i")
	require.Equal(t, int32(1), effects.Load())
	require.True(t, strings.HasPrefix(got.Random, "r-"))
	require.NotEqual(t, got.ID1, got.ID2)
	require.True(t, got.Now.Equal(t0))
	ok, err = b.describe(t, "i").CustomStatus(&status)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "decided", status)
}

func TestCoroutinesWhenAllWhenAnySelect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	activity(t, b.engine, "quote", func(_ context.Context, bank string) (int, error) { return len(bank) * 100, nil })
	register(t, b.engine, "wf", func(ctx *chronicle.Context, banks []string) ([]int, error) {
		// Fan out one coroutine per bank, wait for all.
		quotes := make([]int, len(banks))
		var fs []chronicle.Future
		for i, bank := range banks {
			fs = append(fs, ctx.Go(func(ctx *chronicle.Context) error {
				q, err := chronicle.CallActivity[int](ctx, "quote", bank, nil)
				quotes[i] = q
				return err
			}))
		}
		if err := ctx.WhenAll(fs...); err != nil {
			return nil, err
		}
		// Race a short and a long timer: the short one wins.
		long, short := ctx.Timer(time.Hour, nil), ctx.Timer(time.Minute, nil)
		winner := ctx.WhenAny(long, short)
		// Select runs the case of the first ready future.
		picked := -1
		ctx.Select(
			chronicle.SelectCase{Future: ctx.Timer(2*time.Hour, nil), Do: func(chronicle.Future) { picked = 0 }},
			chronicle.SelectCase{Future: long, Do: func(chronicle.Future) { picked = 1 }},
		)
		return append(quotes, winner, picked), nil
	})
	b.start(t, "wf", "i", []string{"abc", "ab", "abcd"})
	b.drain(t)
	b.advance(t, time.Minute)
	b.advance(t, time.Hour)
	b.advance(t, time.Hour)
	require.Equal(t, []int{300, 200, 400, 1, 1}, result[[]int](t, b, "i"))
}

func TestSagaCompensatesInReverse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var undone []string
	activity(t, b.engine, "do", func(_ context.Context, step string) (string, error) {
		if step == "pay-out" {
			return "", chronicle.NonRetryable(errors.New("account closed"))
		}
		return step, nil
	})
	activity(t, b.engine, "undo", func(_ context.Context, step string) (string, error) {
		undone = append(undone, step)
		return step, nil
	})
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		saga := ctx.NewSaga()
		for _, step := range []string{"reserve-funds", "book-appointment", "pay-out"} {
			if _, err := chronicle.CallActivity[string](ctx, "do", step, nil); err != nil {
				return "", errors.Join(err, saga.Compensate("step "+step+" failed"))
			}
			saga.AddCompensation(step, func(ctx *chronicle.Context) error {
				_, err := chronicle.CallActivity[string](ctx, "undo", step, nil)
				return err
			})
		}
		return "done", nil
	})
	b.start(t, "wf", "i", "")
	b.drain(t)
	require.Equal(t, []string{"book-appointment", "reserve-funds"}, undone)
	inst := b.describe(t, "i")
	require.Equal(t, chronicle.StatusFailed, inst.Status)
	require.Contains(t, inst.Failure.Message, "account closed")
	events := b.history(t, "i")
	require.Equal(t, 1, count(events, history.KindCompensationStarted))
	require.Equal(t, 1, count(events, history.KindCompensationCompleted))
}

func TestTerminateSuspendResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		v, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return v, err
	})
	b.start(t, "wf", "a", "")
	b.start(t, "wf", "b", "")
	b.drain(t)

	require.NoError(t, b.engine.Suspend(b.ctx, "a", "fraud review", &chronicle.ControlOptions{Actor: "auditor-7", Ticket: "FRAUD-12"}))
	b.drain(t)
	require.Equal(t, chronicle.StatusSuspended, b.describe(t, "a").Status)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "a", "go", "now", nil))
	b.drain(t)
	require.Equal(t, chronicle.StatusSuspended, b.describe(t, "a").Status, "a suspended instance records signals but does not run")
	require.NoError(t, b.engine.Resume(b.ctx, "a", "cleared", &chronicle.ControlOptions{Actor: "auditor-7", Ticket: "FRAUD-13"}))
	b.drain(t)
	require.Equal(t, "now", result[string](t, b, "a"))
	events := b.history(t, "a")
	var actors, tickets []string
	for _, e := range events {
		if e.Kind == history.KindExecutionSuspended || e.Kind == history.KindExecutionResumed {
			actors = append(actors, e.Actor)
			a, err := e.Attributes()
			require.NoError(t, err)
			switch a := a.(type) {
			case *history.ExecutionSuspended:
				tickets = append(tickets, a.Ticket)
			case *history.ExecutionResumed:
				tickets = append(tickets, a.Ticket)
			}
		}
	}
	require.Equal(t, []string{"user:auditor-7", "user:auditor-7"}, actors)
	require.Equal(t, []string{"FRAUD-12", "FRAUD-13"}, tickets)

	require.NoError(t, b.engine.Terminate(b.ctx, "b", "duplicate application", &chronicle.ControlOptions{Ticket: "CS-4411"}))
	b.drain(t)
	events = b.history(t, "b")
	last := events[len(events)-1]
	require.Equal(t, history.KindExecutionTerminated, last.Kind)
	a, err := last.Attributes()
	require.NoError(t, err)
	require.Equal(t, &history.ExecutionTerminated{Reason: "duplicate application", Ticket: "CS-4411"}, a)
	require.Equal(t, history.ActorSystem, last.Actor)
	inst := b.describe(t, "b")
	require.Equal(t, chronicle.StatusTerminated, inst.Status)
	require.Contains(t, inst.Failure.Message, "duplicate application")
	require.ErrorIs(t, b.engine.Terminate(b.ctx, "b", "again", nil), chronicle.ErrInstanceNotRunning)
	require.ErrorIs(t, b.engine.Resume(b.ctx, "a", "", nil), chronicle.ErrInstanceNotRunning)
}

// TestControlRefusesBadTicket checks that Terminate, Suspend and Resume
// refuse a ticket that is too long or holds control characters or invalid
// UTF-8, and write nothing.
func TestControlRefusesBadTicket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		return chronicle.WaitEvent[string](ctx, "go", nil)
	})
	b.start(t, "wf", "a", "")
	b.drain(t)
	before := len(b.history(t, "a"))
	for name, ticket := range map[string]string{
		"too long":     strings.Repeat("T", chronicle.MaxTicketLength+1),
		"newline":      "OPS-1\nOPS-2",
		"NUL":          "OPS\x00",
		"invalid UTF8": "OPS-\xff",
	} {
		opts := &chronicle.ControlOptions{Actor: "ops", Ticket: ticket}
		require.ErrorIs(t, b.engine.Terminate(b.ctx, "a", "r", opts), chronicle.ErrInvalidArgument, name)
		require.ErrorIs(t, b.engine.Suspend(b.ctx, "a", "r", opts), chronicle.ErrInvalidArgument, name)
		require.ErrorIs(t, b.engine.Resume(b.ctx, "a", "r", opts), chronicle.ErrInvalidArgument, name)
	}
	b.drain(t)
	require.Len(t, b.history(t, "a"), before, "a refused action wrote an event")
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "a").Status)
	require.NoError(t, b.engine.Suspend(b.ctx, "a", "r", &chronicle.ControlOptions{Ticket: strings.Repeat("T", chronicle.MaxTicketLength)}))
}

// TestControlTicketExportImport: a history whose control events carry a
// ticket exports to JSON Lines with the ticket readable, reads back equal
// with its chain intact, and replays from the file.
func TestControlTicketExportImport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		return chronicle.WaitEvent[string](ctx, "go", nil)
	})
	b.start(t, "wf", "a", "")
	b.drain(t)
	require.NoError(t, b.engine.Suspend(b.ctx, "a", "audit", &chronicle.ControlOptions{Actor: "ops", Ticket: "CHG-1"}))
	b.drain(t)
	require.NoError(t, b.engine.Resume(b.ctx, "a", "audit done", &chronicle.ControlOptions{Actor: "ops", Ticket: "CHG-2"}))
	b.drain(t)
	require.NoError(t, b.engine.Terminate(b.ctx, "a", "withdrawn", &chronicle.ControlOptions{Actor: "ops", Ticket: "CHG-3"}))
	b.drain(t)
	events := b.history(t, "a")

	var buf bytes.Buffer
	require.NoError(t, history.WriteJSONL(&buf, events))
	for _, want := range []string{`"reason":"audit","ticket":"CHG-1"`, `"reason":"audit done","ticket":"CHG-2"`, `"reason":"withdrawn","ticket":"CHG-3"`} {
		require.Contains(t, buf.String(), want)
	}
	back, err := history.ReadJSONL(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.Equal(t, events, back)
	require.NoError(t, history.Verify(back))
	a, err := back[len(back)-1].Attributes()
	require.NoError(t, err)
	require.Equal(t, &history.ExecutionTerminated{Reason: "withdrawn", Ticket: "CHG-3"}, a)

	path := filepath.Join(t.TempDir(), "a.jsonl")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	sum, err := b.engine.ReplayHistories(b.ctx, chronicle.HistoryFiles(path))
	require.NoError(t, err)
	require.NoError(t, sum.Err())
}

func TestCancelTimerAndSignalRetryAfterEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
		reminder := ctx.Timer(24*time.Hour, &chronicle.TimerOptions{Name: "reminder"})
		v, err := chronicle.WaitEvent[string](ctx, "answer", nil)
		if err != nil {
			return "", err
		}
		cancelled := ctx.CancelTimer(reminder)
		again := ctx.CancelTimer(reminder)
		return fmt.Sprint(v, " ", cancelled, " ", again, " ", errors.Is(reminder.Get(nil), chronicle.ErrTimerCancelled)), nil
	})
	b.start(t, "wf", "i", "")
	b.drain(t)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "answer", "yes", &chronicle.RaiseOptions{IdempotencyKey: "form-1"}))
	b.drain(t)
	require.Equal(t, "yes true false true", result[string](t, b, "i"))
	b.advance(t, 25*time.Hour)
	events := b.history(t, "i")
	require.Equal(t, 1, count(events, history.KindTimerCancelled))
	require.Equal(t, 0, count(events, history.KindTimerFired), "the cancelled timer's message is stale")
	// A client retrying the recorded signal after the end gets success; a
	// new signal is refused.
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "answer", "yes", &chronicle.RaiseOptions{IdempotencyKey: "form-1"}))
	require.ErrorIs(t, b.engine.RaiseEvent(b.ctx, "i", "answer", "no", &chronicle.RaiseOptions{IdempotencyKey: "form-2"}), chronicle.ErrInstanceNotRunning)
}
