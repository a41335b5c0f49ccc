package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// waitingOrders registers "gate", a workflow that runs until its "go"
// signal, and starts orders of two customers with a concurrency limit per
// customer: acme (limit 1) runs a-1 while a-2 and a-3 wait behind it,
// bolt (limit 2) runs b-1 and nobody waits.
func waitingOrders(t *testing.T) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		require.NoError(t, chronicle.RegisterWorkflow(e, "gate", func(ctx *chronicle.Context, in string) (string, error) {
			var s string
			err := ctx.WaitEvent("go", nil).Get(&s)
			return in + s, err
		}))
		ctx := context.Background()
		for _, o := range []struct {
			id, key string
			limit   int
		}{{"a-1", "acme", 1}, {"a-2", "acme", 1}, {"b-1", "bolt", 2}, {"a-3", "acme", 1}} {
			_, err := e.Start(ctx, "gate", o.id, &chronicle.StartOptions{
				InstanceID: o.id, Concurrency: &chronicle.Concurrency{Key: o.key, Limit: o.limit},
			})
			require.NoError(t, err)
		}
		drainEngine(t, e)
	}}
}

func TestConcurrencyCommands(t *testing.T) {
	t.Parallel()
	const ok, failed, usage = exitOK, exitFailure, exitUsage
	cases := []struct {
		name string
		code int
		args []string
	}{
		{"instance_show_waiting", ok, []string{"instance", "show", "a-3"}},
		{"instance_show_waiting_json", ok, []string{"--json", "instance", "show", "a-3"}},
		{"instance_show_slot_holder", ok, []string{"instance", "show", "a-1"}},
		{"concurrency_list", ok, []string{"concurrency", "list"}},
		{"concurrency_list_waiting", ok, []string{"concurrency", "list", "--waiting"}},
		{"concurrency_list_page", ok, []string{"concurrency", "list", "--limit", "1"}},
		{"concurrency_list_after", ok, []string{"concurrency", "list", "--after", "acme"}},
		{"concurrency_list_json", ok, []string{"concurrency", "list", "--json"}},
		{"concurrency_list_bad_limit", usage, []string{"concurrency", "list", "--limit", "0"}},
		{"concurrency_show", ok, []string{"concurrency", "show", "acme"}},
		{"concurrency_show_json", ok, []string{"concurrency", "show", "acme", "--json"}},
		{"concurrency_show_unknown", failed, []string{"concurrency", "show", "zeta"}},
		{"concurrency_show_missing_key", usage, []string{"concurrency", "show"}},
		{"concurrency_help", ok, []string{"help", "concurrency"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tc.name, tc.code, waitingOrders(t), tc.args...)
		})
	}
}

// TestConcurrencyNone: on the demo data alone nobody waits.
func TestConcurrencyNone(t *testing.T) {
	t.Parallel()
	golden(t, "concurrency_list_none", exitOK, hooks{}, "concurrency", "list", "--waiting")
}

// TestInstanceShowWaitingJSON reads the waiting reason back from the
// JSON of instance show: a-3 waits second behind a-2, for a-1's slot; an
// instance that holds its slot does not wait.
func TestInstanceShowWaitingJSON(t *testing.T) {
	t.Parallel()
	var out struct {
		Status  chronicle.Status `json:"status"`
		Waiting *waitingJSON     `json:"waiting"`
	}
	r := runTool(t, "", waitingOrders(t), "--json", "instance", "show", "a-3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, chronicle.StatusPending, out.Status)
	require.NotNil(t, out.Waiting)
	require.Equal(t, "acme", out.Waiting.Key)
	require.Equal(t, 1, out.Waiting.Limit)
	require.Equal(t, 2, out.Waiting.Position)
	require.Equal(t, []string{"a-1"}, out.Waiting.Holders)
	require.False(t, out.Waiting.Since.IsZero())

	out.Waiting = nil
	r = runTool(t, "", waitingOrders(t), "--json", "instance", "show", "a-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, chronicle.StatusRunning, out.Status)
	require.Nil(t, out.Waiting)
}

// TestConcurrencyShowAfterRelease: once a-1 ends, a-2 holds the slot and
// a-3 is first in line.
func TestConcurrencyShowAfterRelease(t *testing.T) {
	t.Parallel()
	h := waitingOrders(t)
	seed := h.demoEngine
	h.demoEngine = func(e *chronicle.Engine) {
		seed(e)
		require.NoError(t, e.RaiseEvent(context.Background(), "a-1", "go", "!", nil))
		drainEngine(t, e)
	}
	r := runTool(t, "", h, "--json", "concurrency", "show", "acme")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out slotSetJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Holders, 1)
	require.Equal(t, "a-2", out.Holders[0].InstanceID)
	require.Len(t, out.Waiters, 1)
	require.Equal(t, "a-3", out.Waiters[0].InstanceID)
	require.NotNil(t, out.RunningActivities)
	require.Zero(t, *out.RunningActivities)
}

// TestConcurrencyShowAfterTerminate: a waiter that is terminated leaves
// the line; the one behind it moves up.
func TestConcurrencyShowAfterTerminate(t *testing.T) {
	t.Parallel()
	r := runTool(t, "", waitingOrders(t), "instance", "terminate", "a-2", "--reason", "duplicate order", "--by", "ops")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "instance a-2 is terminated")

	h := waitingOrders(t)
	seed := h.demoEngine
	h.demoEngine = func(e *chronicle.Engine) {
		seed(e)
		require.NoError(t, e.Terminate(context.Background(), "a-2", "duplicate order", nil))
		drainEngine(t, e)
	}
	r = runTool(t, "", h, "instance", "show", "a-3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "concurrency key acme (limit 1), position 1, behind a-1")
}

// runningCharge registers "charge", a workflow whose activity "psp" on
// the queue "psp" has the concurrency key psp, starts one and claims its
// task as a worker of that queue would (the demo engine serves only the
// default queue), so that it runs while the command looks.
func runningCharge(t *testing.T) hooks {
	var mem *memory.Store
	return hooks{
		afterSeed: func(s *memory.Store) { mem = s },
		demoEngine: func(e *chronicle.Engine) {
			require.NoError(t, chronicle.RegisterWorkflow(e, "charge", func(ctx *chronicle.Context, n int) (int, error) {
				var out int
				err := ctx.CallActivity("psp", n, &chronicle.ActivityOptions{
					Queue: "psp", Concurrency: &chronicle.Concurrency{Key: "psp", Limit: 2},
				}).Get(&out)
				return out, err
			}))
			ctx := context.Background()
			_, err := e.Start(ctx, "charge", 7, &chronicle.StartOptions{InstanceID: "c-1"})
			require.NoError(t, err)
			drainEngine(t, e)
			now := e.Options().Clock.Now()
			lease, err := mem.ClaimActivity(ctx, &provider.ClaimActivityParams{
				Queues: []string{"psp"}, Owner: "psp-worker", Now: now, LockedUntil: now.Add(time.Hour),
			})
			require.NoError(t, err)
			require.NotNil(t, lease, "the psp task is claimable")
		},
	}
}

// TestConcurrencyShowActivities: a key only activity tasks use shows
// their live claims and no instance slots.
func TestConcurrencyShowActivities(t *testing.T) {
	t.Parallel()
	golden(t, "concurrency_show_activities", exitOK, runningCharge(t), "concurrency", "show", "psp")
	r := runTool(t, "", runningCharge(t), "--json", "concurrency", "show", "psp")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out slotSetJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.NotNil(t, out.RunningActivities)
	require.Equal(t, 1, *out.RunningActivities)
	require.Empty(t, out.Holders)
}
