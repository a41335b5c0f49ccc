package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// escalatedRefund registers a workflow whose task escalates to
// supervisors at its due time, and runs order E-1 to its task.
func escalatedRefund(t *testing.T) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		require.NoError(t, chronicle.RegisterWorkflow(e, "escalated-refund", func(ctx *chronicle.Context, order string) (string, error) {
			task := ctx.CreateTask("approve-refund", order, &chronicle.TaskOptions{
				TaskID: "refund-" + order, Roles: []string{"finance"}, Due: ctx.Now().Add(72 * time.Hour),
				Escalation: []chronicle.TaskEscalation{{ReassignRoles: []string{"supervisor"}}},
			})
			return chronicle.WaitTask[string](ctx, task)
		}))
		_, err := e.Start(context.Background(), "escalated-refund", "E-1", &chronicle.StartOptions{InstanceID: "E-1"})
		require.NoError(t, err)
		drainEngine(t, e)
	}}
}

// TestTaskShowEscalation: task show says when the task escalates and what
// happens then; a task without escalation shows no such line.
func TestTaskShowEscalation(t *testing.T) {
	t.Parallel()
	r := runTool(t, "", escalatedRefund(t), "task", "show", "refund-E-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^Escalation  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: reassign to roles \[supervisor\]$`, r.stdout)

	r = runTool(t, "", escalatedRefund(t), "--json", "task", "show", "refund-E-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out struct {
		Due        time.Time `json:"due"`
		Escalation []struct {
			At     time.Time `json:"at"`
			Action string    `json:"action"`
		} `json:"escalation"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Escalation, 1)
	require.Equal(t, out.Due, out.Escalation[0].At)
	require.Equal(t, "reassign to roles [supervisor]", out.Escalation[0].Action)

	var e *chronicle.Engine
	r = runTool(t, "", refundOrder(t, &e), "task", "show", "refund-R-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "Escalation")
}
