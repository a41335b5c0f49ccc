package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

type shopOrder struct {
	ID    string
	Items int
}

type shopReceipt struct {
	OrderID string
	Total   int
	Note    string
}

type shopReason struct{ Text string }

type shopDecision struct {
	Approved bool
	By       string
}

var (
	shopOrders   = chronicle.Workflow[shopOrder, shopReceipt]("order")
	shopCancel   = chronicle.Signal[shopReason]("cancel")
	shopApproval = chronicle.HumanTask[shopOrder, shopDecision]("approve-order")
)

// shopFulfil waits for a manager's approval of big orders, or a cancellation.
func shopFulfil(ctx *chronicle.Context, o shopOrder) (shopReceipt, error) {
	if o.Items > 10 {
		task := shopApproval.Create(ctx, o, &chronicle.TaskOptions{TaskID: "approve-" + o.ID, Roles: []string{"manager"}})
		d, err := shopApproval.Wait(ctx, task)
		if err != nil {
			return shopReceipt{}, err
		}
		if !d.Approved {
			return shopReceipt{OrderID: o.ID, Note: "refused by " + d.By}, nil
		}
	}
	r, err := shopCancel.Wait(ctx, nil)
	if err != nil {
		return shopReceipt{}, err
	}
	if r.Text != "" {
		return shopReceipt{OrderID: o.ID, Note: "cancelled: " + r.Text}, nil
	}
	return shopReceipt{OrderID: o.ID, Total: 5 * o.Items}, nil
}

// Start refused inputs of another type than the registered workflow's
// before: a string started an order that was dead-lettered, another
// struct or nil one that ran on zero values.
func TestStartChecksTheRegisteredInputType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, shopOrders.Register(b.engine, shopFulfil))
	ctx := b.ctx

	for _, bad := range []struct {
		input any
		want  string
	}{
		{"ORD-1", "workflow order takes input of type chronicle_test.shopOrder, not string"},
		{shopReceipt{OrderID: "ORD-1"}, "not chronicle_test.shopReceipt"},
		{nil, "not nil"},
		{(*shopOrder)(nil), "not a nil *chronicle_test.shopOrder"},
		{map[string]any{"ID": "ORD-1", "Itms": 2}, `unknown field "Itms"`},
		{map[string]any{"ID": 7}, "does not decode to chronicle_test.shopOrder"},
		{[]any{1, 2}, "does not decode to chronicle_test.shopOrder"},
	} {
		_, err := b.engine.Start(ctx, "order", bad.input, nil)
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "%#v", bad.input)
		require.ErrorContains(t, err, bad.want)
		_, err = b.engine.StartMany(ctx, []chronicle.StartRequest{{Workflow: "order", Input: bad.input}})
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "%#v", bad.input)
	}
	_, err := b.engine.Start(ctx, "orders", shopOrder{}, nil)
	require.ErrorIs(t, err, chronicle.ErrUnknownWorkflow, "an engine still refuses names it does not know")

	// Nothing was written by the refused starts.
	b.drain(t)
	all, err := b.engine.ListInstances(ctx, chronicle.InstanceFilter{})
	require.NoError(t, err)
	require.Empty(t, all)

	// A value, a pointer and a generic value (JSON a person typed, say)
	// that fits are started.
	b.start(t, "order", "value", shopOrder{ID: "A", Items: 1})
	b.start(t, "order", "pointer", &shopOrder{ID: "B", Items: 2})
	b.start(t, "order", "generic", map[string]any{"id": "C", "items": 3})
	b.drain(t)
	for _, id := range []string{"value", "pointer", "generic"} {
		require.NoError(t, shopCancel.Raise(ctx, b.engine, id, shopReason{}, nil))
	}
	b.drain(t)
	require.Equal(t, shopReceipt{OrderID: "A", Total: 5}, result[shopReceipt](t, b, "value"))
	require.Equal(t, shopReceipt{OrderID: "B", Total: 10}, result[shopReceipt](t, b, "pointer"))
	require.Equal(t, shopReceipt{OrderID: "C", Total: 15}, result[shopReceipt](t, b, "generic"))

	// A workflow of any input takes anything; nil where nil fits.
	register(t, b.engine, "anything", func(_ *chronicle.Context, v any) (string, error) { return fmt.Sprint(v), nil })
	register(t, b.engine, "pointer", func(_ *chronicle.Context, o *shopOrder) (bool, error) { return o == nil, nil })
	b.start(t, "anything", "any-string", "x")
	b.start(t, "anything", "any-nil", nil)
	b.start(t, "pointer", "nil-pointer", nil)
	b.drain(t)
	require.Equal(t, "x", result[string](t, b, "any-string"))
	require.True(t, result[bool](t, b, "nil-pointer"))
}

func TestTypedWorkflowSignalAndTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, shopOrders.Register(b.engine, shopFulfil))
	require.ErrorIs(t, shopOrders.Register(b.engine, shopFulfil), chronicle.ErrAlreadyRegistered)
	ctx := b.ctx

	run, err := shopOrders.Start(ctx, b.engine, shopOrder{ID: "ORD-1", Items: 2}, &chronicle.StartOptions{InstanceID: "ORD-1"})
	require.NoError(t, err)
	require.Equal(t, "ORD-1", run.ID)
	b.drain(t)
	require.NoError(t, shopCancel.Raise(ctx, b.engine, "ORD-1", shopReason{Text: "changed my mind"}, nil))
	b.drain(t)
	got, err := run.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, shopReceipt{OrderID: "ORD-1", Note: "cancelled: changed my mind"}, got)

	// A big order waits for a manager.
	big, err := shopOrders.Start(ctx, b.engine, shopOrder{ID: "ORD-2", Items: 20}, &chronicle.StartOptions{InstanceID: "ORD-2"})
	require.NoError(t, err)
	b.drain(t)
	p, err := shopApproval.Payload(ctx, b.engine, "approve-ORD-2")
	require.NoError(t, err)
	require.Equal(t, shopOrder{ID: "ORD-2", Items: 20}, p)
	ana := chronicle.User{ID: "ana", Roles: []string{"manager"}}
	require.NoError(t, shopApproval.Complete(ctx, b.engine, "approve-ORD-2", shopDecision{Approved: true, By: "ana"}, ana))
	b.drain(t)
	require.NoError(t, shopCancel.Raise(ctx, b.engine, "ORD-2", shopReason{}, nil))
	b.drain(t)
	got, err = shopOrders.Wait(ctx, b.engine, big.ID)
	require.NoError(t, err)
	require.Equal(t, shopReceipt{OrderID: "ORD-2", Total: 100}, got)

	// A handle of another workflow, or a task of another name, is refused
	// before anything is waited for or written.
	register(t, b.engine, "review", func(ctx *chronicle.Context, s string) (string, error) {
		return chronicle.WaitTask[string](ctx, ctx.CreateTask("review", s, &chronicle.TaskOptions{TaskID: "review-1", Roles: []string{"manager"}}))
	})
	b.start(t, "review", "R-1", "claim")
	b.drain(t)
	_, err = shopOrders.Wait(ctx, b.engine, "R-1")
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.ErrorContains(t, err, `instance R-1 runs workflow "review", not "order"`)
	err = shopApproval.Complete(ctx, b.engine, "review-1", shopDecision{Approved: true}, ana)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.ErrorContains(t, err, `task review-1 is a "review" task, not "approve-order"`)
	_, err = shopApproval.Payload(ctx, b.engine, "review-1")
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	task, err := b.engine.GetTask(ctx, "review-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.TaskOpen, task.Status)
	_, err = shopOrders.Wait(ctx, b.engine, "nobody")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	_, err = chronicle.Handle[shopReceipt]{ID: "ORD-1"}.Wait(ctx)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)

	// A failed instance is a *WorkflowError.
	failing := chronicle.Workflow[int, int]("failing")
	require.NoError(t, failing.Register(b.engine, func(*chronicle.Context, int) (int, error) { return 0, errors.New("out of stock") }))
	h, err := failing.Start(ctx, b.engine, 1, nil)
	require.NoError(t, err)
	b.drain(t)
	_, err = h.Wait(ctx)
	var we *chronicle.WorkflowError
	require.ErrorAs(t, err, &we)
	require.Equal(t, chronicle.StatusFailed, we.Status)
	require.Contains(t, we.Failure.Message, "out of stock")
}

func TestTypedChildAndStartMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	double := chronicle.Workflow[int, int]("double")
	sum := chronicle.Workflow[[]int, int]("sum")
	require.NoError(t, double.Register(b.engine, func(_ *chronicle.Context, n int) (int, error) { return 2 * n, nil }))
	require.NoError(t, sum.Register(b.engine, func(ctx *chronicle.Context, ns []int) (int, error) {
		total := 0
		for _, n := range ns {
			d, err := double.Call(ctx, n, nil)
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total, nil
	}))
	ids, err := b.engine.StartMany(b.ctx, []chronicle.StartRequest{
		sum.Request([]int{1, 2, 3}, &chronicle.StartOptions{InstanceID: "s1"}),
		double.Request(21, &chronicle.StartOptions{InstanceID: "d1"}),
	})
	require.NoError(t, err)
	require.Equal(t, []string{"s1", "d1"}, ids)
	b.drain(t)
	total, err := sum.Wait(b.ctx, b.engine, "s1")
	require.NoError(t, err)
	require.Equal(t, 12, total)
	inst := b.describe(t, "d1")
	d, err := double.Result(inst)
	require.NoError(t, err)
	require.Equal(t, 42, d)
	_, err = sum.Result(inst)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
}

// A workflow sends a typed signal to another with Signal.Send; the
// receiver waits for it with the same handle.
func TestTypedSignalSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ping := chronicle.Signal[shopReason]("ping")
	waiter := chronicle.Workflow[string, string]("waiter")
	sender := chronicle.Workflow[string, string]("sender")
	require.NoError(t, waiter.Register(b.engine, func(ctx *chronicle.Context, _ string) (string, error) {
		r, err := ping.Wait(ctx, nil)
		return r.Text, err
	}))
	require.NoError(t, sender.Register(b.engine, func(ctx *chronicle.Context, to string) (string, error) {
		if err := ping.Send(ctx, to, shopReason{Text: "hello"}).Get(nil); err != nil {
			return "", err
		}
		return "sent", nil
	}))
	_, err := waiter.Start(b.ctx, b.engine, "", &chronicle.StartOptions{InstanceID: "w1"})
	require.NoError(t, err)
	_, err = sender.Start(b.ctx, b.engine, "w1", &chronicle.StartOptions{InstanceID: "s1"})
	require.NoError(t, err)
	b.drain(t)
	got, err := waiter.Wait(b.ctx, b.engine, "w1")
	require.NoError(t, err)
	require.Equal(t, "hello", got)
	sent, err := sender.Wait(b.ctx, b.engine, "s1")
	require.NoError(t, err)
	require.Equal(t, "sent", sent)
}

