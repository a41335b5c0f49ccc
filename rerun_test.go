package chronicle_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// rerunClaim is the workflow the rerun tests run: it rates a claim, then
// pays the rate, optionally waiting for an approval signal in between.
type rerunClaim struct {
	Amount int
	Wait   bool
}

// rerunCalls counts the activities' calls of one test.
type rerunCalls struct{ rate, pay atomic.Int32 }

func registerRerunClaim(t *testing.T, e *chronicle.Engine, calls *rerunCalls) {
	t.Helper()
	activity(t, e, "rate", func(_ context.Context, amount int) (int, error) {
		calls.rate.Add(1)
		if amount < 0 {
			return 0, chronicle.NonRetryable(fmt.Errorf("negative amount %d", amount))
		}
		return amount * 3, nil
	})
	activity(t, e, "pay", func(_ context.Context, rate int) (string, error) {
		n := calls.pay.Add(1)
		return fmt.Sprintf("paid %d (call %d)", rate, n), nil
	})
	register(t, e, "claim", func(ctx *chronicle.Context, in rerunClaim) (string, error) {
		rate, err := chronicle.CallActivity[int](ctx, "rate", in.Amount, nil)
		if err != nil {
			return "", err
		}
		if in.Wait {
			var ok bool
			if err := ctx.WaitEvent("approve", nil).Get(&ok); err != nil {
				return "", err
			}
		}
		return chronicle.CallActivity[string](ctx, "pay", rate, nil)
	})
}

// seqOf returns the seq of the n-th (from 1) event of kind k.
func seqOf(t *testing.T, events []history.Event, k history.Kind, n int) int64 {
	t.Helper()
	for _, e := range events {
		if e.Kind == k {
			if n--; n == 0 {
				return e.Seq
			}
		}
	}
	t.Fatalf("no %s number %d in history", k, n)
	return 0
}

// checkRerun checks what every rerun leaves: the old events untouched, a
// chain that verifies, projections equal to the fold of history, a
// history the code replays, the record in the old execution and the
// lineage in the new one.
func checkRerun(t *testing.T, b *bundle, id string, before []history.Event, newExec string, fromSeq int64) []history.Event {
	t.Helper()
	events := b.history(t, id)
	require.GreaterOrEqual(t, len(events), len(before))
	require.Equal(t, before, events[:len(before)], "the old history is never rewritten")
	require.NoError(t, b.engine.Verify(b.ctx, id))
	diffs, err := b.engine.CheckProjections(b.ctx, id)
	require.NoError(t, err)
	require.Empty(t, diffs, "stored projections equal the fold of history")
	require.NoError(t, b.engine.RebuildProjections(b.ctx, id))
	diffs, err = b.engine.CheckProjections(b.ctx, id)
	require.NoError(t, err)
	require.Empty(t, diffs, "rebuilt projections equal the fold of history")
	rep := b.engine.ReplayHistory(events)
	require.NoError(t, rep.Err)
	require.Nil(t, rep.Divergence)
	require.Equal(t, 2, rep.Executions)

	old := before[0].ExecutionID
	var record *history.ExecutionRerun
	var start *history.ExecutionStarted
	for _, e := range events[len(before):] {
		a, err := e.Attributes()
		require.NoError(t, err)
		switch a := a.(type) {
		case *history.ExecutionRerun:
			require.Equal(t, old, e.ExecutionID)
			require.Equal(t, "user:ana", e.Actor)
			record = a
		case *history.ExecutionStarted:
			require.Equal(t, newExec, e.ExecutionID)
			require.Equal(t, "user:ana", e.Actor)
			start = a
		}
	}
	require.NotNil(t, record, "the old execution records the rerun")
	require.Equal(t, newExec, record.NewExecutionID)
	require.Equal(t, fromSeq, record.FromSeq)
	require.Equal(t, "rate table fixed", record.Reason)
	require.Equal(t, "OPS-7", record.Ticket)
	require.NotNil(t, start, "the new execution starts")
	require.NotNil(t, start.RerunOf)
	require.Equal(t, history.RerunRef{ExecutionID: old, FromSeq: fromSeq, Reason: "rate table fixed", Ticket: "OPS-7", ActivitySeq: record.ActivitySeq}, *start.RerunOf)
	return events
}

