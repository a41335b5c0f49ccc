package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/jsonarg"
	"github.com/chronicleflow/chronicle/provider"
)

// taskJSON is a task in JSON output.
type taskJSON struct {
	ID          string              `json:"id"`
	Name        string              `json:"name"`
	InstanceID  string              `json:"instance_id"`
	ExecutionID string              `json:"execution_id"`
	Status      provider.TaskStatus `json:"status"`
	Assignee    string              `json:"assignee,omitempty"`
	Roles       []string            `json:"roles"`
	Payload     any                 `json:"payload,omitempty"`
	Result      any                 `json:"result,omitempty"`
	Due         time.Time           `json:"due,omitzero"`
	CreatedAt   time.Time           `json:"created_at"`
	UpdatedAt   time.Time           `json:"updated_at"`
	CompletedAt time.Time           `json:"completed_at,omitzero"`
	Seq         int64               `json:"seq"`
}

func (c *cli) toTaskJSON(t *chronicle.TaskInfo) taskJSON {
	roles := t.Roles
	if roles == nil {
		roles = []string{}
	}
	return taskJSON{
		ID: t.TaskID, Name: t.Name, InstanceID: t.InstanceID, ExecutionID: t.ExecutionID, Status: t.Status,
		Assignee: t.Assignee, Roles: roles, Payload: c.payload(t.Payload), Result: c.payload(t.Result),
		Due: t.Due.UTC(), CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), CompletedAt: t.CompletedAt.UTC(), Seq: t.Seq,
	}
}

// taskTable writes tasks as a table; withInstance adds the instance column.
func (c *cli) taskTable(prefix string, tasks []chronicle.TaskInfo, withInstance bool) {
	header := []string{"ID", "NAME", "STATUS", "ASSIGNEE", "ROLES", "DUE", "CREATED"}
	if withInstance {
		header = []string{"ID", "NAME", "INSTANCE", "STATUS", "ASSIGNEE", "ROLES", "DUE", "CREATED"}
	}
	rows := make([][]string, len(tasks))
	for i, t := range tasks {
		row := []string{t.TaskID, t.Name, string(t.Status), dash(t.Assignee), strings.Join(t.Roles, ","), when(t.Due), when(t.CreatedAt)}
		if withInstance {
			row = append(row[:2:2], append([]string{t.InstanceID}, row[2:]...)...)
		}
		rows[i] = row
	}
	table(c.stdout, prefix, header, rows)
}

var taskStatuses = []string{string(chronicle.TaskOpen), string(chronicle.TaskCompleted), string(chronicle.TaskCancelled)}

func runTasksList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var f chronicle.TaskFilter
	var roles listFlag
	var status string
	fs.Var(&roles, "role", "only tasks one of these roles may work on (repeatable, or a comma list)")
	fs.StringVar(&f.Assignee, "assignee", "", "only tasks assigned to this user")
	fs.StringVar(&status, "status", "", "only tasks in this status: "+strings.Join(taskStatuses, ", "))
	fs.StringVar(&f.InstanceID, "instance", "", "only tasks of this instance")
	fs.BoolVar(&f.Unassigned, "unassigned", false, "only tasks nobody has")
	fs.StringVar(&f.AfterID, "after", "", "page: only tasks with ids after this one")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many tasks")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if err := choice("status", status, taskStatuses...); err != nil {
		return usagef(cmd, "%v", err)
	}
	if f.Limit < 1 {
		return usagef(cmd, "invalid value %d for flag --limit: must be at least 1", f.Limit)
	}
	if f.Unassigned && f.Assignee != "" {
		return usagef(cmd, "--unassigned and --assignee exclude each other")
	}
	f.Roles, f.Status = roles, provider.TaskStatus(status)
	e, err := c.open()
	if err != nil {
		return err
	}
	tasks, err := e.ListTasks(c.ctx, f)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]taskJSON, len(tasks))
		for i := range tasks {
			out[i] = c.toTaskJSON(&tasks[i])
		}
		return c.printJSON(out)
	}
	if len(tasks) == 0 {
		c.printf("no tasks match\n")
		return nil
	}
	c.taskTable("", tasks, true)
	if len(tasks) == f.Limit {
		c.printf("more may follow: --after %s\n", tasks[len(tasks)-1].TaskID)
	}
	return nil
}

