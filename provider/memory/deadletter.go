package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/chronicleflow/chronicle/provider"
)

func cloneLetter(l *provider.DeadLetter) provider.DeadLetter {
	c := *l
	if l.Message != nil {
		m := *l.Message
		c.Message = &m
	}
	if l.Activity != nil {
		t := *l.Activity
		c.Activity = &t
	}
	return c
}

// ListDeadLetters implements provider.Store.
func (s *Store) ListDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	var out []provider.DeadLetter
	err := s.do(ctx, OpListDeadLetters, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		ids := make([]string, 0, len(s.letters))
		for id := range s.letters {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		for _, id := range ids {
			l := s.letters[id]
			if id <= p.AfterID || (p.InstanceID != "" && l.InstanceID != p.InstanceID) || (p.Status != "" && l.Status != p.Status) {
				continue
			}
			out = append(out, cloneLetter(l))
			if len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// GetDeadLetter implements provider.Store.
func (s *Store) GetDeadLetter(ctx context.Context, id string) (*provider.DeadLetter, error) {
	var out *provider.DeadLetter
	err := s.do(ctx, OpGetDeadLetter, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		l, ok := s.letters[id]
		if !ok {
			return fmt.Errorf("dead letter %s: %w", id, provider.ErrNotFound)
		}
		c := cloneLetter(l)
		out = &c
		return nil
	})
	return out, err
}

// ResolveDeadLetter implements provider.Store.
func (s *Store) ResolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	return s.step(ctx, OpResolveDeadLetter, func(w *writes) error {
		var l provider.DeadLetter
		if err := w.read(func() error {
			stored, ok := s.letters[p.ID]
			if !ok {
				return fmt.Errorf("dead letter %s: %w", p.ID, provider.ErrNotFound)
			}
			if stored.Status != provider.DeadLetterDead {
				return fmt.Errorf("dead letter %s is %s: %w", p.ID, stored.Status, provider.ErrInvalidState)
			}
			if m := stored.Message; m != nil && p.Status == provider.DeadLetterRedriven {
				if q, ok := s.messages[m.ID]; ok && q.m.EnqueuedAt.Equal(m.EnqueuedAt) {
					return fmt.Errorf("dead letter %s: %w: %w", p.ID, provider.ErrInvalidState, provider.ErrDeadLetteringUnfinished)
				}
			}
			l = cloneLetter(stored)
			return nil
		}); err != nil {
			return err
		}
		// What the resolution queues comes first, the incident next and
		// the letter's status last: a crash before the status leaves the
		// letter unresolved, and resolving it again queues the same
		// message ids (idempotent) or the same task again.
		var queue []func() error
		switch p.Status {
		case provider.DeadLetterRedriven:
			if l.Message != nil {
				m := *l.Message
				m.Attempts, m.LastError, m.VisibleAt, m.EnqueuedAt = 0, "", p.Now, p.Now
				queue = append(queue, func() error {
					s.enqueueMessages([]provider.Message{m}, p.Now)
					return nil
				})
			}
			if l.Activity != nil {
				t := *l.Activity
				t.VisibleAt, t.EnqueuedAt, t.LastError = p.Now, p.Now, ""
				queue = append(queue, func() error {
					if old, ok := s.tasks[t.ID]; ok {
						s.removeTask(old)
					}
					s.taskIDs[t.ID] = true
					s.insertTask(t)
					s.notify(provider.QueueActivity)
					return nil
				})
			}
		case provider.DeadLetterDiscarded:
			if l.Activity != nil {
				m, err := provider.DiscardedActivityResult(&l, p.By)
				if err != nil {
					return err
				}
				queue = append(queue, func() error {
					s.enqueueMessages([]provider.Message{m}, p.Now)
					return nil
				})
			}
			if m, ok, err := provider.DiscardedSubWorkflowResult(&l, p.By); err != nil {
				return err
			} else if ok {
				queue = append(queue, func() error {
					s.enqueueMessages([]provider.Message{m}, p.Now)
					return nil
				})
			}
		default:
			return fmt.Errorf("dead letter %s: %w: cannot resolve to %q", p.ID, provider.ErrInvalidState, p.Status)
		}
		for _, fn := range queue {
			if err := w.write(fn); err != nil {
				return err
			}
		}
		if err := w.write(func() error {
			in := s.instances[l.InstanceID]
			if in == nil {
				return nil
			}
			// The incident is the newest dead letter still unresolved
			// but this one.
			var newest *provider.DeadLetter
			for _, other := range s.letters {
				if other.ID != l.ID && other.InstanceID == l.InstanceID && other.Status == provider.DeadLetterDead &&
					(newest == nil || other.At.After(newest.At) || (other.At.Equal(newest.At) && other.ID > newest.ID)) {
					newest = other
				}
			}
			in.incident = ""
			if newest != nil {
				in.incident = string(newest.Reason) + ": " + newest.Error
			}
			return nil
		}); err != nil {
			return err
		}
		return w.write(func() error {
			stored, ok := s.letters[p.ID]
			if !ok {
				return fmt.Errorf("dead letter %s: %w", p.ID, provider.ErrNotFound)
			}
			if stored.Status != provider.DeadLetterDead {
				return fmt.Errorf("dead letter %s is %s: %w", p.ID, stored.Status, provider.ErrInvalidState)
			}
			stored.Status, stored.ResolvedBy, stored.ResolvedAt = p.Status, p.By, p.Now
			return nil
		})
	})
}
