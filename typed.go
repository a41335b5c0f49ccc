package chronicle

import (
	"context"
	"fmt"
	"time"
)

// Workflow is a workflow's name with the types of its input and output,
// so that registering, starting, calling and waiting for it are checked
// when the program compiles. Declare one by converting the name, next to
// the types, and use it on both sides:
//
//	var Orders = chronicle.Workflow[Order, Receipt]("order")
//
//	Orders.Register(engine, fulfil)                       // the worker
//	run, err := Orders.Start(ctx, client, order, opts)    // a client
//	receipt, err := run.Wait(ctx)
//
// Passing anything but an Order to Start, or waiting for anything but a
// Receipt, does not compile. The untyped calls ([Engine.Start],
// [RegisterWorkflow]) stay for names known only at run time. See
// docs/client.md.
type Workflow[In, Out any] string

// Register registers fn as the workflow on e; see [RegisterWorkflow].
func (w Workflow[In, Out]) Register(e *Engine, fn func(ctx *Context, in In) (Out, error)) error {
	return RegisterWorkflow(e, string(w), fn)
}

// Start starts an instance of the workflow with input in and returns its
// handle; see [Engine.Start]. c is an [*Engine] or a [Client]. opts may be
// nil.
func (w Workflow[In, Out]) Start(ctx context.Context, c Client, in In, opts *StartOptions) (Handle[Out], error) {
	id, err := c.Start(ctx, string(w), in, opts)
	return Handle[Out]{ID: id, workflow: string(w), client: c}, err
}

// Request returns the start of an instance of the workflow with input in,
// for [Engine.StartMany]. opts may be nil.
func (w Workflow[In, Out]) Request(in In, opts *StartOptions) StartRequest {
	return StartRequest{Workflow: string(w), Input: in, Options: opts}
}

// Wait blocks until the instance has ended or ctx ends, and returns its
// output; see [Engine.Wait]. A failed or terminated instance returns a
// *WorkflowError, and an instance of another workflow an error matching
// ErrInvalidArgument, before waiting.
func (w Workflow[In, Out]) Wait(ctx context.Context, c Client, instanceID string) (Out, error) {
	var out Out
	inst, err := c.Describe(ctx, instanceID)
	if err != nil {
		return out, err
	}
	if err := w.owns(inst); err != nil {
		return out, err
	}
	if !inst.Status.Terminal() {
		if inst, err = c.Wait(ctx, instanceID); err != nil {
			return out, err
		}
	}
	return w.Result(inst)
}

// Result returns the output of an ended instance of the workflow, as
// [Instance.Result] decodes it.
func (w Workflow[In, Out]) Result(inst *Instance) (Out, error) {
	var out Out
	if err := w.owns(inst); err != nil {
		return out, err
	}
	err := inst.Result(&out)
	return out, err
}

// owns checks that inst is an instance of the workflow.
func (w Workflow[In, Out]) owns(inst *Instance) error {
	if inst.Workflow != string(w) {
		return fmt.Errorf("%w: instance %s runs workflow %q, not %q", ErrInvalidArgument, inst.ID, inst.Workflow, string(w))
	}
	return nil
}

// Call runs the workflow as a child of the calling workflow and waits for
// its output; see [CallSubWorkflow]. opts may be nil.
func (w Workflow[In, Out]) Call(ctx *Context, in In, opts *SubWorkflowOptions) (Out, error) {
	return CallSubWorkflow[Out](ctx, string(w), in, opts)
}

// Handle is a started instance of a workflow whose output is an Out, as
// [Workflow.Start] returns it.
type Handle[Out any] struct {
	// ID is the instance id.
	ID string

	workflow string
	client   Client
}

// Wait blocks until the instance has ended or ctx ends, and returns its
// output; see [Workflow.Wait].
func (h Handle[Out]) Wait(ctx context.Context) (Out, error) {
	if h.client == nil {
		var out Out
		return out, fmt.Errorf("%w: the handle of instance %q was not returned by Start", ErrInvalidArgument, h.ID)
	}
	return Workflow[any, Out](h.workflow).Wait(ctx, h.client, h.ID)
}

