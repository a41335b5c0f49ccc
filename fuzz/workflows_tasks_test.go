package fuzz_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Human tasks of programs, the users who act on them, and the checks that
// every stored projection — snapshot, instance record, task records, task
// events and the custom projection below — is the fold of history.

const (
	wfRoleClerk   = "clerk"
	wfRoleManager = "manager"
	// wfTaskTimerPrefix names the timer of a task step, followed by the
	// task id.
	wfTaskTimerPrefix = "task "
	// wfTaskTimeout is the outcome of a task step whose timer won, and the
	// reason its task is cancelled with.
	wfTaskTimeout = "timeout"
	// wfEscalateAfter is when the escalation step of a task with one
	// acts.
	wfEscalateAfter = time.Minute
)

// wfUser is who acts on tasks, with the roles the product granted.
type wfUser struct {
	ID    string
	Roles []string
}

// wfUsers: u4 holds no role, so it acts only on tasks given to it.
var wfUsers = []wfUser{
	{"u1", []string{wfRoleClerk}},
	{"u2", []string{wfRoleClerk, wfRoleManager}},
	{"u3", []string{wfRoleManager}},
	{"u4", nil},
}

func (u wfUser) holdsRole(roles []string) bool {
	return slices.ContainsFunc(u.Roles, func(r string) bool { return slices.Contains(roles, r) })
}

// wfTaskAction is an action a user may take on a task by the rules of the
// client API (chronicle.Engine.ClaimTask, AssignTask, ReleaseTask, ReassignTask,
// CompleteTask) against the task record it reads.
type wfTaskAction struct {
	kind string // claim, assign, release, reassign, complete
	user wfUser
	to   string // assignee of assign and reassign
}

// wfAllowedActions lists what the client API lets each user do to t.
func wfAllowedActions(t *provider.TaskRecord) []wfTaskAction {
	var out []wfTaskAction
	for _, u := range wfUsers {
		role := u.holdsRole(t.Roles)
		switch {
		case t.Assignee == "" && role:
			out = append(out, wfTaskAction{kind: "claim", user: u}, wfTaskAction{kind: "complete", user: u})
			for _, to := range wfUsers {
				out = append(out, wfTaskAction{kind: "assign", user: u, to: to.ID})
			}
		case t.Assignee == u.ID:
			out = append(out, wfTaskAction{kind: "release", user: u}, wfTaskAction{kind: "complete", user: u})
		}
		if t.Assignee != "" && (t.Assignee == u.ID || role) {
			for _, to := range wfUsers {
				out = append(out, wfTaskAction{kind: "reassign", user: u, to: to.ID})
			}
		}
	}
	return out
}

// message builds the action's message as the client API does: addressed to
// the task's execution, its id a fresh message id that is also its
// correlation, its actor the user.
func (a wfTaskAction) message(t *provider.TaskRecord, msgID string) (provider.Message, error) {
	var attrs history.Attributes
	switch a.kind {
	case "claim":
		attrs = &history.TaskAssigned{TaskID: t.TaskID, Assignee: a.user.ID, Claimed: true}
	case "assign":
		attrs = &history.TaskAssigned{TaskID: t.TaskID, Assignee: a.to}
	case "release":
		attrs = &history.TaskReleased{TaskID: t.TaskID, Previous: a.user.ID}
	case "reassign":
		attrs = &history.TaskReassigned{TaskID: t.TaskID, From: t.Assignee, To: a.to}
	case "complete":
		result, err := history.Encode(wfTaskResult(a.user.ID, msgID))
		if err != nil {
			return provider.Message{}, err
		}
		attrs = &history.TaskCompleted{TaskID: t.TaskID, Result: result}
	default:
		return provider.Message{}, fmt.Errorf("unknown task action %q", a.kind)
	}
	m, err := provider.NewMessage(msgID, t.InstanceID, t.ExecutionID, msgID, attrs)
	if err != nil {
		return provider.Message{}, err
	}
	m.Actor = history.UserActor(a.user.ID)
	return m, nil
}

