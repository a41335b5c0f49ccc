package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/resulttype"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// instanceStatuses are the statuses the instance filter offers.
var instanceStatuses = []string{
	string(chronicle.StatusPending), string(chronicle.StatusRunning), string(chronicle.StatusSuspended),
	string(chronicle.StatusCompleted), string(chronicle.StatusFailed), string(chronicle.StatusTerminated),
}

// pager is the paging of a list: the link to the next page, if there is
// one, and to the first, when this is not it.
type pager struct {
	Next, First string
}

// page pages rows fetched with one more than a page: it keeps a page and
// links the next from the id of its last row.
func page[T any](c *console, path string, q url.Values, rows []T, id func(T) string) ([]T, pager) {
	var p pager
	if q.Get("after") != "" {
		first := maps.Clone(q)
		first.Del("after")
		p.First = c.link(path, first)
	}
	if len(rows) > c.opts.PageSize {
		rows = rows[:c.opts.PageSize]
		next := maps.Clone(q)
		next.Set("after", id(rows[len(rows)-1]))
		p.Next = c.link(path, next)
	}
	return rows, p
}

// instancesPage is the data of the instance list.
type instancesPage struct {
	Status, Workflow, Key, From, To string
	// Query is the filter in the query language (the q parameter), as
	// typed; Columns the declared attributes shown as columns, and
	// ColumnsText the columns parameter as typed.
	Query       string
	Columns     []string
	ColumnsText string
	// Declared lists the declared search attributes, for the query box's
	// hint: "amount (float)".
	Declared []string
	Statuses []string
	Rows     []instanceRow
	// Counts are the instances of each status over the filter but its
	// status; Total is their sum. CountErr says why they are missing.
	Counts   []statusCount
	Total    int64
	CountErr string
	Pager    pager
	Problem  string
}

// instanceRow is one row of the instance list: the instance and the
// values of the chosen attribute columns.
type instanceRow struct {
	*chronicle.Instance
	Attrs []string
}

// statusCount is one status of the count row, with the link that filters
// the list by it.
type statusCount struct {
	Status  string
	Count   int64
	URL     string
	Current bool
}

// maxColumns bounds the attribute columns of the instance list.
const maxColumns = 8

func (c *console) instances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	decls := c.engine.Options().SearchAttributes
	p := instancesPage{Status: q.Get("status"), Workflow: strings.TrimSpace(q.Get("workflow")),
		Key: strings.TrimSpace(q.Get("key")), From: q.Get("from"), To: q.Get("to"), Statuses: instanceStatuses,
		Query: strings.TrimSpace(q.Get("q")), ColumnsText: q.Get("columns")}
	for _, name := range slices.Sorted(maps.Keys(decls)) {
		p.Declared = append(p.Declared, name+" ("+decls[name].String()+")")
	}
	f := chronicle.InstanceFilter{Status: chronicle.Status(p.Status), Workflow: p.Workflow, BusinessKey: p.Key,
		Where: p.Query, AfterID: q.Get("after"), Limit: c.opts.PageSize + 1}
	var problems []string
	if p.Status != "" && !slices.Contains(instanceStatuses, p.Status) {
		problems = append(problems, "unknown status "+strconv.Quote(p.Status))
	}
	var err error
	if f.CreatedFrom, err = parseTime(p.From); err != nil {
		problems = append(problems, "created from: "+err.Error())
	}
	if f.CreatedTo, err = parseTime(p.To); err != nil {
		problems = append(problems, "created before: "+err.Error())
	}
	if p.Query != "" {
		if _, err := query.Parse(p.Query, query.SchemaOf(decls)); err != nil {
			problems = append(problems, "query: "+err.Error())
		}
	}
	var cerr string
	p.Columns, cerr = chooseColumns(q, decls)
	if cerr != "" {
		problems = append(problems, "columns: "+cerr)
	}
	if len(problems) > 0 {
		p.Problem = strings.Join(problems, "; ")
		c.render(w, r, http.StatusBadRequest, "instances", "Instances", "instances", p)
		return
	}
	list, err := c.engine.ListInstances(r.Context(), f)
	if err != nil {
		if errors.Is(err, chronicle.ErrInvalidArgument) || errors.Is(err, query.ErrInvalidQuery) {
			p.Problem = "query: " + err.Error()
			c.render(w, r, http.StatusBadRequest, "instances", "Instances", "instances", p)
			return
		}
		c.failErr(w, r, err)
		return
	}
	list, p.Pager = page(c, "/instances", q, list, func(in *chronicle.Instance) string { return in.ID })
	for _, in := range list {
		row := instanceRow{Instance: in}
		for _, name := range p.Columns {
			row.Attrs = append(row.Attrs, attrText(in.SearchAttributes[name]))
		}
		p.Rows = append(p.Rows, row)
	}
	c.statusCounts(r, q, f, &p)
	c.render(w, r, http.StatusOK, "instances", "Instances", "instances", p)
}

