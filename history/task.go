package history

import "time"

// TaskCreated records a human task opened by workflow code.
type TaskCreated struct {
	TaskID   string    `msgpack:"task_id"`
	Name     string    `msgpack:"name"`
	Roles    []string  `msgpack:"roles,omitempty"`
	Assignee string    `msgpack:"assignee,omitempty"`
	Payload  []byte    `msgpack:"payload,omitempty"`
	Due      time.Time `msgpack:"due,omitempty"`
}

// TaskAssigned records that a task was claimed or assigned. The event's
// Actor is the acting user.
type TaskAssigned struct {
	TaskID   string `msgpack:"task_id"`
	Assignee string `msgpack:"assignee"`
	// Claimed is true when the assignee took the task themselves.
	Claimed bool `msgpack:"claimed,omitempty"`
}

// TaskReleased records that the assignee gave a task back to its roles.
type TaskReleased struct {
	TaskID   string `msgpack:"task_id"`
	Previous string `msgpack:"previous,omitempty"`
}

// TaskReassigned records that a task moved from one assignee to another.
type TaskReassigned struct {
	TaskID string `msgpack:"task_id"`
	From   string `msgpack:"from,omitempty"`
	To     string `msgpack:"to"`
}

// TaskCompleted records a task's result.
type TaskCompleted struct {
	TaskID string `msgpack:"task_id"`
	Result []byte `msgpack:"result,omitempty"`
}

// TaskCancelled records that a task was closed without a result.
type TaskCancelled struct {
	TaskID string `msgpack:"task_id"`
	Reason string `msgpack:"reason,omitempty"`
}

// EventKind implements [Attributes].
func (*TaskCreated) EventKind() Kind { return KindTaskCreated }

// EventKind implements [Attributes].
func (*TaskAssigned) EventKind() Kind { return KindTaskAssigned }

// EventKind implements [Attributes].
func (*TaskReleased) EventKind() Kind { return KindTaskReleased }

// EventKind implements [Attributes].
func (*TaskReassigned) EventKind() Kind { return KindTaskReassigned }

// EventKind implements [Attributes].
func (*TaskCompleted) EventKind() Kind { return KindTaskCompleted }

// EventKind implements [Attributes].
func (*TaskCancelled) EventKind() Kind { return KindTaskCancelled }

func (a *TaskCreated) normalizeUTC() { a.Due = utc(a.Due) }
