package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/jsonarg"
)

// maxForm bounds the body of an action: a task result may be large, not
// larger than the engine's payload limit allows anyway.
const maxForm = 8 << 20

// act is one action: it does what the form asks as user and returns what
// it did, for the next page to say, and the page to go back to when the
// form names none.
type act func(c *console, r *http.Request, user chronicle.User, id string) (done, back string, err error)

// actions are the console's actions by name: POST <base>/actions/<name>.
var actions = map[string]act{
	"redrive": func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		return "Dead letter " + id + " redriven by " + user.ID + ".", c.path("/deadletters"),
			c.engine.RedriveDeadLetter(r.Context(), id, user.ID)
	},
	"discard": func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		return "Dead letter " + id + " discarded by " + user.ID + ".", c.path("/deadletters"),
			c.engine.DiscardDeadLetter(r.Context(), id, user.ID)
	},
	"terminate": controlAct("terminated", "terminated in the console", (*chronicle.Engine).Terminate),
	"suspend":   controlAct("suspended", "suspended in the console", (*chronicle.Engine).Suspend),
	"resume":    controlAct("resumed", "resumed in the console", (*chronicle.Engine).Resume),
	"rerun":     rerunAct,
	"schedule-pause": scheduleAct("paused", func(ctx context.Context, e *chronicle.Engine, id, note, actor string) error {
		return e.PauseSchedule(ctx, id, note, actor)
	}),
	"schedule-resume": scheduleAct("resumed", func(ctx context.Context, e *chronicle.Engine, id, note, actor string) error {
		return e.ResumeSchedule(ctx, id, note, actor)
	}),
	"schedule-trigger": scheduleAct("triggered", func(ctx context.Context, e *chronicle.Engine, id, _, actor string) error {
		return e.TriggerSchedule(ctx, id, actor)
	}),
	"batch-pause":  batchAct("paused", (*chronicle.Engine).PauseBatch),
	"batch-resume": batchAct("resumed", (*chronicle.Engine).ResumeBatch),
	"batch-cancel": batchAct("cancelled", (*chronicle.Engine).CancelBatch),
	"claim": taskAct("claimed", func(ctx context.Context, e *chronicle.Engine, id string, r *http.Request, u chronicle.User) error {
		return e.ClaimTask(ctx, id, u)
	}),
	"release": taskAct("released", func(ctx context.Context, e *chronicle.Engine, id string, r *http.Request, u chronicle.User) error {
		return e.ReleaseTask(ctx, id, u)
	}),
	"assign": taskAct("assigned", func(ctx context.Context, e *chronicle.Engine, id string, r *http.Request, u chronicle.User) error {
		return e.AssignTask(ctx, id, strings.TrimSpace(r.PostFormValue("to")), u)
	}),
	"reassign": taskAct("reassigned", func(ctx context.Context, e *chronicle.Engine, id string, r *http.Request, u chronicle.User) error {
		return e.ReassignTask(ctx, id, strings.TrimSpace(r.PostFormValue("to")), u)
	}),
	"complete": taskAct("completed", func(ctx context.Context, e *chronicle.Engine, id string, r *http.Request, u chronicle.User) error {
		return e.CompleteTaskJSON(ctx, id, []byte(r.PostFormValue("result")), u)
	}),
}

// controlAct makes the action of Terminate, Suspend or Resume: the form's
// reason (fallback when empty) and optional ticket are recorded with the
// acting user in the instance's history.
func controlAct(verb, fallback string, do func(e *chronicle.Engine, ctx context.Context, id, reason string, opts *chronicle.ControlOptions) error) act {
	return func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if reason == "" {
			reason = fallback
		}
		ticket := strings.TrimSpace(r.PostFormValue("ticket"))
		return "Instance " + id + " " + verb + " by " + user.ID + ".", c.instanceURL(id),
			do(c.engine, r.Context(), id, reason, &chronicle.ControlOptions{Actor: user.ID, Ticket: ticket})
	}
}