// chooseColumns returns the attribute columns of the instance list: those
// the columns parameter names (comma-separated), or by default the
// declared attributes in name order, at most maxColumns of them.
func chooseColumns(q url.Values, decls map[string]query.Type) ([]string, string) {
	if !q.Has("columns") {
		names := slices.Sorted(maps.Keys(decls))
		return names[:min(len(names), maxColumns)], ""
	}
	var cols, unknown []string
	for _, name := range strings.Split(q.Get("columns"), ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(cols, name) {
			continue
		}
		if _, ok := decls[name]; !ok {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		cols = append(cols, name)
	}
	if len(unknown) > 0 {
		return nil, strings.Join(unknown, ", ") + " not declared (Options.SearchAttributes)"
	}
	if len(cols) > maxColumns {
		return nil, fmt.Sprintf("at most %d", maxColumns)
	}
	return cols, ""
}

// statusCounts counts the instances of each status over the list's filter
// without its status, for the count row; each count links to the list
// filtered by its status. Pending instances are not counted: they have no
// record yet.
func (c *console) statusCounts(r *http.Request, q url.Values, f chronicle.InstanceFilter, p *instancesPage) {
	var terms []string
	if f.Where != "" {
		terms = append(terms, "("+f.Where+")")
	}
	if f.Workflow != "" {
		terms = append(terms, "workflow = "+quote(f.Workflow))
	}
	if f.BusinessKey != "" {
		terms = append(terms, "business_key = "+quote(f.BusinessKey))
	}
	if !f.CreatedFrom.IsZero() {
		terms = append(terms, "created_at >= "+quote(f.CreatedFrom.UTC().Format(time.RFC3339Nano)))
	}
	if !f.CreatedTo.IsZero() {
		terms = append(terms, "created_at < "+quote(f.CreatedTo.UTC().Format(time.RFC3339Nano)))
	}
	groups, err := c.engine.CountInstances(r.Context(), chronicle.CountFilter{Where: strings.Join(terms, " AND "), By: "status"})
	if err != nil {
		c.log.WarnContext(r.Context(), "console: count instances", slog.Any("error", err))
		p.CountErr = "counts unavailable: " + err.Error()
		return
	}
	for _, g := range groups {
		s, _ := g.Value.(string)
		if s == "" {
			continue
		}
		link := maps.Clone(q)
		link.Del("after")
		link.Set("status", s)
		p.Counts = append(p.Counts, statusCount{Status: s, Count: g.Count, URL: c.link("/instances", link), Current: s == p.Status})
		p.Total += g.Count
	}
}

// quote writes s as a string literal of the query language.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// attrText formats an attribute's value for a cell; "" when unset.
func attrText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return when(v)
	case []string:
		return strings.Join(v, ", ")
	}
	return fmt.Sprint(v)
}

// parseTime reads a time filter: what an <input type="datetime-local">
// sends, RFC 3339 or a date, in UTC; "" is no bound.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("want a time such as 2026-11-22T09:00 (UTC) or a date")
}

// instancePage is the data of an instance's page.
type instancePage struct {
	Instance                      *chronicle.Instance
	Result, CustomStatus, Failure string
	Chain                         chain
	// Check lists how the stored projections differ from a fold of the
	// history; CheckErr says why they could not be compared.
	Check    []string
	CheckErr string
	Timeline *svgTimeline
	Events   []eventRow
	// Seq is the seq the projections are shown as of (time travel), Last
	// the history's last; Travel is set when Seq is not the last.
	Seq, Last  int64
	Travel     bool
	Prev, Next int64
	View       *projectionView
	Tasks      []taskDetail
	Letters    []letterRow
	// Terminable says whether the instance may be terminated.
	Terminable bool
	// Suspendable and Resumable say whether the instance may be suspended
	// (it runs) or resumed (it is suspended).
	Suspendable, Resumable bool
	// Rerunnable says whether the instance may be rerun from a seq: it has
	// history.
	Rerunnable bool
}

