package chronicle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// childParent is the input of the parent workflow of the sub-workflow
// tests: which child to call, under which id, after how many activities.
type childParent struct {
	Child   string
	ID      string
	Warmups int
}

// registerChildParent registers "parent", which calls its child and
// returns the child's result or the type of its failure, and "waiter", a
// child that waits for the signal "go".
func registerChildParent(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	activity(t, e, "warmup", func(context.Context, int) (int, error) { return 0, nil })
	register(t, e, "waiter", echo)
	register(t, e, "parent", func(ctx *chronicle.Context, in childParent) (string, error) {
		for i := range in.Warmups {
			if _, err := chronicle.CallActivity[int](ctx, "warmup", i, nil); err != nil {
				return "", err
			}
		}
		out, err := chronicle.CallSubWorkflow[string](ctx, in.Child, "child", &chronicle.SubWorkflowOptions{InstanceID: in.ID})
		var se *chronicle.SubWorkflowError
		if errors.As(err, &se) {
			if errors.Is(err, chronicle.ErrSubWorkflowAlreadyStarted) {
				return "taken: " + se.InstanceID, nil
			}
			return "failed: " + se.Failure.Type, nil
		}
		return out, err
	})
}

// childIDs returns the instance ids of the children an instance scheduled.
func childIDs(t *testing.T, b *bundle, id string) []string {
	t.Helper()
	var ids []string
	for _, e := range b.history(t, id) {
		if e.Kind == history.KindSubWorkflowScheduled {
			a, err := e.Attributes()
			require.NoError(t, err)
			ids = append(ids, a.(*history.SubWorkflowScheduled).InstanceID)
		}
	}
	return ids
}

// setupMode returns a bundle on a fresh memory store in mode.
func setupMode(t *testing.T, mode provider.Mode) *bundle {
	t.Helper()
	mem := memory.New(memory.Options{Mode: mode})
	b := setupOn(t, mem)
	b.mem = mem
	return b
}

// childFailure returns the failure of the one SubWorkflowFailed in an
// instance's history.
func childFailure(t *testing.T, b *bundle, id string) history.Failure {
	t.Helper()
	var out []history.Failure
	for _, e := range b.history(t, id) {
		if e.Kind == history.KindSubWorkflowFailed {
			a, err := e.Attributes()
			require.NoError(t, err)
			out = append(out, a.(*history.SubWorkflowFailed).Failure)
		}
	}
	require.Len(t, out, 1)
	return out[0]
}

func TestSubWorkflowChildIDs(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {

		// Two parents name the same child at the same seq: the second used to
		// get the first's execution id, its start was acked as a duplicate and
		// it waited forever.
		t.Run(mode.String()+"/SecondParentOfARunningChildIsRefused", func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, mode)
			registerChildParent(t, b.engine)
			b.start(t, "parent", "p1", childParent{Child: "waiter", ID: "shared"})
			b.drain(t)
			b.start(t, "parent", "p2", childParent{Child: "waiter", ID: "shared"})
			b.drain(t)

			require.Equal(t, "taken: shared", result[string](t, b, "p2"), "the second parent is stuck waiting")
			require.Equal(t, chronicle.StatusRunning, b.describe(t, "p1").Status)
			require.Equal(t, "p1", b.describe(t, "shared").ParentID, "the refused start changed the child")
			letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
			require.NoError(t, err)
			require.Empty(t, letters, "a refused child start is answered, not dead-lettered")
			require.Equal(t, 1, count(b.history(t, "shared"), history.KindExecutionStarted))

			// The first parent still gets its child's result.
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "shared", "go", "!", nil))
			b.drain(t)
			require.Equal(t, "child!", result[string](t, b, "p1"))
		})

		// The same with the starts at different seqs, and both in one round of
		// the child: the start that finds the child running used to be
		// dead-lettered without a word to its parent.
		t.Run(mode.String()+"/RefusalReachesTheParentWhateverTheSeq", func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, mode)
			registerChildParent(t, b.engine)
			b.start(t, "parent", "p1", childParent{Child: "waiter", ID: "shared"})
			b.start(t, "parent", "p2", childParent{Child: "waiter", ID: "shared", Warmups: 2})
			b.drain(t)

			require.Equal(t, "taken: shared", result[string](t, b, "p2"), "the second parent is stuck waiting")
			letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
			require.NoError(t, err)
			require.Empty(t, letters)
			f := childFailure(t, b, "p2")
			require.Equal(t, round.FailureSubWorkflowAlreadyStarted, f.Type)
			require.True(t, f.NonRetryable)
			require.Contains(t, f.Message, "shared is already running")

			// Once the child has ended, its id may be used again.
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "shared", "go", "!", nil))
			b.drain(t)
			require.Equal(t, "child!", result[string](t, b, "p1"))
			b.start(t, "parent", "p3", childParent{Child: "waiter", ID: "shared"})
			b.drain(t)
			require.Equal(t, "p3", b.describe(t, "shared").ParentID)
			require.NoError(t, b.engine.RaiseEvent(b.ctx, "shared", "go", "?", nil))
			b.drain(t)
			require.Equal(t, "child?", result[string](t, b, "p3"))
		})

		// A purged parent id started again gets new default child ids: the old
		// ones led its start to the old child and it waited forever.
		t.Run(mode.String()+"/DefaultIDsDifferAfterPurgeAndReuse", func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, mode)
			registerChildParent(t, b.engine)
			register(t, b.engine, "quick", func(_ *chronicle.Context, s string) (string, error) { return s + " done", nil })
			b.start(t, "parent", "p", childParent{Child: "quick"})
			b.drain(t)
			require.Equal(t, "child done", result[string](t, b, "p"))
			first := childIDs(t, b, "p")
			require.Len(t, first, 1)
			require.Equal(t, round.DefaultChildID("p", b.describe(t, "p").ExecutionID, 3), first[0])

			rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"p"}, By: "records-officer"})
			require.NoError(t, err)
			require.Len(t, rep.Purged, 1)
			b.engine.Close() // as a restarted node: this test is not about cached executors
			b.start(t, "parent", "p", childParent{Child: "quick"})
			b.drain(t)
			require.Equal(t, "child done", result[string](t, b, "p"), "the reused parent is stuck waiting")
			second := childIDs(t, b, "p")
			require.Len(t, second, 1)
			require.NotEqual(t, first[0], second[0])
			require.Equal(t, chronicle.StatusCompleted, b.describe(t, first[0]).Status)
			require.Equal(t, 1, count(b.history(t, first[0]), history.KindExecutionStarted), "the old child was started again")
		})

		// Discarding the dead letter of a child's start fails the parent's
		// sub-workflow, as discarding an activity's fails the activity.
		t.Run(mode.String()+"/DiscardedChildStartFailsTheParent", func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, mode)
			registerChildParent(t, b.engine)
			b.start(t, "parent", "p", childParent{Child: "not-registered", ID: "orphan"})
			b.drain(t)
			letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
			require.NoError(t, err)
			require.Len(t, letters, 1)
			require.Equal(t, "orphan", letters[0].InstanceID)
			require.Equal(t, provider.ReasonUnknownWorkflow, letters[0].Reason)
			require.Equal(t, chronicle.StatusRunning, b.describe(t, "p").Status)

			require.NoError(t, b.engine.DiscardDeadLetter(b.ctx, letters[0].ID, "ops-ana"))
			b.drain(t)
			require.Equal(t, "failed: "+round.FailureDeadLetterDiscarded, result[string](t, b, "p"), "the parent is stuck waiting")
			require.Contains(t, childFailure(t, b, "p").Message, "discarded by user:ops-ana")
		})
	}
}
