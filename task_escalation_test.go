package chronicle_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// escalationModes runs a test in both round modes of the memory store.
func escalationModes(t *testing.T, run func(t *testing.T, env *chronicletest.Env)) {
	for _, mode := range []struct {
		name string
		mode provider.Mode
	}{{"transactional", provider.ModeTransactional}, {"peeklock", provider.ModePeekLock}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			env := chronicletest.New(t, chronicletest.Store(memory.New(memory.Options{Mode: mode.mode})))
			run(t, env)
		})
	}
}

type expense struct {
	ID     string
	Amount int
}

type verdict struct {
	Approved bool
	By       string
}

// approveExpense is a typed task whose escalation tests use.
var approveExpense = chronicle.HumanTask[expense, verdict]("approve-expense")

const escalationDue = 24 * time.Hour

// escalatingWorkflow opens an approval task due in a day with the given
// escalation and returns the verdict.
func escalatingWorkflow(steps ...chronicle.TaskEscalation) func(*chronicle.Context, expense) (verdict, error) {
	return func(ctx *chronicle.Context, in expense) (verdict, error) {
		task := approveExpense.Create(ctx, in, &chronicle.TaskOptions{
			TaskID: "approve-" + in.ID, Roles: []string{"clerk"}, Assignee: "alice",
			Due: ctx.Now().Add(escalationDue), Escalation: steps,
		})
		return approveExpense.Wait(ctx, task)
	}
}

// escalations returns the TaskEscalated events of a history.
func escalations(t *testing.T, env *chronicletest.Env, id string) ([]chronicle.Event, []*history.TaskEscalated) {
	t.Helper()
	var events []chronicle.Event
	var attrs []*history.TaskEscalated
	for _, e := range env.History(id) {
		if e.Kind != history.KindTaskEscalated {
			continue
		}
		a, err := e.Attributes()
		require.NoError(t, err)
		events, attrs = append(events, e), append(attrs, a.(*history.TaskEscalated))
	}
	return events, attrs
}

func lastTaskEvent(t *testing.T, env *chronicletest.Env, taskID string) chronicle.TaskEvent {
	t.Helper()
	trail, err := env.Engine().TaskEvents(env.Context(), taskID)
	require.NoError(t, err)
	require.NotEmpty(t, trail)
	return trail[len(trail)-1]
}

func TestTaskEscalationReassignsAtDue(t *testing.T) {
	escalationModes(t, func(t *testing.T, env *chronicletest.Env) {
		register(t, env.Engine(), "expense", escalatingWorkflow(
			chronicle.TaskEscalation{ReassignTo: "bob", Reason: "alice did not decide in a day"},
			chronicle.TaskEscalation{After: 2 * escalationDue, ReassignRoles: []string{"supervisor"}},
		))
		id := env.Start("expense", expense{ID: "e1", Amount: 90}, nil)

		env.RunFor(escalationDue - time.Minute)
		task := env.Task(id, "approve-expense")
		require.Equal(t, "alice", task.Assignee, "nothing escalates before the due time")
		_, got := escalations(t, env, id)
		require.Empty(t, got)

		env.RunFor(2 * time.Minute)
		task = env.Task(id, "approve-expense")
		require.Equal(t, "bob", task.Assignee)
		require.Equal(t, []string{"clerk"}, task.Roles)
		events, got := escalations(t, env, id)
		require.Len(t, got, 1)
		require.Equal(t, history.ActorEscalation, events[0].Actor)
		require.Equal(t, env.StartTime().Add(escalationDue), events[0].At)
		require.Equal(t, &history.TaskEscalated{TaskID: "approve-e1", Reason: "alice did not decide in a day", Reassigned: true, Assignee: "bob"}, got[0])
		last := lastTaskEvent(t, env, task.TaskID)
		require.Equal(t, history.KindTaskEscalated, last.Kind)
		require.Equal(t, history.ActorEscalation, last.Actor)
		require.Equal(t, "bob", last.Assignee)
		require.Equal(t, "alice did not decide in a day: reassigned to bob", last.Detail)

		// The second step returns the task, unassigned, to supervisors.
		env.RunFor(escalationDue)
		task = env.Task(id, "approve-expense")
		require.Empty(t, task.Assignee)
		require.Equal(t, []string{"supervisor"}, task.Roles)
		_, got = escalations(t, env, id)
		require.Len(t, got, 2)
		require.Equal(t, 1, got[1].Step)
		require.Equal(t, "not completed by "+env.StartTime().Add(2*escalationDue).Format(time.RFC3339), got[1].Reason)

		// A supervisor may now complete it; a clerk no longer may.
		clerk := chronicle.User{ID: "carol", Roles: []string{"clerk"}}
		require.ErrorIs(t, env.Engine().CompleteTask(env.Context(), task.TaskID, verdict{Approved: true}, clerk), chronicle.ErrForbidden)
		env.CompleteTask(id, "approve-expense", verdict{Approved: true, By: "sue"}, chronicle.User{ID: "sue", Roles: []string{"supervisor"}})
		env.RunUntilIdle()
		env.AssertStatus(id, chronicle.StatusCompleted)
		require.Equal(t, verdict{Approved: true, By: "sue"}, chronicletest.Result[verdict](env, id))
	})
}