// chain is the verification of a hash chain.
type chain struct {
	Verified bool
	Events   int
	// Seq is the first broken seq, Reason what is wrong with it.
	Seq    int64
	Reason string
	// Err is set when the history could not be read at all.
	Err string
	// Signed is set when the console has keys: the fields below say what
	// the signed checkpoints found.
	Signed bool
	// CoveredSeq is the highest seq a checkpoint covers (0: not yet
	// covered), Checkpoint its number.
	CoveredSeq, Checkpoint int64
	// Forged says how the history contradicts its checkpoints; "" when
	// it does not.
	Forged string
}

// eventRow is one event of the history table.
type eventRow struct {
	Seq                  int64
	At                   time.Time
	Kind, Actor, Detail  string
	Attributes           string
	ExecutionID          string
	Later, Current, Ends bool
	// LinkSeq and LinkText link a rerun's record to the start of the
	// execution it started, and that start to the seq it reran from.
	LinkSeq  int64
	LinkText string
}

// projectionView is what the projections of an instance were as of one
// seq.
type projectionView struct {
	Seq          int64
	At           time.Time
	Status       string
	CustomStatus string
	LastError    string
	Updated      time.Time
	Tasks        []chronicle.TaskInfo
	Custom       []named
	Err          string
}

// named is a custom projection's state.
type named struct {
	Name, Value string
}

// taskDetail is a human task with its audit trail.
type taskDetail struct {
	Task            chronicle.TaskInfo
	Payload, Result string
	Trail           []chronicle.TaskEvent
	TrailErr        string
}

// letterRow is a dead letter and what it holds.
type letterRow struct {
	Letter chronicle.DeadLetter
	// Item names the work item: the message's kind or the activity.
	Item string
	// Body is the item's content: the message's attributes or the
	// activity's input.
	Body string
	Dead bool
}

