package round

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// Snapshot is the runtime state of an instance folded from its history: its
// status, its current execution, and what that execution is waiting for.
// The round runner uses it to drop duplicate and stale messages and to
// derive the work items of new events; it is stored with the other
// projections, and [Snapshot.Apply] over the history always rebuilds it.
//
// Apply is strict: it refuses events that break the rules of a log (a gap
// in Seq, a completion without a pending schedule, a second event with one
// idempotency key, an event after the end of an execution other than the
// record of a rerun), so folding a history checks it too.
type Snapshot struct {
	InstanceID        string `msgpack:"instance"`
	ExecutionID       string `msgpack:"execution,omitempty"`
	ExecutionStartSeq int64  `msgpack:"execution_start_seq,omitempty"`
	// Executions lists every execution id of the instance, oldest first.
	Executions    []string           `msgpack:"executions,omitempty"`
	Name          string             `msgpack:"name,omitempty"`
	Version       string             `msgpack:"version,omitempty"`
	Status        provider.Status    `msgpack:"status,omitempty"`
	Ended         bool               `msgpack:"ended,omitempty"`
	BusinessKey   string             `msgpack:"business_key,omitempty"`
	BusinessParts map[string]string  `msgpack:"business_parts,omitempty"`
	Parent        *history.ParentRef `msgpack:"parent,omitempty"`
	CustomStatus  []byte             `msgpack:"custom_status,omitempty"`
	// CustomStatusText is the custom status when it was set as a string.
	CustomStatusText string `msgpack:"custom_status_text,omitempty"`
	// Attributes are the current execution's search attributes: those
	// its start recorded, changed by every SearchAttributesUpserted since.
	Attributes  history.SearchAttributeMap `msgpack:"attributes,omitempty"`
	CreatedAt   time.Time                  `msgpack:"created_at,omitempty"`
	UpdatedAt   time.Time                  `msgpack:"updated_at,omitempty"`
	CompletedAt time.Time                  `msgpack:"completed_at,omitempty"`
	Output      []byte                     `msgpack:"output,omitempty"`
	Failure     *history.Failure           `msgpack:"failure,omitempty"`
	LastError   string                     `msgpack:"last_error,omitempty"`
	LastSeq     int64                      `msgpack:"last_seq"`
	LastHash    []byte                     `msgpack:"last_hash,omitempty"`
	// Priority is the current execution's priority: the work its rounds
	// queue carries it.
	Priority int `msgpack:"priority,omitempty"`
	// Concurrency is the key whose slot the instance holds while its
	// current execution runs, given with its start.
	Concurrency *history.Concurrency `msgpack:"concurrency,omitempty"`
	// Subject is the current execution's data subject, which its
	// sub-workflows inherit.
	Subject string `msgpack:"subject,omitempty"`
	// Activities maps the Seq of each pending ActivityScheduled to its name.
	Activities map[int64]string `msgpack:"-"`
	// Timers maps the Seq of each pending TimerCreated to its fire time.
	Timers map[int64]time.Time `msgpack:"-"`
	// SubWorkflows maps the Seq of each pending SubWorkflowScheduled to the
	// child's instance id.
	SubWorkflows map[int64]string `msgpack:"-"`
	// Signals maps the Seq of each SignalSent whose outcome history does
	// not hold yet to the receiver's instance id. Unlike the other pending
	// work it outlives the end of its execution, so that a cold peek-lock
	// round can still send a signal whose enqueue a crash cut short.
	Signals map[int64]string `msgpack:"-"`
	// Tasks holds the open human tasks by task id.
	Tasks map[string]*OpenTask `msgpack:"-"`
	// Seen holds the idempotency keys (class/correlation) of raised events,
	// task actions and control requests of the current execution. It grows
	// with the execution's history, so it is not stored with the snapshot
	// (see [MarshalSnapshot]): a round that starts from a stored snapshot
	// rebuilds it from the execution's events, which it loads anyway.
	Seen map[string]bool `msgpack:"-"`
}

// OpenTask is the state of an open human task kept in the snapshot.
type OpenTask struct {
	Name     string   `msgpack:"name"`
	Assignee string   `msgpack:"assignee,omitempty"`
	Roles    []string `msgpack:"roles,omitempty"`
}

