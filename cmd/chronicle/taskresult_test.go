package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// refundApproval is a task result as a Go programmer writes it: no tags.
type refundApproval struct {
	Approved bool
	Amount   int
}

// refundWorkflow asks finance to approve a refund and says what they
// decided.
func refundWorkflow(ctx *chronicle.Context, order string) (string, error) {
	task := ctx.CreateTask("approve-refund", order, &chronicle.TaskOptions{TaskID: "refund-" + order, Roles: []string{"finance"}})
	a, err := chronicle.WaitTask[refundApproval](ctx, task)
	if err != nil {
		return "", err
	}
	if !a.Approved {
		return "rejected by finance", nil
	}
	return fmt.Sprintf("refunded %d", a.Amount), nil
}

// drainEngine runs e until it has no work left.
func drainEngine(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	for range 1000 {
		worked, err := e.RunOnce(context.Background())
		require.NoError(t, err)
		if !worked {
			return
		}
	}
	t.Fatal("work left after 1000 steps")
}

// refundOrder registers refundWorkflow on the demo engine and runs order
// R-1 to its task; the engine is kept in *engine.
func refundOrder(t *testing.T, engine **chronicle.Engine) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		*engine = e
		require.NoError(t, chronicle.RegisterWorkflow(e, "order-refund", refundWorkflow))
		_, err := e.Start(context.Background(), "order-refund", "R-1", &chronicle.StartOptions{InstanceID: "R-1"})
		require.NoError(t, err)
		drainEngine(t, e)
	}}
}

// TestTaskCompleteTypedResult completes a task whose result is a Go
// struct without tags: {"approved": true} reaches Approved, and a key the
// struct lacks is refused with nothing written.
func TestTaskCompleteTypedResult(t *testing.T) {
	t.Parallel()
	var e *chronicle.Engine
	r := runTool(t, "", refundOrder(t, &e), "task", "complete", "refund-R-1", "--user", "fin", "--roles", "finance",
		"--result", `{"approved": true, "amount": 3900}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "completed refund-R-1 as fin: task completed; instance R-1 is completed\n", r.stdout)
	in, err := e.Describe(context.Background(), "R-1")
	require.NoError(t, err)
	var out string
	require.NoError(t, in.Result(&out))
	require.Equal(t, "refunded 3900", out)

	r = runTool(t, "", refundOrder(t, &e), "task", "complete", "refund-R-1", "--user", "fin", "--roles", "finance",
		"--result", `{"aproved": true}`)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, `chronicle: invalid argument: the result of task refund-R-1 does not decode to main.refundApproval: unknown field "aproved"`+"\n", r.stderr)
	msgs, err := e.Store().ListMessages(context.Background(), &provider.ListMessagesParams{InstanceID: "R-1", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing written")
	task, err := e.GetTask(context.Background(), "refund-R-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.TaskOpen, task.Status)
}

// TestTaskCompleteWorkersCodec completes, on PostgreSQL, a task of a
// deployment whose engines use JSONCodec: the tool encodes the result as
// the workflow decodes it, and the instance completes.
func TestTaskCompleteWorkersCodec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(ctx, []string{"--store", url, "--schema", schema, "migrate"}, &stdout, &stderr), stderr.String())
	store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	worker, err := chronicle.New(store, chronicle.Options{NodeID: "worker", Codec: chronicle.JSONCodec{}})
	require.NoError(t, err)
	defer worker.Close()
	require.NoError(t, chronicle.RegisterWorkflow(worker, "refund", refundWorkflow))
	_, err = worker.Start(ctx, "refund", "R-1", &chronicle.StartOptions{InstanceID: "R-1"})
	require.NoError(t, err)
	drainEngine(t, worker)

	// Reading the deployment's payloads needs its codec: --codec.
	cli := func(args ...string) (int, string, string) {
		stdout.Reset()
		stderr.Reset()
		code := run(ctx, append([]string{"--store", url, "--schema", schema}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errs := cli("--codec", "json", "--json", "task", "show", "refund-R-1")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, `"payload": "R-1"`)
	code, out, errs = cli("--json", "task", "show", "refund-R-1")
	require.Equal(t, exitOK, code, errs)
	require.NotContains(t, out, `"payload": "R-1"`, "the JSON payload does not decode as msgpack")
	code, _, errs = cli("--codec", "yaml", "task", "show", "refund-R-1")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `unsupported --codec "yaml": use msgpack (the default) or json`)

	// Writing needs no flag: the task records its workflow's codec.
	stdout.Reset()
	stderr.Reset()
	code = run(ctx, []string{"--store", url, "--schema", schema, "task", "complete", "refund-R-1", "--user", "fin", "--roles", "finance",
		"--result", `{"approved": true, "amount": 120}`}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	require.Equal(t, "completed refund-R-1 as fin: recorded; the instance's workers apply it\n", stdout.String())
	drainEngine(t, worker)
	in, err := worker.Describe(ctx, "R-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, in.Status, in.LastError)
	var result string
	require.NoError(t, in.Result(&result))
	require.Equal(t, "refunded 120", result)
}
