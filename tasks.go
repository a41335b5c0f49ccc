package chronicle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/jsonarg"
	"github.com/chronicleflow/chronicle/internal/resulttype"
	"github.com/chronicleflow/chronicle/provider"
)

// Errors of human tasks.
var (
	// ErrTaskNotFound: no task has this id.
	ErrTaskNotFound = errors.New("chronicle: task not found")
	// ErrTaskClosed: the task was completed or cancelled.
	ErrTaskClosed = errors.New("chronicle: task closed")
	// ErrForbidden: the acting user may not do this to the task; nothing
	// was written.
	ErrForbidden = errors.New("chronicle: forbidden")
	// ErrTaskAlreadyCompleted: the task was completed, or a completion of
	// it is queued; the error is a *TaskCompletedError and also matches
	// ErrTaskClosed.
	ErrTaskAlreadyCompleted = errors.New("chronicle: task already completed")
)

// ErrCodecMismatch is matched by a *CodecMismatchError.
var ErrCodecMismatch = errors.New("chronicle: codec mismatch")

// CodecMismatchError is returned by CompleteTask and CompleteTaskJSON when
// the task's workflow decodes its result with a codec this engine does
// not have (neither a built-in one nor Options.Codec); nothing was
// written. Complete the task with an engine configured with that codec.
type CodecMismatchError struct {
	TaskID string
	// Recorded is the codec the task's TaskCreated names; Engine is the
	// name of the engine's Options.Codec.
	Recorded, Engine string
}

// Error implements error.
func (e *CodecMismatchError) Error() string {
	return fmt.Sprintf("%s: the workflow of task %s decodes its result with codec %q, this engine has %q: "+
		"complete it with an engine whose Options.Codec is %q", ErrCodecMismatch, e.TaskID, e.Recorded, e.Engine, e.Recorded)
}

// Is matches ErrCodecMismatch.
func (e *CodecMismatchError) Is(target error) bool { return target == ErrCodecMismatch }

// TaskResultError is returned by CompleteTaskJSON, and by CompleteTask
// for a generic result, when the result does not decode to the type the
// task's workflow reads it as, or is not JSON; nothing was written. It
// matches ErrInvalidArgument.
type TaskResultError struct {
	TaskID string
	// Type is the Go type the workflow decodes the result into, such as
	// "billing.Approval"; "" when the task records none.
	Type string
	// Err says what does not fit: "unknown field \"aproved\"", say.
	Err error
}

// Error implements error.
func (e *TaskResultError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("%s: the result of task %s: %v", ErrInvalidArgument, e.TaskID, e.Err)
	}
	return fmt.Sprintf("%s: the result of task %s does not decode to %s: %v", ErrInvalidArgument, e.TaskID, e.Type, e.Err)
}

// Unwrap returns what does not fit.
func (e *TaskResultError) Unwrap() error { return e.Err }

// Is matches ErrInvalidArgument.
func (e *TaskResultError) Is(target error) bool { return target == ErrInvalidArgument }

// TaskCompletedError is returned by task actions (CompleteTask, ClaimTask, ...) on
// a task that another action already completed: a completion applied to
// history (Seq set) or one queued and not yet applied by a round (Seq 0).
// It matches ErrTaskAlreadyCompleted and ErrTaskClosed.
type TaskCompletedError struct {
	TaskID     string
	InstanceID string
	// By is who completed the task: the user id, or the recorded actor
	// when it was not a user.
	By string
	// Seq is the history event of the completion; 0 while it is queued.
	Seq int64
}

// Error implements error.
func (e *TaskCompletedError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("%s: task %s of instance %s: a completion by %s is queued", ErrTaskAlreadyCompleted, e.TaskID, e.InstanceID, e.By)
	}
	return fmt.Sprintf("%s: task %s of instance %s was completed by %s at seq %d", ErrTaskAlreadyCompleted, e.TaskID, e.InstanceID, e.By, e.Seq)
}

// Is matches ErrTaskAlreadyCompleted and ErrTaskClosed.
func (e *TaskCompletedError) Is(target error) bool {
	return target == ErrTaskAlreadyCompleted || target == ErrTaskClosed
}