// NewSnapshot returns the snapshot of an instance without history.
func NewSnapshot(instanceID string) *Snapshot {
	return &Snapshot{InstanceID: instanceID}
}

// Fold folds a whole history into a new snapshot.
func Fold(instanceID string, events []history.Event) (*Snapshot, error) {
	s := NewSnapshot(instanceID)
	for i := range events {
		if err := s.Apply(&events[i], nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Started reports whether the instance has an execution.
func (s *Snapshot) Started() bool { return s.ExecutionID != "" }

// Pending reports whether the current execution waits on anything that
// will arrive by itself (an activity, timer, sub-workflow or the outcome
// of a signal it sent).
func (s *Snapshot) Pending() bool {
	signals := len(s.Signals)
	if s.Ended {
		signals = 0
	}
	return len(s.Activities)+len(s.Timers)+len(s.SubWorkflows)+signals > 0
}

// Record returns the instance record of the snapshot.
func (s *Snapshot) Record() *provider.InstanceRecord {
	r := &provider.InstanceRecord{
		InstanceID: s.InstanceID, ExecutionID: s.ExecutionID, Name: s.Name, Version: s.Version,
		Status: s.Status, BusinessKey: s.BusinessKey, BusinessParts: s.BusinessParts,
		CustomStatus: s.CustomStatus, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		CompletedAt: s.CompletedAt, Output: s.Output, Failure: s.Failure, LastError: s.LastError,
		LastSeq: s.LastSeq, CustomStatusText: s.CustomStatusText,
	}
	if len(s.Attributes) > 0 {
		r.Attributes = maps.Clone(map[string]query.Value(s.Attributes))
	}
	if s.Parent != nil {
		r.ParentID = s.Parent.InstanceID
	}
	return r
}

// MergeAttributes sets the search attributes of m in the record over its
// own (those of the snapshot): derived attributes, such as a projection's,
// win. A zero Value in m sets nothing.
func MergeAttributes(r *provider.InstanceRecord, m map[string]query.Value) {
	for k, v := range m {
		if v.Type == query.Invalid {
			continue
		}
		if r.Attributes == nil {
			r.Attributes = make(map[string]query.Value, len(m))
		}
		r.Attributes[k] = v
	}
}

// Clone returns a deep copy.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Executions = slices.Clone(s.Executions)
	c.BusinessParts = cloneMap(s.BusinessParts)
	c.Attributes = cloneMap(s.Attributes)
	c.Activities = cloneMap(s.Activities)
	c.Timers = cloneMap(s.Timers)
	c.SubWorkflows = cloneMap(s.SubWorkflows)
	c.Signals = cloneMap(s.Signals)
	c.Seen = cloneMap(s.Seen)
	if s.Tasks != nil {
		c.Tasks = make(map[string]*OpenTask, len(s.Tasks))
		for k, v := range s.Tasks {
			t := *v
			t.Roles = slices.Clone(v.Roles)
			c.Tasks[k] = &t
		}
	}
	return &c
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// snapshotWire is the stored form of a snapshot: its maps become slices
// sorted by key, so equal snapshots encode to equal bytes.
type snapshotWire struct {
	*Snapshot
	Activities   []pendingName  `msgpack:"activities,omitempty"`
	Timers       []pendingTime  `msgpack:"timers,omitempty"`
	SubWorkflows []pendingName  `msgpack:"subworkflows,omitempty"`
	Signals      []pendingName  `msgpack:"signals,omitempty"`
	Tasks        []openTaskWire `msgpack:"tasks,omitempty"`
	// Seen is read from snapshots stored before it was left out; it is
	// never written.
	Seen []string `msgpack:"seen,omitempty"`
}

type pendingName struct {
	Seq  int64  `msgpack:"seq"`
	Name string `msgpack:"name"`
}

type pendingTime struct {
	Seq int64     `msgpack:"seq"`
	At  time.Time `msgpack:"at"`
}

type openTaskWire struct {
	ID string `msgpack:"id"`
	OpenTask
}

// MarshalSnapshot encodes a snapshot; equal snapshots encode to equal
// bytes. It leaves out Seen, so that what a round stores does not grow
// with the execution's history: [Snapshot.RememberKeys] rebuilds it.
func MarshalSnapshot(s *Snapshot) ([]byte, error) {
	buf := snapshotBuffers.Get().(*[]byte)
	b := appendSnapshot((*buf)[:0], s)
	out := bytes.Clone(b)
	if cap(b) <= 64<<10 {
		*buf = b
		snapshotBuffers.Put(buf)
	}
	return out, nil
}

// snapshotBuffers hold the scratch buffers MarshalSnapshot encodes into,
// so that a snapshot costs one allocation of its own size.
var snapshotBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// RememberKeys adds to Seen the idempotency keys of events, which are
// events of the current execution the snapshot has folded (those a round
// that starts from a stored snapshot loads).
func (s *Snapshot) RememberKeys(events []history.Event) {
	for i := range events {
		e := &events[i]
		if e.ExecutionID != s.ExecutionID || e.Seq > s.LastSeq {
			continue
		}
		if k, ok := seenKey(e.Kind, e.CorrelationID); ok {
			s.remember(k)
		}
	}
}

// UnmarshalSnapshot decodes a snapshot written by [MarshalSnapshot]; it
// never panics.
func UnmarshalSnapshot(data []byte) (*Snapshot, error) {
	w := snapshotWire{Snapshot: &Snapshot{}}
	if len(data) > history.MaxEncodedSize || !decodeSnapshotWire(data, &w) {
		w = snapshotWire{Snapshot: &Snapshot{}}
		if err := history.Decode(data, &w); err != nil {
			return nil, fmt.Errorf("decode snapshot: %w", err)
		}
	}
	s := w.Snapshot
	if s == nil {
		return nil, fmt.Errorf("decode snapshot: %w: no snapshot", history.ErrCorrupt)
	}
	s.CreatedAt, s.UpdatedAt, s.CompletedAt = utc(s.CreatedAt), utc(s.UpdatedAt), utc(s.CompletedAt)
	for k, v := range s.Attributes {
		if !v.Time.IsZero() {
			v.Time = v.Time.UTC()
			s.Attributes[k] = v
		}
	}
	for _, p := range w.Activities {
		s.Activities = put(s.Activities, p.Seq, p.Name)
	}
	for _, p := range w.Timers {
		s.Timers = put(s.Timers, p.Seq, utc(p.At))
	}
	for _, p := range w.SubWorkflows {
		s.SubWorkflows = put(s.SubWorkflows, p.Seq, p.Name)
	}
	for _, p := range w.Signals {
		s.Signals = put(s.Signals, p.Seq, p.Name)
	}
	for _, t := range w.Tasks {
		if s.Tasks == nil {
			s.Tasks = map[string]*OpenTask{}
		}
		ot := t.OpenTask
		s.Tasks[t.ID] = &ot
	}
	for _, k := range w.Seen {
		if s.Seen == nil {
			s.Seen = map[string]bool{}
		}
		s.Seen[k] = true
	}
	return s, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// seenKey returns the idempotency key (class/correlation) that Seen holds
// for an event or message of kind k: raised events, task actions and
// control requests have one; ok is false for other kinds.
func seenKey(k history.Kind, correlation string) (key string, ok bool) {
	switch class := k.Class(); class {
	case history.ClassEvent, history.ClassTask, history.ClassControl:
		return class + "/" + correlation, true
	}
	return "", false
}

// remember adds key to Seen.
func (s *Snapshot) remember(key string) {
	if s.Seen == nil {
		s.Seen = map[string]bool{}
	}
	s.Seen[key] = true
}

// Apply folds one sealed event into the snapshot. When w is not nil, the
// work items the event causes are added to it: activity tasks, timer and
// child start messages, the parent's notification and the cancellation of
// activities when an execution ends.
func (s *Snapshot) Apply(e *history.Event, w *Work) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: instance %s seq %d (%s): %s", provider.ErrConflict, s.InstanceID, e.Seq, e.Kind, fmt.Sprintf(format, args...))
	}
	if e.Seq != s.LastSeq+1 {
		return fail("expected seq %d", s.LastSeq+1)
	}
	if e.InstanceID != s.InstanceID {
		return fail("event belongs to instance %q", e.InstanceID)
	}
	attrs, err := e.Attributes()
	if err != nil {
		return fail("%v", err)
	}
	if e.Kind == history.KindExecutionStarted {
		if s.Started() && !s.Ended {
			return fail("execution %s is still running", s.ExecutionID)
		}
		if slices.Contains(s.Executions, e.ExecutionID) || e.ExecutionID == "" || e.CorrelationID != e.ExecutionID {
			return fail("execution id %q is empty, reused or not its correlation id", e.ExecutionID)
		}
	} else {
		switch {
		case !s.Started():
			return fail("instance has not started")
		case e.ExecutionID != s.ExecutionID:
			return fail("event of execution %q, current is %q", e.ExecutionID, s.ExecutionID)
		case e.Kind == history.KindExecutionRerun:
			// The record of a rerun follows the end of its execution.
			if !s.Ended {
				return fail("a rerun record must follow the end of execution %s", s.ExecutionID)
			}
		case e.Kind.IsRecord():
			// A legal hold's record is added whether or not the
			// execution has ended.
		case s.Ended:
			return fail("execution %s has ended", s.ExecutionID)
		}
	}
	if k, ok := seenKey(e.Kind, e.CorrelationID); ok {
		if s.Seen[k] {
			return fail("idempotency key %s already used", k)
		}
		s.remember(k)
	}
	if e.Kind.Terminal() && e.CorrelationID != e.ExecutionID {
		return fail("end event must be correlated with its execution")
	}

	switch a := attrs.(type) {
	case *history.ExecutionStarted:
		s.ExecutionID, s.ExecutionStartSeq, s.Ended = e.ExecutionID, e.Seq, false
		s.Executions = append(s.Executions, e.ExecutionID)
		s.Name, s.Version, s.Status = a.Name, a.Version, provider.StatusRunning
		s.BusinessKey, s.BusinessParts, s.Parent = a.BusinessKey, a.BusinessParts, a.Parent
		s.Priority, s.Concurrency, s.Subject = a.Priority, a.Concurrency, a.Subject
		s.Attributes = nil
		s.upsert(a.SearchAttributes)
		if s.CreatedAt.IsZero() {
			s.CreatedAt = e.At
		}
		s.CompletedAt, s.Output, s.Failure = time.Time{}, nil, nil
		s.Activities, s.Timers, s.SubWorkflows, s.Signals, s.Tasks, s.Seen = nil, nil, nil, nil, nil, nil
	case *history.ExecutionCompleted:
		s.end(e, w, provider.StatusCompleted)
		s.Output = a.Output
	case *history.ExecutionFailed:
		s.end(e, w, provider.StatusFailed)
		f := a.Failure
		s.Failure, s.LastError = &f, f.Message
	case *history.ExecutionTerminated:
		s.end(e, w, provider.StatusTerminated)
		s.Failure = &history.Failure{Message: "terminated: " + a.Reason, Type: "Terminated", NonRetryable: true}
	case *history.ExecutionRerun:
		// A record: the execution has ended, and the next event starts
		// the new one.
	case *history.ContinuedAsNew:
		s.end(e, w, provider.StatusRunning)
		s.CompletedAt = time.Time{}
	case *history.ExecutionSuspended:
		if s.Status == provider.StatusSuspended {
			return fail("already suspended")
		}
		s.Status = provider.StatusSuspended
	case *history.ExecutionResumed:
		if s.Status != provider.StatusSuspended {
			return fail("not suspended")
		}
		s.Status = provider.StatusRunning
	case *history.ActivityScheduled:
		s.Activities = put(s.Activities, e.Seq, a.Name)
		if w != nil {
			w.Activities = append(w.Activities, provider.ActivityTask{
				ID: provider.ActivityTaskID(s.InstanceID, s.ExecutionID, e.Seq), InstanceID: s.InstanceID,
				ExecutionID: s.ExecutionID, ScheduledSeq: e.Seq, Name: a.Name, Queue: a.Queue,
				Input: a.Input, Attempt: 1, Retry: a.Retry, Timeout: a.Timeout,
				// Queues serve the oldest visible work first: a task
				// visible since its instance was created goes ahead of the
				// work of instances created later, so workflows in flight
				// finish before a backlog of new ones (see docs/semantics.md).
				VisibleAt: s.CreatedAt,
				Priority:  s.Priority,
			})
			t := &w.Activities[len(w.Activities)-1]
			if a.Priority != 0 {
				t.Priority = a.Priority
			}
			if c := a.Concurrency; c != nil {
				t.ConcurrencyKey, t.ConcurrencyLimit = c.Key, c.Limit
			}
		}
	case *history.ActivityCompleted, *history.ActivityFailed:
		seq, err := s.settle(e, s.Activities)
		if err != nil {
			return fail("%v", err)
		}
		delete(s.Activities, seq)
		if f, ok := a.(*history.ActivityFailed); ok {
			s.LastError = f.Failure.Message
		}
	case *history.TimerCreated:
		s.Timers = put(s.Timers, e.Seq, a.FireAt)
		if w != nil {
			m, err := provider.NewMessage(TimerMessageID(s.InstanceID, s.ExecutionID, e.Seq), s.InstanceID, s.ExecutionID,
				history.SeqCorrelation(e.Seq), &history.TimerFired{FireAt: a.FireAt})
			if err != nil {
				return fail("%v", err)
			}
			m.VisibleAt = a.FireAt
			w.Messages = append(w.Messages, m)
		}
	case *history.TimerFired, *history.TimerCancelled:
		seq, err := s.settle(e, s.Timers)
		if err != nil {
			return fail("%v", err)
		}
		delete(s.Timers, seq)
	case *history.SubWorkflowScheduled:
		if a.Detached {
			// Nothing pending: a detached start is only sent.
			if w != nil {
				m, err := s.detachedStart(e, a)
				if err != nil {
					return fail("%v", err)
				}
				w.Messages = append(w.Messages, m)
			}
			break
		}
		s.SubWorkflows = put(s.SubWorkflows, e.Seq, a.InstanceID)
		if w != nil {
			m, err := s.childStart(e.Seq, a)
			if err != nil {
				return fail("%v", err)
			}
			w.Messages = append(w.Messages, m)
		}
	case *history.SubWorkflowCompleted, *history.SubWorkflowFailed:
		seq, err := s.settle(e, s.SubWorkflows)
		if err != nil {
			return fail("%v", err)
		}
		delete(s.SubWorkflows, seq)
	case *history.SignalSent:
		s.Signals = put(s.Signals, e.Seq, a.InstanceID)
		if w != nil {
			m, err := s.signalMessage(SignalMessageID(s.InstanceID, s.ExecutionID, e.Seq), e.Seq, a)
			if err != nil {
				return fail("%v", err)
			}
			w.Messages = append(w.Messages, m)
		}
	case *history.SignalDelivered, *history.SignalFailed:
		seq, err := s.settle(e, s.Signals)
		if err != nil {
			return fail("%v", err)
		}
		delete(s.Signals, seq)
	case *history.TaskCreated:
		if _, ok := s.Tasks[a.TaskID]; ok {
			return fail("task %s is already open", a.TaskID)
		}
		if s.Tasks == nil {
			s.Tasks = map[string]*OpenTask{}
		}
		s.Tasks[a.TaskID] = &OpenTask{Name: a.Name, Assignee: a.Assignee, Roles: a.Roles}
	case *history.TaskAssigned:
		return s.taskAction(e, a.TaskID, func(t *OpenTask) { t.Assignee = a.Assignee })
	case *history.TaskReassigned:
		return s.taskAction(e, a.TaskID, func(t *OpenTask) { t.Assignee = a.To })
	case *history.TaskReleased:
		return s.taskAction(e, a.TaskID, func(t *OpenTask) { t.Assignee = "" })
	case *history.TaskCompleted:
		return s.taskAction(e, a.TaskID, func(*OpenTask) { delete(s.Tasks, a.TaskID) })
	case *history.TaskCancelled:
		return s.taskAction(e, a.TaskID, func(*OpenTask) { delete(s.Tasks, a.TaskID) })
	case *history.TaskEscalated:
		return s.taskAction(e, a.TaskID, func(t *OpenTask) {
			if a.Reassigned {
				t.Assignee = a.Assignee
				if len(a.Roles) > 0 {
					t.Roles = a.Roles
				}
			}
			if a.Completed {
				delete(s.Tasks, a.TaskID)
			}
		})
	case *history.CustomStatusSet:
		s.CustomStatus, s.CustomStatusText = a.Status, a.Text
	case *history.SearchAttributesUpserted:
		s.upsert(a.Attributes) // Clone and Record copy the map: s owns it
	}
	s.advance(e)
	return nil
}

// upsert sets the attributes of m in s.Attributes, removing those whose
// value is the zero Value (unset).
func (s *Snapshot) upsert(m history.SearchAttributeMap) {
	for k, v := range m {
		if v.Type == query.Invalid {
			delete(s.Attributes, k)
			continue
		}
		if s.Attributes == nil {
			s.Attributes = history.SearchAttributeMap{}
		}
		s.Attributes[k] = v
	}
	if len(s.Attributes) == 0 {
		s.Attributes = nil
	}
}

func (s *Snapshot) advance(e *history.Event) {
	s.LastSeq, s.LastHash, s.UpdatedAt = e.Seq, e.Hash, e.At
}

func (s *Snapshot) taskAction(e *history.Event, taskID string, change func(*OpenTask)) error {
	t, ok := s.Tasks[taskID]
	if !ok {
		return fmt.Errorf("%w: instance %s seq %d (%s): task %s is not open", provider.ErrConflict, s.InstanceID, e.Seq, e.Kind, taskID)
	}
	change(t)
	s.advance(e)
	return nil
}

// settle checks that a completion's correlation names a pending schedule.
func (s *Snapshot) settle(e *history.Event, pending any) (int64, error) {
	seq, err := history.ParseSeqCorrelation(e.CorrelationID)
	if err != nil {
		return 0, err
	}
	var ok bool
	switch m := pending.(type) {
	case map[int64]string:
		_, ok = m[seq]
	case map[int64]time.Time:
		_, ok = m[seq]
	}
	if !ok {
		return 0, fmt.Errorf("no pending schedule at seq %d", seq)
	}
	return seq, nil
}

func (s *Snapshot) end(e *history.Event, w *Work, status provider.Status) {
	if w != nil {
		if len(s.Activities) > 0 {
			w.Cancels = append(w.Cancels, provider.CancelActivitiesParams{InstanceID: s.InstanceID, ExecutionID: s.ExecutionID})
		}
		if s.Parent != nil && e.Kind != history.KindContinuedAsNew {
			w.parentPending = true
		}
	}
	s.Ended, s.Status, s.CompletedAt = true, status, e.At
	s.Activities, s.Timers, s.SubWorkflows, s.Tasks = nil, nil, nil, nil
}

func put[V any](m map[int64]V, k int64, v V) map[int64]V {
	if m == nil {
		m = map[int64]V{}
	}
	m[k] = v
	return m
}

// TimerMessageID derives the id of the message that fires a timer.
func TimerMessageID(instanceID, executionID string, timerSeq int64) string {
	return history.DeterministicID(instanceID+"\x00"+executionID, timerSeq, "timer")
}

func (s *Snapshot) childStart(seq int64, a *history.SubWorkflowScheduled) (provider.Message, error) {
	// The id depends on the parent's identity, so starts of one child id by
	// two parents (or by a purged and reused parent id) never collide.
	m, err := provider.NewMessage(ChildStartMessageID(s.InstanceID, s.ExecutionID, seq), a.InstanceID, a.ExecutionID, a.ExecutionID,
		&history.ExecutionStarted{
			Name: a.Name, Version: a.Version, Input: a.Input,
			Parent:   &history.ParentRef{InstanceID: s.InstanceID, ExecutionID: s.ExecutionID, ScheduledSeq: seq},
			Priority: s.Priority, Subject: s.Subject, SearchAttributes: history.SubjectAttributes(s.Subject),
		})
	if err != nil {
		return provider.Message{}, fmt.Errorf("start of child %s: %w", a.InstanceID, err)
	}
	m.Priority = s.Priority
	return m, nil
}

// detachedStart builds the start message of a detached start (see
// [history.SubWorkflowScheduled.Detached]): no parent link, the start's
// own options, Once set, and the starting instance as its actor. Its id
// is derived as a child's start's is, so a start derived again (by a
// peek-lock round repairing a crash) is the same message.
func (s *Snapshot) detachedStart(e *history.Event, a *history.SubWorkflowScheduled) (provider.Message, error) {
	m, err := provider.NewMessage(ChildStartMessageID(s.InstanceID, s.ExecutionID, e.Seq), a.InstanceID, a.ExecutionID, a.ExecutionID,
		&history.ExecutionStarted{
			Name: a.Name, Version: a.Version, Input: a.Input, Tags: a.Tags,
			Priority: a.Priority, Concurrency: a.Concurrency, Once: true,
		})
	if err != nil {
		return provider.Message{}, fmt.Errorf("start of %s: %w", a.InstanceID, err)
	}
	m.Priority = a.Priority
	m.Actor = history.WorkflowActor(s.InstanceID)
	if !a.Due.IsZero() && a.Due.Before(e.At) {
		m.VisibleAt = a.Due
	}
	return m, nil
}

// parentNotice builds the message that tells a parent its child ended.
func (s *Snapshot) parentNotice() (provider.Message, error) {
	p := s.Parent
	id := provider.SubWorkflowResultID(p.InstanceID, p.ExecutionID, p.ScheduledSeq)
	corr := history.SeqCorrelation(p.ScheduledSeq)
	var attrs history.Attributes = &history.SubWorkflowCompleted{Output: s.Output}
	if s.Status != provider.StatusCompleted {
		f := history.Failure{Message: "sub-workflow " + string(s.Status)}
		if s.Failure != nil {
			f = *s.Failure
		}
		attrs = &history.SubWorkflowFailed{Failure: f}
	}
	return provider.NewMessage(id, p.InstanceID, p.ExecutionID, corr, attrs)
}

// Work is what a round enqueues besides history: it is derived from the
// events the round appends, so a round that crashed after its append can
// derive it again.
type Work struct {
	Messages      []provider.Message
	Activities    []provider.ActivityTask
	Cancels       []provider.CancelActivitiesParams
	parentPending bool
}

// Empty reports whether there is nothing to enqueue.
func (w *Work) Empty() bool {
	return len(w.Messages)+len(w.Activities)+len(w.Cancels) == 0 && !w.parentPending
}

// finish adds the parent notice of an execution that ended, read from the
// snapshot after all of the round's events were applied.
func (w *Work) finish(s *Snapshot) error {
	if !w.parentPending {
		return nil
	}
	w.parentPending = false
	if s.Parent == nil || !s.Ended {
		return nil
	}
	m, err := s.parentNotice()
	if err != nil {
		return err
	}
	w.Messages = append(w.Messages, m)
	return nil
}

// OpenWork derives the work items the current execution should have queued:
// a task per pending activity, a fire message per pending timer, a start
// message per pending child, a resend per signal whose outcome is not in
// history (also after the execution ended; see [SignalResendID]), and the
// parent's notice and activity cancellation of an ended execution, plus
// the cancellation of every earlier execution's activities. Enqueueing them is idempotent, which
// is how peek-lock rounds repair a crash between append and enqueue.
// events must hold the current execution (from ExecutionStartSeq).
func (s *Snapshot) OpenWork(events []history.Event) (*Work, error) {
	w := &Work{}
	if !s.Started() {
		return w, nil
	}
	if len(s.Executions) > 1 {
		// A round that ended an execution and started the next may have
		// died before it cancelled the ended one's activities.
		w.Cancels = append(w.Cancels, provider.CancelActivitiesParams{InstanceID: s.InstanceID, OtherThan: s.ExecutionID})
	}
	resends, err := s.signalResends(events)
	if err != nil {
		return nil, err
	}
	w.Messages = append(w.Messages, resends...)
	if s.Ended {
		w.Cancels = append(w.Cancels, provider.CancelActivitiesParams{InstanceID: s.InstanceID, ExecutionID: s.ExecutionID})
		if s.Parent != nil && s.Status.Terminal() {
			w.parentPending = true
		}
		return w, w.finish(s)
	}
	for i := range events {
		e := &events[i]
		if e.ExecutionID != s.ExecutionID {
			continue
		}
		_, activity := s.Activities[e.Seq]
		_, timer := s.Timers[e.Seq]
		_, child := s.SubWorkflows[e.Seq]
		if !activity && !timer && !child {
			continue
		}
		// Replaying the schedule event on a scratch snapshot positioned
		// just before it derives exactly the work its round derived.
		scratch := &Snapshot{InstanceID: s.InstanceID, ExecutionID: s.ExecutionID, Executions: s.Executions, LastSeq: e.Seq - 1, Status: provider.StatusRunning}
		if err := scratch.Apply(e, w); err != nil {
			return nil, err
		}
	}
	return w, nil
}
