package memory

import (
	"context"
	"sort"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// QueuedMessages returns every queued orchestration message, in enqueue
// order. It is meant for tests and tools that inspect the store.
func (s *Store) QueuedMessages() []provider.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := make([]*message, 0, len(s.messages))
	for _, m := range s.messages {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	out := make([]provider.Message, len(ms))
	for i, m := range ms {
		out[i] = m.m
	}
	return out
}

// QueuedActivities returns every queued or claimed activity task, in enqueue
// order.
func (s *Store) QueuedActivities() []provider.QueuedActivity {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]*task, 0, len(s.tasks))
	for _, t := range s.tasks {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].seq < ts[j].seq })
	out := make([]provider.QueuedActivity, len(ts))
	for i, t := range ts {
		out[i] = provider.QueuedActivity{Task: t.t, Owner: t.owner, LockedUntil: t.until}
		if t.token == "" {
			out[i].LockedUntil = time.Time{}
		}
	}
	return out
}

// ListQueuedActivities implements provider.Store.
func (s *Store) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	var out []provider.QueuedActivity
	err := s.do(ctx, OpListQueuedActivities, func() error {
		for _, q := range s.QueuedActivities() {
			if q.Task.InstanceID == p.InstanceID {
				out = append(out, q)
			}
		}
		return nil
	})
	return out, err
}

// InstanceIDs returns the ids of every instance with history, sorted.
func (s *Store) InstanceIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, in := range s.instances {
		if len(in.events) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// TamperEvent changes a stored event in place, bypassing every check, so
// that tests and demonstrations can show that the hash chain detects it.
// It reports whether the event exists.
func (s *Store) TamperEvent(instanceID string, seq int64, mutate func(e *history.Event)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil || seq < 1 || seq > int64(len(in.events)) {
		return false
	}
	e := &in.events[seq-1]
	e.Payload = append([]byte(nil), e.Payload...)
	mutate(e)
	return true
}
