package chronicle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// ProjectionView is every projection of an instance as of one Seq.
type ProjectionView = projector.View

// RegisterProjection registers a custom projection: fold is called with
// every event of every instance's history, in order, and its state S is
// stored per instance (encoded with the engine's codec) in the same round
// as the events. Bump version when fold changes: stored records of older
// versions are replaced the next time their instance runs, or by
// RebuildProjections. Register projections before Run.
func RegisterProjection[S any](e *Engine, name string, version int, fold func(state S, e *Event) (S, error), opts ...ProjectionOption) error {
	if fold == nil {
		return invalid("projection %s has a nil fold", name)
	}
	var cfg projectionConfig
	for _, o := range opts {
		if o, ok := o.(projectionOption); ok && o != nil {
			o(&cfg)
		}
	}
	for _, w := range cfg.workflows {
		if err := validateID("projection "+name+" workflow", w); err != nil {
			return err
		}
	}
	codec := e.opts.Codec
	def := projector.Definition{
		Name: name, Version: version,
		New: func() any { var s S; return s },
		Fold: func(state any, ev *history.Event) (any, error) {
			s, _ := state.(S)
			return fold(s, ev)
		},
		Encode:    func(state any) ([]byte, error) { return codec.Encode(state) },
		Seal:      e.sealFor,
		Workflows: slices.Clone(cfg.workflows),
	}
	if attrs := cfg.attributes; attrs != nil {
		decls := e.opts.SearchAttributes
		def.Attributes = func(state any) (map[string]query.Value, error) {
			m, err := attrs(state)
			if err != nil {
				return nil, err
			}
			return replay.SearchAttributeValues(decls, m)
		}
	}
	if err := e.projector.Add(def); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	// Cached projection states lack the new projection: start cold.
	e.runner.Forget()
	return nil
}

// Projection returns the stored state of a custom projection for an
// instance and the Seq it was folded to.
func Projection[S any](ctx context.Context, e *Engine, name, instanceID string) (S, int64, error) {
	var s S
	rec, err := e.getCustomProjection(ctx, name, instanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return s, 0, fmt.Errorf("%w: projection %s of %s", ErrInstanceNotFound, name, instanceID)
	}
	if err != nil {
		return s, 0, err
	}
	if err := e.payloads.Decode(rec.Data, &s); err != nil {
		return s, 0, fmt.Errorf("decode projection %s of %s: %w", name, instanceID, err)
	}
	return s, rec.Seq, nil
}

// InstanceFilter selects instances for ListInstances. Empty fields match
// anything.
type InstanceFilter struct {
	Status      Status
	Workflow    string
	BusinessKey string
	// CreatedFrom (inclusive) and CreatedTo (exclusive) bound creation.
	CreatedFrom time.Time
	CreatedTo   time.Time
	// Where is a filter in the query language (docs/search.md), for
	// example "status = 'running' AND amount > 100". It narrows the other
	// fields further; a text that does not parse is refused with
	// ErrInvalidArgument.
	Where string
	// AfterID pages: pass the last id of the previous page.
	AfterID string
	// Limit bounds the page; zero means 100.
	Limit int
}

