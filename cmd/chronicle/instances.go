package main

import (
	"errors"
	"fmt"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
)

// instanceJSON is an instance in JSON output.
type instanceJSON struct {
	ID            string            `json:"id"`
	ExecutionID   string            `json:"execution_id"`
	Workflow      string            `json:"workflow"`
	Version       string            `json:"version,omitempty"`
	Status        chronicle.Status  `json:"status"`
	BusinessKey   string            `json:"business_key,omitempty"`
	BusinessParts map[string]string `json:"business_parts,omitempty"`
	ParentID      string            `json:"parent_id,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	CompletedAt   time.Time         `json:"completed_at,omitzero"`
	LastSeq       int64             `json:"last_seq"`
	LastError     string            `json:"last_error,omitempty"`
	Incident      string            `json:"incident,omitempty"`
	Failure       *failureJSON      `json:"failure,omitempty"`
	// CustomStatusText is the custom status when it was set as a string.
	CustomStatusText string              `json:"custom_status_text,omitempty"`
	SearchAttributes map[string]attrJSON `json:"search_attributes,omitempty"`
	// Waiting is why a pending instance has not started.
	Waiting *waitingJSON `json:"waiting,omitempty"`
	// LegalHold is the instance's legal hold (instance show only).
	LegalHold *holdJSON `json:"legal_hold,omitempty"`
}

type holdJSON struct {
	HoldID   string    `json:"hold_id"`
	Reason   string    `json:"reason"`
	Actor    string    `json:"actor"`
	Ticket   string    `json:"ticket,omitempty"`
	PlacedAt time.Time `json:"placed_at"`
}

// holdText renders a legal hold on one line, "" for none.
func holdText(h *chronicle.LegalHold) string {
	if h == nil {
		return ""
	}
	s := "held since " + when(h.PlacedAt) + " by " + h.Actor + ": " + h.Reason
	if h.Ticket != "" {
		s += " (ticket " + h.Ticket + ")"
	}
	return s
}

type failureJSON struct {
	Message      string `json:"message"`
	Type         string `json:"type,omitempty"`
	NonRetryable bool   `json:"non_retryable,omitempty"`
}

func toInstanceJSON(i *chronicle.Instance) instanceJSON {
	out := instanceJSON{
		ID: i.ID, ExecutionID: i.ExecutionID, Workflow: i.Workflow, Version: i.Version, Status: i.Status,
		BusinessKey: i.BusinessKey, BusinessParts: i.BusinessParts, ParentID: i.ParentID,
		CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(), CompletedAt: i.CompletedAt.UTC(),
		LastSeq: i.LastSeq, LastError: i.LastError, Incident: i.Incident,
		CustomStatusText: i.CustomStatusText, SearchAttributes: toAttrsJSON(i.SearchAttributes),
		Waiting: toWaitingJSON(i.Waiting),
	}
	if f := i.Failure; f != nil {
		out.Failure = &failureJSON{Message: f.Message, Type: f.Type, NonRetryable: f.NonRetryable}
	}
	if h := i.Hold; h != nil {
		out.LegalHold = &holdJSON{HoldID: h.HoldID, Reason: h.Reason, Actor: h.Actor, Ticket: h.Ticket, PlacedAt: h.PlacedAt.UTC()}
	}
	return out
}

var instanceStatuses = []string{
	string(chronicle.StatusPending), string(chronicle.StatusRunning), string(chronicle.StatusSuspended), string(chronicle.StatusCompleted),
	string(chronicle.StatusFailed), string(chronicle.StatusTerminated),
}

func runInstancesList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var f chronicle.InstanceFilter
	var status string
	var from, to timeFlag
	var columns listFlag
	fs.StringVar(&f.Where, "where", "", "only instances matching this query, such as \"status = 'running' AND amount > 100\" (docs/search.md)")
	fs.Var(&columns, "columns", "show these declared search attributes as columns (comma-separated or repeated)")
	fs.StringVar(&status, "status", "", "only instances in this status: "+strings.Join(instanceStatuses, ", "))
	fs.StringVar(&f.Workflow, "workflow", "", "only instances of this workflow")
	fs.StringVar(&f.BusinessKey, "key", "", "only instances with this business key")
	fs.Var(&from, "from", "only instances created at or after this time (RFC 3339 or date)")
	fs.Var(&to, "to", "only instances created before this time (RFC 3339 or date)")
	fs.StringVar(&f.AfterID, "after", "", "page: only instances with ids after this one")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many instances")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if err := choice("status", status, instanceStatuses...); err != nil {
		return usagef(cmd, "%v", err)
	}
	if f.Limit < 1 {
		return usagef(cmd, "invalid value %d for flag --limit: must be at least 1", f.Limit)
	}
	if err := c.checkWhere(cmd, f.Where); err != nil {
		return err
	}
	cols, err := c.columns(cmd, columns)
	if err != nil {
		return err
	}
	f.Status, f.CreatedFrom, f.CreatedTo = chronicle.Status(status), from.t, to.t
	e, err := c.open()
	if err != nil {
		return err
	}
	list, err := e.ListInstances(c.ctx, f)
	if err != nil {
		return c.queryError(cmd, f.Where, err)
	}
	if c.json {
		out := make([]instanceJSON, len(list))
		for i, in := range list {
			out[i] = toInstanceJSON(in)
		}
		return c.printJSON(out)
	}
	if len(list) == 0 {
		c.printf("no instances match\n")
		return nil
	}
	header := []string{"ID", "WORKFLOW", "STATUS", "CUSTOM STATUS", "BUSINESS KEY"}
	for _, name := range cols {
		header = append(header, strings.ToUpper(name))
	}
	header = append(header, "CREATED", "UPDATED", "INCIDENT")
	rows := make([][]string, len(list))
	for i, in := range list {
		row := []string{in.ID, in.Workflow, string(in.Status), timeline.Shorten(in.CustomStatusText, 30), in.BusinessKey}
		for _, name := range cols {
			row = append(row, attrText(in.SearchAttributes[name]))
		}
		rows[i] = append(row, when(in.CreatedAt), when(in.UpdatedAt), timeline.Shorten(in.Incident, 60))
	}
	table(c.stdout, "", header, rows)
	if len(list) == f.Limit {
		c.printf("more may follow: --after %s\n", list[len(list)-1].ID)
	}
	return nil
}

// instanceDetail is instance show's JSON output.
type instanceDetail struct {
	instanceJSON
	Result       any              `json:"result,omitempty"`
	CustomStatus any              `json:"custom_status,omitempty"`
	OpenTasks    []taskJSON       `json:"open_tasks"`
	DeadLetters  []deadLetterJSON `json:"dead_letters"`
}

func runInstanceShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	e, err := c.open()
	if err != nil {
		return err
	}
	in, err := e.Describe(c.ctx, id)
	if err != nil {
		return c.notFound(id, err)
	}
	var result, custom any
	if in.Status == chronicle.StatusCompleted {
		if err := in.Result(&result); err != nil {
			result = fmt.Sprintf("undecodable result: %v", err)
		}
	}
	if _, err := in.CustomStatus(&custom); err != nil {
		custom = fmt.Sprintf("undecodable custom status: %v", err)
	}
	tasks, err := e.ListTasks(c.ctx, chronicle.TaskFilter{InstanceID: id, Status: chronicle.TaskOpen, Limit: 1000})
	if err != nil {
		return err
	}
	letters, err := e.ListDeadLetters(c.ctx, chronicle.DeadLetterFilter{InstanceID: id, Limit: 1000})
	if err != nil {
		return err
	}
	if c.json {
		out := instanceDetail{instanceJSON: toInstanceJSON(in), Result: result, CustomStatus: custom,
			OpenTasks: []taskJSON{}, DeadLetters: []deadLetterJSON{}}
		for _, t := range tasks {
			out.OpenTasks = append(out.OpenTasks, c.toTaskJSON(&t))
		}
		for _, dl := range letters {
			out.DeadLetters = append(out.DeadLetters, c.toDeadLetterJSON(&dl))
		}
		return c.printJSON(out)
	}
	workflow := in.Workflow
	if in.Version != "" {
		workflow += " v" + in.Version
	}
	var failure, resultText, customText string
	if f := in.Failure; f != nil {
		failure = f.Message
		if f.Type != "" {
			failure += " [" + f.Type + "]"
		}
	}
	if in.Status == chronicle.StatusCompleted {
		resultText = decodedText(result)
	}
	if custom != nil {
		customText = decodedText(custom)
	}
	fields(c.stdout, [][2]string{
		{"Instance", in.ID},
		{"Workflow", workflow},
		{"Status", string(in.Status)},
		{"Waiting", waitingText(in.Waiting)},
		{"Legal hold", holdText(in.Hold)},
		{"Execution", in.ExecutionID},
		{"Business key", businessKey(in)},
		{"Parent", in.ParentID},
		{"Created", when(in.CreatedAt)},
		{"Updated", when(in.UpdatedAt)},
		{"Completed", whenSet(in.CompletedAt)},
		{"Last seq", fmt.Sprint(in.LastSeq)},
		{"Custom status", customText},
		{"Attributes", attrsText(in.SearchAttributes)},
		{"Result", resultText},
		{"Failure", failure},
		{"Last error", in.LastError},
		{"Incident", in.Incident},
	})
	c.printf("\nOpen tasks\n")
	if len(tasks) == 0 {
		c.printf("  none\n")
	} else {
		c.taskTable("  ", tasks, false)
	}
	c.printf("\nDead letters\n")
	if len(letters) == 0 {
		c.printf("  none\n")
	} else {
		c.deadLetterTable("  ", letters, false)
	}
	return nil
}

// attrsText renders search attributes on one line, by name:
// "amount=1280, policy=POL-7731".
func attrsText(attrs map[string]any) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		parts = append(parts, name+"="+attrText(attrs[name]))
	}
	return strings.Join(parts, ", ")
}

// whenSet is when, but "" for an unset time so fields leaves it out.
func whenSet(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return when(t)
}

// businessKey renders the business key and its parts: "CLM-1 (line=home,
// policy=P-7)".
func businessKey(in *chronicle.Instance) string {
	if len(in.BusinessParts) == 0 {
		return in.BusinessKey
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(in.BusinessParts)) {
		parts = append(parts, k+"="+in.BusinessParts[k])
	}
	return strings.TrimSpace(in.BusinessKey + " (" + strings.Join(parts, ", ") + ")")
}

// notFound adds what the store remembers of a purged instance to an
// ErrInstanceNotFound.
func (c *cli) notFound(id string, err error) error {
	if !errors.Is(err, chronicle.ErrInstanceNotFound) {
		return err
	}
	ts, terr := c.engine.GetTombstone(c.ctx, id)
	if terr != nil {
		return err
	}
	return fmt.Errorf("%w (purged %s by %s at seq %d)", err, when(ts.PurgedAt), ts.PurgedBy, ts.LastSeq)
}
