package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/round"
)

// Definition is a custom projection: a named, versioned fold of an
// instance's whole history (every execution). Bumping Version makes stores
// replace the records of older versions when they are next written at or
// beyond the stored Seq, and rebuilds refold them; a record of an older
// version never replaces a newer one (see [provider.CustomRecord.Replaces]),
// so nodes of both versions can run side by side during a deploy.
type Definition struct {
	Name    string
	Version int
	// New returns the state before any event.
	New func() any
	// Fold returns the state after e. It must be deterministic and do no
	// I/O.
	Fold func(state any, e *history.Event) (any, error)
	// Encode encodes a state for storage.
	Encode func(state any) ([]byte, error)
	// Seal, when set, seals the encoded state of an instance whose
	// execution has a data subject.
	Seal func(subject, instanceID string, data []byte) ([]byte, error)
	// Workflows, when not empty, limits the projection to the executions
	// of these workflows: it folds only their events, and is stored only
	// for an instance that has had one.
	Workflows []string
	// Attributes, when set, derives search attributes from the state
	// after a fold; they go into the instance record over the workflow's
	// own (see [round.MergeAttributes]). An error fails the round.
	Attributes func(state any) (map[string]query.Value, error)
}

// covers reports whether the projection folds executions of workflow.
func (d *Definition) covers(workflow string) bool {
	return len(d.Workflows) == 0 || slices.Contains(d.Workflows, workflow)
}

// Projector folds rounds' events into task and custom projection records.
// Its definitions may be added while it runs; instances whose state is
// cached then need a cold fold (the engine drops its cache).
type Projector struct {
	mu   sync.RWMutex
	defs []Definition
}

