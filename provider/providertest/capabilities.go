package providertest

import (
	"context"
	"testing"

	"github.com/chronicleflow/chronicle/provider"
)

// The optional capabilities of the store under test: a case that needs one
// the store lacks is skipped, and says so.

func (b *bundle) queries(t *testing.T) provider.QueryStore {
	return capability[provider.QueryStore](t, b.store, "provider.QueryStore")
}

func (b *bundle) deadLetters(t *testing.T) provider.DeadLetterStore {
	return capability[provider.DeadLetterStore](t, b.store, "provider.DeadLetterStore")
}

func (b *bundle) purges(t *testing.T) provider.PurgeStore {
	return capability[provider.PurgeStore](t, b.store, "provider.PurgeStore")
}

func (b *bundle) inspect(t *testing.T) provider.InspectStore {
	return capability[provider.InspectStore](t, b.store, "provider.InspectStore")
}

// capability returns store as C, or skips the case, naming the interface.
func capability[C any](t *testing.T, store provider.Store, name string) C {
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
	_ provider.QueryStore      = unsupported{}
	_ provider.DeadLetterStore = unsupported{}
	_ provider.PurgeStore      = unsupported{}
	_ provider.InspectStore    = unsupported{}
)

func (unsupported) ListInstances(context.Context, *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) GetTask(context.Context, string) (*provider.TaskRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListTasks(context.Context, *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListTaskEvents(context.Context, *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) GetCustomProjection(context.Context, string, string) (*provider.CustomRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) CountInstances(context.Context, *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListCustomProjections(context.Context, *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListDeadLetters(context.Context, *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) GetDeadLetter(context.Context, string) (*provider.DeadLetter, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ResolveDeadLetter(context.Context, *provider.ResolveDeadLetterParams) error {
	return provider.ErrUnsupported
}

func (unsupported) PurgeInstance(context.Context, *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) GetTombstone(context.Context, string) (*provider.Tombstone, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListTombstones(context.Context, string) ([]provider.Tombstone, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListQueuedActivities(context.Context, *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	return nil, provider.ErrUnsupported
}

// CoreOnly returns a view of store that has only the core of its mode —
// [provider.TxStore] or [provider.LeaseStore] — and none of the optional
// capabilities (queries, dead letters, purge, inspection, work hints): what
// a new provider that ships its core first offers. Exercise runs its core
// cases and skips the rest, saying so; an engine runs workflows on it.
func CoreOnly(store provider.Store) provider.Store {
	switch s := store.(type) {
	case provider.LeaseStore:
		if s.Mode() == provider.ModePeekLock {
			return struct{ provider.LeaseStore }{s}
		}
	}
	if s, ok := store.(provider.TxStore); ok {
		return struct{ provider.TxStore }{s}
	}
	return struct{ provider.Store }{store}
}