// openTasks returns the open tasks as a user's inbox shows them: the
// stored task records, which may lag behind queued actions.
func (m *wfMachine) openTasks(t *rapid.T) []provider.TaskRecord {
	tasks, err := m.store.ListTasks(m.ctx, &provider.ListTasksParams{Status: provider.TaskOpen, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func (m *wfMachine) sendTaskAction(t *rapid.T, task *provider.TaskRecord, a wfTaskAction) {
	msgID := m.id("task")
	msg, err := a.message(task, msgID)
	if err != nil {
		t.Fatal(err)
	}
	m.taskActions[msgID] = true
	m.arrivals.sent("task action "+msgID, m.clock.Now(), &msg)
	m.enqueue(t, msg)
}

// taskAction has a user act on an open task as the client API allows it,
// judged on the task record the user sees.
func (m *wfMachine) taskAction(t *rapid.T) {
	open := m.openTasks(t)
	if len(open) == 0 {
		t.Skip("no open task")
	}
	task := rapid.SampledFrom(open).Draw(t, "task")
	// The kind first, so that each kind the rules allow is as likely.
	byKind := map[string][]wfTaskAction{}
	for _, a := range wfAllowedActions(&task) {
		byKind[a.kind] = append(byKind[a.kind], a)
	}
	if len(byKind) == 0 {
		t.Fatalf("nobody may act on task %+v", task)
	}
	kind := rapid.SampledFrom(sortedIDs(byKind)).Draw(t, "action kind")
	m.sendTaskAction(t, &task, rapid.SampledFrom(byKind[kind]).Draw(t, "action"))
}

// taskRace has two users claim the same unassigned task (or one claim it
// and the other complete it) on the same view of it: the round's re-check
// accepts the first and dead-letters the second as rejected.
func (m *wfMachine) taskRace(t *rapid.T) {
	var free []provider.TaskRecord
	for _, task := range m.openTasks(t) {
		if task.Assignee == "" {
			free = append(free, task)
		}
	}
	if len(free) == 0 {
		t.Skip("no unassigned task")
	}
	task := rapid.SampledFrom(free).Draw(t, "task")
	var holders []wfUser
	for _, u := range wfUsers {
		if u.holdsRole(task.Roles) {
			holders = append(holders, u)
		}
	}
	if len(holders) < 2 {
		t.Skip("one user only may claim")
	}
	i := rapid.IntRange(0, len(holders)-1).Draw(t, "first")
	j := rapid.IntRange(0, len(holders)-2).Draw(t, "second")
	if j >= i {
		j++
	}
	second := wfTaskAction{kind: "claim", user: holders[j]}
	if rapid.IntRange(0, 3).Draw(t, "second completes") == 0 {
		second.kind = "complete"
	}
	m.sendTaskAction(t, &task, wfTaskAction{kind: "claim", user: holders[i]})
	m.sendTaskAction(t, &task, second)
	m.stats.taskRaces++
}

// completeOpenTasks completes every task still open in the fold of
// history, by its assignee or a holder of one of its roles: programs end
// only when their tasks are done.
func (m *wfMachine) completeOpenTasks(t *rapid.T, histories map[string][]history.Event) bool {
	sent := false
	for _, id := range sortedIDs(histories) {
		snap, err := round.Fold(id, histories[id])
		if err != nil {
			t.Fatal(err)
		}
		for _, taskID := range sortedIDs(snap.Tasks) {
			ot := snap.Tasks[taskID]
			task := provider.TaskRecord{TaskID: taskID, InstanceID: id, ExecutionID: snap.ExecutionID, Assignee: ot.Assignee, Roles: ot.Roles}
			for _, a := range wfAllowedActions(&task) {
				if a.kind == "complete" {
					m.sendTaskAction(t, &task, a)
					sent = true
					break
				}
			}
		}
	}
	return sent
}

func sortedIDs[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// wfAuditName names the custom projection of the rapid tests.
const wfAuditName = "rapid-audit"

// wfAudit is the custom projection of the rapid tests: a fold over every
// event of an instance, all executions included. It must be a pure
// function of the events, so Fold copies instead of changing its input.
type wfAudit struct {
	Events int64         `msgpack:"n"`
	Kinds  []wfKindCount `msgpack:"k,omitempty"` // by kind
	// Status is the last custom status set.
	Status []byte `msgpack:"s,omitempty"`
	// Actor is the actor of the last task action.
	Actor string `msgpack:"a,omitempty"`
	// At and Hash are those of the last event.
	At   time.Time `msgpack:"t"`
	Hash []byte    `msgpack:"h,omitempty"`
}

type wfKindCount struct {
	Kind history.Kind `msgpack:"k"`
	N    int          `msgpack:"n"`
}

// wfAuditProjection is the definition of the custom projection.
func wfAuditProjection() projector.Definition { return wfAuditProjectionWith(nil) }

// wfAuditProjectionWith is the custom projection whose fold first calls
// before with each event: the nodes' copy panics there for poisoned
// signals (see wfMachine.poisoned), the checks' copy has none.
func wfAuditProjectionWith(before func(e *history.Event)) projector.Definition {
	return projector.Definition{
		Name:    wfAuditName,
		Version: 1,
		New:     func() any { return wfAudit{} },
		Fold: func(state any, e *history.Event) (any, error) {
			a, ok := state.(wfAudit)
			if !ok {
				return nil, fmt.Errorf("audit state is %T", state)
			}
			if before != nil {
				before(e)
			}
			a.Events++
			a.At, a.Hash = e.At, e.Hash
			a.Kinds = slices.Clone(a.Kinds)
			i, found := slices.BinarySearchFunc(a.Kinds, e.Kind, func(k wfKindCount, kind history.Kind) int { return cmp.Compare(k.Kind, kind) })
			if found {
				a.Kinds[i].N++
			} else {
				a.Kinds = slices.Insert(a.Kinds, i, wfKindCount{e.Kind, 1})
			}
			switch e.Kind {
			case history.KindCustomStatusSet:
				attrs, err := e.Attributes()
				if err != nil {
					return nil, err
				}
				a.Status = attrs.(*history.CustomStatusSet).Status
			case history.KindTaskAssigned, history.KindTaskReleased, history.KindTaskReassigned, history.KindTaskCompleted:
				a.Actor = e.Actor
			}
			return a, nil
		},
		Encode: func(state any) ([]byte, error) { return history.Encode(state) },
	}
}

// wfView is the reference fold of an instance's history up to a Seq.
type wfView struct {
	seq  int64
	view *projector.View
}

// foldAt returns the projector's fold of events up to seq (at least 1),
// cached by instance: the history before seq never changes, which the
// hash chain check proves.
func (m *wfMachine) foldAt(t *rapid.T, id string, events []history.Event, seq int64) *projector.View {
	if v := m.views[id]; v != nil && v.seq == seq {
		return v.view
	}
	view, err := m.projector.FoldAt(id, events, seq)
	if err != nil {
		t.Fatalf("%s: fold at seq %d: %v", id, seq, err)
	}
	m.views[id] = &wfView{seq: seq, view: view}
	return view
}

// checkProducts checks the task records, task events and custom record of
// an instance against the fold of its history up to seq, the Seq of its
// stored snapshot (0: none stored). All of them are written with the
// snapshot, each only forward, so they are always at that same Seq.
func (m *wfMachine) checkProducts(t *rapid.T, id string, events []history.Event, seq int64) {
	tasks, err := m.store.ListTasks(m.ctx, &provider.ListTasksParams{InstanceID: id, Limit: 10000})
	if err != nil {
		t.Fatalf("%s: list tasks: %v", id, err)
	}
	taskEvents, err := m.store.ListTaskEvents(m.ctx, &provider.ListTaskEventsParams{InstanceID: id})
	if err != nil {
		t.Fatalf("%s: list task events: %v", id, err)
	}
	custom, err := m.store.GetCustomProjection(m.ctx, wfAuditName, id)
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s: custom projection: %v", id, err)
	}
	if seq == 0 {
		if len(tasks) > 0 || len(taskEvents) > 0 || custom != nil {
			t.Fatalf("%s: no snapshot stored, but %d task records, %d task events and custom record %+v", id, len(tasks), len(taskEvents), custom)
		}
		return
	}
	want := m.foldAt(t, id, events, seq)
	if custom == nil {
		t.Fatalf("%s: no custom record with a snapshot at seq %d", id, seq)
	}
	if len(want.CustomRecords) != 1 || !wfCustomEqual(&want.CustomRecords[0], custom) {
		t.Fatalf("%s: stored custom record differs from the fold of history at seq %d:\nwant %+v\ngot  %+v", id, seq, want.CustomRecords, custom)
	}
	if len(tasks) != len(want.Tasks) {
		t.Fatalf("%s: %d task records stored, the fold at seq %d has %d:\nwant %+v\ngot  %+v", id, len(tasks), seq, len(want.Tasks), want.Tasks, tasks)
	}
	for i := range tasks {
		if d := wfTaskDiff(&want.Tasks[i], &tasks[i]); d != nil {
			t.Fatalf("%s: stored task record differs from the fold of history at seq %d in %v:\nwant %+v\ngot  %+v", id, seq, d, want.Tasks[i], tasks[i])
		}
	}
	wantEvents := slices.Clone(want.TaskEvents)
	sortTaskEvents(wantEvents)
	sortTaskEvents(taskEvents)
	if len(taskEvents) != len(wantEvents) {
		t.Fatalf("%s: %d task events stored, the fold at seq %d has %d:\nwant %+v\ngot  %+v", id, len(taskEvents), seq, len(wantEvents), wantEvents, taskEvents)
	}
	for i := range taskEvents {
		if !wfTaskEventEqual(&wantEvents[i], &taskEvents[i]) {
			t.Fatalf("%s: stored task event differs from the fold of history at seq %d:\nwant %+v\ngot  %+v", id, seq, wantEvents[i], taskEvents[i])
		}
	}
}

// sortTaskEvents orders task events by Seq and task: the end of an
// execution closes several tasks at one Seq, in an order stores need not
// keep.
func sortTaskEvents(es []provider.TaskEventRecord) {
	slices.SortFunc(es, func(a, b provider.TaskEventRecord) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.TaskID, b.TaskID))
	})
}