// New returns a projector with the given custom projections; it fails as
// [Projector.Add] does on the first invalid or duplicate definition.
func New(defs ...Definition) (*Projector, error) {
	p := &Projector{}
	for _, d := range defs {
		if err := p.Add(d); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Add registers a custom projection.
func (p *Projector) Add(d Definition) error {
	if err := history.ValidateID("projection name", d.Name); err != nil {
		return err
	}
	if d.New == nil || d.Fold == nil || d.Encode == nil {
		return fmt.Errorf("%w: projection %s needs New, Fold and Encode", history.ErrInvalid, d.Name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, old := range p.defs {
		if old.Name == d.Name {
			return fmt.Errorf("%w: projection %s is already registered", history.ErrInvalid, d.Name)
		}
	}
	p.defs = append(p.defs, d)
	sort.Slice(p.defs, func(i, j int) bool { return p.defs[i].Name < p.defs[j].Name })
	return nil
}

// Definitions returns the registered custom projections, by name.
func (p *Projector) Definitions() []Definition {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.defs)
}

// State is the folded projection state of one instance.
type State struct {
	InstanceID string
	Seq        int64
	// Tasks holds every task of the instance by id.
	Tasks map[string]*provider.TaskRecord
	// Custom holds each custom projection's state by name.
	Custom map[string]any
	defs   []Definition
	// workflow is the workflow of the execution being folded, and
	// covered holds the projections limited to some workflows that have
	// folded an execution of one.
	workflow string
	covered  map[string]bool
	// subject is the data subject of the execution being folded.
	subject string

	changed map[string]bool
	events  []provider.TaskEventRecord
}

// NewState returns the state of an instance before any event.
func (p *Projector) NewState(instanceID string) *State {
	s := &State{InstanceID: instanceID, Tasks: map[string]*provider.TaskRecord{}, Custom: map[string]any{}, defs: p.Definitions()}
	for _, d := range s.defs {
		s.Custom[d.Name] = d.New()
	}
	return s
}

// Apply folds one event.
func (s *State) Apply(e *history.Event) error {
	if e.Seq != s.Seq+1 {
		return fmt.Errorf("projector: %s expected seq %d, got %d", s.InstanceID, s.Seq+1, e.Seq)
	}
	if err := s.applyTask(e); err != nil {
		return err
	}
	if e.Kind == history.KindExecutionStarted && len(s.defs) > 0 {
		a, err := e.Attributes()
		if err != nil {
			return err
		}
		start := a.(*history.ExecutionStarted)
		s.workflow, s.subject = start.Name, start.Subject
	}
	for i := range s.defs {
		d := &s.defs[i]
		if len(d.Workflows) > 0 {
			if !d.covers(s.workflow) {
				continue
			}
			if s.covered == nil {
				s.covered = map[string]bool{}
			}
			s.covered[d.Name] = true
		}
		next, err := d.Fold(s.Custom[d.Name], e)
		var erased *history.ErasedError
		if errors.As(err, &erased) {
			// The event's payload belongs to an erased data subject: the
			// state stays as it was, and rounds of the instance go on.
			continue
		}
		if err != nil {
			return fmt.Errorf("projection %s of %s at seq %d: %w", d.Name, s.InstanceID, e.Seq, err)
		}
		s.Custom[d.Name] = next
	}
	s.Seq = e.Seq
	return nil
}

func (s *State) touch(t *provider.TaskRecord, e *history.Event) {
	t.UpdatedAt, t.Seq = e.At, e.Seq
	if s.changed == nil {
		s.changed = map[string]bool{}
	}
	s.changed[t.TaskID] = true
}

func (s *State) record(t *provider.TaskRecord, e *history.Event, kind history.Kind, assignee, detail string) {
	s.events = append(s.events, provider.TaskEventRecord{
		InstanceID: s.InstanceID, TaskID: t.TaskID, Seq: e.Seq, Kind: kind,
		Actor: e.Actor, At: e.At, Assignee: assignee, Detail: detail,
	})
}

func (s *State) applyTask(e *history.Event) error {
	if k := e.Kind; !k.Terminal() && k.Class() != history.ClassTask && k != history.KindTaskCreated && k != history.KindTaskCancelled && k != history.KindTaskEscalated {
		return nil
	}
	a, err := e.Attributes()
	if err != nil {
		return err
	}
	task := func(id string) (*provider.TaskRecord, error) {
		t, ok := s.Tasks[id]
		if !ok {
			return nil, fmt.Errorf("projector: %s seq %d: %s for unknown task %s", s.InstanceID, e.Seq, e.Kind, id)
		}
		return t, nil
	}
	switch a := a.(type) {
	case *history.TaskCreated:
		t := &provider.TaskRecord{
			TaskID: a.TaskID, InstanceID: s.InstanceID, ExecutionID: e.ExecutionID, Name: a.Name,
			Status: provider.TaskOpen, Assignee: a.Assignee, Roles: a.Roles, Payload: a.Payload, Due: a.Due,
			CreatedAt: e.At,
		}
		s.Tasks[a.TaskID] = t
		s.touch(t, e)
		s.record(t, e, e.Kind, a.Assignee, a.Name)
	case *history.TaskAssigned:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		t.Assignee = a.Assignee
		s.touch(t, e)
		detail := "assigned"
		if a.Claimed {
			detail = "claimed"
		}
		s.record(t, e, e.Kind, a.Assignee, detail)
	case *history.TaskReleased:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		t.Assignee = ""
		s.touch(t, e)
		s.record(t, e, e.Kind, "", "released by "+a.Previous)
	case *history.TaskReassigned:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		t.Assignee = a.To
		s.touch(t, e)
		s.record(t, e, e.Kind, a.To, "from "+a.From)
	case *history.TaskCompleted:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		t.Status, t.Result, t.CompletedAt = provider.TaskCompleted, a.Result, e.At
		s.touch(t, e)
		s.record(t, e, e.Kind, t.Assignee, "completed")
	case *history.TaskCancelled:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		t.Status, t.CompletedAt = provider.TaskCancelled, e.At
		s.touch(t, e)
		s.record(t, e, e.Kind, t.Assignee, a.Reason)
	case *history.TaskEscalated:
		t, err := task(a.TaskID)
		if err != nil {
			return err
		}
		if a.Reassigned {
			t.Assignee = a.Assignee
			if len(a.Roles) > 0 {
				t.Roles = a.Roles
			}
		}
		if a.Completed {
			t.Status, t.Result, t.CompletedAt = provider.TaskCompleted, a.Result, e.At
		}
		s.touch(t, e)
		s.record(t, e, e.Kind, t.Assignee, escalationDetail(a))
	default:
		// The end of an execution closes its open tasks.
		if !e.Kind.Terminal() {
			return nil
		}
		for _, id := range sortedKeys(s.Tasks) {
			t := s.Tasks[id]
			if t.Status == provider.TaskOpen && t.ExecutionID == e.ExecutionID {
				t.Status, t.CompletedAt = provider.TaskCancelled, e.At
				s.touch(t, e)
				s.record(t, e, history.KindTaskCancelled, t.Assignee, "execution ended ("+string(e.Kind)+")")
			}
		}
	}
	return nil
}

// escalationDetail is the audit-trail text of an escalation step: its
// reason and what it did.
func escalationDetail(a *history.TaskEscalated) string {
	var did []string
	switch {
	case a.Reassigned && a.Assignee != "":
		did = append(did, "reassigned to "+a.Assignee)
	case a.Reassigned:
		did = append(did, "returned to roles "+strings.Join(a.Roles, ", "))
	}
	if a.Notify != "" {
		did = append(did, "notified by "+a.Notify)
	}
	if a.Completed {
		did = append(did, "completed with the default result")
	}
	return a.Reason + ": " + strings.Join(did, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// flush returns the records changed since the last flush.
func (s *State) flush() (*round.ProjectOutput, error) {
	out := &round.ProjectOutput{TaskEvents: s.events}
	for _, id := range sortedKeys(s.changed) {
		t := *s.Tasks[id]
		t.Roles = slices.Clone(t.Roles)
		out.Tasks = append(out.Tasks, t)
	}
	for i := range s.defs {
		d := &s.defs[i]
		if len(d.Workflows) > 0 && !s.covered[d.Name] {
			continue
		}
		data, err := d.Encode(s.Custom[d.Name])
		if err == nil && s.subject != "" && d.Seal != nil {
			data, err = d.Seal(s.subject, s.InstanceID, data)
		}
		var erased *history.ErasedError
		if errors.As(err, &erased) {
			// An erased subject's state cannot be sealed: the stored one
			// (unreadable) stays.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("encode projection %s of %s: %w", d.Name, s.InstanceID, err)
		}
		out.Custom = append(out.Custom, provider.CustomRecord{Name: d.Name, Version: d.Version, InstanceID: s.InstanceID, Seq: s.Seq, Data: data})
		if d.Attributes == nil {
			continue
		}
		attrs, err := d.Attributes(s.Custom[d.Name])
		if err != nil {
			return nil, fmt.Errorf("search attributes of projection %s of %s at seq %d: %w", d.Name, s.InstanceID, s.Seq, err)
		}
		for k, v := range attrs {
			if out.Attributes == nil {
				out.Attributes = map[string]query.Value{}
			}
			out.Attributes[k] = v
		}
	}
	s.changed, s.events = nil, nil
	return out, nil
}

// Project implements round.ProjectFunc.
func (p *Projector) Project(_ context.Context, in *round.ProjectInput) (*round.ProjectOutput, error) {
	s, _ := in.Cached.(*State)
	events := in.NewEvents
	if s == nil || len(s.defs) != len(p.Definitions()) {
		// Tasks of ended executions never change again, so without custom
		// projections (which fold every execution) the current execution's
		// events are enough.
		s = p.NewState(in.InstanceID)
		from := int64(1)
		if len(s.defs) == 0 && in.Snapshot != nil {
			from = max(in.Snapshot.ExecutionStartSeq, 1)
		}
		var err error
		if events, err = in.History(from); err != nil {
			return nil, err
		}
		s.Seq = from - 1
	}
	for i := range events {
		if err := s.Apply(&events[i]); err != nil {
			return nil, err
		}
	}
	out, err := s.flush()
	if err != nil {
		return nil, err
	}
	out.Cached = s
	return out, nil
}

// View is every projection of an instance as of one Seq.
type View struct {
	Snapshot   *round.Snapshot
	Instance   *provider.InstanceRecord
	Tasks      []provider.TaskRecord
	TaskEvents []provider.TaskEventRecord
	Custom     map[string]any
	// CustomRecords are the custom states encoded as stores keep them.
	CustomRecords []provider.CustomRecord
}

// FoldAt folds a whole history up to and including seq (0 or beyond the
// end: all of it) into every projection: time travel for debugging and the
// reference of rebuilds and projection checks.
func (p *Projector) FoldAt(instanceID string, events []history.Event, seq int64) (*View, error) {
	if seq <= 0 || seq > int64(len(events)) {
		seq = int64(len(events))
	}
	events = events[:seq]
	snap, err := round.Fold(instanceID, events)
	if err != nil {
		return nil, err
	}
	s := p.NewState(instanceID)
	var all []provider.TaskEventRecord
	for i := range events {
		if err := s.Apply(&events[i]); err != nil {
			return nil, err
		}
		all = append(all, s.events...)
		s.events = nil
	}
	v := &View{Snapshot: snap, TaskEvents: all, Custom: map[string]any{}}
	for i := range s.defs {
		if d := &s.defs[i]; len(d.Workflows) == 0 || s.covered[d.Name] {
			v.Custom[d.Name] = s.Custom[d.Name]
		}
	}
	for _, id := range sortedKeys(s.Tasks) {
		v.Tasks = append(v.Tasks, *s.Tasks[id])
	}
	out, err := s.flush()
	if err != nil {
		return nil, err
	}
	v.CustomRecords = out.Custom
	if snap.Started() {
		v.Instance = snap.Record()
		round.MergeAttributes(v.Instance, out.Attributes)
		if n := len(v.Instance.Attributes); n > history.MaxSearchAttributes {
			return nil, fmt.Errorf("projector: %s has %d search attributes with those the projections derive, at most %d allowed", instanceID, n, history.MaxSearchAttributes)
		}
	}
	return v, nil
}
