package replay

import (
	"fmt"
	"reflect"
	"strings"
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
	// Due is shown to users. Chronicle acts on it only through
	// Escalation: a step without a time of its own acts at Due.
	Due time.Time
	// Escalation is what happens when the task is still open at its due
	// time: steps that act in order, each at its time, while the task is
	// open. A step reassigns the task, notifies through an activity, or
	// completes it with a default result (the last step); each is
	// recorded as TaskEscalated with actor history.ActorEscalation. The
	// steps run on durable timers that race the task: completing or
	// cancelling the task first cancels the pending timer, and nothing
	// escalates. See docs/tasks.md.
	Escalation []TaskEscalation
}

// TaskEscalation is a step of a task's escalation policy. It acts at At,
// or After past the task's creation, or, when both are zero, at the
// task's Due; steps are given in the order of their times. A step does at
// least one of: reassign (ReassignTo, ReassignRoles), notify
// (NotifyActivity) and complete (Complete).
type TaskEscalation struct {
	At    time.Time
	After time.Duration
	// Reason is recorded on the TaskEscalated event and in the task's
	// audit trail; default: "not completed by <time>".
	Reason string
	// ReassignTo gives the task to this user. ReassignRoles, when set,
	// replace the task's roles; with ReassignRoles and no ReassignTo the
	// task goes back, unassigned, to the inboxes of those roles.
	ReassignTo    string
	ReassignRoles []string
	// NotifyActivity, when set, schedules this activity with NotifyInput
	// (encoded like any activity input) and NotifyOptions. The workflow
	// does not wait for it; it runs once, with the activity's retries.
	NotifyActivity string
	NotifyInput    any
	NotifyOptions  *ActivityOptions
	// Complete completes the task with Result, as a user's completion
	// would: the workflow's WaitTask returns Result. Only the last step
	// may complete.
	Complete bool
	Result   any
}

// escalationStep is a TaskEscalation checked and encoded when the task is
// created.
type escalationStep struct {
	at     time.Time
	event  history.TaskEscalated
	notify []byte
	opts   *ActivityOptions
}

// Task is a human task opened by workflow code.
type Task struct {
	// ID identifies the task in the client API.
	ID string
	f  *future
	x  *executor
	// stop cancels the pending escalation timer, if any.
	stop func()
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
	steps, err := c.escalationSteps(id, o)
	if err != nil {
		return &Task{x: x, f: x.failedFuture(fmt.Errorf("chronicle: task %s escalation: %w", name, err))}
	}
	created := &history.TaskCreated{TaskID: id, Name: name, Roles: o.Roles, Assignee: o.Assignee, Payload: data, Due: o.Due.UTC(),
		Codec: x.r.opts.Codec.Name()}
	for _, st := range steps {
		created.Escalation = append(created.Escalation, history.EscalationStep{At: st.at, Action: describeEscalation(&st.event)})
	}
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
	t := &Task{ID: id, f: f, x: x}
	if len(steps) > 0 {
		t.stop = c.escalate(id, name, f, steps)
	}
	return t
}

