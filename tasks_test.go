package chronicle_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

type claimReview struct {
	Claim  string
	Amount int
}

// reviewWorkflow opens a review task and returns its decision.
func reviewWorkflow(ctx *chronicle.Context, c claimReview) (string, error) {
	task := ctx.CreateTask("review-claim", c, &chronicle.TaskOptions{TaskID: "review-" + c.Claim, Roles: []string{"adjuster", "supervisor"}})
	decision, err := chronicle.WaitTask[string](ctx, task)
	if err != nil {
		return "", err
	}
	return decision, nil
}

func TestHumanTasks(t *testing.T) {
	t.Parallel()
	var (
		ana  = chronicle.User{ID: "ana", Roles: []string{"adjuster"}}
		bo   = chronicle.User{ID: "bo", Roles: []string{"adjuster"}}
		sue  = chronicle.User{ID: "sue", Roles: []string{"supervisor"}}
		eve  = chronicle.User{ID: "eve", Roles: []string{"clerk"}}
		task = "review-C-1"
	)
	setupTask := func(t *testing.T) *bundle {
		b := setup(t)
		register(t, b.engine, "review", reviewWorkflow)
		b.start(t, "review", "claim-1", claimReview{Claim: "C-1", Amount: 1200})
		b.drain(t)
		return b
	}
	get := func(t *testing.T, b *bundle) *chronicle.TaskInfo {
		t.Helper()
		info, err := b.engine.GetTask(b.ctx, task)
		require.NoError(t, err)
		return info
	}

	t.Run("InboxClaimReleaseReassignComplete", func(t *testing.T) {
		t.Parallel()
		b := setupTask(t)
		inbox, err := b.engine.ListTasks(b.ctx, chronicle.TaskFilter{Roles: ana.Roles, Unassigned: true, Status: chronicle.TaskOpen})
		require.NoError(t, err)
		require.Len(t, inbox, 1)
		require.Equal(t, "review-claim", inbox[0].Name)
		var payload claimReview
		require.NoError(t, b.engine.Decode(inbox[0].Payload, &payload))
		require.Equal(t, 1200, payload.Amount)

		require.NoError(t, b.engine.ClaimTask(b.ctx, task, ana))
		b.drain(t)
		require.Equal(t, "ana", get(t, b).Assignee)
		require.NoError(t, b.engine.ClaimTask(b.ctx, task, ana), "claiming one's own task does nothing")
		require.NoError(t, b.engine.ReleaseTask(b.ctx, task, ana))
		b.drain(t)
		require.Empty(t, get(t, b).Assignee)
		require.NoError(t, b.engine.AssignTask(b.ctx, task, "bo", sue))
		b.drain(t)
		require.NoError(t, b.engine.ReassignTask(b.ctx, task, "ana", bo))
		b.drain(t)
		mine, err := b.engine.ListTasks(b.ctx, chronicle.TaskFilter{Assignee: "ana"})
		require.NoError(t, err)
		require.Len(t, mine, 1)
		require.NoError(t, b.engine.CompleteTask(b.ctx, task, "approve", ana))
		b.drain(t)
		require.Equal(t, "approve", result[string](t, b, "claim-1"))
		info := get(t, b)
		require.Equal(t, chronicle.TaskCompleted, info.Status)

		trail, err := b.engine.TaskEvents(b.ctx, task)
		require.NoError(t, err)
		type entry struct {
			kind            history.Kind
			actor, assignee string
			detail          string
		}
		var got []entry
		for _, e := range trail {
			got = append(got, entry{e.Kind, e.Actor, e.Assignee, e.Detail})
		}
		require.Equal(t, []entry{
			{history.KindTaskCreated, "worker:test", "", "review-claim"},
			{history.KindTaskAssigned, "user:ana", "ana", "claimed"},
			{history.KindTaskReleased, "user:ana", "", "released by ana"},
			{history.KindTaskAssigned, "user:sue", "bo", "assigned"},
			{history.KindTaskReassigned, "user:bo", "ana", "from bo"},
			{history.KindTaskCompleted, "user:ana", "ana", "completed"},
		}, got)
		diffs, err := b.engine.CheckProjections(b.ctx, "claim-1")
		require.NoError(t, err)
		require.Empty(t, diffs)
	})

	t.Run("ForbiddenActionsWriteNothing", func(t *testing.T) {
		t.Parallel()
		b := setupTask(t)
		before := len(b.history(t, "claim-1"))
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, task, eve), chronicle.ErrForbidden, "no matching role")
		require.ErrorIs(t, b.engine.CompleteTask(b.ctx, task, "approve", eve), chronicle.ErrForbidden)
		require.ErrorIs(t, b.engine.ReleaseTask(b.ctx, task, ana), chronicle.ErrForbidden, "not the assignee")
		require.ErrorIs(t, b.engine.ReassignTask(b.ctx, task, "bo", ana), chronicle.ErrForbidden, "not assigned yet")
		require.ErrorIs(t, b.engine.AssignTask(b.ctx, task, "bo", eve), chronicle.ErrForbidden)
		require.NoError(t, b.engine.ClaimTask(b.ctx, task, ana))
		b.drain(t)
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, task, bo), chronicle.ErrForbidden, "assigned to someone else")
		require.ErrorIs(t, b.engine.CompleteTask(b.ctx, task, "reject", bo), chronicle.ErrForbidden)
		require.ErrorIs(t, b.engine.AssignTask(b.ctx, task, "bo", sue), chronicle.ErrForbidden, "assigned tasks are reassigned")
		require.ErrorIs(t, b.engine.ReassignTask(b.ctx, task, "bo", eve), chronicle.ErrForbidden)
		_, err := b.engine.GetTask(b.ctx, "no-such-task")
		require.ErrorIs(t, err, chronicle.ErrTaskNotFound)
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, task, chronicle.User{ID: ""}), chronicle.ErrInvalidArgument)
		b.drain(t)
		require.Len(t, b.history(t, "claim-1"), before+2, "only the claim was recorded, with the turn it woke")
	})

	t.Run("ClosedTask", func(t *testing.T) {
		t.Parallel()
		b := setupTask(t)
		require.NoError(t, b.engine.CompleteTask(b.ctx, task, "approve", sue), "an unassigned task can be completed by a role holder")
		b.drain(t)
		require.ErrorIs(t, b.engine.CompleteTask(b.ctx, task, "reject", sue), chronicle.ErrTaskClosed)
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, task, ana), chronicle.ErrTaskClosed)
		require.Equal(t, "approve", result[string](t, b, "claim-1"))
	})

	t.Run("LostRaceIsRejectedNotApplied", func(t *testing.T) {
		t.Parallel()
		b := setupTask(t)
		// Both claims pass the client's check against the projection; the
		// round applies the first and rejects the second.
		require.NoError(t, b.engine.ClaimTask(b.ctx, task, ana))
		require.NoError(t, b.engine.ClaimTask(b.ctx, task, bo))
		b.drain(t)
		require.Equal(t, "ana", get(t, b).Assignee)
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "claim-1"})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, provider.ReasonRejected, letters[0].Reason)
		require.Contains(t, letters[0].Error, "already assigned to ana")
		require.Equal(t, "user:bo", letters[0].Message.Actor)
	})

	t.Run("EndOfExecutionCancelsOpenTasks", func(t *testing.T) {
		t.Parallel()
		b := setupTask(t)
		require.NoError(t, b.engine.Terminate(b.ctx, "claim-1", "claim withdrawn", nil))
		b.drain(t)
		info := get(t, b)
		require.Equal(t, chronicle.TaskCancelled, info.Status)
		require.ErrorIs(t, b.engine.ClaimTask(b.ctx, task, ana), chronicle.ErrTaskClosed)
		trail, err := b.engine.TaskEvents(b.ctx, task)
		require.NoError(t, err)
		require.Equal(t, history.KindTaskCancelled, trail[len(trail)-1].Kind)
		require.Contains(t, trail[len(trail)-1].Detail, "ExecutionTerminated")
	})

	t.Run("WorkflowCancelsTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		register(t, b.engine, "escalate", func(ctx *chronicle.Context, _ string) (string, error) {
			tk := ctx.CreateTask("first-line", nil, &chronicle.TaskOptions{TaskID: "first", Roles: []string{"adjuster"}})
			if i := ctx.WhenAny(ctx.WaitTask(tk), ctx.Timer(48*time.Hour, nil)); i == 1 {
				ctx.CancelTask(tk, "escalated after 48h")
				err := ctx.WaitTask(tk).Get(nil)
				return "escalated", errors.Join(err, nil)
			}
			return "handled", nil
		})
		b.start(t, "escalate", "e", "")
		b.drain(t)
		b.advance(t, 48*time.Hour)
		inst := b.describe(t, "e")
		require.Equal(t, chronicle.StatusFailed, inst.Status, "the cancelled task's future fails")
		require.Contains(t, inst.Failure.Message, "task cancelled")
		info, err := b.engine.GetTask(b.ctx, "first")
		require.NoError(t, err)
		require.Equal(t, chronicle.TaskCancelled, info.Status)
	})
}