// wfTaskDiff names the fields in which two task records differ; nil and
// empty slices are alike, times compare as instants.
func wfTaskDiff(a, b *provider.TaskRecord) []string {
	var d []string
	check := func(field string, same bool) {
		if !same {
			d = append(d, field)
		}
	}
	check("TaskID", a.TaskID == b.TaskID)
	check("InstanceID", a.InstanceID == b.InstanceID)
	check("ExecutionID", a.ExecutionID == b.ExecutionID)
	check("Name", a.Name == b.Name)
	check("Status", a.Status == b.Status)
	check("Assignee", a.Assignee == b.Assignee)
	check("Roles", slices.Equal(a.Roles, b.Roles))
	check("Payload", bytes.Equal(a.Payload, b.Payload))
	check("Result", bytes.Equal(a.Result, b.Result))
	check("Due", a.Due.Equal(b.Due))
	check("CreatedAt", a.CreatedAt.Equal(b.CreatedAt))
	check("UpdatedAt", a.UpdatedAt.Equal(b.UpdatedAt))
	check("CompletedAt", a.CompletedAt.Equal(b.CompletedAt))
	check("Seq", a.Seq == b.Seq)
	return d
}

func wfTaskEventEqual(a, b *provider.TaskEventRecord) bool {
	return a.InstanceID == b.InstanceID && a.TaskID == b.TaskID && a.Seq == b.Seq && a.Kind == b.Kind &&
		a.Actor == b.Actor && a.At.Equal(b.At) && a.Assignee == b.Assignee && a.Detail == b.Detail
}

