package chronicletest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// fakeT is a chronicletest.T that records what the environment reports,
// so that tests can check the environment fails tests when it should.
type fakeT struct {
	t *testing.T

	mu       sync.Mutex
	errors   []string
	fatal    string
	cleanups []func()
}

func (f *fakeT) Helper()                      {}
func (f *fakeT) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Log(args ...any)              { f.t.Log(args...) }
func (f *fakeT) Logf(format string, a ...any) { f.t.Logf(format, a...) }

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// runFake runs body as a test with a fakeT, then its cleanups, and returns
// the fakeT.
func runFake(t *testing.T, body func(ft *fakeT)) *fakeT {
	t.Helper()
	ft := &fakeT{t: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(ft)
	}()
	<-done
	for i := len(ft.cleanups) - 1; i >= 0; i-- {
		ft.cleanups[i]()
	}
	return ft
}

// reported returns everything the fake test reported, one line each.
func (f *fakeT) reported() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := strings.Join(f.errors, "\n")
	if f.fatal != "" {
		s += "\nFATAL: " + f.fatal
	}
	return s
}

func expectReport(t *testing.T, ft *fakeT, want ...string) {
	t.Helper()
	got := ft.reported()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("report lacks %q; it is:\n%s", w, got)
		}
	}
}

func expectClean(t *testing.T, ft *fakeT) {
	t.Helper()
	if got := ft.reported(); got != "" {
		t.Errorf("the environment reported failures:\n%s", got)
	}
}

func TestUnmetExpectationsFailTheTest(t *testing.T) {
	t.Parallel()
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft)
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
		chronicletest.MockActivity[int, string](env, "charge").Return("R-1").Once()
		chronicletest.MockActivity[int, string](env, "refund").Return("F-1").Once()
		chronicletest.MockActivity[int, string](env, "notify").Return("sent")
		chronicletest.MockActivity[int, string](env, "audit").Return("ok").Maybe()
		env.Start("charge", 5, nil)
		env.RunUntilIdle()
	})
	expectReport(t, ft,
		"activity refund, expectation 1 of 1: expected 1 call(s), got 0",
		"activity notify, expectation 1 of 1: expected at least one call, got none")
	if strings.Contains(ft.reported(), "audit") || strings.Contains(ft.reported(), "activity charge") {
		t.Errorf("met or optional expectations reported:\n%s", ft.reported())
	}
}

func TestUnexpectedCallFailsTheTestAndTheActivity(t *testing.T) {
	t.Parallel()
	var status chronicle.Status
	var failure string
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft)
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "charge", charge))
		chronicletest.MockActivity[int, string](env, "charge").With(func(n int) bool { return n > 100 }).Return("big").Maybe()
		id := env.Start("charge", 5, nil)
		inst := env.Wait(id)
		status, failure = inst.Status, inst.Failure.Message
	})
	expectReport(t, ft, "unexpected call of activity charge by id-1 (attempt 1)", "with input 5")
	if status != chronicle.StatusFailed || !strings.Contains(failure, "unexpected activity call") {
		t.Errorf("instance %s (%s), want failed by the unexpected call, not retried", status, failure)
	}
}

func TestTimesUsedUpFallsThrough(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "charges", func(ctx *chronicle.Context, n int) ([]string, error) {
		var out []string
		for i := range n {
			r, err := chronicle.CallActivity[string](ctx, "charge", i, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}))
	first := chronicletest.MockActivity[int, string](env, "charge").Return("a").Times(2)
	rest := chronicletest.MockActivity[int, string](env, "charge").Return("b")
	id := env.Start("charges", 4, nil)
	env.RunUntilIdle()
	got := chronicletest.Result[[]string](env, id)
	if strings.Join(got, "") != "aabb" || first.Calls() != 2 || rest.Calls() != 2 {
		t.Fatalf("results %v, calls %d and %d", got, first.Calls(), rest.Calls())
	}
	if in := rest.Inputs(); len(in) != 2 || in[0] != 2 || in[1] != 3 {
		t.Fatalf("inputs of the second expectation %v, want [2 3]", in)
	}
}

func TestDeadLettersFailTheTest(t *testing.T) {
	t.Parallel()
	panicky := func(ctx *chronicle.Context, _ int) (int, error) { panic("boom") }
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft)
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "panicky", panicky))
		env.Start("panicky", 1, nil)
		env.RunUntilIdle()
		// Ten deliveries, held 1s, 2s, 4s, ... between them.
		if env.Elapsed() < 5*time.Minute {
			ft.Errorf("dead-lettered after %s of virtual time: the holds between deliveries were not skipped", env.Elapsed())
		}
	})
	expectReport(t, ft, "dead letter", "of id-1 (panic)", "boom", "AllowDeadLetters")

	ft = runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft, chronicletest.AllowDeadLetters())
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "panicky", panicky))
		env.Start("panicky", 1, nil)
		env.RunUntilIdle()
		letters, err := env.Engine().ListDeadLetters(env.Context(), chronicle.DeadLetterFilter{})
		if err != nil || len(letters) != 1 {
			ft.Errorf("dead letters %v, %v", letters, err)
		}
	})
	expectClean(t, ft)
}

func TestWaitFailsWhenNothingCanEndTheInstance(t *testing.T) {
	t.Parallel()
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft)
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "forever", func(ctx *chronicle.Context, _ int) (string, error) {
			return chronicle.WaitEvent[string](ctx, "never", nil)
		}))
		env.Wait(env.Start("forever", 1, nil))
		ft.Errorf("Wait returned")
	})
	expectReport(t, ft, "FATAL: chronicletest: id-1 is running and nothing is left to run")
}