// A process with a Client starts, signals, waits for and operates
// instances of a workflow whose code only the worker has; an Engine
// without the registration refused to start it.
func TestClientWithoutTheCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, shopOrders.Register(b.engine, shopFulfil))
	client, err := chronicle.NewClient(b.store, chronicle.ClientOptions{Clock: b.clock})
	require.NoError(t, err)
	ctx := b.ctx

	// An engine that does not have the code refuses the name.
	_, err = b.newEngine(t).Start(ctx, "order", shopOrder{ID: "X"}, nil)
	require.ErrorIs(t, err, chronicle.ErrUnknownWorkflow)

	// The untyped call takes the name and any input, encoded as it is.
	id, err := client.Start(ctx, "order", map[string]any{"ID": "ORD-7", "Items": 3}, &chronicle.StartOptions{InstanceID: "ORD-7", Actor: "shop"})
	require.NoError(t, err)
	require.Equal(t, "ORD-7", id)
	inst, err := client.Describe(ctx, id)
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusPending, inst.Status)
	require.Equal(t, "order", inst.Workflow)
	run, err := shopOrders.Start(ctx, client, shopOrder{ID: "ORD-8", Items: 30}, &chronicle.StartOptions{InstanceID: "ORD-8"})
	require.NoError(t, err)
	b.drain(t)

	require.NoError(t, shopCancel.Raise(ctx, client, "ORD-7", shopReason{}, &chronicle.RaiseOptions{IdempotencyKey: "k1"}))
	b.drain(t)
	got, err := shopOrders.Wait(ctx, client, "ORD-7")
	require.NoError(t, err)
	require.Equal(t, shopReceipt{OrderID: "ORD-7", Total: 15}, got)
	events, err := client.History(ctx, "ORD-7")
	require.NoError(t, err)
	require.Equal(t, history.KindExecutionStarted, events[0].Kind)
	require.Equal(t, "user:shop", events[0].Actor)

	// Human tasks, listed and completed through the client; the result is
	// checked against the type the workflow reads it as.
	tasks, err := client.ListTasks(ctx, chronicle.TaskFilter{Roles: []string{"manager"}, Unassigned: true})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	boss := chronicle.User{ID: "boss", Roles: []string{"manager"}}
	err = client.CompleteTaskJSON(ctx, tasks[0].TaskID, []byte(`{"Aproved": true}`), boss)
	var tre *chronicle.TaskResultError
	require.ErrorAs(t, err, &tre)
	require.NoError(t, shopApproval.Complete(ctx, client, tasks[0].TaskID, shopDecision{Approved: false, By: "boss"}, boss))
	b.drain(t)
	got, err = run.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, shopReceipt{OrderID: "ORD-8", Note: "refused by boss"}, got)

	// Operations.
	_, err = client.Start(ctx, "order", shopOrder{ID: "ORD-9"}, &chronicle.StartOptions{InstanceID: "ORD-9"})
	require.NoError(t, err)
	b.drain(t)
	require.NoError(t, client.Suspend(ctx, "ORD-9", "audit", nil))
	b.drain(t)
	require.NoError(t, client.Resume(ctx, "ORD-9", "done", nil))
	b.drain(t)
	require.NoError(t, client.Terminate(ctx, "ORD-9", "duplicate", &chronicle.ControlOptions{Actor: "ops"}))
	b.drain(t)
	_, err = shopOrders.Wait(ctx, client, "ORD-9")
	var we *chronicle.WorkflowError
	require.ErrorAs(t, err, &we)
	require.Equal(t, chronicle.StatusTerminated, we.Status)
	list, err := client.ListInstances(ctx, chronicle.InstanceFilter{Workflow: "order"})
	require.NoError(t, err)
	require.Len(t, list, 3)

	// Bad input still gets clear errors.
	_, err = client.Start(ctx, "bad name\n", 1, nil)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.ErrorContains(t, err, "workflow name")
	_, err = client.Start(ctx, "order", func() {}, nil)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = client.Wait(ctx, "nobody")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)

	// A client runs nothing: it is no Engine and has no Run.
	_, isEngine := client.(*chronicle.Engine)
	require.False(t, isEngine)
	_, runs := client.(interface{ Run(context.Context) error })
	require.False(t, runs)
	_, err = chronicle.NewClient(nil, chronicle.ClientOptions{})
	require.Error(t, err)
	_, err = chronicle.NewClient(b.store, chronicle.ClientOptions{MaxPayloadSize: -1})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
}

// A client with a registered-workflow check would refuse what the worker
// has not deployed yet; the Client's start waits, pending, for a worker
// that has the code.
func TestClientStartsBeforeTheWorkerHasTheCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, err := chronicle.NewClient(b.store, chronicle.ClientOptions{Clock: b.clock})
	require.NoError(t, err)
	_, err = shopOrders.Start(b.ctx, client, shopOrder{ID: "early", Items: 1}, &chronicle.StartOptions{InstanceID: "early"})
	require.NoError(t, err)
	b.drain(t)
	letters, err := client.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "early"})
	require.NoError(t, err)
	require.Len(t, letters, 1)

	require.NoError(t, shopOrders.Register(b.engine, shopFulfil))
	require.NoError(t, client.RedriveDeadLetter(b.ctx, letters[0].ID, "ops"))
	b.drain(t)
	require.NoError(t, shopCancel.Raise(b.ctx, client, "early", shopReason{}, nil))
	b.drain(t)
	got, err := shopOrders.Wait(b.ctx, client, "early")
	require.NoError(t, err)
	require.Equal(t, 5, got.Total)
}