func (c *console) instance(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	in, err := c.engine.Describe(ctx, id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := instancePage{Instance: in, Terminable: !in.Status.Terminal() && in.Status != chronicle.StatusPending,
		Suspendable: in.Status == chronicle.StatusRunning, Resumable: in.Status == chronicle.StatusSuspended}
	if in.Status == chronicle.StatusCompleted {
		p.Result = decodedText(in.Result)
	}
	if f := in.Failure; f != nil {
		p.Failure = f.Message
		if f.Type != "" {
			p.Failure += " [" + f.Type + "]"
		}
	}
	p.CustomStatus = decodedText(func(out any) error {
		_, err := in.CustomStatus(out)
		return err
	})

	letters, err := c.engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{InstanceID: id, Limit: 100})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	dead := map[int64]string{}
	for _, l := range letters {
		p.Letters = append(p.Letters, c.letterRow(l))
		if l.Status == provider.DeadLetterDead && l.Activity != nil {
			dead[l.Activity.ScheduledSeq] = string(l.Reason) + ": " + l.Error
		}
	}
	tasks, err := c.engine.ListTasks(ctx, chronicle.TaskFilter{InstanceID: id, Limit: 100})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	// Open tasks first.
	slices.SortStableFunc(tasks, func(a, b chronicle.TaskInfo) int {
		return boolOrder(a.Status != chronicle.TaskOpen) - boolOrder(b.Status != chronicle.TaskOpen)
	})
	for _, t := range tasks {
		p.Tasks = append(p.Tasks, c.taskDetail(r, t))
	}

	events, err := c.engine.History(ctx, id)
	var broken *history.ChainError
	switch {
	case errors.As(err, &broken):
		p.Chain = chain{Seq: broken.Seq, Reason: broken.Reason}
	case errors.Is(err, chronicle.ErrInstanceNotFound):
		// Pending: nothing recorded yet.
		c.render(w, r, http.StatusOK, "instance", in.ID, "instances", p)
		return
	case err != nil:
		p.Chain = chain{Err: err.Error()}
	}
	if len(events) == 0 {
		c.render(w, r, http.StatusOK, "instance", in.ID, "instances", p)
		return
	}
	p.Chain.Events = len(events)
	if err := history.Verify(events); errors.As(err, &broken) {
		p.Chain.Seq, p.Chain.Reason = broken.Seq, broken.Reason
	} else if p.Chain.Err == "" && p.Chain.Seq == 0 {
		p.Chain.Verified = true
	}
	if c.opts.Keys != nil && p.Chain.Verified {
		c.checkSigned(ctx, id, &p.Chain)
	}
	if diffs, err := c.engine.CheckProjections(ctx, id); err != nil {
		p.CheckErr = err.Error()
	} else {
		p.Check = diffs
	}

	p.Last = int64(len(events))
	p.Seq = p.Last
	if s, err := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64); err == nil && s >= 1 && s < p.Last {
		p.Seq, p.Travel = s, true
	}
	if p.Seq > 1 {
		p.Prev = p.Seq - 1
	}
	if p.Seq < p.Last {
		p.Next = p.Seq + 1
	}
	shown := events[:p.Seq]
	now := c.engine.Options().Clock.Now()
	if p.Travel {
		now = shown[len(shown)-1].At
	}
	p.Timeline = drawTimeline(timeline.Bars(shown), now, dead)
	p.View = c.projections(r, id, p.Seq, shown[len(shown)-1].At)
	plain := timeline.DecodeMsgpack
	if c.engine.Options().Codec.Name() == "json" {
		plain = timeline.DecodeJSON
	}
	decode := func(b []byte) string {
		// A data subject's payload is opened first; an erased one
		// says so.
		b, err := c.engine.Unseal(b)
		if err != nil {
			return chronicle.ErasedText(err)
		}
		return plain(b)
	}
	starts := map[string]int64{}
	for i := range events {
		if events[i].Kind == history.KindExecutionStarted {
			starts[events[i].ExecutionID] = events[i].Seq
		}
	}
	for i := range events {
		e := &events[i]
		row := eventRow{Seq: e.Seq, At: e.At, Kind: string(e.Kind), Actor: e.Actor,
			ExecutionID: e.ExecutionID, Detail: timeline.Detail(e, decode), Attributes: c.attributes(e.Kind, e.Payload),
			Later: e.Seq > p.Seq, Current: p.Travel && e.Seq == p.Seq, Ends: e.Kind.Terminal()}
		row.LinkSeq, row.LinkText = lineage(e, starts)
		p.Events = append(p.Events, row)
	}
	p.Rerunnable = len(events) > 0
	c.render(w, r, http.StatusOK, "instance", in.ID, "instances", p)
}