// completedError describes the completion of a task from an actor.
func completedError(t *TaskInfo, actor string, seq int64) *TaskCompletedError {
	return &TaskCompletedError{TaskID: t.TaskID, InstanceID: t.InstanceID, By: strings.TrimPrefix(actor, history.ActorUserPrefix), Seq: seq}
}

// User is who acts on a task: an id recorded in history ("user:<ID>") and
// the roles the product granted them.
type User struct {
	ID    string
	Roles []string
}

// TaskInfo is a human task as its projection shows it.
type TaskInfo = provider.TaskRecord

// TaskEvent is one entry of a task's audit trail.
type TaskEvent = provider.TaskEventRecord

// TaskFilter selects tasks for ListTasks. Empty fields match anything.
type TaskFilter struct {
	InstanceID string
	Status     provider.TaskStatus
	Assignee   string
	// Roles matches tasks that any of these roles may work on.
	Roles []string
	// Unassigned matches only tasks nobody has.
	Unassigned bool
	AfterID    string
	Limit      int
}

// Task statuses.
const (
	TaskOpen      = provider.TaskOpen
	TaskCompleted = provider.TaskCompleted
	TaskCancelled = provider.TaskCancelled
)

// ListTasks returns human tasks in id order: an inbox is ListTasks with the
// user's roles and Unassigned, or with Assignee set to the user.
func (e *Engine) ListTasks(ctx context.Context, f TaskFilter) ([]TaskInfo, error) {
	return e.listTasks(ctx, &provider.ListTasksParams{
		InstanceID: f.InstanceID, Status: f.Status, Assignee: f.Assignee, Roles: f.Roles,
		Unassigned: f.Unassigned, AfterID: f.AfterID, Limit: f.Limit,
	})
}

// GetTask returns one human task.
func (e *Engine) GetTask(ctx context.Context, taskID string) (*TaskInfo, error) {
	if err := e.validateID("task id", taskID); err != nil {
		return nil, err
	}
	t, err := e.getTask(ctx, taskID)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
	}
	return t, err
}

// TaskEvents returns the audit trail of a human task: created, assigned,
// released, reassigned, completed, cancelled, each with its actor and time.
func (e *Engine) TaskEvents(ctx context.Context, taskID string) ([]TaskEvent, error) {
	t, err := e.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return e.listTaskEvents(ctx, &provider.ListTaskEventsParams{InstanceID: t.InstanceID, TaskID: taskID})
}

// TaskEscalation returns the escalation policy of a human task as its
// TaskCreated records it: when each step acts if the task is still open,
// and what it does (see TaskOptions.Escalation). A task without one, or
// whose history no longer holds its creation, has none.
func (e *Engine) TaskEscalation(ctx context.Context, taskID string) ([]history.EscalationStep, error) {
	t, err := e.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	created, err := e.taskCreated(ctx, t)
	if err != nil || created == nil {
		return nil, err
	}
	return created.Escalation, nil
}

// ClaimTask gives an unassigned task to the acting user, who must hold one of
// its roles. Claiming a task one already has does nothing.
func (e *Engine) ClaimTask(ctx context.Context, taskID string, user User) error {
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		switch {
		case t.Assignee == user.ID:
			return nil, nil
		case t.Assignee != "":
			return nil, fmt.Errorf("%w: task %s is assigned to %s", ErrForbidden, t.TaskID, t.Assignee)
		case !holdsRole(user, t):
			return nil, fmt.Errorf("%w: %s holds none of the roles %v of task %s", ErrForbidden, user.ID, t.Roles, t.TaskID)
		}
		return &history.TaskAssigned{TaskID: t.TaskID, Assignee: user.ID, Claimed: true}, nil
	})
}