func TestTaskEscalationNotifiesOnce(t *testing.T) {
	escalationModes(t, func(t *testing.T, env *chronicletest.Env) {
		var calls []time.Duration
		var inputs []string
		activity(t, env.Engine(), "page-manager", func(_ context.Context, in string) (string, error) {
			calls = append(calls, env.Elapsed())
			inputs = append(inputs, in)
			return "paged", nil
		})
		register(t, env.Engine(), "expense", escalatingWorkflow(
			chronicle.TaskEscalation{NotifyActivity: "page-manager", NotifyInput: "expense e1 is overdue"},
		))
		id := env.Start("expense", expense{ID: "e1"}, nil)
		env.RunFor(3 * escalationDue)

		require.Equal(t, []time.Duration{escalationDue}, calls, "the notify activity runs once, at the due time")
		require.Equal(t, []string{"expense e1 is overdue"}, inputs)
		task := env.Task(id, "approve-expense")
		require.Equal(t, "alice", task.Assignee, "a notification does not move the task")
		_, got := escalations(t, env, id)
		require.Len(t, got, 1)
		require.Equal(t, "page-manager", got[0].Notify)
		env.AssertHistoryContains(id, history.KindTaskCreated, history.KindTimerCreated, history.KindTimerFired,
			history.KindTaskEscalated, history.KindActivityScheduled, history.KindActivityCompleted)

		env.CompleteTask(id, "approve-expense", verdict{Approved: false, By: "alice"}, chronicle.User{ID: "alice"})
		env.RunUntilIdle()
		require.Equal(t, verdict{By: "alice"}, chronicletest.Result[verdict](env, id))
		require.Len(t, calls, 1)
	})
}

func TestTaskEscalationCompletesWithDefault(t *testing.T) {
	escalationModes(t, func(t *testing.T, env *chronicletest.Env) {
		register(t, env.Engine(), "expense", escalatingWorkflow(
			approveExpense.CompleteWith(0, verdict{Approved: true, By: "policy"}, "small expenses are approved when nobody decides"),
		))
		id := env.Start("expense", expense{ID: "e1", Amount: 20}, nil)
		inst := env.Wait(id)

		require.Equal(t, chronicle.StatusCompleted, inst.Status)
		require.Equal(t, verdict{Approved: true, By: "policy"}, chronicletest.Result[verdict](env, id))
		require.Equal(t, escalationDue, env.Elapsed())
		events, got := escalations(t, env, id)
		require.Len(t, got, 1)
		require.True(t, got[0].Completed)
		require.Equal(t, history.ActorEscalation, events[0].Actor)

		tasks, err := env.Engine().ListTasks(env.Context(), chronicle.TaskFilter{InstanceID: id})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, chronicle.TaskCompleted, tasks[0].Status)
		require.Equal(t, env.StartTime().Add(escalationDue), tasks[0].CompletedAt)
		var result verdict
		require.NoError(t, chronicle.MsgpackCodec{}.Decode(tasks[0].Result, &result))
		require.Equal(t, verdict{Approved: true, By: "policy"}, result)
		last := lastTaskEvent(t, env, tasks[0].TaskID)
		require.Equal(t, history.ActorEscalation, last.Actor)
		require.Equal(t, "small expenses are approved when nobody decides: completed with the default result", last.Detail)

		// The task is closed: a late user's completion writes nothing and
		// learns who completed it.
		err = env.Engine().CompleteTask(env.Context(), tasks[0].TaskID, verdict{}, chronicle.User{ID: "alice"})
		require.ErrorIs(t, err, chronicle.ErrTaskAlreadyCompleted)
		var done *chronicle.TaskCompletedError
		require.ErrorAs(t, err, &done)
		require.Equal(t, history.ActorEscalation, done.By)
		require.Equal(t, events[0].Seq, done.Seq)
	})
}