// ticker sleeps an hour at a time, for ever.
func ticker(ctx *chronicle.Context, _ int) (int, error) {
	for i := 0; ; i++ {
		if err := ctx.Sleep(time.Hour); err != nil {
			return i, err
		}
		if err := ctx.SetCustomStatus(i + 1); err != nil {
			return i, err
		}
	}
}

func TestMaxStepsStopsAWorkflowThatNeverIdles(t *testing.T) {
	t.Parallel()
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft, chronicletest.MaxSteps(50))
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "ticker", ticker))
		env.Start("ticker", 0, nil)
		env.RunUntilIdle()
		ft.Errorf("RunUntilIdle returned")
	})
	expectReport(t, ft, "FATAL: chronicletest: 50 steps without becoming idle", "RunFor")

	env := chronicletest.New(t)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "ticker", ticker))
	id := env.Start("ticker", 0, nil)
	env.RunFor(30*time.Hour + 30*time.Minute)
	if ticks, _ := chronicletest.CustomStatus[int](env, id); ticks != 30 {
		t.Fatalf("%d ticks in 30.5 hours, want 30", ticks)
	}
}

func TestMisuseFailsAtOnce(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		body func(ft *fakeT)
		want string
	}{
		"clock in options": {
			body: func(ft *fakeT) {
				chronicletest.New(ft, chronicletest.EngineOptions(chronicle.Options{Clock: round.SystemClock{}}))
			},
			want: "the environment owns the clock",
		},
		"mock with other types": {
			body: func(ft *fakeT) {
				env := chronicletest.New(ft)
				chronicletest.MockActivity[int, string](env, "charge").Maybe()
				chronicletest.MockActivity[string, string](env, "charge")
			},
			want: "activity charge is mocked as [int, string]; MockActivity[string, string] cannot add to it",
		},
		"mock and real activity": {
			body: func(ft *fakeT) {
				env := chronicletest.New(ft)
				mustRegisterF(ft, chronicle.RegisterActivity(env.Engine(), "charge", func(_ context.Context, n int) (string, error) { return "", nil }))
				chronicletest.MockActivity[int, string](env, "charge")
			},
			want: "do not register both",
		},
		"result of a failed instance": {
			body: func(ft *fakeT) {
				env := chronicletest.New(ft)
				mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "fails", func(*chronicle.Context, int) (int, error) {
					return 0, errors.New("out of stock")
				}))
				id := env.Start("fails", 1, nil)
				env.RunUntilIdle()
				chronicletest.Result[int](env, id)
			},
			want: "id-1 is failed, not completed (out of stock)",
		},
		"run until the past": {
			body: func(ft *fakeT) {
				env := chronicletest.New(ft)
				env.RunUntil(env.Now().Add(-time.Second))
			},
			want: "is before the virtual time",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ft := runFake(t, c.body)
			expectReport(t, ft, "FATAL: ", c.want)
		})
	}
}

func TestAssertionsReportMismatches(t *testing.T) {
	t.Parallel()
	golden := filepath.Join(t.TempDir(), "approval.golden")
	if err := os.WriteFile(golden, []byte("SEQ  something else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ft := runFake(t, func(ft *fakeT) {
		env := chronicletest.New(ft)
		mustRegisterF(ft, chronicle.RegisterWorkflow(env.Engine(), "approval", approval))
		id := env.Start("approval", "x", nil)
		env.RunFor(time.Hour)
		if env.AssertStatus(id, chronicle.StatusCompleted) {
			ft.Errorf("AssertStatus passed")
		}
		if env.AssertCustomStatus(id, "decided") {
			ft.Errorf("AssertCustomStatus passed")
		}
		if env.AssertHistory(id, history.KindExecutionStarted, history.KindTimerCreated) {
			ft.Errorf("AssertHistory passed")
		}
		if env.AssertHistoryContains(id, history.KindTimerCreated, history.KindCustomStatusSet) {
			ft.Errorf("AssertHistoryContains passed")
		}
		if env.AssertGolden(id, golden) {
			ft.Errorf("AssertGolden passed")
		}
		if env.AssertGolden(id, golden+".missing") {
			ft.Errorf("AssertGolden passed without a file")
		}
		// And the ones that hold pass.
		if !env.AssertStatus(id, chronicle.StatusRunning) || !env.AssertCustomStatus(id, "waiting") ||
			!env.AssertHistory(id, history.KindExecutionStarted, history.KindCustomStatusSet, history.KindTimerCreated) ||
			!env.AssertHistoryContains(id, history.KindExecutionStarted, history.KindTimerCreated) {
			ft.Errorf("a true assertion failed")
		}
	})
	expectReport(t, ft,
		"id-1 is running, want completed",
		`custom status of id-1 is "waiting", want "decided"`,
		"≠ 2   CustomStatusSet          TimerCreated",
		"has no CustomStatusSet after [TimerCreated] in order",
		"differs from "+golden+" at line 1",
		"does not exist; run the test with CHRONICLE_UPDATE_GOLDEN=1")
	ft.mu.Lock()
	n := len(ft.errors)
	ft.mu.Unlock()
	if n != 6 {
		t.Errorf("%d failures reported, want 6:\n%s", n, ft.reported())
	}
}

func mustRegisterF(ft *fakeT, err error) {
	if err != nil {
		ft.Fatal(err)
	}
}
