package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.HoldStore = (*Store)(nil)

// PlaceHold implements provider.HoldStore. The store's lock makes it
// atomic with a purge.
func (s *Store) PlaceHold(ctx context.Context, h *provider.Hold) (*provider.Hold, bool, error) {
	var (
		cur    *provider.Hold
		placed bool
	)
	err := s.do(ctx, OpPlaceHold, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[h.InstanceID]
		if in == nil || in.record == nil || in.purging != nil {
			return fmt.Errorf("hold %s: %w", h.InstanceID, provider.ErrNotFound)
		}
		if in.legalHold == nil {
			c := *h
			c.PlacedAt = c.PlacedAt.UTC()
			in.legalHold, placed = &c, true
		}
		c := *in.legalHold
		cur = &c
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return cur, placed, nil
}

// ReleaseHold implements provider.HoldStore.
func (s *Store) ReleaseHold(ctx context.Context, instanceID, holdID string) error {
	return s.do(ctx, OpReleaseHold, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[instanceID]
		if in == nil || in.legalHold == nil || in.legalHold.HoldID != holdID {
			return fmt.Errorf("release hold %s of %s: %w", holdID, instanceID, provider.ErrNotFound)
		}
		in.legalHold = nil
		return nil
	})
}

// GetHold implements provider.HoldStore.
func (s *Store) GetHold(ctx context.Context, instanceID string) (*provider.Hold, error) {
	var out *provider.Hold
	err := s.do(ctx, OpGetHold, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[instanceID]
		if in == nil || in.legalHold == nil {
			return fmt.Errorf("hold of %s: %w", instanceID, provider.ErrNotFound)
		}
		c := *in.legalHold
		out = &c
		return nil
	})
	return out, err
}

// ListHolds implements provider.HoldStore.
func (s *Store) ListHolds(ctx context.Context, afterID string, limit int) ([]provider.Hold, error) {
	var out []provider.Hold
	err := s.do(ctx, OpListHolds, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, in := range s.instances {
			if in.legalHold != nil && in.id > afterID {
				out = append(out, *in.legalHold)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b provider.Hold) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}
