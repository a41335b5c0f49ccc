package chronicle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
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
)

// User is who acts on a task: an id recorded in history ("user:<ID>") and
// the roles the product granted them.
type User struct {
	ID    string
	Roles []string
}

// TaskInfo is a human task as its projection shows it.
type TaskInfo = round.TaskRecord

// TaskEvent is one entry of a task's audit trail.
type TaskEvent = round.TaskEventRecord

// TaskFilter selects tasks for ListTasks. Empty fields match anything.
type TaskFilter struct {
	InstanceID string
	Status     round.TaskStatus
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
	TaskOpen      = round.TaskOpen
	TaskCompleted = round.TaskCompleted
	TaskCancelled = round.TaskCancelled
)

// ListTasks returns tasks in id order: an inbox is ListTasks with the
// user's roles and Unassigned, or with Assignee set to the user.
func (e *Engine) ListTasks(ctx context.Context, f TaskFilter) ([]TaskInfo, error) {
	return e.store.ListTasks(ctx, &round.ListTasksParams{
		InstanceID: f.InstanceID, Status: f.Status, Assignee: f.Assignee, Roles: f.Roles,
		Unassigned: f.Unassigned, AfterID: f.AfterID, Limit: f.Limit,
	})
}

// GetTask returns one task.
func (e *Engine) GetTask(ctx context.Context, taskID string) (*TaskInfo, error) {
	if err := e.validateID("task id", taskID); err != nil {
		return nil, err
	}
	t, err := e.store.GetTask(ctx, taskID)
	if errors.Is(err, round.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
	}
	return t, err
}

// TaskEvents returns the audit trail of a task: created, assigned,
// released, reassigned, completed, cancelled, each with its actor and time.
func (e *Engine) TaskEvents(ctx context.Context, taskID string) ([]TaskEvent, error) {
	t, err := e.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return e.store.ListTaskEvents(ctx, &round.ListTaskEventsParams{InstanceID: t.InstanceID, TaskID: taskID})
}

// Claim gives an unassigned task to the acting user, who must hold one of
// its roles. Claiming a task one already has does nothing.
func (e *Engine) Claim(ctx context.Context, taskID string, user User) error {
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

// Assign gives an unassigned task to assignee; the acting user must hold
// one of its roles.
func (e *Engine) Assign(ctx context.Context, taskID, assignee string, user User) error {
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

// Release gives a task back to its roles; only its assignee may.
func (e *Engine) Release(ctx context.Context, taskID string, user User) error {
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		if t.Assignee != user.ID {
			return nil, fmt.Errorf("%w: task %s is not assigned to %s", ErrForbidden, t.TaskID, user.ID)
		}
		return &history.TaskReleased{TaskID: t.TaskID, Previous: user.ID}, nil
	})
}

// Reassign moves an assigned task to another user; its assignee or a
// holder of one of its roles may.
func (e *Engine) Reassign(ctx context.Context, taskID, to string, user User) error {
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

// Complete closes a task with a result, which the waiting workflow
// receives. Its assignee may complete it, or, while it is unassigned, a
// holder of one of its roles.
func (e *Engine) Complete(ctx context.Context, taskID string, result any, user User) error {
	data, err := e.encode("task result", result)
	if err != nil {
		return err
	}
	return e.taskAction(ctx, taskID, user, func(t *TaskInfo) (history.Attributes, error) {
		switch {
		case t.Assignee == user.ID:
		case t.Assignee != "":
			return nil, fmt.Errorf("%w: task %s is assigned to %s", ErrForbidden, t.TaskID, t.Assignee)
		case !holdsRole(user, t):
			return nil, fmt.Errorf("%w: %s holds none of the roles %v of task %s", ErrForbidden, user.ID, t.Roles, t.TaskID)
		}
		return &history.TaskCompleted{TaskID: t.TaskID, Result: data}, nil
	})
}

func holdsRole(user User, t *TaskInfo) bool {
	return slices.ContainsFunc(user.Roles, func(r string) bool { return slices.Contains(t.Roles, r) })
}

// taskAction checks the acting user against the task's projection and
// enqueues the action; decide returns nil attributes for a no-op. The round
// checks again against the instance's state, so a lost race is rejected
// there rather than applied.
func (e *Engine) taskAction(ctx context.Context, taskID string, user User, decide func(*TaskInfo) (history.Attributes, error)) error {
	if err := e.validateID("user id", user.ID); err != nil {
		return err
	}
	t, err := e.GetTask(ctx, taskID)
	if err != nil {
		return err
	}
	if t.Status != round.TaskOpen {
		return fmt.Errorf("%w: task %s is %s", ErrTaskClosed, taskID, t.Status)
	}
	attrs, err := decide(t)
	if err != nil || attrs == nil {
		return err
	}
	id := e.opts.NewID()
	m, err := round.NewMessage(id, t.InstanceID, t.ExecutionID, id, attrs)
	if err != nil {
		return err
	}
	m.Actor = history.UserActor(user.ID)
	return e.enqueue(ctx, m)
}
