package memory

import (
	"context"
	"errors"

	"github.com/chronicleflow/chronicle/provider"
)

// errSearchTodo marks the search methods whose bodies are being written.
var errSearchTodo = errors.New("memory: search not implemented yet")

// CountInstances implements provider.QueryStore.
func (s *Store) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	return nil, errSearchTodo
}

// ListCustomProjections implements provider.QueryStore.
func (s *Store) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	return nil, errSearchTodo
}