func TestTaskCompletedBeforeDueCancelsEscalation(t *testing.T) {
	escalationModes(t, func(t *testing.T, env *chronicletest.Env) {
		var calls int
		activity(t, env.Engine(), "page-manager", func(context.Context, string) (string, error) {
			calls++
			return "", nil
		})
		register(t, env.Engine(), "expense", escalatingWorkflow(
			chronicle.TaskEscalation{ReassignTo: "bob", NotifyActivity: "page-manager"},
			approveExpense.CompleteWith(2*escalationDue, verdict{By: "policy"}, "default"),
		))
		id := env.Start("expense", expense{ID: "e1"}, nil)
		env.CompleteTaskAt(time.Hour, id, "approve-expense", verdict{Approved: true, By: "alice"}, chronicle.User{ID: "alice"})
		env.RunUntilIdle()

		env.AssertStatus(id, chronicle.StatusCompleted)
		require.Equal(t, verdict{Approved: true, By: "alice"}, chronicletest.Result[verdict](env, id))
		// The workflow's Get of the result cancels the timer in the turn
		// that completes; its fire message is dropped as stale at the due
		// time.
		env.AssertHistory(id, history.KindExecutionStarted, history.KindTaskCreated, history.KindTimerCreated,
			history.KindTaskCompleted, history.KindTimerCancelled, history.KindExecutionCompleted)
		_, got := escalations(t, env, id)
		require.Empty(t, got)
		require.Zero(t, calls)

		// Nothing escalates later either.
		env.RunFor(3 * escalationDue)
		_, got = escalations(t, env, id)
		require.Empty(t, got)
	})
}

// TestTaskCancelledCancelsEscalation: a workflow that closes its task
// itself (here when a signal comes) cancels the escalation timer too.
func TestTaskCancelledCancelsEscalation(t *testing.T) {
	env := chronicletest.New(t)
	register(t, env.Engine(), "expense", func(ctx *chronicle.Context, in expense) (string, error) {
		task := approveExpense.Create(ctx, in, &chronicle.TaskOptions{
			Roles: []string{"clerk"}, Due: ctx.Now().Add(escalationDue),
			Escalation: []chronicle.TaskEscalation{{ReassignRoles: []string{"supervisor"}}},
		})
		if err := ctx.WaitEvent("withdrawn", nil).Get(nil); err != nil {
			return "", err
		}
		ctx.CancelTask(task, "withdrawn")
		return "withdrawn", ctx.Sleep(3 * escalationDue)
	})
	id := env.Start("expense", expense{ID: "e1"}, nil)
	env.RaiseEventAt(time.Hour, id, "withdrawn", nil, nil)
	env.RunUntilIdle()
	env.AssertStatus(id, chronicle.StatusCompleted)
	env.AssertHistoryContains(id, history.KindTaskCreated, history.KindTimerCreated, history.KindEventRaised,
		history.KindTaskCancelled, history.KindTimerCancelled, history.KindTimerCreated, history.KindTimerFired)
	require.NotContains(t, env.Kinds(id), history.KindTaskEscalated)
	_, got := escalations(t, env, id)
	require.Empty(t, got)
}

