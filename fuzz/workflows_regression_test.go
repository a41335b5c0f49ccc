package fuzz_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// Reproductions of bugs that TestRapidWorkflowsPeekLock found, as plain
// tests on the memory provider in peek-lock mode with real workflow code.

// waitForGo waits for the signal "go" and returns its payload.
func waitForGo(ctx *replay.Context, _ []byte) ([]byte, error) {
	var got string
	if err := ctx.WaitEvent("go", nil).Get(&got); err != nil {
		return nil, err
	}
	return history.Encode(got)
}

// relayGo waits for "go" and continues as new (input 0); the next
// execution (input 1) waits for "go" again and returns its payload.
func relayGo(ctx *replay.Context, input []byte) ([]byte, error) {
	var n int
	if err := history.Decode(input, &n); err != nil {
		return nil, &replay.InputError{Workflow: "relay", Err: err}
	}
	var got string
	if err := ctx.WaitEvent("go", nil).Get(&got); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ctx.ContinueAsNew(1)
	}
	return history.Encode(got)
}

// regWorkflows are the workflows of the reproductions.
var regWorkflows = map[string]replay.WorkflowFunc{
	// waiter waits for the signal "go" and returns its payload.
	"waiter": waitForGo,
	// relay waits for "go" and continues as new; the next execution waits
	// for "go" again.
	"relay": relayGo,
	// sleeper sleeps a second and continues as new; the next execution
	// waits for "go".
	"sleeper": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var n int
		if err := history.Decode(input, &n); err != nil {
			return nil, &replay.InputError{Workflow: "sleeper", Err: err}
		}
		if n == 0 {
			if err := ctx.Sleep(time.Second); err != nil {
				return nil, err
			}
			return nil, ctx.ContinueAsNew(1)
		}
		return nil, ctx.WaitEvent("go", nil).Get(nil)
	},
	// caller calls "waiter" as the child "kid" and returns its output.
	"caller": func(ctx *replay.Context, _ []byte) ([]byte, error) {
		var got string
		if err := ctx.CallSubWorkflow("waiter", 0, &replay.SubWorkflowOptions{InstanceID: "kid"}).Get(&got); err != nil {
			return nil, err
		}
		return history.Encode(got)
	},
	// worker calls the activity "ok" and then waits for "go".
	"worker": func(ctx *replay.Context, _ []byte) ([]byte, error) {
		if err := ctx.CallActivity("ok", "x", nil).Get(nil); err != nil {
			return nil, err
		}
		return nil, ctx.WaitEvent("go", nil).Get(nil)
	},
	// abandoner calls the activity "ok" without waiting for it, waits for
	// "go" and continues as new; the next execution waits for "go".
	"abandoner": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var n int
		if err := history.Decode(input, &n); err != nil {
			return nil, &replay.InputError{Workflow: "abandoner", Err: err}
		}
		if n == 0 {
			ctx.CallActivity("ok", "x", nil)
		}
		if err := ctx.WaitEvent("go", nil).Get(nil); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, ctx.ContinueAsNew(1)
		}
		return nil, nil
	},
}

// regNode is a process with its own executor cache; its rounds can crash
// or pause at a crash point.
type regNode struct {
	runner *round.Runner

	points
}

type regBundle struct {
	store  *memory.Store
	clock  *round.ManualClock
	n1, n2 *regNode
}

func regSetup(t *testing.T) *regBundle {
	t.Helper()
	b := &regBundle{store: memory.New(memory.Options{Mode: provider.ModePeekLock}), clock: round.NewManualClock(t0)}
	lookup := func(name string) (replay.WorkflowFunc, bool) { fn, ok := regWorkflows[name]; return fn, ok }
	for _, n := range []**regNode{&b.n1, &b.n2} {
		node := &regNode{}
		r, err := round.NewRunner(b.store, round.RunnerOptions{
			Node: "node", Turn: replay.New(replay.Options{Lookup: lookup}).Turn, Clock: nowOnly{b.clock},
			LeaseDuration: leaseDuration, Hooks: round.Hooks{Crash: node.hook},
		})
		require.NoError(t, err)
		node.runner = r
		*n = node
		t.Cleanup(r.Forget)
	}
	return b
}

// nowOnly is a clock without timers: a runner with it never renews its
// rounds' leases, so a stalled round's lease runs out when the test moves
// the clock past it (a node cut off from the store), and no renewal
// goroutine races the test's next step.
type nowOnly struct{ c *round.ManualClock }