// AssignTask gives an unassigned task to assignee; the acting user must hold
// one of its roles.
func (e *Engine) AssignTask(ctx context.Context, taskID, assignee string, user User) error {
	if err := e.validateID("assignee", assignee); err != nil {
		return err
	}
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		switch {
		case t.Assignee != "":
			return nil, fmt.Errorf("%w: task %s is assigned to %s; reassign it", ErrForbidden, t.TaskID, t.Assignee)
		case !holdsRole(user, t):
			return nil, fmt.Errorf("%w: %s holds none of the roles %v of task %s", ErrForbidden, user.ID, t.Roles, t.TaskID)
		}
		return &history.TaskAssigned{TaskID: t.TaskID, Assignee: assignee}, nil
	})
}

// ReleaseTask gives a task back to its roles; only its assignee may.
func (e *Engine) ReleaseTask(ctx context.Context, taskID string, user User) error {
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		if t.Assignee != user.ID {
			return nil, fmt.Errorf("%w: task %s is not assigned to %s", ErrForbidden, t.TaskID, user.ID)
		}
		return &history.TaskReleased{TaskID: t.TaskID, Previous: user.ID}, nil
	})
}

// ReassignTask moves an assigned task to another user; its assignee or a
// holder of one of its roles may.
func (e *Engine) ReassignTask(ctx context.Context, taskID, to string, user User) error {
	if err := e.validateID("assignee", to); err != nil {
		return err
	}
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		switch {
		case t.Assignee == "":
			return nil, fmt.Errorf("%w: task %s is not assigned; assign it", ErrForbidden, t.TaskID)
		case t.Assignee != user.ID && !holdsRole(user, t):
			return nil, fmt.Errorf("%w: %s is neither the assignee of task %s nor holds one of its roles %v", ErrForbidden, user.ID, t.TaskID, t.Roles)
		}
		return &history.TaskReassigned{TaskID: t.TaskID, From: t.Assignee, To: to}, nil
	})
}

// CompleteTask closes a task with a result, which the waiting workflow
// receives. Its assignee may complete it, or, while it is unassigned, a
// holder of one of its roles.
//
// The result is encoded with the codec the task's workflow decodes it
// with, which its TaskCreated records: an engine whose own codec differs
// uses that one when it is a built-in codec (MsgpackCodec, JSONCodec) and
// otherwise returns a *CodecMismatchError, writing nothing. A value of a
// Go type is encoded as it is. A generic value, a map[string]any or an
// []any such as json.Unmarshal into an any gives, is checked against the
// type the workflow reads the result as, like CompleteTaskJSON's JSON
// (a *TaskResultError when it does not fit); for a result a person typed
// as JSON use [Engine.CompleteTaskJSON].
//
// A task is completed once. Completing a task that is completed, or whose
// completion by another call is queued and not yet applied, returns a
// *TaskCompletedError naming who completed it (and at which seq, once
// applied); of two concurrent completions exactly one returns nil. The
// rule: the first completion queued wins. The queue holds at most one
// completion per task (its message id is derived from the task), so a
// later call finds the winner's message there, or its event in history.
func (e *Engine) CompleteTask(ctx context.Context, taskID string, result any, user User) error {
	return e.completeTask(ctx, taskID, user, func(t *TaskInfo, created *history.TaskCreated) ([]byte, error) {
		codec, err := e.taskCodec(t, created)
		if err != nil {
			return nil, err
		}
		if created != nil && created.ResultType != nil && generic(result) {
			b, err := json.Marshal(result)
			if err != nil {
				return nil, fmt.Errorf("%w: encode task result: %w", ErrInvalidArgument, err)
			}
			if result, err = resulttype.Decode(created.ResultType, b); err != nil {
				return nil, &TaskResultError{TaskID: t.TaskID, Type: created.ResultType.Name, Err: err}
			}
		}
		return e.encodeWith(codec, "task result", result)
	})
}