func TestTaskEscalationInvalidPolicy(t *testing.T) {
	env := chronicletest.New(t)
	for name, steps := range map[string][]chronicle.TaskEscalation{
		"no time":           {{ReassignTo: "bob"}},
		"no action":         {{After: time.Hour}},
		"complete not last": {{After: time.Hour, Complete: true}, {After: 2 * time.Hour, ReassignTo: "bob"}},
		"out of order":      {{After: 2 * time.Hour, ReassignTo: "bob"}, {After: time.Hour, ReassignTo: "carol"}},
		"bad assignee":      {{After: time.Hour, ReassignTo: "bad id\x00"}},
	} {
		register(t, env.Engine(), "bad-"+strings.ReplaceAll(name, " ", "-"), func(ctx *chronicle.Context, _ int) (string, error) {
			task := ctx.CreateTask("t", nil, &chronicle.TaskOptions{Escalation: steps})
			_, err := chronicle.WaitTask[string](ctx, task)
			return "", err
		})
		id := env.Start("bad-"+strings.ReplaceAll(name, " ", "-"), 0, nil)
		env.RunUntilIdle()
		env.AssertStatus(id, chronicle.StatusFailed)
		require.Contains(t, env.Err(id).Error(), "escalation", name)
		require.NotContains(t, env.Kinds(id), history.KindTaskCreated, "%s: nothing of the task is written", name)
	}
}

// TestTaskEscalationNegativeAfter: a negative After is refused, not taken
// as "at Due".
func TestTaskEscalationNegativeAfter(t *testing.T) {
	env := chronicletest.New(t)
	register(t, env.Engine(), "negative", func(ctx *chronicle.Context, _ int) (string, error) {
		task := ctx.CreateTask("t", nil, &chronicle.TaskOptions{Due: ctx.Now().Add(escalationDue),
			Escalation: []chronicle.TaskEscalation{{After: -time.Hour, ReassignTo: "bob"}}})
		_, err := chronicle.WaitTask[string](ctx, task)
		return "", err
	})
	id := env.Start("negative", 0, nil)
	env.RunUntilIdle()
	env.AssertStatus(id, chronicle.StatusFailed)
	require.Contains(t, env.Err(id).Error(), "negative After")
	require.NotContains(t, env.Kinds(id), history.KindTaskCreated)
}

// TestTaskEscalationHistoriesReplayAndRoundTrip exports the histories the
// escalations wrote, reads them back, and replays them against the code.
func TestTaskEscalationHistoriesReplayAndRoundTrip(t *testing.T) {
	env := chronicletest.New(t)
	activity(t, env.Engine(), "page-manager", func(context.Context, string) (string, error) { return "", nil })
	register(t, env.Engine(), "expense", escalatingWorkflow(
		chronicle.TaskEscalation{ReassignTo: "bob", NotifyActivity: "page-manager", NotifyInput: "overdue"},
		approveExpense.CompleteWith(2*escalationDue, verdict{By: "policy"}, "default"),
	))
	escalated := env.Start("expense", expense{ID: "e1"}, nil)
	early := env.Start("expense", expense{ID: "e2"}, nil)
	env.CompleteTaskAt(time.Hour, early, "approve-expense", verdict{Approved: true}, chronicle.User{ID: "alice"})
	env.RunUntilIdle()
	env.AssertStatus(escalated, chronicle.StatusCompleted)
	env.AssertStatus(early, chronicle.StatusCompleted)

	dir := t.TempDir()
	for _, id := range []string{escalated, early} {
		events := env.History(id)
		var buf bytes.Buffer
		require.NoError(t, history.WriteJSONL(&buf, events))
		back, err := history.ReadJSONL(bytes.NewReader(buf.Bytes()))
		require.NoError(t, err)
		require.Equal(t, events, back)
		require.NoError(t, history.Verify(back))
		require.NoError(t, os.WriteFile(filepath.Join(dir, id+".jsonl"), buf.Bytes(), 0o600))
	}
	sum := chronicletest.Replay(t, env.Engine(), dir)
	ok, _, diverged, failed := sum.Counts()
	require.Equal(t, 2, ok)
	require.Zero(t, diverged+failed)

	// Code whose escalation differs no longer matches the history.
	other := chronicletest.New(t)
	register(t, other.Engine(), "expense", escalatingWorkflow(
		approveExpense.CompleteWith(0, verdict{By: "policy"}, "default"),
		chronicle.TaskEscalation{After: 2 * escalationDue, ReassignTo: "bob"},
	))
	res, err := other.Engine().ReplayHistories(other.Context(), chronicle.HistoryFiles(filepath.Join(dir, escalated+".jsonl")))
	require.NoError(t, err)
	require.Error(t, res.Err())
	require.False(t, errors.Is(res.Err(), context.Canceled))
}

