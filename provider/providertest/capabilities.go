package providertest

import (
	"context"
	"testing"

	"github.com/chronicleflow/chronicle/round"
)

// The optional capabilities of the store under test: a case that needs one
// the store lacks is skipped, and says so.

func (b *bundle) queries(t *testing.T) round.QueryStore {
	return capability[round.QueryStore](t, b.store, "round.QueryStore")
}

func (b *bundle) deadLetters(t *testing.T) round.DeadLetterStore {
	return capability[round.DeadLetterStore](t, b.store, "round.DeadLetterStore")
}

func (b *bundle) purges(t *testing.T) round.PurgeStore {
	return capability[round.PurgeStore](t, b.store, "round.PurgeStore")
}

func (b *bundle) inspect(t *testing.T) round.InspectStore {
	return capability[round.InspectStore](t, b.store, "round.InspectStore")
}

// capability returns store as C, or skips the case, naming the interface.
func capability[C any](t *testing.T, store round.Store, name string) C {
	t.Helper()
	s, ok := store.(C)
	if !ok {
		t.Skipf("providertest: SKIPPED: the store does not implement %s", name)
	}
	return s
}

// unsupported is a capability a wrapped store lacks.
type unsupported struct{}

var (
	_ round.QueryStore      = unsupported{}
	_ round.DeadLetterStore = unsupported{}
	_ round.PurgeStore      = unsupported{}
	_ round.InspectStore    = unsupported{}
)

func (unsupported) ListInstances(context.Context, *round.ListInstancesParams) ([]round.InstanceRecord, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) GetTask(context.Context, string) (*round.TaskRecord, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ListTasks(context.Context, *round.ListTasksParams) ([]round.TaskRecord, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ListTaskEvents(context.Context, *round.ListTaskEventsParams) ([]round.TaskEventRecord, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) GetCustomProjection(context.Context, string, string) (*round.CustomRecord, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ListDeadLetters(context.Context, *round.ListDeadLettersParams) ([]round.DeadLetter, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) GetDeadLetter(context.Context, string) (*round.DeadLetter, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ResolveDeadLetter(context.Context, *round.ResolveDeadLetterParams) error {
	return round.ErrUnsupported
}

func (unsupported) PurgeInstance(context.Context, *round.PurgeInstanceParams) (*round.Tombstone, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) GetTombstone(context.Context, string) (*round.Tombstone, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ListTombstones(context.Context, string) ([]round.Tombstone, error) {
	return nil, round.ErrUnsupported
}

func (unsupported) ListQueuedActivities(context.Context, *round.ListQueuedActivitiesParams) ([]round.QueuedActivity, error) {
	return nil, round.ErrUnsupported
}

// CoreOnly returns a view of store that has only the core of its mode —
// [round.TxStore] or [round.LeaseStore] — and none of the optional
// capabilities (queries, dead letters, purge, inspection, work hints): what
// a new provider that ships its core first offers. Exercise runs its core
// cases and skips the rest, saying so; an engine runs workflows on it.
func CoreOnly(store round.Store) round.Store {
	switch s := store.(type) {
	case round.LeaseStore:
		if s.Mode() == round.ModePeekLock {
			return struct{ round.LeaseStore }{s}
		}
	}
	if s, ok := store.(round.TxStore); ok {
		return struct{ round.TxStore }{s}
	}
	return struct{ round.Store }{store}
}