func wfCustomEqual(a, b *provider.CustomRecord) bool {
	return a.Name == b.Name && a.Version == b.Version && a.InstanceID == b.InstanceID && a.Seq == b.Seq && bytes.Equal(a.Data, b.Data)
}

// checkLagging checks the projections of a peek-lock instance whose
// snapshot (at seq, 0: none stored) is behind its history: a round
// crashed before or between its projection writes, which a store whose
// atomic unit is one record writes one by one, the snapshot last. Every
// other record is then the fold of history at some Seq from seq to the
// end (each is written only forward), and none is missing that the fold
// at seq has.
func (m *wfMachine) checkLagging(t *rapid.T, id string, events []history.Event, seq int64) {
	last := int64(len(events))
	views := map[int64]*projector.View{}
	at := func(x int64) *projector.View {
		if v, ok := views[x]; ok {
			return v
		}
		v, err := m.projector.FoldAt(id, events, x)
		if err != nil {
			t.Fatalf("%s: fold at seq %d: %v", id, x, err)
		}
		views[x] = v
		return v
	}
	from := max(seq, 1)
	rec, err := m.store.GetInstance(m.ctx, id)
	switch {
	case errors.Is(err, provider.ErrNotFound) && seq == 0:
	case err != nil:
		t.Fatalf("%s: instance record: %v", id, err)
	case rec.LastSeq < from || rec.LastSeq > last:
		t.Fatalf("%s: instance record at seq %d, snapshot at %d, history at %d", id, rec.LastSeq, seq, last)
	case !at(rec.LastSeq).Snapshot.Record().Equal(rec):
		want := at(rec.LastSeq).Snapshot.Record()
		t.Fatalf("%s: stored instance differs from the fold of history at seq %d in %v:\nwant %+v\ngot  %+v", id, rec.LastSeq, want.Diff(rec), want, rec)
	}
	custom, err := m.store.GetCustomProjection(m.ctx, wfAuditName, id)
	switch {
	case errors.Is(err, provider.ErrNotFound) && seq == 0:
	case err != nil:
		t.Fatalf("%s: custom projection: %v", id, err)
	default:
		x := custom.Seq
		if x < from || x > last {
			t.Fatalf("%s: custom record at seq %d, snapshot at %d, history at %d", id, x, seq, last)
		}
		if want := at(x).CustomRecords; len(want) != 1 || !wfCustomEqual(&want[0], custom) {
			t.Fatalf("%s: stored custom record differs from the fold of history at seq %d:\nwant %+v\ngot  %+v", id, x, want, custom)
		}
	}
	tasks, err := m.store.ListTasks(m.ctx, &provider.ListTasksParams{InstanceID: id, Limit: 10000})
	if err != nil {
		t.Fatalf("%s: list tasks: %v", id, err)
	}
	stored := map[string]bool{}
	for i := range tasks {
		stored[tasks[i].TaskID] = true
		found := false
		for x := from; x <= last && !found; x++ {
			for j := range at(x).Tasks {
				if at(x).Tasks[j].TaskID == tasks[i].TaskID && wfTaskDiff(&at(x).Tasks[j], &tasks[i]) == nil {
					found = true
					break
				}
			}
		}
		if !found {
			t.Fatalf("%s: stored task record %+v is no fold of history from seq %d to %d", id, tasks[i], from, last)
		}
	}
	taskEvents, err := m.store.ListTaskEvents(m.ctx, &provider.ListTaskEventsParams{InstanceID: id})
	if err != nil {
		t.Fatalf("%s: list task events: %v", id, err)
	}
	all := at(last).TaskEvents
	for i := range taskEvents {
		if !slices.ContainsFunc(all, func(e provider.TaskEventRecord) bool { return wfTaskEventEqual(&e, &taskEvents[i]) }) {
			t.Fatalf("%s: stored task event %+v is not in the fold of history", id, taskEvents[i])
		}
	}
	if seq == 0 {
		return
	}
	for _, w := range at(seq).Tasks {
		if !stored[w.TaskID] {
			t.Fatalf("%s: task record %s of the fold at seq %d is missing", id, w.TaskID, seq)
		}
	}
	for _, w := range at(seq).TaskEvents {
		if !slices.ContainsFunc(taskEvents, func(e provider.TaskEventRecord) bool { return wfTaskEventEqual(&w, &e) }) {
			t.Fatalf("%s: task event %+v of the fold at seq %d is missing", id, w, seq)
		}
	}
}