func (n nowOnly) Now() time.Time { return n.c.Now() }

func (b *regBundle) enqueue(t *testing.T, msgs ...provider.Message) {
	t.Helper()
	require.NoError(t, b.store.EnqueueMessages(context.Background(), &provider.EnqueueMessagesParams{Messages: msgs, Now: b.clock.Now()}))
}

// start enqueues the start of a new execution of workflow with input.
func (b *regBundle) start(t *testing.T, id, exec, workflow string, input any) provider.Message {
	t.Helper()
	data, err := history.Encode(input)
	require.NoError(t, err)
	m, err := provider.NewMessage(history.DeterministicID(id, 0, "start:"+exec), id, exec, exec, &history.ExecutionStarted{Name: workflow, Input: data})
	require.NoError(t, err)
	return m
}

// request builds a client request addressed to the instance's current
// execution, as Engine.RaiseEvent, Terminate, Suspend and Resume do.
func (b *regBundle) request(t *testing.T, msgID, id, correlation string, attrs history.Attributes) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(msgID, id, "", correlation, attrs)
	require.NoError(t, err)
	return m
}

// round runs one round on n that must do something.
func (b *regBundle) round(t *testing.T, n *regNode) {
	t.Helper()
	rep, err := n.runner.RunOnce(context.Background())
	require.NoError(t, err)
	require.NotNil(t, rep)
}

// crashAfterAppend runs a round on n that dies right after its append, and
// lets its lease run out, so the messages are delivered again.
func (b *regBundle) crashAfterAppend(t *testing.T, n *regNode) {
	t.Helper()
	n.mu.Lock()
	n.crashAt = round.AfterAppend
	n.mu.Unlock()
	_, err := n.runner.RunOnce(context.Background())
	require.True(t, round.IsCrash(err), "round did not crash: %v", err)
	b.clock.Advance(leaseDuration + time.Second)
}

