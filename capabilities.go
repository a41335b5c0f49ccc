package chronicle

import (
	"context"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
)

// ErrUnsupported is matched by the error of a call that needs a capability
// the engine's store does not have (see [UnsupportedError]).
var ErrUnsupported = errors.New("chronicle: not supported by the store")

// UnsupportedError names the optional store capability a call needs and the
// engine's store lacks: [provider.QueryStore] (instance lists, human tasks,
// custom projections), [provider.DeadLetterStore] (listing and resolving dead
// letters), [provider.PurgeStore] (purge and tombstones) or
// [provider.FlowStore] (concurrency slots). Workflows and
// activities run on the core [provider.Store] alone.
type UnsupportedError struct {
	// Capability is the interface the store does not implement.
	Capability string
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("chronicle: the store does not implement %s", e.Capability)
}

// Is matches [ErrUnsupported].
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func (e *Engine) queryStore() (provider.QueryStore, error) {
	return capability[provider.QueryStore](e.store, "provider.QueryStore")
}

func (e *Engine) deadLetterStore() (provider.DeadLetterStore, error) {
	return capability[provider.DeadLetterStore](e.store, "provider.DeadLetterStore")
}

func (e *Engine) purgeStore() (provider.PurgeStore, error) {
	return capability[provider.PurgeStore](e.store, "provider.PurgeStore")
}

// capability returns store as C, or an *UnsupportedError naming it.
func capability[C any](store provider.Store, name string) (C, error) {
	s, ok := store.(C)
	if !ok {
		return s, &UnsupportedError{Capability: name}
	}
	return s, nil
}

// Forwarders to the optional capabilities, with the store methods' signatures.

func (e *Engine) listInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	return s.ListInstances(ctx, p)
}

func (e *Engine) getTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	return s.GetTask(ctx, taskID)
}

func (e *Engine) listTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	return s.ListTasks(ctx, p)
}

func (e *Engine) listTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	return s.ListTaskEvents(ctx, p)
}

func (e *Engine) getCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	s, err := e.queryStore()
	if err != nil {
		return nil, err
	}
	return s.GetCustomProjection(ctx, name, instanceID)
}

func (e *Engine) listDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	s, err := e.deadLetterStore()
	if err != nil {
		return nil, err
	}
	return s.ListDeadLetters(ctx, p)
}

func (e *Engine) getDeadLetter(ctx context.Context, id string) (*provider.DeadLetter, error) {
	s, err := e.deadLetterStore()
	if err != nil {
		return nil, err
	}
	return s.GetDeadLetter(ctx, id)
}

func (e *Engine) purgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	s, err := e.purgeStore()
	if err != nil {
		return nil, err
	}
	return s.PurgeInstance(ctx, p)
}

func (e *Engine) getTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	s, err := e.purgeStore()
	if err != nil {
		return nil, err
	}
	return s.GetTombstone(ctx, instanceID)
}

func (e *Engine) listTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	s, err := e.purgeStore()
	if err != nil {
		return nil, err
	}
	return s.ListTombstones(ctx, instanceID)
}

func (e *Engine) resolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	s, err := e.deadLetterStore()
	if err != nil {
		return err
	}
	return s.ResolveDeadLetter(ctx, p)
}