// lineage links a rerun's record to the start of the execution it
// started, and a start by a rerun to the seq it reran from: the seq to
// link to and its text, or 0 and "".
func lineage(e *history.Event, starts map[string]int64) (int64, string) {
	a, err := e.Attributes()
	if err != nil {
		return 0, ""
	}
	switch a := a.(type) {
	case *history.ExecutionRerun:
		if seq, ok := starts[a.NewExecutionID]; ok {
			return seq, fmt.Sprintf("new execution at #%d", seq)
		}
	case *history.ExecutionStarted:
		if r := a.RerunOf; r != nil {
			return r.FromSeq, fmt.Sprintf("reran from #%d", r.FromSeq)
		}
	}
	return 0, ""
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// projections folds the history up to seq into every projection.
func (c *console) projections(r *http.Request, id string, seq int64, at time.Time) *projectionView {
	v := &projectionView{Seq: seq, At: at}
	view, err := c.engine.ProjectionsAt(r.Context(), id, seq)
	if err != nil {
		v.Err = err.Error()
		return v
	}
	if rec := view.Instance; rec != nil {
		v.Status, v.LastError, v.Updated = string(rec.Status), rec.LastError, rec.UpdatedAt
		v.CustomStatus = c.payload(rec.CustomStatus)
	}
	v.Tasks = view.Tasks
	for _, name := range slices.Sorted(maps.Keys(view.Custom)) {
		v.Custom = append(v.Custom, named{Name: name, Value: pretty(jsonable(view.Custom[name]))})
	}
	return v
}

// decodedText renders what decode decodes into an any as indented JSON,
// or says why it does not decode.
func decodedText(decode func(out any) error) string {
	var v any
	if err := decode(&v); err != nil {
		return "undecodable: " + err.Error()
	}
	if v == nil {
		return ""
	}
	return pretty(jsonable(v))
}

// jsonable returns v, or its text when it does not encode as JSON.
func jsonable(v any) any {
	if _, err := json.Marshal(v); err != nil {
		return timeline.Shorten(timeline.Clean(strings.TrimSpace(strings.ReplaceAll(pretty(v), "\n", " "))), maxShown)
	}
	return v
}

func (c *console) taskDetail(r *http.Request, t chronicle.TaskInfo) taskDetail {
	d := taskDetail{Task: t, Payload: c.payload(t.Payload), Result: c.payload(t.Result)}
	trail, err := c.engine.TaskEvents(r.Context(), t.TaskID)
	if err != nil {
		d.TrailErr = err.Error()
	}
	d.Trail = trail
	return d
}

func (c *console) letterRow(l chronicle.DeadLetter) letterRow {
	row := letterRow{Letter: l, Dead: l.Status == provider.DeadLetterDead}
	switch {
	case l.Message != nil:
		row.Item = "message " + string(l.Message.Kind)
		row.Body = c.attributes(l.Message.Kind, l.Message.Payload)
	case l.Activity != nil:
		row.Item = "activity " + l.Activity.Name + " (#" + strconv.FormatInt(l.Activity.ScheduledSeq, 10) + ", attempt " + strconv.Itoa(l.Activity.Attempt) + ")"
		row.Body = c.payload(l.Activity.Input)
	default:
		row.Item = "undecodable item"
		row.Body = timeline.Undecodable(l.Raw)
	}
	return row
}

// deadLetterStatuses are the statuses the dead-letter filter offers;
// "any" lists them all.
var deadLetterStatuses = []string{string(provider.DeadLetterDead), string(provider.DeadLetterRedriven), string(provider.DeadLetterDiscarded), "any"}

// deadLettersPage is the data of the dead-letter list.
type deadLettersPage struct {
	Status, Instance string
	Statuses         []string
	Rows             []letterRow
	Pager            pager
	Problem          string
}

func (c *console) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := deadLettersPage{Status: q.Get("status"), Instance: strings.TrimSpace(q.Get("instance")), Statuses: deadLetterStatuses}
	if p.Status == "" {
		p.Status = string(provider.DeadLetterDead)
	}
	if !slices.Contains(deadLetterStatuses, p.Status) {
		p.Problem = "unknown status " + strconv.Quote(p.Status)
		c.render(w, r, http.StatusBadRequest, "deadletters", "Dead letters", "deadletters", p)
		return
	}
	f := chronicle.DeadLetterFilter{InstanceID: p.Instance, AfterID: q.Get("after"), Limit: c.opts.PageSize + 1}
	if p.Status != "any" {
		f.Status = provider.DeadLetterStatus(p.Status)
	}
	letters, err := c.engine.ListDeadLetters(r.Context(), f)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	letters, p.Pager = page(c, "/deadletters", q, letters, func(l chronicle.DeadLetter) string { return l.ID })
	for _, l := range letters {
		p.Rows = append(p.Rows, c.letterRow(l))
	}
	c.render(w, r, http.StatusOK, "deadletters", "Dead letters", "deadletters", p)
}

// taskStatuses are the statuses the task filter offers; "any" lists them
// all.
var taskStatuses = []string{string(chronicle.TaskOpen), string(chronicle.TaskCompleted), string(chronicle.TaskCancelled), "any"}

// tasksPage is the data of the task list.
type tasksPage struct {
	Roles, Assignee, Status, Instance string
	Unassigned                        bool
	Statuses                          []string
	Rows                              []chronicle.TaskInfo
	Pager                             pager
	Problem                           string
}