func (b *regBundle) history(t *testing.T, id string) []history.Event {
	t.Helper()
	events, err := b.store.LoadHistory(context.Background(), &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	require.NoError(t, err)
	return events
}

func (b *regBundle) snapshot(t *testing.T, id string) *round.Snapshot {
	t.Helper()
	snap, err := round.Fold(id, b.history(t, id))
	require.NoError(t, err)
	return snap
}

// TestRegressionRedeliveryAcrossExecutions: in peek-lock mode, a client
// request addressed to the current execution (empty ExecutionID: signals,
// terminate, suspend, resume) whose round appended its event and, in the
// same round, ended the execution — a terminate-and-restart batch, or a
// turn that continued as new — is applied a second time, to the new
// execution, when the round crashes before its ack and the batch is
// delivered again. Deduplication of such messages is per execution
// (Snapshot.Seen is reset by ExecutionStarted; an end request is
// correlated with whatever execution is current), so the redelivered
// message is not recognised. Transactional mode is not affected: its ack
// commits with the append.
func TestRegressionRedeliveryAcrossExecutions(t *testing.T) {

	t.Run("RestartTerminatesTheNewExecution", func(t *testing.T) {
		// Engine.Start with ReuseTerminateAndRestart enqueues exactly this:
		// a terminate of the current execution and the new start.
		b := regSetup(t)
		b.enqueue(t, b.start(t, "claim", "exec-a", "waiter", 0))
		b.round(t, b.n1)
		b.enqueue(t,
			b.request(t, "terminate-1", "claim", "", &history.ExecutionTerminated{Reason: "restarted by ops"}),
			b.start(t, "claim", "exec-b", "waiter", 0))
		b.crashAfterAppend(t, b.n1)
		b.round(t, b.n2)

		snap := b.snapshot(t, "claim")
		terminations := 0
		for _, e := range b.history(t, "claim") {
			if e.Kind == history.KindExecutionTerminated {
				terminations++
			}
		}
		require.Equal(t, 1, terminations, "one terminate request, one termination")
		require.Equal(t, "exec-b", snap.ExecutionID)
		require.Equal(t, provider.StatusRunning, snap.Status, "the restarted execution must keep running")
	})

	t.Run("SignalDeliveredAgainAfterContinueAsNew", func(t *testing.T) {
		b := regSetup(t)
		b.enqueue(t, b.start(t, "relay", "exec-a", "relay", 0))
		b.round(t, b.n1)
		payload, err := history.Encode("first")
		require.NoError(t, err)
		// The first execution consumes the signal and continues as new in
		// the same round; the round dies before its ack.
		b.enqueue(t, b.request(t, "signal-1", "relay", "key-1", &history.EventRaised{Name: "go", Payload: payload, IdempotencyKey: "key-1"}))
		b.crashAfterAppend(t, b.n1)
		b.round(t, b.n2)

		raised := 0
		for _, e := range b.history(t, "relay") {
			if e.Kind == history.KindEventRaised {
				raised++
			}
		}
		require.Equal(t, 1, raised, "one signal sent, one signal recorded")
		require.Equal(t, provider.StatusRunning, b.snapshot(t, "relay").Status, "the second execution must still wait for its own signal")
	})

	t.Run("SuspendAndResumeAppliedAgainAfterContinueAsNew", func(t *testing.T) {
		b := regSetup(t)
		b.enqueue(t, b.start(t, "sleeper", "exec-a", "sleeper", 0))
		b.round(t, b.n1)
		// The timer fires with a suspend and a resume in one batch; the
		// turn after them continues as new; the round dies before its ack.
		b.clock.Advance(2 * time.Second)
		b.enqueue(t,
			b.request(t, "suspend-1", "sleeper", "", &history.ExecutionSuspended{Reason: "review"}),
			b.request(t, "resume-1", "sleeper", "", &history.ExecutionResumed{}))
		b.crashAfterAppend(t, b.n1)
		b.round(t, b.n2)

		var controls []history.Kind
		for _, e := range b.history(t, "sleeper") {
			if e.Kind == history.KindExecutionSuspended || e.Kind == history.KindExecutionResumed {
				controls = append(controls, e.Kind)
			}
		}
		require.Equal(t, []history.Kind{history.KindExecutionSuspended, history.KindExecutionResumed}, controls,
			"each request is recorded once")
	})
}

// TestRegressionZombieEnqueuesAfterEnd: in peek-lock mode, a round that
// stalls after its append (a zombie) enqueues its work items when it goes
// on, even if meanwhile another node ended the execution and cancelled
// its activities: the activity task of a terminated execution is queued
// again and runs after the termination. The takeover round derives no
// work for the ended execution (Snapshot.OpenWork), so without the zombie
// the task would never exist; enqueue is not fenced by the lease.
func TestRegressionZombieEnqueuesAfterEnd(t *testing.T) {

	b := regSetup(t)
	b.enqueue(t, b.start(t, "claim", "exec-a", "worker", 0))
	// n1's round appends the start and the turn that schedules the
	// activity, and stalls before it enqueues the task.
	pz := &pause{at: round.AfterAppend, paused: make(chan struct{}), resumed: make(chan struct{})}
	b.n1.mu.Lock()
	b.n1.pause = pz
	b.n1.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := b.n1.runner.RunOnce(context.Background())
		done <- err
	}()
	select {
	case <-pz.paused:
	case err := <-done:
		t.Fatalf("round did not stall: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("round did not stall")
	}
	// Meanwhile an operator terminates the instance, and n2 takes it over
	// once n1's lease has run out.
	b.enqueue(t, b.request(t, "terminate-1", "claim", "", &history.ExecutionTerminated{Reason: "ops"}))
	b.clock.Advance(leaseDuration + time.Second)
	b.round(t, b.n2)
	require.Equal(t, provider.StatusTerminated, b.snapshot(t, "claim").Status)
	require.Empty(t, b.store.QueuedActivities(), "the terminated execution has no activity task")

	close(pz.resumed)
	select {
	case err := <-done:
		require.True(t, errors.Is(err, provider.ErrLeaseLost), "the zombie cannot ack: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("zombie round did not end")
	}
	require.Empty(t, b.store.QueuedActivities(), "the zombie must not queue a task of the terminated execution")
}

// TestRegressionPeekLockPurgeOfRestartedInstance: in peek-lock mode a
// round that appended the start of a new run of an ended instance and then
// failed before it saved its projections (a SaveProjections error, a
// projection fold that panicked) was abandoned: its lease released, its
// messages waiting out a retry delay. The instance record still showed the
// ended run, so PurgeInstance, which checked only the record and a live
// lease, deleted the running new run: its history, its queued start,
// everything, and the tombstone named the new run's last event.
// TestRapidWorkflowsPeekLock found it (purge-and-reuse with a poisoned
// projection). Purge refuses an instance whose history goes beyond its
// record (ErrInvalidState), as it refuses a running one.
func TestRegressionPeekLockPurgeOfRestartedInstance(t *testing.T) {
	var failSave atomic.Bool
	store := memory.New(memory.Options{Mode: provider.ModePeekLock, Fault: func(op memory.Op) *memory.Fault {
		if op == memory.OpSaveProjections && failSave.CompareAndSwap(true, false) {
			return &memory.Fault{}
		}
		return nil
	}})
	clock := round.NewManualClock(t0)
	lookup := func(name string) (replay.WorkflowFunc, bool) { fn, ok := regWorkflows[name]; return fn, ok }
	runner, err := round.NewRunner(store, round.RunnerOptions{
		Node: "node", Turn: replay.New(replay.Options{Lookup: lookup}).Turn, Clock: clock, LeaseDuration: leaseDuration,
	})
	require.NoError(t, err)
	t.Cleanup(runner.Forget)
	ctx := context.Background()
	b := &regBundle{store: store, clock: clock}
	roundOK := func() {
		t.Helper()
		rep, err := runner.RunOnce(ctx)
		require.NoError(t, err)
		require.NotNil(t, rep)
	}

	// The first run waits for "go" and completes.
	b.enqueue(t, b.start(t, "claim", "exec-a", "waiter", 0))
	roundOK()
	b.enqueue(t, b.request(t, "signal-1", "claim", "key-1", &history.EventRaised{Name: "go", IdempotencyKey: "key-1"}))
	roundOK()
	rec, err := store.GetInstance(ctx, "claim")
	require.NoError(t, err)
	require.Equal(t, provider.StatusCompleted, rec.Status)

	// A new run starts under the same id; its round appends and fails to
	// save its projections.
	b.enqueue(t, b.start(t, "claim", "exec-b", "waiter", 0))
	failSave.Store(true)
	_, err = runner.RunOnce(ctx)
	require.ErrorIs(t, err, memory.ErrInjected)
	snap := b.snapshot(t, "claim")
	require.Equal(t, "exec-b", snap.ExecutionID)
	require.Equal(t, provider.StatusRunning, snap.Status, "the new run is running")

	_, err = store.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "claim", By: "ops", Now: clock.Now()})
	require.ErrorIs(t, err, provider.ErrInvalidState, "purge must refuse an instance whose history runs on past its record")
	require.Len(t, b.history(t, "claim"), int(snap.LastSeq), "the running run's history is kept")
}