// ListInstances returns instances in id order, from their projections.
// Instances whose start was dead-lettered before their first round stored
// anything (their first turn panicked, say) are listed too, as pending
// with their incident (see [Engine.Describe]); instances whose start is
// merely queued are not.
func (e *Engine) ListInstances(ctx context.Context, f InstanceFilter) ([]*Instance, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	where, err := e.parseWhere(f.Where)
	if err != nil {
		return nil, err
	}
	var out []*Instance
	if f.Status != StatusPending {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{
			Status: f.Status, Name: f.Workflow, BusinessKey: f.BusinessKey,
			CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo, Where: where, AfterID: f.AfterID, Limit: limit,
		})
		if err != nil {
			return nil, err
		}
		out = make([]*Instance, len(recs))
		for i := range recs {
			out[i] = e.instance(&recs[i])
		}
	}
	if f.Status != "" && f.Status != StatusPending {
		return out, nil
	}
	dead, err := e.deadStarts(ctx, f, where)
	if err != nil {
		return nil, err
	}
	if len(dead) == 0 {
		return out, nil
	}
	out = append(out, dead...)
	slices.SortFunc(out, func(a, b *Instance) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// eachInstance calls fn with every instance matching f (whose AfterID and
// Limit it sets), in id order, a page at a time, until fn fails.
func (e *Engine) eachInstance(ctx context.Context, f InstanceFilter, fn func(*Instance) error) error {
	const pageSize = 100
	f.Limit = pageSize
	for {
		page, err := e.ListInstances(ctx, f)
		if err != nil {
			return err
		}
		for _, inst := range page {
			if err := fn(inst); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		f.AfterID = page[len(page)-1].ID
	}
}

// deadStarts returns the instances matching f (and where, evaluated on
// what their start gave: status pending) that have an unresolved
// dead-lettered start and no record, in id order.
func (e *Engine) deadStarts(ctx context.Context, f InstanceFilter, where query.Expr) ([]*Instance, error) {
	newest := map[string]*provider.DeadLetter{}
	after := ""
	for {
		letters, err := e.listDeadLetters(ctx, &provider.ListDeadLettersParams{Status: provider.DeadLetterDead, AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for i := range letters {
			l := &letters[i]
			if l.Message == nil || l.Message.Kind != history.KindExecutionStarted || l.InstanceID <= f.AfterID {
				continue
			}
			if old, ok := newest[l.InstanceID]; !ok || l.At.After(old.At) {
				newest[l.InstanceID] = l
			}
		}
		if len(letters) < 500 {
			break
		}
		after = letters[len(letters)-1].ID
	}
	var out []*Instance
	for id, l := range newest {
		inst := e.deadPending(l)
		switch {
		case f.Workflow != "" && inst.Workflow != f.Workflow,
			f.BusinessKey != "" && inst.BusinessKey != f.BusinessKey,
			!f.CreatedFrom.IsZero() && inst.CreatedAt.Before(f.CreatedFrom),
			!f.CreatedTo.IsZero() && !inst.CreatedAt.Before(f.CreatedTo),
			where != nil && !query.Match(where, pendingRecord(inst, l.Message)):
			continue
		}
		if _, err := e.store.GetInstance(ctx, id); !errors.Is(err, provider.ErrNotFound) {
			if err != nil {
				return nil, err
			}
			continue // it has a record, listed as such
		}
		out = append(out, inst)
	}
	slices.SortFunc(out, func(a, b *Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// pendingRecord is the record a query sees of a pending instance: what its
// start message gave.
func pendingRecord(inst *Instance, start *provider.Message) *provider.InstanceRecord {
	r := &provider.InstanceRecord{
		InstanceID: inst.ID, ExecutionID: inst.ExecutionID, Name: inst.Workflow, Version: inst.Version,
		Status: inst.Status, BusinessKey: inst.BusinessKey, BusinessParts: inst.BusinessParts, ParentID: inst.ParentID,
		CreatedAt: inst.CreatedAt, UpdatedAt: inst.UpdatedAt,
	}
	if a, err := history.DecodeAttributes(start.Kind, start.Payload); err == nil {
		if s, ok := a.(*history.ExecutionStarted); ok {
			r.Attributes = s.SearchAttributes
		}
	}
	return r
}

// ProjectionsAt folds an instance's history up to seq (0: all of it) into
// every projection — snapshot, instance, tasks, task events and custom
// projections — without touching the store: time travel for debugging.
func (e *Engine) ProjectionsAt(ctx context.Context, instanceID string, seq int64) (*ProjectionView, error) {
	events, err := e.History(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	return e.projector.FoldAt(instanceID, events, seq)
}

// RebuildProjections folds an instance's whole history afresh and replaces
// its stored projections: the built-in ones and the custom projections
// registered on this engine (others are left as they are). Use it after a projection's version
// changed or to repair projections. It may run while the instance runs: it
// folds again when a round commits during the rebuild.
func (e *Engine) RebuildProjections(ctx context.Context, instanceID string) error {
	for attempt := 0; attempt < 5; attempt++ {
		events, err := e.History(ctx, instanceID)
		if err != nil {
			return err
		}
		v, err := e.projector.FoldAt(instanceID, events, 0)
		if err != nil {
			return fmt.Errorf("rebuild %s: %w", instanceID, err)
		}
		snap, err := round.MarshalSnapshot(v.Snapshot)
		if err != nil {
			return err
		}
		p := &provider.Projections{
			InstanceID: instanceID, Seq: v.Snapshot.LastSeq, Snapshot: snap, Instance: v.Instance,
			Tasks: v.Tasks, TaskEvents: v.TaskEvents, Custom: v.CustomRecords,
		}
		// Only the custom projections this engine folds are replaced
		// (removed, when one limited to some workflows does not cover
		// the instance).
		var custom []string
		for _, d := range e.projector.Definitions() {
			custom = append(custom, d.Name)
		}
		write := func(ctx context.Context, s provider.Steps) error {
			// Check inside the write that no round appended meanwhile.
			tail, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: p.Seq + 1})
			if err != nil {
				return err
			}
			if len(tail) > 0 {
				return errRebuildRace
			}
			if err := s.ResetProjections(ctx, &provider.ResetProjectionsParams{InstanceID: instanceID, Custom: custom}); err != nil {
				return err
			}
			return s.SaveProjections(ctx, p)
		}
		// A store may implement both modes' methods (the memory store
		// does); its Mode says which one it runs.
		tx, isTx := e.store.(provider.TxStore)
		lease, isLease := e.store.(provider.LeaseStore)
		switch {
		case e.store.Mode() == provider.ModeTransactional && isTx:
			err = tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error { return write(ctx, tx) })
		case e.store.Mode() == provider.ModePeekLock && isLease:
			err = write(ctx, lease)
		default:
			return fmt.Errorf("rebuild %s: the store does not implement its mode (%s)", instanceID, e.store.Mode())
		}
		if err == nil {
			// A round that committed during the write may have had its
			// projections replaced by the older fold: fold again.
			tail, lerr := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: p.Seq + 1})
			if lerr != nil {
				return lerr
			}
			if len(tail) == 0 {
				return nil
			}
			continue
		}
		if !errors.Is(err, errRebuildRace) {
			return err
		}
	}
	return fmt.Errorf("rebuild %s: the instance kept changing; try again", instanceID)
}

var errRebuildRace = errors.New("chronicle: history changed during rebuild")

// CheckProjections compares the stored projections of an instance with a
// fresh fold of its history and returns the differences, one line each
// (none when they agree).
func (e *Engine) CheckProjections(ctx context.Context, instanceID string) ([]string, error) {
	events, err := e.History(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	want, err := e.projector.FoldAt(instanceID, events, 0)
	if err != nil {
		return nil, err
	}
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	data, seq, err := e.store.GetSnapshot(ctx, instanceID)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		add("snapshot: missing")
	case err != nil:
		return nil, err
	default:
		wantData, err := round.MarshalSnapshot(want.Snapshot)
		if err != nil {
			return nil, err
		}
		if seq != want.Snapshot.LastSeq || !bytes.Equal(data, wantData) {
			add("snapshot: stored at seq %d differs from the fold at seq %d", seq, want.Snapshot.LastSeq)
		}
	}
	rec, err := e.store.GetInstance(ctx, instanceID)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		add("instance: missing")
	case err != nil:
		return nil, err
	case !want.Instance.Equal(rec):
		add("instance: fields differ from the fold at seq %d: %s", want.Instance.LastSeq, strings.Join(want.Instance.Diff(rec), ", "))
	}
	stored, err := e.listTasks(ctx, &provider.ListTasksParams{InstanceID: instanceID, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	byID := map[string]provider.TaskRecord{}
	for _, t := range stored {
		byID[t.TaskID] = t
	}
	for _, t := range want.Tasks {
		got, ok := byID[t.TaskID]
		switch {
		case !ok:
			add("task %s: missing", t.TaskID)
		case got.Status != t.Status || got.Assignee != t.Assignee || got.Seq != t.Seq || !bytes.Equal(got.Result, t.Result):
			add("task %s: stored %s/%q at seq %d, fold gives %s/%q at seq %d", t.TaskID, got.Status, got.Assignee, got.Seq, t.Status, t.Assignee, t.Seq)
		}
		delete(byID, t.TaskID)
	}
	for id := range byID {
		add("task %s: stored but not in history", id)
	}
	storedEvents, err := e.listTaskEvents(ctx, &provider.ListTaskEventsParams{InstanceID: instanceID})
	if err != nil {
		return nil, err
	}
	if len(storedEvents) != len(want.TaskEvents) {
		add("task events: %d stored, fold gives %d", len(storedEvents), len(want.TaskEvents))
	}
	folded := map[string]bool{}
	for _, c := range want.CustomRecords {
		folded[c.Name] = true
	}
	for _, d := range e.projector.Definitions() {
		if folded[d.Name] {
			continue
		}
		// A projection limited to other workflows has no record here.
		if _, err := e.getCustomProjection(ctx, d.Name, instanceID); err == nil {
			add("projection %s: stored, but the projection does not cover the instance's workflows", d.Name)
		} else if !errors.Is(err, provider.ErrNotFound) {
			return nil, err
		}
	}
	for _, c := range want.CustomRecords {
		got, err := e.getCustomProjection(ctx, c.Name, instanceID)
		switch {
		case errors.Is(err, provider.ErrNotFound):
			add("projection %s: missing", c.Name)
		case err != nil:
			return nil, err
		case got.Version != c.Version || got.Seq != c.Seq || !bytes.Equal(got.Data, c.Data):
			add("projection %s: stored version %d at seq %d differs from the fold (version %d, seq %d)", c.Name, got.Version, got.Seq, c.Version, c.Seq)
		}
	}
	return diffs, nil
}
