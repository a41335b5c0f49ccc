package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/chronicleflow/chronicle/round"
)

func cloneLetter(l *round.DeadLetter) round.DeadLetter {
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

// ListDeadLetters implements round.Store.
func (s *Store) ListDeadLetters(ctx context.Context, p *round.ListDeadLettersParams) ([]round.DeadLetter, error) {
	var out []round.DeadLetter
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

// GetDeadLetter implements round.Store.
func (s *Store) GetDeadLetter(ctx context.Context, id string) (*round.DeadLetter, error) {
	var out *round.DeadLetter
	err := s.do(ctx, OpGetDeadLetter, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		l, ok := s.letters[id]
		if !ok {
			return fmt.Errorf("dead letter %s: %w", id, round.ErrNotFound)
		}
		c := cloneLetter(l)
		out = &c
		return nil
	})
	return out, err
}

// ResolveDeadLetter implements round.Store.
func (s *Store) ResolveDeadLetter(ctx context.Context, p *round.ResolveDeadLetterParams) error {
	return s.do(ctx, OpResolveDeadLetter, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		l, ok := s.letters[p.ID]
		if !ok {
			return fmt.Errorf("dead letter %s: %w", p.ID, round.ErrNotFound)
		}
		if l.Status != round.DeadLetterDead {
			return fmt.Errorf("dead letter %s is %s: %w", p.ID, l.Status, round.ErrInvalidState)
		}
		switch p.Status {
		case round.DeadLetterRedriven:
			if l.Message != nil {
				m := *l.Message
				m.Attempts, m.LastError, m.VisibleAt, m.EnqueuedAt = 0, "", p.Now, p.Now
				s.enqueueMessages([]round.Message{m}, p.Now)
			}
			if l.Activity != nil {
				t := *l.Activity
				t.VisibleAt, t.EnqueuedAt, t.LastError = p.Now, p.Now, ""
				if old, ok := s.tasks[t.ID]; ok {
					s.removeTask(old)
				}
				s.taskIDs[t.ID] = true
				s.insertTask(t)
				s.notify(round.QueueActivity)
			}
		case round.DeadLetterDiscarded:
			if l.Activity != nil {
				m, err := round.DiscardedActivityResult(l, p.By)
				if err != nil {
					return err
				}
				s.enqueueMessages([]round.Message{m}, p.Now)
			}
			if m, ok, err := round.DiscardedSubWorkflowResult(l, p.By); err != nil {
				return err
			} else if ok {
				s.enqueueMessages([]round.Message{m}, p.Now)
			}
		default:
			return fmt.Errorf("dead letter %s: %w: cannot resolve to %q", p.ID, round.ErrInvalidState, p.Status)
		}
		l.Status, l.ResolvedBy, l.ResolvedAt = p.Status, p.By, p.Now
		if in := s.instances[l.InstanceID]; in != nil {
			// The incident is the newest dead letter still unresolved.
			var newest *round.DeadLetter
			for _, other := range s.letters {
				if other.InstanceID == l.InstanceID && other.Status == round.DeadLetterDead &&
					(newest == nil || other.At.After(newest.At) || (other.At.Equal(newest.At) && other.ID > newest.ID)) {
					newest = other
				}
			}
			in.incident = ""
			if newest != nil {
				in.incident = string(newest.Reason) + ": " + newest.Error
			}
		}
		return nil
	})
}
