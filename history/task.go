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
	// Codec names the codec the workflow decodes the task's result with
	// ("msgpack", "json"); a completion encodes the result with it. Empty
	// in histories written before it was recorded.
	Codec string `msgpack:"codec,omitempty" json:"codec,omitempty"`
	// ResultType describes the Go type the workflow decodes the result
	// into, when the workflow asked for it in the turn that opened the
	// task; nil otherwise.
	ResultType *ResultType `msgpack:"result_type,omitempty" json:"result_type,omitempty"`
	// Escalation is the task's escalation policy, for display: when each
	// step acts if the task is still open, and what it does. Empty for a
	// task without one.
	Escalation []EscalationStep `msgpack:"escalation,omitempty" json:"escalation,omitempty"`
}

// EscalationStep describes a step of a task's escalation policy on its
// TaskCreated.
type EscalationStep struct {
	At time.Time `msgpack:"at" json:"at"`
	// Action says what the step does, such as "reassign to roles
	// [supervisor]; notify by activity page-manager".
	Action string `msgpack:"action" json:"action"`
}

// ResultType describes a Go type well enough for a client that does not
// have it to check a task result against it and encode the result so that
// the workflow decodes it: its kind, and for a struct its exported fields
// with the keys their tags give them.
type ResultType struct {
	// Kind is one of bool, int, int8, int16, int32, int64, uint, uint8,
	// uint16, uint32, uint64, float32, float64, string, bytes, time,
	// slice, array, map, struct, pointer and any (a value of any shape:
	// an interface, or a type that decodes itself).
	Kind string `msgpack:"kind" json:"kind"`
	// Name is the Go type's name, such as "billing.Approval", for
	// messages.
	Name string `msgpack:"name,omitempty" json:"name,omitempty"`
	// Elem is the element type of a slice, array, map or pointer.
	Elem *ResultType `msgpack:"elem,omitempty" json:"elem,omitempty"`
	// Key is the key type of a map.
	Key *ResultType `msgpack:"key,omitempty" json:"key,omitempty"`
	// Len is the length of an array.
	Len int `msgpack:"len,omitempty" json:"len,omitempty"`
	// Fields are the exported fields of a struct, in order.
	Fields []ResultField `msgpack:"fields,omitempty" json:"fields,omitempty"`
}

// ResultField is a field of a struct [ResultType].
type ResultField struct {
	// Name is the Go field's name.
	Name string `msgpack:"name" json:"name"`
	// Tag holds the field's json and msgpack tags, which name its keys.
	Tag string `msgpack:"tag,omitempty" json:"tag,omitempty"`
	// Embedded is set for an embedded struct, whose fields are promoted.
	Embedded bool       `msgpack:"embedded,omitempty" json:"embedded,omitempty"`
	Type     ResultType `msgpack:"type" json:"type"`
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

// TaskEscalated records that a step of a task's escalation policy acted
// because the task was still open at the step's time. Workflow code writes
// it (its Actor is [ActorEscalation]); what the step did is in its fields:
// a reassignment (Assignee, Roles), a notification (Notify, followed by
// the ActivityScheduled of that activity) and a completion with a default
// result (Completed, Result), which resolves the workflow's wait.
type TaskEscalated struct {
	TaskID string `msgpack:"task_id" json:"task_id"`
	// Step is the index of the step in the task's policy, from 0.
	Step int `msgpack:"step,omitempty" json:"step,omitempty"`
	// Reason says why, for the task's audit trail.
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Reassigned is set when the step moved the task: to Assignee, or
	// when Assignee is empty back to the inboxes of its roles; Roles,
	// when set, replace the task's roles.
	Reassigned bool     `msgpack:"reassigned,omitempty" json:"reassigned,omitempty"`
	Assignee   string   `msgpack:"assignee,omitempty" json:"assignee,omitempty"`
	Roles      []string `msgpack:"roles,omitempty" json:"roles,omitempty"`
	// Notify names the activity the step scheduled, if any.
	Notify string `msgpack:"notify,omitempty" json:"notify,omitempty"`
	// Completed is set when the step completed the task with Result.
	Completed bool   `msgpack:"completed,omitempty" json:"completed,omitempty"`
	Result    []byte `msgpack:"result,omitempty" json:"result,omitempty"`
}

// EventKind implements [Attributes].
func (*TaskEscalated) EventKind() Kind { return KindTaskEscalated }

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

func (a *TaskCreated) normalizeUTC() {
	a.Due = utc(a.Due)
	for i := range a.Escalation {
		a.Escalation[i].At = utc(a.Escalation[i].At)
	}
}