// Signal is a signal's name with the type of its payload, so that raising
// it and waiting for it are checked when the program compiles:
//
//	var Cancel = chronicle.Signal[Reason]("cancel")
//
//	err := Cancel.Raise(ctx, client, "ORD-1", Reason{Text: "changed my mind"}, nil) // a client
//	reason, err := Cancel.Wait(ctx, nil)                                           // the workflow
//
// The untyped calls ([Engine.RaiseEvent], [WaitEvent]) stay for names
// known only at run time.
type Signal[T any] string

// Raise sends the signal with payload to an instance; see
// [Engine.RaiseEvent]. c is an [*Engine] or a [Client]. opts may be nil.
func (s Signal[T]) Raise(ctx context.Context, c Client, instanceID string, payload T, opts *RaiseOptions) error {
	return c.RaiseEvent(ctx, instanceID, string(s), payload, opts)
}

// Wait waits, in workflow code, for the next signal and returns its
// payload; see [WaitEvent]. opts may be nil.
func (s Signal[T]) Wait(ctx *Context, opts *WaitOptions) (T, error) {
	return WaitEvent[T](ctx, string(s), opts)
}

// Send sends the signal with payload, from workflow code, to another
// instance (or its own); see [Context.SignalWorkflow]. The future resolves
// once the receiver has recorded it.
func (s Signal[T]) Send(ctx *Context, instanceID string, payload T) Future {
	return ctx.SignalWorkflow(instanceID, string(s), payload)
}

// HumanTask is a human task's name with the types of its payload (what the
// person sees) and its result (what they decide), so that creating,
// completing and waiting for it are checked when the program compiles:
//
//	var Approval = chronicle.HumanTask[Order, Decision]("approve-order")
//
//	task := Approval.Create(ctx, order, &chronicle.TaskOptions{Roles: []string{"manager"}}) // the workflow
//	decision, err := Approval.Wait(ctx, task)
//	err := Approval.Complete(ctx, client, taskID, Decision{Approved: true}, user)          // a client
//
// The untyped calls ([Context.CreateTask], [WaitTask],
// [Engine.CompleteTask]) stay for names known only at run time.
type HumanTask[Payload, Result any] string

// Create opens the task in workflow code; see [Context.CreateTask]. opts
// may be nil.
func (h HumanTask[Payload, Result]) Create(ctx *Context, payload Payload, opts *TaskOptions) *Task {
	return ctx.CreateTask(string(h), payload, opts)
}

// CompleteWith returns an escalation step (for TaskOptions.Escalation)
// that completes the task with result, a Result as Wait returns it, when
// the task is still open after that long past its creation, or at its Due
// when after is zero. The completion is recorded as TaskEscalated with
// actor history.ActorEscalation and reason.
func (h HumanTask[Payload, Result]) CompleteWith(after time.Duration, result Result, reason string) TaskEscalation {
	return TaskEscalation{After: after, Reason: reason, Complete: true, Result: result}
}

// Wait waits, in workflow code, for the task's completion and returns its
// result; see [WaitTask].
func (h HumanTask[Payload, Result]) Wait(ctx *Context, t *Task) (Result, error) {
	return WaitTask[Result](ctx, t)
}

// Complete closes the task with result on behalf of user; see
// [Engine.CompleteTask]. c is an [*Engine] or a [Client]. A task of
// another name is an error matching ErrInvalidArgument, and nothing is
// written.
func (h HumanTask[Payload, Result]) Complete(ctx context.Context, c Client, taskID string, result Result, user User) error {
	if _, err := h.get(ctx, c, taskID); err != nil {
		return err
	}
	return c.CompleteTask(ctx, taskID, result, user)
}

// Payload returns the payload of the task, for showing it to the person
// who decides. A task of another name is an error matching
// ErrInvalidArgument.
func (h HumanTask[Payload, Result]) Payload(ctx context.Context, c Client, taskID string) (Payload, error) {
	var p Payload
	t, err := h.get(ctx, c, taskID)
	if err != nil {
		return p, err
	}
	if err := c.Decode(t.Payload, &p); err != nil {
		return p, fmt.Errorf("decode payload of task %s: %w", taskID, err)
	}
	return p, nil
}

// get returns the task, checking that it is one of h.
func (h HumanTask[Payload, Result]) get(ctx context.Context, c Client, taskID string) (*TaskInfo, error) {
	t, err := c.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if t.Name != string(h) {
		return nil, fmt.Errorf("%w: task %s is a %q task, not %q", ErrInvalidArgument, taskID, t.Name, string(h))
	}
	return t, nil
}