func rerunModes(t *testing.T, test func(t *testing.T, b *bundle)) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			test(t, setupOn(t, memory.New(memory.Options{Mode: mode})))
		})
	}
}

func TestRerun(t *testing.T) {
	t.Parallel()
	t.Run("CompletedFromMidHistory", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunCompleted)
	})
	t.Run("FailedActivityWithReplacedInput", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunFailedActivity)
	})
	t.Run("RunningInstanceEndsTheOldExecution", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunRunning)
	})
	t.Run("RefusalsWriteNothing", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunRefusals)
	})
	t.Run("SecondRequestForTheSameExecutionIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunTwice)
	})
	t.Run("PendingTimerIsArmedAgain", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunTimer)
	})
	t.Run("SuspendedInstance", func(t *testing.T) {
		t.Parallel()
		rerunModes(t, testRerunSuspended)
	})
}

// A timer the kept part leaves pending is armed again at its recorded
// fire time, and the new execution goes on when it fires.
func testRerunTimer(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	register(t, b.engine, "cooling", func(ctx *chronicle.Context, n int) (string, error) {
		rate, err := chronicle.CallActivity[int](ctx, "rate", n, nil)
		if err != nil {
			return "", err
		}
		if err := ctx.Sleep(time.Hour); err != nil {
			return "", err
		}
		return chronicle.CallActivity[string](ctx, "pay", rate, nil)
	})
	b.start(t, "cooling", "C-6", 1)
	b.drain(t)
	b.advance(t, time.Hour)
	require.Equal(t, "paid 3 (call 1)", result[string](t, b, "C-6"))
	before := b.history(t, "C-6")
	from := seqOf(t, before, history.KindTimerFired, 1)

	exec, err := b.engine.Rerun(b.ctx, "C-6", chronicle.RerunOptions{FromSeq: from, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	b.drain(t) // the timer's fire time has passed: it fires at once
	require.Equal(t, "paid 3 (call 2)", result[string](t, b, "C-6"))
	events := checkRerun(t, b, "C-6", before, exec, from)
	require.Equal(t, 2, count(events, history.KindTimerFired))
	require.Equal(t, int32(1), calls.rate.Load())
}

// A suspended instance can be rerun: its execution ends as terminated and
// the new one runs, since suspensions are not copied.
func testRerunSuspended(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-7", rerunClaim{Amount: 1, Wait: true})
	b.drain(t)
	require.NoError(t, b.engine.Suspend(b.ctx, "C-7", "fraud review", nil))
	b.drain(t)
	require.Equal(t, chronicle.StatusSuspended, b.describe(t, "C-7").Status)
	before := b.history(t, "C-7")
	from := int64(len(before)) // the suspension, a message

	exec, err := b.engine.Rerun(b.ctx, "C-7", chronicle.RerunOptions{FromSeq: from, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	b.drain(t)
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "C-7").Status)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "C-7", "approve", true, nil))
	b.drain(t)
	require.Equal(t, "paid 3 (call 1)", result[string](t, b, "C-7"))
	events := checkRerun(t, b, "C-7", before, exec, from)
	require.Equal(t, history.KindExecutionTerminated, events[len(before)].Kind)
}

