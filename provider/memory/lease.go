package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/chronicleflow/chronicle/provider"
)

// AppendHistory implements provider.Steps in peek-lock mode.
func (s *Store) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	return s.do(ctx, OpAppendHistory, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		// The fence and the append are one record write: the append
		// record of a document store carries the lease it was made under
		// (see the mongo provider), so a zombie's never lands in another
		// run of the instance.
		if err := s.fence(p.Lease); err != nil {
			return fmt.Errorf("append to %s: %w", p.InstanceID, err)
		}
		in := s.instance(p.InstanceID)
		skip, err := appendCheck(in, nil, p.Events)
		if err != nil || skip {
			return err
		}
		in.append(cloneEvents(p.Events))
		return nil
	})
}

// SaveProjections implements provider.Steps in peek-lock mode.
func (s *Store) SaveProjections(ctx context.Context, p *provider.Projections) error {
	return s.step(ctx, OpSaveProjections, func(w *writes) error {
		if err := w.read(func() error {
			if err := s.fence(p.Lease); err != nil {
				return fmt.Errorf("projections of %s: %w", p.InstanceID, err)
			}
			return s.takenTaskID(p)
		}); err != nil {
			return err
		}
		return s.saveProjectionWrites(w, p)
	})
}

// EnqueueActivities implements provider.Steps in peek-lock mode.
func (s *Store) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	return s.step(ctx, OpEnqueueActivities, func(w *writes) error {
		if err := w.read(func() error { return s.fence(p.Lease) }); err != nil {
			return err
		}
		// One write per task, idempotent by its id: the task's record,
		// which stays known once the task is done.
		for _, t := range p.Tasks {
			if err := w.write(func() error {
				s.enqueueActivities([]provider.ActivityTask{t}, p.Now)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// PinMessages implements provider.LeaseStore.
func (s *Store) PinMessages(ctx context.Context, p *provider.PinMessagesParams) error {
	return s.step(ctx, OpPinMessages, func(w *writes) error {
		var in *instance
		if err := w.read(func() (err error) {
			in, err = s.leased(p.Lease)
			return err
		}); err != nil {
			return err
		}
		ids := make([]string, 0, len(p.Pins))
		for id := range p.Pins {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		// One write per message, each setting a field only while unset.
		for _, id := range ids {
			if err := w.write(func() error {
				if m, ok := s.messages[id]; ok && m.inst == in && m.m.ExecutionID == "" {
					m.m.ExecutionID = p.Pins[id]
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// CancelActivities implements provider.Steps in peek-lock mode.
func (s *Store) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	return s.step(ctx, OpCancelActivities, func(w *writes) error {
		var ids []string
		if err := w.read(func() error {
			if err := s.fence(p.Lease); err != nil {
				return err
			}
			ids = s.cancelled(p)
			return nil
		}); err != nil {
			return err
		}
		// One removal per task; a task already gone is skipped.
		for _, id := range ids {
			if err := w.write(func() error {
				if t, ok := s.tasks[id]; ok {
					s.removeTask(t)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// LeaseInstance implements provider.LeaseStore.
func (s *Store) LeaseInstance(ctx context.Context, p *provider.LeaseParams) (*provider.Lease, error) {
	var l *provider.Lease
	err := s.do(ctx, OpLeaseInstance, func() error {
		if s.mode != provider.ModePeekLock {
			return fmt.Errorf("memory: LeaseInstance on a %s store", s.mode)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var in *instance
		if p.InstanceID != "" {
			in = s.instances[p.InstanceID]
			if in == nil || in.purging != nil || len(in.msgs) == 0 || in.readyAt().After(p.Now) || len(visible(in, p.Now, 1)) == 0 {
				return nil
			}
		} else {
			if in = s.next(p.Now); in == nil {
				return nil
			}
		}
		in.epoch++
		in.lease = &leaseState{token: s.token(), owner: p.Owner, until: p.LockedUntil}
		msgs := visible(in, p.Now, p.Limit)
		s.reindex(in)
		l = &provider.Lease{InstanceID: in.id, Messages: msgs, Token: in.lease.token, Epoch: in.epoch, Owner: p.Owner, LockedUntil: p.LockedUntil}
		return nil
	})
	return l, err
}

// leased returns the instance of a lease whose token still matches;
// callers hold s.mu.
func (s *Store) leased(l *provider.Lease) (*instance, error) {
	in := s.instances[l.InstanceID]
	if in == nil || in.lease == nil || in.lease.token != l.Token {
		return nil, fmt.Errorf("lease of %s: %w", l.InstanceID, provider.ErrLeaseLost)
	}
	return in, nil
}

// fence checks the lease a peek-lock step is fenced with, if any; callers
// hold s.mu.
func (s *Store) fence(l *provider.Lease) error {
	if l == nil {
		return nil
	}
	_, err := s.leased(l)
	return err
}

// RenewLease implements provider.LeaseStore.
func (s *Store) RenewLease(ctx context.Context, p *provider.RenewLeaseParams) error {
	return s.do(ctx, OpRenewLease, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in, err := s.leased(p.Lease)
		if err != nil {
			return err
		}
		in.lease.until = p.LockedUntil
		s.reindex(in)
		return nil
	})
}

// DeadLetterLeased implements provider.LeaseStore.
func (s *Store) DeadLetterLeased(ctx context.Context, p *provider.DeadLetterLeasedParams) error {
	return s.step(ctx, OpDeadLetterLeased, func(w *writes) error {
		var in *instance
		if err := w.read(func() (err error) {
			in, err = s.leased(p.Lease)
			return err
		}); err != nil {
			return err
		}
		return s.deadLetterWrites(w, in, p.Letters, nil)
	})
}

// AckLease implements provider.LeaseStore.
func (s *Store) AckLease(ctx context.Context, p *provider.AckLeaseParams) error {
	return s.step(ctx, OpAckLease, func(w *writes) error {
		var in *instance
		if err := w.read(func() (err error) {
			in, err = s.leased(p.Lease)
			return err
		}); err != nil {
			return err
		}
		// The messages go first, one by one, and the lease last: a crash
		// before its release leaves the instance leased until the lease
		// runs out, never its acked messages visible to another round.
		for _, id := range p.MessageIDs {
			if err := w.write(func() error {
				s.removeMessages(in, []string{id})
				return nil
			}); err != nil {
				return err
			}
		}
		return w.write(func() error {
			if _, err := s.leased(p.Lease); err != nil {
				return err
			}
			in.lease = nil
			s.reindex(in)
			s.notify(provider.QueueOrchestration)
			return nil
		})
	})
}

// AbandonLease implements provider.LeaseStore.
func (s *Store) AbandonLease(ctx context.Context, p *provider.AbandonLeaseParams) error {
	return s.step(ctx, OpAbandonLease, func(w *writes) error {
		var in *instance
		if err := w.read(func() (err error) {
			in, err = s.leased(p.Lease)
			return err
		}); err != nil {
			return err
		}
		ids := make([]string, len(p.Lease.Messages))
		for i, m := range p.Lease.Messages {
			ids[i] = m.ID
		}
		return s.abandonWrites(w, in, ids, p.VisibleAt, p.Error, p.Lease)
	})
}
