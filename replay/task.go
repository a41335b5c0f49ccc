package replay

import (
	"fmt"
	"reflect"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// TaskOptions configure a human task; a nil *TaskOptions, like the zero
// value, means a derived task id, no roles, no assignee and no due time.
type TaskOptions struct {
	// TaskID names the task; default: derived from the instance and Seq.
	// Task ids are unique per store: an id another instance's task has
	// fails the round (provider.ErrTaskIDTaken).
	TaskID string
	// Roles may claim the task; Assignee, when set, has it from the start.
	Roles    []string
	Assignee string
	// Due is shown to users; Chronicle does not act on it (use a timer).
	Due time.Time
}

// Task is a human task opened by workflow code.
type Task struct {
	// ID identifies the task in the client API.
	ID string
	f  *future
	x  *executor
}

// CreateTask opens a human task: it appears in task lists for its roles or
// assignee, who claim, release, reassign and complete it through the
// client API. The result of the completion is what [Context.WaitTask]
// returns. opts may be nil.
func (c *Context) CreateTask(name string, payload any, opts *TaskOptions) *Task {
	var o TaskOptions
	if opts != nil {
		o = *opts
	}
	x := c.x
	if err := checkTaskText(name, o); err != nil {
		return &Task{x: x, f: x.failedFuture(fmt.Errorf("chronicle: task %q: %w", name, err))}
	}
	data, err := c.encode(payload)
	if err != nil {
		return &Task{x: x, f: x.failedFuture(fmt.Errorf("chronicle: task %s payload: %w", name, err))}
	}
	id := o.TaskID
	if id == "" {
		id = history.DeterministicID(x.instanceID+"\x00"+x.executionID, x.nextSeq, "task")
	}
	if err := history.ValidateID("task id", id); err != nil {
		return &Task{x: x, f: x.failedFuture(err)}
	}
	created := &history.TaskCreated{TaskID: id, Name: name, Roles: o.Roles, Assignee: o.Assignee, Payload: data, Due: o.Due.UTC(),
		Codec: x.r.opts.Codec.Name()}
	live, turn, at := !x.replaying, x.turnSeq, len(x.produced)
	x.command(created, "")
	f := x.newFuture(0, name)
	if live {
		// The first Get of the result tells its type: recorded on the
		// TaskCreated while it is still this turn's, so that clients
		// without the workflow's types can check a result against it.
		f.expect = func(out any) {
			if out == nil || x.replaying || x.turnSeq != turn || at >= len(x.produced) || x.produced[at].Kind != history.KindTaskCreated {
				return
			}
			created.ResultType = history.DescribeResultType(reflect.TypeOf(out).Elem())
			payload, err := history.EncodeAttributes(created)
			if err != nil {
				return
			}
			x.produced[at].Payload = payload
		}
	}
	if x.tasks == nil {
		x.tasks = map[string]*future{}
	}
	x.tasks[id] = f
	return &Task{ID: id, f: f, x: x}
}

// checkTaskText checks the text of a task that is stored as text.
func checkTaskText(name string, o TaskOptions) error {
	if err := CheckText("task name", name); err != nil {
		return err
	}
	for _, r := range o.Roles {
		if err := CheckText("task role", r); err != nil {
			return err
		}
	}
	if o.Assignee != "" {
		return history.ValidateID("task assignee", o.Assignee)
	}
	return nil
}

// WaitTask returns the future of a task's completion; Get decodes the
// result given by the user who completed it.
func (c *Context) WaitTask(t *Task) Future { return t.f }

// CancelTask closes an open task without a result; its future fails with
// ErrTaskCancelled. Cancelling a closed task does nothing.
func (c *Context) CancelTask(t *Task, reason string) {
	x := c.x
	if _, open := x.tasks[t.ID]; !open {
		return
	}
	delete(x.tasks, t.ID)
	// The reason is stored as text: NUL bytes and invalid UTF-8 are
	// replaced rather than failing a method that cannot return an error.
	x.command(&history.TaskCancelled{TaskID: t.ID, Reason: CleanText(reason)}, "cancel:"+t.ID)
	x.settle(t.f, nil, fmt.Errorf("%w: %s", ErrTaskCancelled, reason))
}

func (x *executor) resolveTask(e *history.Event, a *history.TaskCompleted) error {
	f, ok := x.tasks[a.TaskID]
	if !ok {
		return &NondeterminismError{InstanceID: x.instanceID, Seq: e.Seq, History: describe(e), Code: fmt.Sprintf("no open task %s", a.TaskID)}
	}
	delete(x.tasks, a.TaskID)
	x.settle(f, a.Result, nil)
	return nil
}