// TestTaskCompletedAtDueWinsOverDefault: a user's completion that reaches
// the round in which the escalation timer fires is the task's result; the
// escalation does not act.
func TestTaskCompletedAtDueWinsOverDefault(t *testing.T) {
	escalationModes(t, func(t *testing.T, env *chronicletest.Env) {
		register(t, env.Engine(), "expense", escalatingWorkflow(
			approveExpense.CompleteWith(0, verdict{By: "policy"}, "default"),
		))
		id := env.Start("expense", expense{ID: "e1"}, nil)
		env.CompleteTaskAt(escalationDue, id, "approve-expense", verdict{Approved: true, By: "alice"}, chronicle.User{ID: "alice"})
		env.RunUntilIdle()

		env.AssertStatus(id, chronicle.StatusCompleted)
		require.Equal(t, verdict{Approved: true, By: "alice"}, chronicletest.Result[verdict](env, id))
		_, got := escalations(t, env, id)
		require.Empty(t, got)
		env.AssertHistoryContains(id, history.KindTaskCompleted, history.KindExecutionCompleted)
	})
}

// TestTaskEscalationPostgres runs a reassignment to other roles and a
// default completion on PostgreSQL, whose task projection keeps roles and
// status in columns of their own.
func TestTaskEscalationPostgres(t *testing.T) {
	t.Parallel()
	testTaskEscalationOn(t, pgtest.NewStore(t, postgres.Options{}))
}

// testTaskEscalationOn runs the escalation of TestTaskEscalationPostgres
// on store.
func testTaskEscalationOn(t *testing.T, store provider.Store) {
	env := chronicletest.New(t, chronicletest.Store(store))
	register(t, env.Engine(), "expense", escalatingWorkflow(
		chronicle.TaskEscalation{ReassignRoles: []string{"supervisor"}},
		approveExpense.CompleteWith(2*escalationDue, verdict{By: "policy"}, "default"),
	))
	id := env.Start("expense", expense{ID: "pg1"}, nil)
	env.RunFor(escalationDue + time.Minute)
	task := env.Task(id, "approve-expense")
	require.Empty(t, task.Assignee)
	require.Equal(t, []string{"supervisor"}, task.Roles)
	inbox, err := env.Engine().ListTasks(env.Context(), chronicle.TaskFilter{Roles: []string{"supervisor"}, Unassigned: true, Status: chronicle.TaskOpen})
	require.NoError(t, err)
	require.Len(t, inbox, 1)

	inst := env.Wait(id)
	require.Equal(t, chronicle.StatusCompleted, inst.Status)
	require.Equal(t, verdict{By: "policy"}, chronicletest.Result[verdict](env, id))
	trail, err := env.Engine().TaskEvents(env.Context(), task.TaskID)
	require.NoError(t, err)
	var kinds []history.Kind
	for _, ev := range trail {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []history.Kind{history.KindTaskCreated, history.KindTaskEscalated, history.KindTaskEscalated}, kinds)
	require.Equal(t, history.ActorEscalation, trail[2].Actor)
	require.Equal(t, "default: completed with the default result", trail[2].Detail)
}