// taskEventJSON is an entry of a task's audit trail in JSON output.
type taskEventJSON struct {
	Seq      int64        `json:"seq"`
	Kind     history.Kind `json:"kind"`
	Actor    string       `json:"actor"`
	At       time.Time    `json:"at"`
	Assignee string       `json:"assignee,omitempty"`
	Detail   string       `json:"detail,omitempty"`
}

func runTaskShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	t, err := e.GetTask(c.ctx, pos[0])
	if err != nil {
		return err
	}
	events, err := e.TaskEvents(c.ctx, t.TaskID)
	if err != nil {
		return err
	}
	escalation, err := e.TaskEscalation(c.ctx, t.TaskID)
	if err != nil {
		return err
	}
	if c.json {
		out := struct {
			taskJSON
			Escalation []history.EscalationStep `json:"escalation,omitempty"`
			Events     []taskEventJSON          `json:"events"`
		}{taskJSON: c.toTaskJSON(t), Escalation: escalation, Events: []taskEventJSON{}}
		for _, ev := range events {
			out.Events = append(out.Events, taskEventJSON{Seq: ev.Seq, Kind: ev.Kind, Actor: ev.Actor, At: ev.At.UTC(), Assignee: ev.Assignee, Detail: ev.Detail})
		}
		return c.printJSON(out)
	}
	rowsOf := [][2]string{
		{"Task", t.TaskID},
		{"Name", t.Name},
		{"Instance", t.InstanceID + " (execution " + t.ExecutionID + ")"},
		{"Status", string(t.Status)},
		{"Assignee", dash(t.Assignee)},
		{"Roles", strings.Join(t.Roles, ", ")},
		{"Due", whenSet(t.Due)},
	}
	// The escalation policy, when the task has one: each step's time and
	// what it does if the task is still open then.
	for i, st := range escalation {
		label := ""
		if i == 0 {
			label = "Escalation"
		}
		rowsOf = append(rowsOf, [2]string{label, when(st.At) + ": " + st.Action})
	}
	fields(c.stdout, append(rowsOf, [][2]string{
		{"Created", when(t.CreatedAt)},
		{"Updated", when(t.UpdatedAt)},
		{"Completed", whenSet(t.CompletedAt)},
		{"Payload", c.payloadText(t.Payload)},
		{"Result", c.payloadText(t.Result)},
	}...))
	c.printf("\nAudit trail\n")
	rows := make([][]string, len(events))
	for i, ev := range events {
		rows[i] = []string{fmt.Sprint(ev.Seq), when(ev.At), string(ev.Kind), ev.Actor, dash(ev.Assignee), ev.Detail}
	}
	table(c.stdout, "  ", []string{"SEQ", "TIME (UTC)", "EVENT", "ACTOR", "ASSIGNEE", "DETAIL"}, rows)
	return nil
}

