package history

import "time"

// TaskCreated records a human task opened by workflow code.
type TaskCreated struct {
	TaskID   string    `msgpack:"task_id" json:"task_id"`
	Name     string    `msgpack:"name" json:"name"`
	Roles    []string  `msgpack:"roles,omitempty" json:"roles,omitempty"`
	Assignee string    `msgpack:"assignee,omitempty" json:"assignee,omitempty"`
	Payload  []byte    `msgpack:"payload,omitempty" json:"payload,omitempty"`
	Due      time.Time `msgpack:"due,omitempty" json:"due,omitempty"`
}

// TaskAssigned records that a task was claimed or assigned. The event's
// Actor is the acting user.
type TaskAssigned struct {
	TaskID   string `msgpack:"task_id" json:"task_id"`
	Assignee string `msgpack:"assignee" json:"assignee"`
	// Claimed is true when the assignee took the task themselves.
	Claimed bool `msgpack:"claimed,omitempty" json:"claimed,omitempty"`
}

// TaskReleased records that the assignee gave a task back to its roles.
type TaskReleased struct {
	TaskID   string `msgpack:"task_id" json:"task_id"`
	Previous string `msgpack:"previous,omitempty" json:"previous,omitempty"`
}

// TaskReassigned records that a task moved from one assignee to another.
type TaskReassigned struct {
	TaskID string `msgpack:"task_id" json:"task_id"`
	From   string `msgpack:"from,omitempty" json:"from,omitempty"`
	To     string `msgpack:"to" json:"to"`
}

// TaskCompleted records a task's result.
type TaskCompleted struct {
	TaskID string `msgpack:"task_id" json:"task_id"`
	Result []byte `msgpack:"result,omitempty" json:"result,omitempty"`
}

// TaskCancelled records that a task was closed without a result.
type TaskCancelled struct {
	TaskID string `msgpack:"task_id" json:"task_id"`
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
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
