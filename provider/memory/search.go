package memory

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// copyRecord returns a copy of r that shares no map, slice or pointer with
// it: the store never keeps what a caller may change after a write, nor
// hands out what a caller could change in the store.
func copyRecord(r *provider.InstanceRecord) provider.InstanceRecord {
	c := *r
	c.BusinessParts = maps.Clone(r.BusinessParts)
	c.CustomStatus = bytes.Clone(r.CustomStatus)
	c.Output = bytes.Clone(r.Output)
	if r.Failure != nil {
		f := *r.Failure
		f.Details = bytes.Clone(r.Failure.Details)
		c.Failure = &f
	}
	c.Attributes = copyAttributes(r.Attributes)
	return c
}

// copyAttributes deep-copies a record's search attributes (nil stays nil).
func copyAttributes(m map[string]query.Value) map[string]query.Value {
	if m == nil {
		return nil
	}
	c := make(map[string]query.Value, len(m))
	for k, v := range m {
		v.List = slices.Clone(v.List)
		c[k] = v
	}
	return c
}

// CountInstances implements provider.QueryStore: the records matching
// Where, grouped by the value of By in ascending order, the group without
// a value first.
func (s *Store) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	if p.By != nil && p.By.Type == query.KeywordList {
		return nil, fmt.Errorf("memory: count grouped by %s: %w: a keyword list cannot group", p.By.Name, query.ErrInvalidQuery)
	}
	var out []provider.GroupCount
	err := s.do(ctx, OpCountInstances, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.By == nil {
			n := int64(0)
			for _, in := range s.instances {
				if in.record != nil && query.Match(p.Where, in.record) {
					n++
				}
			}
			out = []provider.GroupCount{{Count: n}}
			return nil
		}
		var values []query.Value
		for _, in := range s.instances {
			if in.record == nil || !query.Match(p.Where, in.record) {
				continue
			}
			v, ok := in.record.Field(*p.By)
			if !ok {
				v = query.Value{}
			}
			values = append(values, v)
		}
		// The zero Value's type sorts first.
		slices.SortFunc(values, query.Compare)
		for _, v := range values {
			if n := len(out); n > 0 && query.Compare(out[n-1].Value, v) == 0 {
				out[n-1].Count++
				continue
			}
			out = append(out, provider.GroupCount{Value: v, Count: 1})
		}
		return nil
	})
	return out, err
}

// ListCustomProjections implements provider.QueryStore: the records of
// projection p.Name whose instance record matches Where, by instance id.
func (s *Store) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	var out []provider.CustomRecord
	err := s.do(ctx, OpListCustomProjections, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		var ids []string
		for id, in := range s.instances {
			if _, ok := in.custom[p.Name]; ok && in.record != nil && id > p.AfterID {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		limit := limitOf(p.Limit)
		for _, id := range ids {
			in := s.instances[id]
			if !query.Match(p.Where, in.record) {
				continue
			}
			c := in.custom[p.Name]
			c.Data = bytes.Clone(c.Data)
			out = append(out, c)
			if len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}