// taskAction parses a task action's flags — who acts, with --to the user
// the task goes to, with --result the result — runs act and reports the
// action's effect.
func (c *cli) taskAction(cmd *command, args []string, verb string, needTo, withResult bool,
	act func(e *chronicle.Engine, taskID string, user chronicle.User, to string, result []byte) error) error {
	fs := c.flags(cmd)
	var user, to, resultJSON string
	var roles listFlag
	fs.StringVar(&user, "user", "", "the acting user (required)")
	fs.Var(&roles, "roles", "the roles the acting user holds (repeatable, or a comma list)")
	if needTo {
		fs.StringVar(&to, "to", "", "the user the task goes to (required)")
	}
	if withResult {
		fs.StringVar(&resultJSON, "result", "", "the result as JSON, e.g. '{\"approved\":true}'")
	}
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	if user == "" {
		return usagef(cmd, "--user is required")
	}
	if needTo && to == "" {
		return usagef(cmd, "--to is required")
	}
	if resultJSON != "" {
		// JSON that does not parse is a mistake in the command line; one
		// that does not fit the task's result type is the engine's to say.
		if _, err = parseResult(resultJSON); err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	if err := act(e, pos[0], chronicle.User{ID: user, Roles: roles}, to, []byte(resultJSON)); err != nil {
		return err
	}
	return c.reportTask(pos[0], verb, user)
}

func runTaskClaim(c *cli, cmd *command, args []string) error {
	return c.taskAction(cmd, args, "claimed", false, false, func(e *chronicle.Engine, id string, u chronicle.User, _ string, _ []byte) error {
		return e.ClaimTask(c.ctx, id, u)
	})
}

func runTaskAssign(c *cli, cmd *command, args []string) error {
	return c.taskAction(cmd, args, "assigned", true, false, func(e *chronicle.Engine, id string, u chronicle.User, to string, _ []byte) error {
		return e.AssignTask(c.ctx, id, to, u)
	})
}

func runTaskReassign(c *cli, cmd *command, args []string) error {
	return c.taskAction(cmd, args, "reassigned", true, false, func(e *chronicle.Engine, id string, u chronicle.User, to string, _ []byte) error {
		return e.ReassignTask(c.ctx, id, to, u)
	})
}

func runTaskRelease(c *cli, cmd *command, args []string) error {
	return c.taskAction(cmd, args, "released", false, false, func(e *chronicle.Engine, id string, u chronicle.User, _ string, _ []byte) error {
		return e.ReleaseTask(c.ctx, id, u)
	})
}

func runTaskComplete(c *cli, cmd *command, args []string) error {
	return c.taskAction(cmd, args, "completed", false, true, func(e *chronicle.Engine, id string, u chronicle.User, _ string, result []byte) error {
		return e.CompleteTaskJSON(c.ctx, id, result, u)
	})
}

// taskReport is the JSON output of a task action.
type taskReport struct {
	TaskID         string              `json:"task_id"`
	Action         string              `json:"action"`
	User           string              `json:"user"`
	Applied        bool                `json:"applied"`
	TaskStatus     provider.TaskStatus `json:"task_status,omitempty"`
	Assignee       string              `json:"assignee,omitempty"`
	InstanceID     string              `json:"instance_id,omitempty"`
	InstanceStatus chronicle.Status    `json:"instance_status,omitempty"`
}

// reportTask lets a task action take effect and says what it did.
func (c *cli) reportTask(taskID, verb, user string) error {
	applied, err := c.settle()
	if err != nil {
		return err
	}
	rep := taskReport{TaskID: taskID, Action: verb, User: user, Applied: applied}
	if applied {
		t, err := c.engine.GetTask(c.ctx, taskID)
		if err != nil {
			return err
		}
		rep.TaskStatus, rep.Assignee, rep.InstanceID = t.Status, t.Assignee, t.InstanceID
		if in, err := c.engine.Describe(c.ctx, t.InstanceID); err == nil {
			rep.InstanceStatus = in.Status
		}
	}
	if c.json {
		return c.printJSON(rep)
	}
	if !applied {
		c.printf("%s %s as %s: recorded; the instance's workers apply it\n", verb, taskID, user)
		return nil
	}
	state := string(rep.TaskStatus)
	switch {
	case rep.TaskStatus != chronicle.TaskOpen:
	case rep.Assignee != "":
		state += ", assigned to " + rep.Assignee
	default:
		state += ", unassigned"
	}
	c.printf("%s %s as %s: task %s; instance %s is %s\n", verb, taskID, user, state, rep.InstanceID, rep.InstanceStatus)
	return nil
}

// parseResult checks that a --result value is one JSON value.
func parseResult(s string) (any, error) {
	v, err := jsonarg.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid value for flag --result: %w", err)
	}
	return v, nil
}