// generic reports whether v is a value of no Go type of its own: a map of
// strings or a list of anything, the shapes JSON decodes to.
func generic(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// CompleteTaskJSON is CompleteTask with a result a person typed as JSON
// (the console's result box, chronicle task complete --result). When the
// task records the Go type its workflow decodes the result into (see
// docs/tasks.md), the JSON is decoded into that type as encoding/json
// would — keys match field names and json tags without regard to case —
// and strictly: an unknown key, a value of the wrong kind, a number out of
// range or trailing data returns a *TaskResultError and writes nothing.
// The value is then encoded with the task's codec under the keys the
// workflow's decoder reads. A task that records no type (its WaitTask came
// in a later turn than its creation, or it predates the record) gets the
// JSON as parsed, whole numbers as int64. Blank JSON is no result.
func (e *Engine) CompleteTaskJSON(ctx context.Context, taskID string, result []byte, user User) error {
	return e.completeTask(ctx, taskID, user, func(t *TaskInfo, created *history.TaskCreated) ([]byte, error) {
		codec, err := e.taskCodec(t, created)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(result)) == 0 {
			return nil, nil
		}
		v, err := jsonarg.Parse(string(result))
		if err != nil {
			return nil, &TaskResultError{TaskID: t.TaskID, Err: err}
		}
		if created != nil && created.ResultType != nil {
			if v, err = resulttype.Decode(created.ResultType, result); err != nil {
				return nil, &TaskResultError{TaskID: t.TaskID, Type: created.ResultType.Name, Err: err}
			}
		}
		return e.encodeWith(codec, "task result", v)
	})
}

// completeTask completes a task with the result encode returns, once the
// acting user may complete it.
func (e *Engine) completeTask(ctx context.Context, taskID string, user User,
	encode func(t *TaskInfo, created *history.TaskCreated) ([]byte, error)) error {
	var task *TaskInfo
	nonce := e.opts.NewID()
	err := e.taskActionWith(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		switch {
		case t.Assignee == user.ID:
		case t.Assignee != "":
			return nil, fmt.Errorf("%w: task %s is assigned to %s", ErrForbidden, t.TaskID, t.Assignee)
		case !holdsRole(user, t):
			return nil, fmt.Errorf("%w: %s holds none of the roles %v of task %s", ErrForbidden, user.ID, t.Roles, t.TaskID)
		}
		created, err := e.taskCreated(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("complete task %s: %w", t.TaskID, err)
		}
		data, err := encode(t, created)
		if err != nil {
			return nil, err
		}
		if data, err = e.sealForInstance(ctx, t.InstanceID, data); err != nil {
			return nil, err
		}
		task = t
		return &history.TaskCompleted{TaskID: t.TaskID, Result: data}, nil
	}, func(t *TaskInfo) (string, string) { return completionID(t), nonce })
	if err != nil || task == nil {
		return err
	}
	return e.wonCompletion(ctx, task, completionID(task), nonce)
}

// taskCreated returns the TaskCreated attributes of a task, nil when its
// history no longer holds them.
func (e *Engine) taskCreated(ctx context.Context, t *TaskInfo) (*history.TaskCreated, error) {
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: t.InstanceID, FromSeq: 1})
	if err != nil {
		return nil, err
	}
	for i := len(events) - 1; i >= 0; i-- {
		ev := &events[i]
		if ev.Kind != history.KindTaskCreated || ev.ExecutionID != t.ExecutionID {
			continue
		}
		a, err := ev.Attributes()
		if err != nil {
			return nil, err
		}
		if c := a.(*history.TaskCreated); c.TaskID == t.TaskID {
			return c, nil
		}
	}
	return nil, nil
}

// taskCodec returns the codec a task's workflow decodes its result with:
// the engine's own, unless the task records another (a worker with
// another codec created it); a recorded codec that is not built in and not
// the engine's is a *CodecMismatchError.
func (e *Engine) taskCodec(t *TaskInfo, created *history.TaskCreated) (Codec, error) {
	if created == nil || created.Codec == "" || created.Codec == e.opts.Codec.Name() {
		return e.opts.Codec, nil
	}
	switch created.Codec {
	case MsgpackCodec{}.Name():
		return MsgpackCodec{}, nil
	case JSONCodec{}.Name():
		return JSONCodec{}, nil
	}
	return nil, &CodecMismatchError{TaskID: t.TaskID, Recorded: created.Codec, Engine: e.opts.Codec.Name()}
}