func (c *console) tasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := tasksPage{Roles: strings.TrimSpace(q.Get("roles")), Assignee: strings.TrimSpace(q.Get("assignee")),
		Status: q.Get("status"), Instance: strings.TrimSpace(q.Get("instance")), Unassigned: q.Get("unassigned") != "",
		Statuses: taskStatuses}
	if p.Status == "" {
		p.Status = string(chronicle.TaskOpen)
	}
	var problems []string
	if !slices.Contains(taskStatuses, p.Status) {
		problems = append(problems, "unknown status "+strconv.Quote(p.Status))
	}
	if p.Unassigned && p.Assignee != "" {
		problems = append(problems, "a task cannot be both unassigned and assigned to "+p.Assignee)
	}
	if len(problems) > 0 {
		p.Problem = strings.Join(problems, "; ")
		c.render(w, r, http.StatusBadRequest, "tasks", "Human tasks", "tasks", p)
		return
	}
	f := chronicle.TaskFilter{InstanceID: p.Instance, Assignee: p.Assignee, Unassigned: p.Unassigned,
		AfterID: q.Get("after"), Limit: c.opts.PageSize + 1}
	for _, role := range strings.Split(p.Roles, ",") {
		if role = strings.TrimSpace(role); role != "" {
			f.Roles = append(f.Roles, role)
		}
	}
	if p.Status != "any" {
		f.Status = provider.TaskStatus(p.Status)
	}
	tasks, err := c.engine.ListTasks(r.Context(), f)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p.Rows, p.Pager = page(c, "/tasks", q, tasks, func(t chronicle.TaskInfo) string { return t.TaskID })
	c.render(w, r, http.StatusOK, "tasks", "Human tasks", "tasks", p)
}

// taskPage is the data of a task's page.
type taskPage struct {
	taskDetail
	// Open says whether the task actions apply.
	Open bool
	// ResultType names the Go type the workflow reads the result as, and
	// ResultExample is its zero value as JSON, when the task records it.
	ResultType, ResultExample string
	// Escalation is the task's escalation policy: when each step acts if
	// the task is still open, and what it does.
	Escalation []history.EscalationStep
}