// testCompleteTwice checks that a task is completed once: a second
// completion, queued or applied, gets a *TaskCompletedError naming the
// first, and of two concurrent completions exactly one wins.
func testCompleteTwice(t *testing.T, b *bundle) {
	t.Helper()
	ana := chronicle.User{ID: "ana", Roles: []string{"adjuster"}}
	bo := chronicle.User{ID: "bo", Roles: []string{"adjuster"}}
	register(t, b.engine, "review", reviewWorkflow)
	b.start(t, "review", "claim-1", claimReview{Claim: "C-1"})
	b.start(t, "review", "claim-2", claimReview{Claim: "C-2"})
	b.drain(t)

	// The first completion is queued, not yet applied by a round.
	require.NoError(t, b.engine.CompleteTask(b.ctx, "review-C-1", "approve", ana))
	err := b.engine.CompleteTask(b.ctx, "review-C-1", "reject", bo)
	var done *chronicle.TaskCompletedError
	require.ErrorAs(t, err, &done)
	require.ErrorIs(t, err, chronicle.ErrTaskAlreadyCompleted)
	require.ErrorIs(t, err, chronicle.ErrTaskClosed)
	require.Equal(t, "ana", done.By)
	require.Zero(t, done.Seq, "the winner is queued")
	err = b.engine.CompleteTask(b.ctx, "review-C-1", "approve", ana)
	require.ErrorIs(t, err, chronicle.ErrTaskAlreadyCompleted, "completing twice is an error for the same user too")
	b.drain(t)
	require.Equal(t, "approve", result[string](t, b, "claim-1"))

	// Applied: the error names the event.
	err = b.engine.CompleteTask(b.ctx, "review-C-1", "reject", bo)
	require.ErrorAs(t, err, &done)
	require.Equal(t, "ana", done.By)
	trail, err := b.engine.TaskEvents(b.ctx, "review-C-1")
	require.NoError(t, err)
	require.Equal(t, history.KindTaskCompleted, trail[len(trail)-1].Kind)
	require.Equal(t, trail[len(trail)-1].Seq, done.Seq)

	// Two concurrent completions: exactly one wins.
	errs := make(chan error, 2)
	gate := make(chan struct{})
	for _, u := range []chronicle.User{ana, bo} {
		go func() {
			<-gate
			errs <- b.engine.CompleteTask(b.ctx, "review-C-2", u.ID, u)
		}()
	}
	close(gate)
	e1, e2 := receive(t, errs), receive(t, errs)
	require.True(t, (e1 == nil) != (e2 == nil), "one completion wins: %v, %v", e1, e2)
	loser := e1
	if loser == nil {
		loser = e2
	}
	require.ErrorAs(t, loser, &done)
	b.drain(t)
	winner := result[string](t, b, "claim-2")
	require.Equal(t, winner, done.By, "the loser is told who won")
}

func TestCompleteTwice(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		testCompleteTwice(t, setup(t))
	})
	t.Run("MemoryPeekLock", func(t *testing.T) {
		t.Parallel()
		testCompleteTwice(t, setupOn(t, memory.New(memory.Options{Mode: provider.ModePeekLock})))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testCompleteTwice(t, setupPostgres(t))
	})
}