// rerunAct starts a new execution of an instance from the form's seq,
// with the form's activity input (JSON, optional), reason (a fallback when
// empty) and ticket, recorded with the acting user in both executions.
func rerunAct(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
	back := c.instanceURL(id)
	from, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("from_seq")), 10, 64)
	if err != nil {
		return "", back, fmt.Errorf("%w: the seq to rerun from is not a number", chronicle.ErrInvalidArgument)
	}
	opts := chronicle.RerunOptions{FromSeq: from, Actor: user.ID,
		Reason: strings.TrimSpace(r.PostFormValue("reason")), Ticket: strings.TrimSpace(r.PostFormValue("ticket"))}
	if opts.Reason == "" {
		opts.Reason = "rerun in the console"
	}
	if in := strings.TrimSpace(r.PostFormValue("input")); in != "" {
		if opts.ActivityInput, err = jsonarg.Parse(in); err != nil {
			return "", back, fmt.Errorf("%w: the activity input is %v", chronicle.ErrInvalidArgument, err)
		}
	}
	exec, err := c.engine.Rerun(r.Context(), id, opts)
	return fmt.Sprintf("Instance %s rerun from seq %d by %s as execution %s.", id, from, user.ID, exec), back, err
}

// taskAct makes the action of a human-task method.
func taskAct(verb string, do func(context.Context, *chronicle.Engine, string, *http.Request, chronicle.User) error) act {
	return func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		return "Task " + id + " " + verb + " by " + user.ID + ".", c.taskURL(id), do(r.Context(), c.engine, id, r, user)
	}
}

// scheduleAct makes the action of a schedule method; the form's note is
// recorded with the change where the method takes one.
func scheduleAct(verb string, do func(ctx context.Context, e *chronicle.Engine, id, note, actor string) error) act {
	return func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		note := strings.TrimSpace(r.PostFormValue("note"))
		return "Schedule " + id + " " + verb + " by " + user.ID + ".", c.scheduleURL(id), do(r.Context(), c.engine, id, note, user.ID)
	}
}

// batchAct makes the action of a batch method, with the form's note as
// the change's reason.
func batchAct(verb string, do func(e *chronicle.Engine, ctx context.Context, id, note, actor string) error) act {
	return func(c *console, r *http.Request, user chronicle.User, id string) (string, string, error) {
		note := strings.TrimSpace(r.PostFormValue("note"))
		return "Batch " + id + " " + verb + " by " + user.ID + ".", c.batchURL(id), do(c.engine, r.Context(), id, note, user.ID)
	}
}

// action serves POST <base>/actions/{action}: it checks that actions are
// enabled, the request is not forged and the hook names the acting user,
// takes the action as that user and sends the browser back where it came
// from with a notice of what it did.
func (c *console) action(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("action")
	do, ok := actions[name]
	switch {
	case !ok:
		c.fail(w, r, http.StatusNotFound, "no such action: "+name)
		return
	case !c.opts.Actions:
		c.fail(w, r, http.StatusForbidden, "Actions are disabled: this console is read-only.")
		return
	}
	if err := c.origin.Check(r); err != nil {
		c.fail(w, r, http.StatusForbidden, "Refused a cross-origin request: "+err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "unreadable form: "+err.Error())
		return
	}
	if !checkCSRF(r) {
		c.fail(w, r, http.StatusForbidden, "The form's CSRF token is missing or does not match this browser's: reload the page and try again.")
		return
	}
	user, err := c.opts.User(r)
	if err == nil {
		err = history.ValidateID("user id", user.ID)
	}
	if err != nil {
		c.fail(w, r, http.StatusForbidden, "No acting user: "+err.Error())
		return
	}
	id := r.PostFormValue("id")
	done, back, err := do(c, r, user, id)
	attrs := []any{slog.String("action", name), slog.String("id", id), slog.String("user", user.ID)}
	if err != nil {
		c.log.InfoContext(r.Context(), "console: action refused", append(attrs, slog.Any("error", err))...)
		c.failErr(w, r, err)
		return
	}
	c.log.InfoContext(r.Context(), "console: action taken", attrs...)
	c.setNotice(w, r, done)
	http.Redirect(w, r, c.returnPath(r, back), http.StatusSeeOther)
}