func (c *console) task(w http.ResponseWriter, r *http.Request) {
	t, err := c.engine.GetTask(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := taskPage{taskDetail: c.taskDetail(r, *t), Open: t.Status == chronicle.TaskOpen}
	if p.Open {
		p.ResultType, p.ResultExample = c.resultType(r, t)
	}
	// The policy is shown when it can be read; the page goes on without.
	p.Escalation, _ = c.engine.TaskEscalation(r.Context(), t.TaskID)
	c.render(w, r, http.StatusOK, "task", "Task "+t.TaskID, "tasks", p)
}

// resultType returns the name of the type the workflow of task t reads
// its result as and a JSON template of it, both "" when its TaskCreated
// records none (or cannot be read: the page goes on without them).
func (c *console) resultType(r *http.Request, t *chronicle.TaskInfo) (name, example string) {
	events, err := c.engine.History(r.Context(), t.InstanceID)
	if err != nil {
		return "", ""
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := &events[i]
		if e.Kind != history.KindTaskCreated || e.ExecutionID != t.ExecutionID {
			continue
		}
		a, err := e.Attributes()
		if err != nil {
			return "", ""
		}
		created := a.(*history.TaskCreated)
		if created.TaskID != t.TaskID || created.ResultType == nil {
			continue
		}
		example, err := resulttype.Example(created.ResultType)
		if err != nil {
			return "", ""
		}
		return created.ResultType.Name, example
	}
	return "", ""
}

// checkSigned fills in what the signed checkpoints say of an instance's
// history.
func (c *console) checkSigned(ctx context.Context, id string, ch *chain) {
	res, gaps, err := c.engine.VerifyInstanceCheckpoints(ctx, c.opts.Keys, id)
	if err != nil {
		ch.Verified, ch.Err = false, "checkpoints not checked: "+err.Error()
		return
	}
	ch.Signed, ch.CoveredSeq, ch.Checkpoint = true, res.CoveredSeq, res.Checkpoint
	var m *chronicle.CheckpointMismatchError
	switch {
	case errors.As(res.Err, &m):
		ch.Forged = fmt.Sprintf("history rewritten after checkpoint %d: it differs at covered seq %d (matches up to seq %d)", m.Checkpoint, m.Seq, m.GoodSeq)
	case res.Err != nil:
		ch.Forged = res.Err.Error()
	case len(gaps) > 0:
		ch.Forged = fmt.Sprintf("checkpoint chain broken at %d: %s", gaps[0].Number, gaps[0].Reason)
	}
	if ch.Forged != "" {
		ch.Verified = false
	}
}

// schedulesPage is the data of the schedule list.
type schedulesPage struct {
	Rows []scheduleRow
}

// scheduleRow is one schedule in the list.
type scheduleRow struct {
	ID, Instance, Spec, Workflow, Overlap, Note string
	Paused                                      bool
	Next                                        time.Time
	Started, Skipped                            int64
	Last                                        *chronicle.ScheduleFiring
}

func (c *console) schedules(w http.ResponseWriter, r *http.Request) {
	list, err := c.engine.ListSchedules(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	var p schedulesPage
	for _, d := range list {
		p.Rows = append(p.Rows, newScheduleRow(d))
	}
	c.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", p)
}

// newScheduleRow summarizes a schedule for the list and its page.
func newScheduleRow(d *chronicle.ScheduleDescription) scheduleRow {
	row := scheduleRow{ID: d.ID, Instance: chronicle.SchedulePrefix + d.ID, Spec: d.Spec.Cron, Workflow: d.Workflow,
		Overlap: string(d.Overlap), Paused: d.Paused, Note: d.Note, Started: d.Started, Skipped: d.Skipped}
	if d.Spec.Every > 0 {
		row.Spec = "every " + d.Spec.Every.String()
	}
	if d.Spec.TimeZone != "" {
		row.Spec += " (" + d.Spec.TimeZone + ")"
	}
	if len(d.Next) > 0 {
		row.Next = d.Next[0]
	}
	if n := len(d.Recent); n > 0 {
		row.Last = &d.Recent[n-1]
	}
	return row
}

// schedulePage is the data of a schedule's page.
type schedulePage struct {
	scheduleRow
	Schedule *chronicle.ScheduleDescription
}

func (c *console) schedule(w http.ResponseWriter, r *http.Request) {
	d, err := c.engine.DescribeSchedule(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "schedule", "Schedule "+d.ID, "schedules", schedulePage{scheduleRow: newScheduleRow(d), Schedule: d})
}

// batchesPage is the data of the batch list.
type batchesPage struct {
	Rows []*chronicle.BatchDescription
}

func (c *console) batches(w http.ResponseWriter, r *http.Request) {
	list, err := c.engine.ListBatches(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "batches", "Batches", "batches", batchesPage{Rows: list})
}

// batchPage is the data of a batch's page.
type batchPage struct {
	Batch    *chronicle.BatchDescription
	Instance string
	// Running says whether the batch can still be paused, resumed or
	// cancelled.
	Running bool
}

func (c *console) batch(w http.ResponseWriter, r *http.Request) {
	d, err := c.engine.DescribeBatch(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := batchPage{Batch: d, Instance: chronicle.BatchPrefix + d.ID,
		Running: d.State == chronicle.BatchRunning || d.State == chronicle.BatchPaused}
	c.render(w, r, http.StatusOK, "batch", "Batch "+d.ID, "batches", p)
}

// waitingPage is the data of the waiting page: the concurrency keys
// somebody waits for, or one key (Key set) with its running activities.
type waitingPage struct {
	Key     string
	Rows    []chronicle.SlotSet
	Running int
	// Activities says whether activity tasks with the key run now.
	Activities bool
	Pager      pager
	Problem    string
}

func (c *console) waiting(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctx := r.Context()
	p := waitingPage{Key: q.Get("key")}
	unsupported := func(err error) bool {
		if !errors.Is(err, chronicle.ErrUnsupported) {
			return false
		}
		p.Problem = "This store keeps no concurrency slots: " + err.Error()
		c.render(w, r, http.StatusNotImplemented, "waiting", "Waiting", "waiting", p)
		return true
	}
	if p.Key != "" {
		running, err := c.engine.RunningActivities(ctx, p.Key)
		if unsupported(err) {
			return
		}
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		p.Running, p.Activities = running, running > 0
		set, err := c.engine.Concurrency(ctx, p.Key)
		switch {
		case errors.Is(err, chronicle.ErrConcurrencyKeyNotFound) && running > 0:
			// Only activity tasks use the key.
			set = &chronicle.SlotSet{Key: p.Key}
		case err != nil:
			c.failErr(w, r, err)
			return
		}
		p.Rows = []chronicle.SlotSet{*set}
		c.render(w, r, http.StatusOK, "waiting", "Concurrency key "+p.Key, "waiting", p)
		return
	}
	sets, err := c.engine.ListConcurrency(ctx, chronicle.SlotFilter{OnlyWaiting: true, AfterKey: q.Get("after"), Limit: c.opts.PageSize + 1})
	if unsupported(err) {
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p.Rows, p.Pager = page(c, "/waiting", q, sets, func(s chronicle.SlotSet) string { return s.Key })
	c.render(w, r, http.StatusOK, "waiting", "Waiting", "waiting", p)
}
