package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// batchDecls are the search attributes of the batch tests.
var batchDecls = map[string]query.Type{"region": query.Keyword}

// waiterIn is the input of the workflow the batch tests act on.
type waiterIn struct {
	// Fragile makes the first turn panic while the test's broken flag is
	// set: the instance is dead-lettered.
	Fragile bool
}

// registerWaiter registers "waiter", which ends when it receives "go" or
// a cancel request, and returns the flag that breaks fragile instances.
func registerWaiter(t *testing.T, e *chronicle.Engine) *atomic.Bool {
	t.Helper()
	broken := &atomic.Bool{}
	err := chronicle.RegisterWorkflow(e, "waiter", func(ctx *chronicle.Context, in waiterIn) (string, error) {
		if in.Fragile && broken.Load() {
			panic("broken")
		}
		goSig := ctx.WaitEvent("go", nil)
		cancel := ctx.WaitEvent(chronicle.CancelEvent, nil)
		if ctx.WhenAny(goSig, cancel) == 1 {
			var r chronicle.CancelRequest
			if err := cancel.Get(&r); err != nil {
				return "", err
			}
			return "cancelled by " + r.Actor + ": " + r.Reason, nil
		}
		return "went", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return broken
}

func batchEnv(t *testing.T, opts ...chronicletest.Option) (*chronicletest.Env, *atomic.Bool) {
	t.Helper()
	opts = append([]chronicletest.Option{chronicletest.EngineOptions(chronicle.Options{SearchAttributes: batchDecls})}, opts...)
	env := chronicletest.New(t, opts...)
	return env, registerWaiter(t, env.Engine())
}

// startWaiters starts n waiters "<region>-<i>" in region.
func startWaiters(env *chronicletest.Env, region string, n int, in waiterIn) []string {
	var ids []string
	for i := 1; i <= n; i++ {
		ids = append(ids, env.Start("waiter", in, &chronicle.StartOptions{
			InstanceID: fmt.Sprintf("%s-%02d", region, i), SearchAttributes: map[string]any{"region": region}}))
	}
	return ids
}

func runBatchJob(t *testing.T, env *chronicletest.Env, o chronicle.BatchOptions) *chronicle.BatchDescription {
	t.Helper()
	id, err := env.Engine().StartBatch(env.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, err := env.Engine().DescribeBatch(env.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func wantProgress(t *testing.T, d *chronicle.BatchDescription, state chronicle.BatchState, matched, done, skipped, failed int64) {
	t.Helper()
	if d.State != state || d.Matched != matched || d.Done != done || d.Skipped != skipped || d.Failed != failed {
		t.Errorf("batch %s: %s matched %d done %d skipped %d failed %d (failures %v), want %s %d/%d/%d/%d",
			d.ID, d.State, d.Matched, d.Done, d.Skipped, d.Failed, d.Failures, state, matched, done, skipped, failed)
	}
}

func statusOf(t *testing.T, env *chronicletest.Env, id string) chronicle.Status {
	t.Helper()
	inst, err := env.Engine().Describe(env.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return inst.Status
}

// lastOf returns the last event of kind in the instance's history.
func lastOf(t *testing.T, env *chronicletest.Env, id string, kind history.Kind) (history.Event, history.Attributes) {
	t.Helper()
	events, err := env.Engine().History(env.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == kind {
			a, err := events[i].Attributes()
			if err != nil {
				t.Fatal(err)
			}
			return events[i], a
		}
	}
	t.Fatalf("%s has no %s event", id, kind)
	return history.Event{}, nil
}

// ticketOf returns the Ticket of a control event's attributes.
func ticketOf(a history.Attributes) string {
	switch a := a.(type) {
	case *history.ExecutionTerminated:
		return a.Ticket
	case *history.ExecutionSuspended:
		return a.Ticket
	case *history.ExecutionResumed:
		return a.Ticket
	}
	return ""
}

func ukBatch(action chronicle.BatchAction) chronicle.BatchOptions {
	return chronicle.BatchOptions{ID: "b-" + string(action), Action: action, Workflow: "waiter", Where: "region = 'uk'",
		Reason: "region closed", Ticket: "OPS-7", Actor: "alice"}
}

func TestBatchControlActions(t *testing.T) {
	for _, tc := range []struct {
		action chronicle.BatchAction
		status chronicle.Status
		kind   history.Kind
	}{
		{chronicle.BatchTerminate, chronicle.StatusTerminated, history.KindExecutionTerminated},
		{chronicle.BatchSuspend, chronicle.StatusSuspended, history.KindExecutionSuspended},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			env, _ := batchEnv(t)
			uk := startWaiters(env, "uk", 3, waiterIn{})
			fr := startWaiters(env, "fr", 2, waiterIn{})
			env.RunUntilIdle()
			d := runBatchJob(t, env, ukBatch(tc.action))
			wantProgress(t, d, chronicle.BatchCompleted, 3, 3, 0, 0)
			for _, id := range uk {
				if s := statusOf(t, env, id); s != tc.status {
					t.Errorf("%s is %s, want %s", id, s, tc.status)
				}
				ev, a := lastOf(t, env, id, tc.kind)
				reason := fmt.Sprint(a)
				if ev.Actor != "user:alice" || !strings.Contains(reason, "region closed") || !strings.Contains(reason, "OPS-7") || !strings.Contains(reason, "b-"+string(tc.action)) {
					t.Errorf("%s: %s recorded by %s with %q, want alice, the reason, ticket and batch", id, tc.kind, ev.Actor, reason)
				}
				if got := ticketOf(a); got != "OPS-7" {
					t.Errorf("%s: %s has ticket %q, want OPS-7", id, tc.kind, got)
				}
			}
			for _, id := range fr {
				if s := statusOf(t, env, id); s != chronicle.StatusRunning {
					t.Errorf("unselected %s is %s", id, s)
				}
			}
			if tc.action != chronicle.BatchSuspend {
				return
			}
			// Resume them, a suspended instance among the selection
			// twice over: an already running one is skipped.
			if err := env.Engine().Resume(env.Context(), uk[0], "early", nil); err != nil {
				t.Fatal(err)
			}
			env.RunUntilIdle()
			d = runBatchJob(t, env, ukBatch(chronicle.BatchResume))
			wantProgress(t, d, chronicle.BatchCompleted, 3, 2, 1, 0)
			for _, id := range uk {
				if s := statusOf(t, env, id); s != chronicle.StatusRunning {
					t.Errorf("%s is %s after resume", id, s)
				}
			}
			if ev, a := lastOf(t, env, uk[1], history.KindExecutionResumed); ev.Actor != "user:alice" || ticketOf(a) != "OPS-7" {
				t.Errorf("resume recorded by %s with ticket %q", ev.Actor, ticketOf(a))
			}
		})
	}
}

func TestBatchSignalAndCancel(t *testing.T) {
	for _, action := range []chronicle.BatchAction{chronicle.BatchSignal, chronicle.BatchCancel} {
		t.Run(string(action), func(t *testing.T) {
			env, _ := batchEnv(t)
			uk := startWaiters(env, "uk", 3, waiterIn{})
			fr := startWaiters(env, "fr", 2, waiterIn{})
			env.RunUntilIdle()
			o := ukBatch(action)
			want := "cancelled by user:alice: region closed"
			if action == chronicle.BatchSignal {
				o.Signal, want = "go", "went"
			}
			wantProgress(t, runBatchJob(t, env, o), chronicle.BatchCompleted, 3, 3, 0, 0)
			for _, id := range uk {
				var got string
				if err := env.Wait(id).Result(&got); err != nil || got != want {
					t.Errorf("%s ended with %q, %v; want %q", id, got, err, want)
				}
				ev, a := lastOf(t, env, id, history.KindEventRaised)
				if r := a.(*history.EventRaised); ev.Actor != "user:alice" || !strings.Contains(r.Sender, "region closed") || !strings.Contains(r.Sender, "OPS-7") {
					t.Errorf("%s: signal recorded from %s by %s", id, r.Sender, ev.Actor)
				}
			}
			for _, id := range fr {
				if s := statusOf(t, env, id); s != chronicle.StatusRunning {
					t.Errorf("unselected %s is %s", id, s)
				}
			}
		})
	}
}

func TestBatchSkipsEndedInstances(t *testing.T) {
	env, _ := batchEnv(t)
	uk := startWaiters(env, "uk", 4, waiterIn{})
	env.RunUntilIdle()
	e := env.Engine()
	// uk-03 ends before the batch starts, uk-04 while it runs (between
	// its pages, of one instance each).
	if err := e.RaiseEvent(env.Context(), uk[2], "go", nil, nil); err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	o := ukBatch(chronicle.BatchTerminate)
	o.Rate = 1
	id, err := e.StartBatch(env.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(500 * time.Millisecond)
	if d, _ := e.DescribeBatch(env.Context(), id); d.Done != 1 || d.Cursor != uk[0] {
		t.Fatalf("after one page: %+v", d)
	}
	if err := e.RaiseEvent(env.Context(), uk[3], "go", nil, nil); err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, _ := e.DescribeBatch(env.Context(), id)
	wantProgress(t, d, chronicle.BatchCompleted, 4, 2, 2, 0)
	for _, id := range uk[2:] {
		if s := statusOf(t, env, id); s != chronicle.StatusCompleted {
			t.Errorf("the ended instance %s is %s", id, s)
		}
	}
}

func TestBatchPurge(t *testing.T) {
	var (
		mu          sync.Mutex
		archived    = map[string]int{} // instance id → events archived
		archiveDown atomic.Bool
	)
	env, _ := batchEnv(t, chronicletest.EngineOptions(chronicle.Options{SearchAttributes: batchDecls,
		PurgeArchive: func(_ context.Context, id string, events []chronicle.Event) error {
			if archiveDown.Load() && id == "uk-02" {
				return errors.New("archive bucket unreachable")
			}
			mu.Lock()
			defer mu.Unlock()
			archived[id] = len(events)
			return nil
		}}))
	uk := startWaiters(env, "uk", 3, waiterIn{})
	fr := startWaiters(env, "fr", 2, waiterIn{})
	env.RunUntilIdle()
	// Two of uk end; the third keeps running and is skipped.
	for _, id := range uk[:2] {
		if err := env.Engine().RaiseEvent(env.Context(), id, "go", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.RunUntilIdle()
	archiveDown.Store(true)
	d := runBatchJob(t, env, ukBatch(chronicle.BatchPurge))
	wantProgress(t, d, chronicle.BatchCompleted, 3, 1, 1, 1)
	if len(d.Failures) != 1 || d.Failures[0].InstanceID != "uk-02" || !strings.Contains(d.Failures[0].Error, "archive bucket unreachable") {
		t.Errorf("failures: %+v", d.Failures)
	}
	if s := statusOf(t, env, "uk-02"); s != chronicle.StatusCompleted {
		t.Errorf("uk-02, whose archive failed, is %s", s)
	}
	// The archive is back: a second batch purges uk-02; uk-01, purged,
	// is not selected any more.
	archiveDown.Store(false)
	o := ukBatch(chronicle.BatchPurge)
	o.ID = "again"
	wantProgress(t, runBatchJob(t, env, o), chronicle.BatchCompleted, 2, 1, 1, 0)
	for _, id := range uk[:2] {
		if _, err := env.Engine().Describe(env.Context(), id); !errors.Is(err, chronicle.ErrInstanceNotFound) {
			t.Errorf("purged %s: Describe says %v", id, err)
		}
		ts, err := env.Engine().GetTombstone(env.Context(), id)
		if err != nil || ts.PurgedBy != "user:alice" {
			t.Errorf("tombstone of %s: %+v, %v", id, ts, err)
		}
		if archived[id] == 0 || int64(archived[id]) != ts.LastSeq {
			t.Errorf("%s: %d events archived, tombstone at seq %d", id, archived[id], ts.LastSeq)
		}
	}
	for _, id := range append([]string{uk[2]}, fr...) {
		if s := statusOf(t, env, id); s != chronicle.StatusRunning {
			t.Errorf("%s is %s", id, s)
		}
		if archived[id] != 0 {
			t.Errorf("%s was archived", id)
		}
	}
}

func TestBatchDeadLetters(t *testing.T) {
	for _, action := range []chronicle.BatchAction{chronicle.BatchRedrive, chronicle.BatchDiscard} {
		t.Run(string(action), func(t *testing.T) {
			env, broken := batchEnv(t, chronicletest.AllowDeadLetters())
			broken.Store(true)
			uk := startWaiters(env, "uk", 2, waiterIn{Fragile: true})
			fr := startWaiters(env, "fr", 1, waiterIn{Fragile: true})
			startWaiters(env, "uk-ok", 1, waiterIn{})
			env.RunUntilIdle()
			broken.Store(false)
			o := ukBatch(action)
			o.Where = "region = 'uk' OR region = 'uk-ok'"
			d := runBatchJob(t, env, o)
			wantProgress(t, d, chronicle.BatchCompleted, 3, 2, 1, 0)
			want := provider.DeadLetterRedriven
			if action == chronicle.BatchDiscard {
				want = provider.DeadLetterDiscarded
			}
			for _, id := range uk {
				dls, err := env.Engine().ListDeadLetters(env.Context(), chronicle.DeadLetterFilter{InstanceID: id})
				if err != nil || len(dls) != 1 {
					t.Fatalf("dead letters of %s: %v, %v", id, dls, err)
				}
				if dls[0].Status != want || dls[0].ResolvedBy != "user:alice" {
					t.Errorf("dead letter of %s: %s by %s", id, dls[0].Status, dls[0].ResolvedBy)
				}
				if action == chronicle.BatchRedrive {
					if s := statusOf(t, env, id); s != chronicle.StatusRunning {
						t.Errorf("redriven %s is %s", id, s)
					}
				}
			}
			dls, err := env.Engine().ListDeadLetters(env.Context(), chronicle.DeadLetterFilter{InstanceID: fr[0]})
			if err != nil || len(dls) != 1 || dls[0].Status != provider.DeadLetterDead {
				t.Errorf("unselected dead letter: %v, %v", dls, err)
			}
			if err := env.Engine().DiscardDeadLetter(env.Context(), dls[0].ID, "test"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBatchPauseResumeAndProgress(t *testing.T) {
	env, _ := batchEnv(t)
	uk := startWaiters(env, "uk", 12, waiterIn{})
	env.RunUntilIdle()
	o := ukBatch(chronicle.BatchTerminate)
	o.Rate = 1 // one page of one instance a second
	id, err := env.Engine().StartBatch(env.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(2500 * time.Millisecond)
	d, err := env.Engine().DescribeBatch(env.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != chronicle.BatchRunning || d.Done < 1 || d.Done > 4 || d.Cursor == "" {
		t.Fatalf("after 2.5s at 1/s: %+v", d)
	}
	if err := env.Engine().PauseBatch(env.Context(), id, "peak hours", "bob"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Second) // the page under way ends
	paused, _ := env.Engine().DescribeBatch(env.Context(), id)
	env.RunFor(time.Hour)
	still, _ := env.Engine().DescribeBatch(env.Context(), id)
	if paused.State != chronicle.BatchPaused || still.Done != paused.Done || still.Matched != paused.Matched {
		t.Fatalf("paused batch moved: %+v then %+v", paused, still)
	}
	last := still.Changes[len(still.Changes)-1]
	if last.Kind != "pause" || last.Actor != "user:bob" || last.Note != "peak hours" {
		t.Errorf("pause recorded as %+v", last)
	}
	running := 0
	for _, u := range uk {
		if statusOf(t, env, u) == chronicle.StatusRunning {
			running++
		}
	}
	if int64(running) != 12-paused.Done {
		t.Errorf("%d running while paused, want %d", running, 12-paused.Done)
	}
	if err := env.Engine().ResumeBatch(env.Context(), id, "", "bob"); err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, _ = env.Engine().DescribeBatch(env.Context(), id)
	wantProgress(t, d, chronicle.BatchCompleted, 12, 12, 0, 0)
	// Twelve pages: the batch continued as new on the way.
	events, err := env.Engine().History(env.Context(), chronicle.BatchInstanceID(id))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(events, history.KindExecutionStarted); n < 2 {
		t.Errorf("batch ran %d executions over 12 pages, want it to continue as new", n)
	}
	list, err := env.Engine().ListBatches(env.Context())
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].State != chronicle.BatchCompleted {
		t.Errorf("ListBatches: %v, %v", list, err)
	}
	if err := env.Engine().PauseBatch(env.Context(), id, "", "bob"); !errors.Is(err, chronicle.ErrInstanceNotRunning) {
		t.Errorf("pausing an ended batch: %v", err)
	}
}

func TestBatchCancel(t *testing.T) {
	env, _ := batchEnv(t)
	startWaiters(env, "uk", 5, waiterIn{})
	env.RunUntilIdle()
	o := ukBatch(chronicle.BatchTerminate)
	o.Rate = 1
	id, err := env.Engine().StartBatch(env.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(1500 * time.Millisecond)
	if err := env.Engine().CancelBatch(env.Context(), id, "wrong query", "carol"); err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, _ := env.Engine().DescribeBatch(env.Context(), id)
	if d.State != chronicle.BatchCancelled || d.Done >= 5 {
		t.Errorf("cancelled batch: %+v", d)
	}
	running, err := env.Engine().ListInstances(env.Context(), chronicle.InstanceFilter{Workflow: "waiter", Status: chronicle.StatusRunning})
	if err != nil || int64(len(running)) != 5-d.Done {
		t.Errorf("%d running after the cancel, want %d (%v)", len(running), 5-d.Done, err)
	}
}

func TestBatchValidation(t *testing.T) {
	env, _ := batchEnv(t)
	e := env.Engine()
	good := ukBatch(chronicle.BatchTerminate)
	for name, mutate := range map[string]func(*chronicle.BatchOptions){
		"unknown action":      func(o *chronicle.BatchOptions) { o.Action = "explode" },
		"unparsable query":    func(o *chronicle.BatchOptions) { o.Where = "region = " },
		"undeclared field":    func(o *chronicle.BatchOptions) { o.Where = "colour = 'red'" },
		"signal without name": func(o *chronicle.BatchOptions) { o.Action = chronicle.BatchSignal },
		"no reason":           func(o *chronicle.BatchOptions) { o.Reason = " " },
		"no actor":            func(o *chronicle.BatchOptions) { o.Actor = "" },
		"ticket with newline": func(o *chronicle.BatchOptions) { o.Ticket = "OPS-7\nOPS-8" },
		"negative rate":       func(o *chronicle.BatchOptions) { o.Rate = -1 },
		"signal on terminate": func(o *chronicle.BatchOptions) { o.Signal = "go" },
		"batches":             func(o *chronicle.BatchOptions) { o.Workflow = chronicle.BatchWorkflow },
	} {
		o := good
		mutate(&o)
		if _, err := e.StartBatch(env.Context(), o); !errors.Is(err, chronicle.ErrInvalidArgument) {
			t.Errorf("%s: StartBatch says %v, want ErrInvalidArgument", name, err)
		}
	}
	if list, err := e.ListBatches(env.Context()); err != nil || len(list) != 0 {
		t.Errorf("refused batches were written: %v, %v", list, err)
	}
	if _, err := e.StartBatch(env.Context(), good); err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartBatch(env.Context(), good); !errors.Is(err, chronicle.ErrBatchExists) {
		t.Errorf("a second batch with the id: %v", err)
	}
	if _, err := e.DescribeBatch(env.Context(), "nope"); !errors.Is(err, chronicle.ErrBatchNotFound) {
		t.Errorf("DescribeBatch of an unknown id: %v", err)
	}
	env.RunUntilIdle()
}

// TestBatchClient runs a batch started from a Client that has no workflow
// registered: an engine elsewhere runs it.
func TestBatchClient(t *testing.T) {
	env, _ := batchEnv(t)
	startWaiters(env, "uk", 2, waiterIn{})
	env.RunUntilIdle()
	c, err := chronicle.NewClient(env.Engine().Store(), chronicle.ClientOptions{SearchAttributes: batchDecls})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.StartBatch(context.Background(), ukBatch(chronicle.BatchTerminate))
	if err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, err := c.DescribeBatch(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	wantProgress(t, d, chronicle.BatchCompleted, 2, 2, 0, 0)
}

// A batch paused and poked many times continues as new while paused and
// goes on where it stopped once resumed.
func TestBatchManySignalsContinueAsNew(t *testing.T) {
	env, _ := batchEnv(t)
	startWaiters(env, "uk", 3, waiterIn{})
	env.RunUntilIdle()
	e, ctx := env.Engine(), env.Context()
	o := ukBatch(chronicle.BatchSuspend)
	o.Rate = 1
	id, err := e.StartBatch(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(500 * time.Millisecond)
	for i := 0; i < 60; i++ {
		if err := e.PauseBatch(ctx, id, fmt.Sprint("pause ", i), "bob"); err != nil {
			t.Fatal(err)
		}
		env.RunFor(time.Second)
	}
	d, _ := e.DescribeBatch(ctx, id)
	if d.State != chronicle.BatchPaused || d.Done != 1 {
		t.Fatalf("paused batch: %+v", d)
	}
	if err := e.ResumeBatch(ctx, id, "", "bob"); err != nil {
		t.Fatal(err)
	}
	env.RunUntilIdle()
	d, _ = e.DescribeBatch(ctx, id)
	wantProgress(t, d, chronicle.BatchCompleted, 3, 3, 0, 0)
	if last := d.Changes[len(d.Changes)-1]; last.Kind != "resume" || d.Changes[0].Kind != "start" {
		t.Errorf("changes: first %+v, last %+v", d.Changes[0], last)
	}
	events, err := e.History(ctx, chronicle.BatchInstanceID(id))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(events, history.KindExecutionStarted); n < 2 {
		t.Errorf("%d executions after 60 signals, want it to continue as new", n)
	}
}