// completionID is the message id every completion of a task shares, so
// that the queue holds at most one: derived from the task's instance,
// execution, id and creation (an explicit task id may be used again).
func completionID(t *TaskInfo) string {
	return history.DeterministicID(t.InstanceID, t.CreatedAt.UnixNano(), "complete:"+t.ExecutionID+":"+t.TaskID)
}

// wonCompletion checks, after a completion was enqueued, that the queued
// or recorded completion of the task is this call's (correlated by nonce);
// otherwise it returns the winner's *TaskCompletedError.
func (e *Engine) wonCompletion(ctx context.Context, t *TaskInfo, msgID, nonce string) error {
	queued, err := e.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: t.InstanceID, Limit: 1000})
	if err != nil {
		return fmt.Errorf("complete task %s: %w", t.TaskID, err)
	}
	for _, m := range queued {
		if m.ID == msgID {
			if m.CorrelationID == nonce {
				return nil
			}
			return completedError(t, m.Actor, 0)
		}
	}
	// Not queued any more: a round applied (or dead-lettered) it.
	ev, err := e.completion(ctx, t)
	if err != nil {
		return fmt.Errorf("complete task %s: %w", t.TaskID, err)
	}
	if ev == nil || ev.CorrelationID == nonce {
		return nil
	}
	return completedError(t, ev.Actor, ev.Seq)
}

// completion returns the event that completed a task: its TaskCompleted,
// or the TaskEscalated of an escalation step that completed it; nil when
// there is none.
func (e *Engine) completion(ctx context.Context, t *TaskInfo) (*history.Event, error) {
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: t.InstanceID, FromSeq: 1})
	if err != nil {
		return nil, err
	}
	for i := len(events) - 1; i >= 0; i-- {
		ev := &events[i]
		if ev.ExecutionID != t.ExecutionID || (ev.Kind != history.KindTaskCompleted && ev.Kind != history.KindTaskEscalated) {
			continue
		}
		a, err := ev.Attributes()
		if err != nil {
			continue
		}
		switch a := a.(type) {
		case *history.TaskCompleted:
			if a.TaskID == t.TaskID {
				return ev, nil
			}
		case *history.TaskEscalated:
			if a.TaskID == t.TaskID && a.Completed {
				return ev, nil
			}
		}
	}
	return nil, nil
}

func holdsRole(user User, t *TaskInfo) bool {
	return slices.ContainsFunc(user.Roles, func(r string) bool { return slices.Contains(t.Roles, r) })
}

// taskAction checks the acting user against the task's projection and
// enqueues the action; decide returns nil attributes for a no-op. The round
// checks again against the instance's state, so a lost race is rejected
// there rather than applied.
func (e *Engine) taskAction(ctx context.Context, taskID string, user User, decide func(*TaskInfo) (history.Attributes, error)) error {
	return e.taskActionWith(ctx, taskID, user, decide, nil)
}

// taskActionWith is taskAction with the message id and correlation id
// chosen by ids (default: a new id for both).
func (e *Engine) taskActionWith(ctx context.Context, taskID string, user User, decide func(*TaskInfo) (history.Attributes, error), ids func(*TaskInfo) (string, string)) error {
	if err := e.validateID("user id", user.ID); err != nil {
		return err
	}
	t, err := e.GetTask(ctx, taskID)
	if err != nil {
		return err
	}
	if t.Status == provider.TaskCompleted {
		ev, err := e.completion(ctx, t)
		if err != nil {
			return fmt.Errorf("task %s: %w", taskID, err)
		}
		if ev != nil {
			return completedError(t, ev.Actor, ev.Seq)
		}
	}
	if t.Status != provider.TaskOpen {
		return fmt.Errorf("%w: task %s is %s", ErrTaskClosed, taskID, t.Status)
	}
	attrs, err := decide(t)
	if err != nil || attrs == nil {
		return err
	}
	var id, correlation string
	if ids != nil {
		id, correlation = ids(t)
	} else {
		id = e.opts.NewID()
		correlation = id
	}
	m, err := provider.NewMessage(id, t.InstanceID, t.ExecutionID, correlation, attrs)
	if err != nil {
		return err
	}
	m.Actor = history.UserActor(user.ID)
	return e.enqueue(ctx, m)
}
