package round_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// noticeBundle runs two parents that share a child id on a peek-lock
// store whose rounds crash where a test says, and whose next AppendHistory
// can be made to fail after taking effect.
type noticeBundle struct {
	*bundle
	mu          sync.Mutex
	crashAt     round.CrashPoint
	failAppend  bool
	errInjected error
}

func newNoticeBundle(t *testing.T) *noticeBundle {
	nb := &noticeBundle{errInjected: errors.New("injected")}
	nb.bundle = setup(t, provider.ModePeekLock, memory.Options{Fault: func(op memory.Op) *memory.Fault {
		nb.mu.Lock()
		defer nb.mu.Unlock()
		if op == memory.OpAppendHistory && nb.failAppend {
			nb.failAppend = false
			return &memory.Fault{Err: nb.errInjected, AfterEffect: true}
		}
		return nil
	}}, round.Hooks{Crash: func(_ context.Context, p round.CrashPoint, id string) error {
		nb.mu.Lock()
		defer nb.mu.Unlock()
		if id == "kid" && p == nb.crashAt {
			nb.crashAt = ""
			return &round.CrashError{Point: p}
		}
		return nil
	}})
	return nb
}

func (nb *noticeBundle) crashNext(p round.CrashPoint) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.crashAt = p
}

// round runs one round, which must be kid's, and returns its error.
func (nb *noticeBundle) kidRound(t *testing.T) error {
	t.Helper()
	rep, err := nb.runner.RunOnce(nb.ctx)
	require.NotNil(t, rep)
	require.Equal(t, "kid", rep.InstanceID)
	if round.IsCrash(err) {
		nb.runner.Forget() // the process restarts
	}
	return err
}

// finish drains, letting holds and leases pass, and checks that both
// parents heard from their child: p1 ends as want, p2 completes.
func (nb *noticeBundle) finish(t *testing.T, want provider.Status) {
	t.Helper()
	for range 5 {
		nb.clock.Advance(2 * time.Minute)
		nb.drain(t)
	}
	require.Equal(t, want, nb.status(t, "p1"), "p1 must hear that its child ended")
	require.Equal(t, provider.StatusCompleted, nb.status(t, "p2"), "p2 must hear that its child ended")
}

var sharedKid = scripted.Step{Kind: scripted.Child, ChildID: "kid", Child: []scripted.Step{{Kind: scripted.Timer, Delay: 10 * time.Second}}}

// TestPeekLockParentNoticeSurvivesTheNextExecution: a peek-lock child's
// final round crashed after its append, before it queued its parent's
// notice; the next round, which repairs that notice, also starts a new
// execution for another parent and fails after its append. The notice must
// not be lost: the round queues it before it appends the next execution,
// since no later round sees the ended execution as current again.
func TestPeekLockParentNoticeSurvivesTheNextExecution(t *testing.T) {
	t.Parallel()
	nb := newNoticeBundle(t)
	nb.start(t, "p1", sharedKid)
	nb.drain(t) // p1 waits on kid, kid on its timer
	nb.clock.Advance(10 * time.Second)
	nb.crashNext(round.AfterProject)
	require.True(t, round.IsCrash(nb.kidRound(t)), "kid's final round crashes before its enqueue")
	nb.start(t, "p2", sharedKid)
	rep, err := nb.runner.RunOnce(nb.ctx)
	require.NoError(t, err)
	require.Equal(t, "p2", rep.InstanceID, "p2 asks for kid while kid's lease still runs")
	nb.clock.Advance(31 * time.Second)
	nb.mu.Lock()
	nb.failAppend = true
	nb.mu.Unlock()
	require.ErrorIs(t, nb.kidRound(t), nb.errInjected, "the round that starts kid for p2 fails after its append")
	nb.finish(t, provider.StatusCompleted)
}

// TestPeekLockStartAfterATerminateWaitsForTheNextRound: a batch that
// terminates a child and then starts it again for another parent must not
// append both in one peek-lock round: a crash after that append would hide
// the terminated execution's notice to its parent from every later round.
func TestPeekLockStartAfterATerminateWaitsForTheNextRound(t *testing.T) {
	t.Parallel()
	nb := newNoticeBundle(t)
	nb.start(t, "p1", sharedKid)
	nb.drain(t)
	// The terminate is queued first but visible a second later, so that p2
	// asks for kid before kid's next round, which then holds the terminate
	// and p2's start, in that order.
	terminate, err := provider.NewMessage("terminate-kid", "kid", "", "", &history.ExecutionTerminated{Reason: "operator"})
	require.NoError(t, err)
	terminate.VisibleAt = nb.clock.Now().Add(time.Second)
	require.NoError(t, nb.store.EnqueueMessages(nb.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{terminate}, Now: nb.clock.Now()}))
	nb.start(t, "p2", sharedKid)
	rep, err := nb.runner.RunOnce(nb.ctx)
	require.NoError(t, err)
	require.Equal(t, "p2", rep.InstanceID)
	nb.clock.Advance(time.Second)
	nb.crashNext(round.AfterProject)
	require.True(t, round.IsCrash(nb.kidRound(t)))
	nb.finish(t, provider.StatusFailed)
	var heard bool
	for _, e := range nb.history(t, "p1") {
		heard = heard || e.Kind == history.KindSubWorkflowFailed
	}
	require.True(t, heard, "p1 heard that kid was terminated")
}

// TestPeekLockRestartsInOneBatchKeepTheirOrder: two restarts (each a
// terminate and a start) queued together: the start a peek-lock round
// leaves for the next round keeps the messages after it behind it, so the
// second terminate ends the second execution and the third starts, with
// nothing dead-lettered.
func TestPeekLockRestartsInOneBatchKeepTheirOrder(t *testing.T) {
	t.Parallel()
	nb := newNoticeBundle(t)
	wait := scripted.Step{Kind: scripted.Signal, Name: "never"}
	nb.start(t, "r", wait)
	nb.drain(t)
	var msgs []provider.Message
	for i, exec := range []string{"exec-b", "exec-c"} {
		term, err := provider.NewMessage(fmt.Sprintf("terminate-%d", i), "r", "", "", &history.ExecutionTerminated{Reason: "restart"})
		require.NoError(t, err)
		start, err := scripted.StartRunMessage("r", exec, scripted.Script{Steps: []scripted.Step{wait}})
		require.NoError(t, err)
		msgs = append(msgs, term, start)
	}
	require.NoError(t, nb.store.EnqueueMessages(nb.ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: nb.clock.Now()}))
	nb.drain(t)
	var starts, ends int
	for _, e := range nb.history(t, "r") {
		switch e.Kind {
		case history.KindExecutionStarted:
			starts++
		case history.KindExecutionTerminated:
			ends++
		}
	}
	require.Equal(t, 3, starts)
	require.Equal(t, 2, ends)
	letters, err := nb.store.ListDeadLetters(nb.ctx, &provider.ListDeadLettersParams{})
	require.NoError(t, err)
	require.Empty(t, letters)
	require.Equal(t, provider.StatusRunning, nb.status(t, "r"))
}
