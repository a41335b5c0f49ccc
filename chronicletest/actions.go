package chronicletest

import (
	"time"

	"github.com/chronicleflow/chronicle"
)

// RaiseEvent sends a signal to an instance now, as
// [chronicle.Engine.RaiseEvent] does; opts may be nil.
func (e *Env) RaiseEvent(instanceID, name string, payload any, opts *chronicle.RaiseOptions) {
	e.t.Helper()
	if err := e.engine.RaiseEvent(e.ctx, instanceID, name, payload, opts); err != nil {
		e.t.Fatalf("chronicletest: raise %s on %s at %s: %v", name, instanceID, e.Elapsed(), err)
	}
}

// RaiseEventAt schedules RaiseEvent at the start time plus d (see [Env.At]).
func (e *Env) RaiseEventAt(d time.Duration, instanceID, name string, payload any, opts *chronicle.RaiseOptions) {
	e.At(d, func() { e.RaiseEvent(instanceID, name, payload, opts) })
}

// Terminate ends a running instance now, as [chronicle.Engine.Terminate]
// does.
func (e *Env) Terminate(instanceID, reason string) {
	e.t.Helper()
	if err := e.engine.Terminate(e.ctx, instanceID, reason, nil); err != nil {
		e.t.Fatalf("chronicletest: terminate %s at %s: %v", instanceID, e.Elapsed(), err)
	}
}

// TerminateAt schedules Terminate at the start time plus d (see [Env.At]).
func (e *Env) TerminateAt(d time.Duration, instanceID, reason string) {
	e.At(d, func() { e.Terminate(instanceID, reason) })
}

// Task returns the open human task named name of the instance. It fails
// the test when there is none, or more than one.
func (e *Env) Task(instanceID, name string) chronicle.TaskInfo {
	e.t.Helper()
	tasks, err := e.engine.ListTasks(e.ctx, chronicle.TaskFilter{InstanceID: instanceID, Status: chronicle.TaskOpen})
	if err != nil {
		e.t.Fatalf("chronicletest: tasks of %s: %v", instanceID, err)
	}
	var found []chronicle.TaskInfo
	var names []string
	for _, t := range tasks {
		names = append(names, t.Name)
		if t.Name == name {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		e.t.Fatalf("chronicletest: %s has no open task %q at %s (open: %q)", instanceID, name, e.Elapsed(), names)
	case 1:
	default:
		e.t.Fatalf("chronicletest: %s has %d open tasks %q", instanceID, len(found), name)
	}
	return found[0]
}

// CompleteTask completes the open task named name of the instance now
// with result, acting as user (see [chronicle.Engine.CompleteTask]).
func (e *Env) CompleteTask(instanceID, name string, result any, user chronicle.User) {
	e.t.Helper()
	task := e.Task(instanceID, name)
	if err := e.engine.CompleteTask(e.ctx, task.TaskID, result, user); err != nil {
		e.t.Fatalf("chronicletest: complete task %q (%s) of %s at %s: %v", name, task.TaskID, instanceID, e.Elapsed(), err)
	}
}

// CompleteTaskAt schedules CompleteTask at the start time plus d (see
// [Env.At]): the task is looked up when the action runs.
func (e *Env) CompleteTaskAt(d time.Duration, instanceID, name string, result any, user chronicle.User) {
	e.At(d, func() { e.CompleteTask(instanceID, name, result, user) })
}

// ClaimTask claims the open task named name of the instance for user now
// (see [chronicle.Engine.ClaimTask]).
func (e *Env) ClaimTask(instanceID, name string, user chronicle.User) {
	e.t.Helper()
	task := e.Task(instanceID, name)
	if err := e.engine.ClaimTask(e.ctx, task.TaskID, user); err != nil {
		e.t.Fatalf("chronicletest: claim task %q (%s) of %s at %s: %v", name, task.TaskID, instanceID, e.Elapsed(), err)
	}
}

// ClaimTaskAt schedules ClaimTask at the start time plus d (see [Env.At]).
func (e *Env) ClaimTaskAt(d time.Duration, instanceID, name string, user chronicle.User) {
	e.At(d, func() { e.ClaimTask(instanceID, name, user) })
}