// escalationSteps checks a task's escalation policy and encodes its
// payloads, before anything of the task is written.
func (c *Context) escalationSteps(taskID string, o TaskOptions) ([]escalationStep, error) {
	steps := make([]escalationStep, 0, len(o.Escalation))
	for i, s := range o.Escalation {
		at := s.At
		switch {
		case !at.IsZero():
		case s.After < 0:
			return nil, fmt.Errorf("step %d has a negative After (%s)", i, s.After)
		case s.After > 0:
			at = c.x.now.Add(s.After)
		case !o.Due.IsZero():
			at = o.Due
		default:
			return nil, fmt.Errorf("step %d has no time (At, After) and the task has no Due", i)
		}
		at = at.UTC()
		if i > 0 && at.Before(steps[i-1].at) {
			return nil, fmt.Errorf("step %d acts at %s, before step %d", i, at.Format(time.RFC3339), i-1)
		}
		if s.ReassignTo == "" && len(s.ReassignRoles) == 0 && s.NotifyActivity == "" && !s.Complete {
			return nil, fmt.Errorf("step %d neither reassigns, notifies nor completes", i)
		}
		if s.Complete && i != len(o.Escalation)-1 {
			return nil, fmt.Errorf("step %d completes the task, so it must be the last", i)
		}
		if s.ReassignTo != "" {
			if err := history.ValidateID("task assignee", s.ReassignTo); err != nil {
				return nil, err
			}
		}
		for _, r := range s.ReassignRoles {
			if err := CheckText("task role", r); err != nil {
				return nil, err
			}
		}
		if err := CheckText("escalation reason", s.Reason); err != nil {
			return nil, err
		}
		st := escalationStep{at: at, opts: s.NotifyOptions, event: history.TaskEscalated{
			TaskID: taskID, Step: i, Reason: s.Reason,
			Reassigned: s.ReassignTo != "" || len(s.ReassignRoles) > 0, Assignee: s.ReassignTo, Roles: s.ReassignRoles,
			Notify: s.NotifyActivity, Completed: s.Complete,
		}}
		if st.event.Reason == "" {
			st.event.Reason = "not completed by " + at.Format(time.RFC3339)
		}
		if s.NotifyActivity != "" {
			if err := history.ValidateID("activity name", s.NotifyActivity); err != nil {
				return nil, err
			}
			b, err := c.encode(s.NotifyInput)
			if err != nil {
				return nil, fmt.Errorf("step %d notify input: %w", i, err)
			}
			st.notify = b
		}
		if s.Complete {
			b, err := c.encode(s.Result)
			if err != nil {
				return nil, fmt.Errorf("step %d result: %w", i, err)
			}
			st.event.Result = b
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// describeEscalation says what a step does, for the TaskCreated's record
// of the policy.
func describeEscalation(a *history.TaskEscalated) string {
	var parts []string
	switch {
	case a.Assignee != "" && len(a.Roles) > 0:
		parts = append(parts, fmt.Sprintf("reassign to %s, roles %v", a.Assignee, a.Roles))
	case a.Assignee != "":
		parts = append(parts, "reassign to "+a.Assignee)
	case len(a.Roles) > 0:
		parts = append(parts, fmt.Sprintf("reassign to roles %v", a.Roles))
	}
	if a.Notify != "" {
		parts = append(parts, "notify by activity "+a.Notify)
	}
	if a.Completed {
		parts = append(parts, "complete with the default result")
	}
	return strings.Join(parts, "; ")
}

// escalate races a task against the timers of its escalation steps: the
// first timer is created now, right after the TaskCreated, the next once
// the previous fired. A coroutine waits for the task or the timer; when
// the task closes first it cancels the pending timer, when the timer
// fires first the step acts. Everything it does is a command, so replay
// repeats it.
// It returns the function that cancels the pending timer.
func (c *Context) escalate(id, name string, f *future, steps []escalationStep) func() {
	x := c.x
	label := "escalate " + name
	seq, timer := c.timer(steps[0].at.Sub(x.now), label)
	cancel := func() {
		if _, pending := x.futures[seq]; pending && !timer.done {
			delete(x.futures, seq)
			x.command(&history.TimerCancelled{}, history.SeqCorrelation(seq))
			x.settle(timer, nil, ErrTimerCancelled)
		}
	}
	// The workflow's Get of the task's result cancels the timer in the
	// same turn, before the workflow goes on (and perhaps ends).
	f.onGet = cancel
	x.spawn("escalate "+id, func() {
		for i := range steps {
			if i > 0 {
				seq, timer = c.timer(steps[i].at.Sub(x.now), label)
			}
			x.current.wait(func() bool { return f.done || timer.done })
			if f.done {
				cancel()
				return
			}
			if timer.err != nil {
				return
			}
			st := &steps[i]
			attrs := st.event
			e := x.command(&attrs, "escalate:"+id)
			if !x.replaying {
				e.Actor = history.ActorEscalation
			}
			if st.event.Notify != "" {
				c.CallActivity(st.event.Notify, RawPayload(st.notify), st.opts)
			}
			if st.event.Completed {
				delete(x.tasks, id)
				x.settle(f, st.event.Result, nil)
				return
			}
		}
	})
	return cancel
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
	if t.stop != nil {
		t.stop()
	}
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