// A completed instance rerun from its second turn pays again, without
// rating again: the rate's result is kept.
func testRerunCompleted(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-1", rerunClaim{Amount: 10})
	b.drain(t)
	require.Equal(t, "paid 30 (call 1)", result[string](t, b, "C-1"))
	before := b.history(t, "C-1")
	from := seqOf(t, before, history.KindTurnStarted, 2)

	exec, err := b.engine.Rerun(b.ctx, "C-1", chronicle.RerunOptions{FromSeq: from, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	require.NotEmpty(t, exec)
	b.drain(t)

	require.Equal(t, "paid 30 (call 2)", result[string](t, b, "C-1"))
	require.Equal(t, int32(1), calls.rate.Load(), "the kept rate is replayed, not run again")
	require.Equal(t, int32(2), calls.pay.Load())
	inst := b.describe(t, "C-1")
	require.Equal(t, exec, inst.ExecutionID)
	events := checkRerun(t, b, "C-1", before, exec, from)
	// The old execution had completed: it records the rerun after its
	// end, without a termination.
	require.Equal(t, history.KindExecutionRerun, events[len(before)].Kind)
	require.Equal(t, 0, count(events, history.KindExecutionTerminated))
	// The new execution copies the events between its start and the turn.
	copied := events[len(before)+2 : len(before)+2+int(from-2)]
	for i, e := range copied {
		require.Equal(t, before[i+1].Kind, e.Kind)
		require.Equal(t, before[i+1].At, e.At, "copies keep their times: the code replays against them")
		require.Equal(t, exec, e.ExecutionID)
	}
}

// An instance that failed because an activity failed for good is rerun
// from that failure with a corrected input, and completes.
func testRerunFailedActivity(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-2", rerunClaim{Amount: -5})
	b.drain(t)
	require.Equal(t, chronicle.StatusFailed, b.describe(t, "C-2").Status)
	before := b.history(t, "C-2")
	from := seqOf(t, before, history.KindActivityFailed, 1)

	exec, err := b.engine.Rerun(b.ctx, "C-2", chronicle.RerunOptions{FromSeq: from, ActivityInput: 5, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	b.drain(t)

	require.Equal(t, "paid 15 (call 1)", result[string](t, b, "C-2"))
	require.Equal(t, int32(2), calls.rate.Load())
	events := checkRerun(t, b, "C-2", before, exec, from)
	var sched []int
	for _, e := range events {
		if e.Kind == history.KindActivityScheduled && e.ExecutionID == exec {
			a, err := e.Attributes()
			require.NoError(t, err)
			var in int
			require.NoError(t, b.engine.Decode(a.(*history.ActivityScheduled).Input, &in))
			sched = append(sched, in)
		}
	}
	require.Equal(t, []int{5, 15}, sched, "the copied schedule records the replaced input")
	rec := events[len(before)]
	a, err := rec.Attributes()
	require.NoError(t, err)
	require.Equal(t, seqOf(t, before, history.KindActivityScheduled, 1), a.(*history.ExecutionRerun).ActivitySeq)
}

// A running instance rerun from an activity's result ends its execution as
// terminated, cancels what it waited for, runs the activity again and goes
// on in the new execution.
func testRerunRunning(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-3", rerunClaim{Amount: 2, Wait: true})
	b.drain(t)
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "C-3").Status)
	before := b.history(t, "C-3")
	from := seqOf(t, before, history.KindActivityScheduled, 1)

	exec, err := b.engine.Rerun(b.ctx, "C-3", chronicle.RerunOptions{FromSeq: from, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	b.drain(t)
	require.Equal(t, int32(2), calls.rate.Load(), "the activity runs again")
	inst := b.describe(t, "C-3")
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	require.Equal(t, exec, inst.ExecutionID)

	require.NoError(t, b.engine.RaiseEvent(b.ctx, "C-3", "approve", true, nil))
	b.drain(t)
	require.Equal(t, "paid 6 (call 1)", result[string](t, b, "C-3"))
	events := checkRerun(t, b, "C-3", before, exec, from)
	end := events[len(before)]
	require.Equal(t, history.KindExecutionTerminated, end.Kind, "the running execution ends first")
	require.Equal(t, before[0].ExecutionID, end.ExecutionID)
	require.Equal(t, "user:ana", end.Actor)
	a, err := end.Attributes()
	require.NoError(t, err)
	require.Contains(t, a.(*history.ExecutionTerminated).Reason, "rate table fixed")
	require.Equal(t, "OPS-7", a.(*history.ExecutionTerminated).Ticket)
	require.Equal(t, history.KindExecutionRerun, events[len(before)+1].Kind)
}

// Every refused rerun returns a typed error and writes nothing.
func testRerunRefusals(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-4", rerunClaim{Amount: 10})
	b.drain(t)
	before := b.history(t, "C-4")
	turn := seqOf(t, before, history.KindTurnStarted, 2)
	ok := chronicle.RerunOptions{FromSeq: turn, Reason: "rate table fixed", Actor: "ana"}

	_, err := b.engine.Rerun(b.ctx, "nobody", ok)
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	b.start(t, "claim", "C-4-queued", rerunClaim{Amount: 1})
	_, err = b.engine.Rerun(b.ctx, "C-4-queued", chronicle.RerunOptions{FromSeq: 2, Reason: "r", Actor: "ana"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "a start still queued has no history")
	require.Contains(t, err.Error(), "no history to rerun from")
	for name, o := range map[string]chronicle.RerunOptions{
		"no seq":               {Reason: "r", Actor: "ana"},
		"negative seq":         {FromSeq: -1, Reason: "r", Actor: "ana"},
		"the start":            {FromSeq: 1, Reason: "r", Actor: "ana"},
		"past the end":         {FromSeq: before[len(before)-1].Seq + 1, Reason: "r", Actor: "ana"},
		"a command":            {FromSeq: before[len(before)-1].Seq, Reason: "r", Actor: "ana"},
		"input without action": {FromSeq: turn, ActivityInput: 1, Reason: "r", Actor: "ana"},
		"no reason":            {FromSeq: turn, Actor: "ana"},
		"bad ticket":           {FromSeq: turn, Reason: "r", Actor: "ana", Ticket: "OPS\n7"},
		"bad actor":            {FromSeq: turn, Reason: "r", Actor: "a\x00b"},
	} {
		_, err := b.engine.Rerun(b.ctx, "C-4", o)
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, name)
	}
	b.drain(t)
	require.Equal(t, before, b.history(t, "C-4"), "a refused rerun writes nothing")

	// After a rerun, seqs of the old execution are refused.
	_, err = b.engine.Rerun(b.ctx, "C-4", ok)
	require.NoError(t, err)
	b.drain(t)
	_, err = b.engine.Rerun(b.ctx, "C-4", ok)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.Contains(t, err.Error(), "only the current execution")
}

// Two reruns queued against one execution: the first runs, the second
// finds another execution current and is dead-lettered, not applied.
func testRerunTwice(t *testing.T, b *bundle) {
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-5", rerunClaim{Amount: 10})
	b.drain(t)
	before := b.history(t, "C-5")
	turn := seqOf(t, before, history.KindTurnStarted, 2)
	opts := chronicle.RerunOptions{FromSeq: turn, Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"}
	first, err := b.engine.Rerun(b.ctx, "C-5", opts)
	require.NoError(t, err)
	second, err := b.engine.Rerun(b.ctx, "C-5", opts)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	b.drain(t)
	events := checkRerun(t, b, "C-5", before, first, turn)
	require.Equal(t, 1, count(events, history.KindExecutionRerun))
	letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "C-5"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, provider.ReasonRejected, letters[0].Reason)
	require.Contains(t, letters[0].Error, "current execution is "+first)
}

// Signed checkpoints cover a rerun like any other append: a checkpoint
// taken before it and one after it both verify, the second up to the new
// execution's last event.
func TestRerunIsCoveredByCheckpoints(t *testing.T) {
	t.Parallel()
	signer, err := chronicle.NewEd25519Signer("k1", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	require.NoError(t, err)
	b := setup(t, chronicle.Options{Checkpoints: &chronicle.CheckpointOptions{Signer: signer}})
	var calls rerunCalls
	registerRerunClaim(t, b.engine, &calls)
	b.start(t, "claim", "C-8", rerunClaim{Amount: 10})
	b.drain(t)
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	before := b.history(t, "C-8")
	exec, err := b.engine.Rerun(b.ctx, "C-8", chronicle.RerunOptions{FromSeq: seqOf(t, before, history.KindTurnStarted, 2), Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"})
	require.NoError(t, err)
	b.drain(t)
	cp, err := b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), cp.Number)
	events := checkRerun(t, b, "C-8", before, exec, seqOf(t, before, history.KindTurnStarted, 2))

	keys := &chronicle.Keyring{}
	require.NoError(t, keys.Add(signer.KeyID(), signer.Public()))
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Len(t, rep.Instances, 1)
	require.Equal(t, events[len(events)-1].Seq, rep.Instances[0].CoveredSeq)
}