// TestRegressionPeekLockChildNoticeLostToNextRun: in peek-lock mode a
// child's final round that appended its end and died before it enqueued
// its parent's notice is repaired by the redelivery of its batch: the cold
// round derives the open work of the instance again. When the redelivered
// batch also held the start of a new run of the child's id (another
// parent's child with the same explicit id, started once the first ended),
// the round started the new run and derived the open work of the new run
// only: the ended run's notice was never enqueued and its parent waited
// forever. TestRapidRoundsPeekLock found it (shared child ids).
func TestRegressionPeekLockChildNoticeLostToNextRun(t *testing.T) {
	b := regSetup(t)
	ctx := context.Background()
	// p1 calls the child "kid", which waits for "go".
	b.enqueue(t, b.start(t, "p1", "exec-p1", "caller", 0))
	b.round(t, b.n1) // p1 schedules kid
	b.round(t, b.n1) // kid starts and waits
	payload, err := history.Encode("x")
	require.NoError(t, err)
	b.enqueue(t, b.request(t, "go-1", "kid", "k1", &history.EventRaised{Name: "go", Payload: payload, IdempotencyKey: "k1"}))
	// kid's final round appends its end and dies before its enqueue.
	b.n1.mu.Lock()
	b.n1.crashAt = round.AfterAppend
	b.n1.mu.Unlock()
	_, err = b.n1.runner.RunOnce(ctx)
	require.True(t, round.IsCrash(err), "round did not crash: %v", err)
	require.True(t, b.snapshot(t, "kid").Ended)
	// p2 calls a child with the same id while kid's batch is still leased.
	b.enqueue(t, b.start(t, "p2", "exec-p2", "caller", 0))
	b.round(t, b.n2)
	// The lease runs out; kid's batch is delivered again together with
	// p2's start of a new run of kid.
	b.clock.Advance(leaseDuration + time.Second)
	for i := 0; i < 20; i++ {
		rep, err := b.n2.runner.RunOnce(ctx)
		require.NoError(t, err)
		if rep == nil {
			break
		}
	}
	p1 := b.snapshot(t, "p1")
	require.True(t, p1.Ended, "p1 must hear that its child ended: %s, waiting on %v", p1.Status, p1.SubWorkflows)
}
