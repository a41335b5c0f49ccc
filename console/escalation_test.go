package console_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/console"
)

// TestTaskPageShowsEscalation: the task page lists the escalation policy
// of a task that has one, and nothing for a task without.
func TestTaskPageShowsEscalation(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	require.NoError(t, chronicle.RegisterWorkflow(env.Engine(), "review", func(ctx *chronicle.Context, escalate bool) (string, error) {
		opts := &chronicle.TaskOptions{Roles: []string{"clerk"}, Due: ctx.Now().Add(48 * time.Hour)}
		if escalate {
			opts.TaskID = "with-policy"
			opts.Escalation = []chronicle.TaskEscalation{{ReassignRoles: []string{"supervisor"}, NotifyActivity: "page"}}
		} else {
			opts.TaskID = "without-policy"
		}
		return chronicle.WaitTask[string](ctx, ctx.CreateTask("review", nil, opts))
	}))
	env.Start("review", true, nil)
	env.Start("review", false, nil)
	env.RunFor(time.Hour)

	b := newBrowser(t, newConsole(t, env.Engine(), console.Options{}))
	p := b.get("/task?id=with-policy")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<ul id="escalation"><li>2026-`)
	require.Contains(t, p.body, `: reassign to roles [supervisor]; notify by activity page</li>`)
	p = b.get("/task?id=without-policy")
	require.Equal(t, http.StatusOK, p.code)
	require.NotContains(t, p.body, `id="escalation"`)
}
