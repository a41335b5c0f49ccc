package memory

import (
	"context"
	"fmt"

	"github.com/chronicleflow/chronicle/round"
)

// ClaimActivity implements round.Store.
func (s *Store) ClaimActivity(ctx context.Context, p *round.ClaimActivityParams) (*round.ActivityLease, error) {
	var l *round.ActivityLease
	err := s.do(ctx, OpClaimActivity, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		var best *task
		for _, q := range queuesOf(p.Queues) {
			h := s.taskHeaps[q]
			if h == nil || len(*h) == 0 {
				continue
			}
			t := (*h)[0]
			if t.claimableAt().After(p.Now) {
				continue
			}
			if best == nil || t.claimableAt().Before(best.claimableAt()) || (t.claimableAt().Equal(best.claimableAt()) && t.seq < best.seq) {
				best = t
			}
		}
		if best == nil {
			return nil
		}
		var expired *round.ExpiredClaim
		if best.token != "" {
			expired = &round.ExpiredClaim{Owner: best.owner, LockedUntil: best.until}
		}
		best.token, best.owner, best.until = s.token(), p.Owner, p.LockedUntil
		s.taskHeap(best.t.Queue).fix(best)
		l = &round.ActivityLease{Task: best.t, Token: best.token, Owner: p.Owner, LockedUntil: p.LockedUntil, Expired: expired}
		return nil
	})
	return l, err
}

// claimed returns a task whose token matches; callers hold s.mu.
func (s *Store) claimed(id, token string) (*task, error) {
	t, ok := s.tasks[id]
	if !ok || t.token == "" || t.token != token {
		return nil, fmt.Errorf("activity task %s: %w", id, round.ErrLeaseLost)
	}
	return t, nil
}

// HeartbeatActivity implements round.Store.
func (s *Store) HeartbeatActivity(ctx context.Context, p *round.HeartbeatActivityParams) error {
	return s.do(ctx, OpHeartbeatActivity, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		t, err := s.claimed(p.TaskID, p.Token)
		if err != nil {
			return err
		}
		t.until = p.LockedUntil
		s.taskHeap(t.t.Queue).fix(t)
		return nil
	})
}

// CompleteActivity implements round.Store.
func (s *Store) CompleteActivity(ctx context.Context, p *round.CompleteActivityParams) error {
	return s.step(ctx, OpCompleteActivity, func(w *writes) error {
		if err := w.read(func() error {
			_, err := s.claimed(p.TaskID, p.Token)
			return err
		}); err != nil {
			return err
		}
		// The result first, then the task: a crash between them leaves
		// the task claimed until its claim runs out, and its next attempt
		// enqueues a result of the same id (round.ActivityResultID).
		if err := w.write(func() error {
			s.enqueueMessages([]round.Message{p.Result}, p.Now)
			return nil
		}); err != nil {
			return err
		}
		return w.write(func() error {
			t, err := s.claimed(p.TaskID, p.Token)
			if err != nil {
				return err
			}
			s.removeTask(t)
			return nil
		})
	})
}

// RetryActivity implements round.Store.
func (s *Store) RetryActivity(ctx context.Context, p *round.RetryActivityParams) error {
	return s.do(ctx, OpRetryActivity, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		t, err := s.claimed(p.TaskID, p.Token)
		if err != nil {
			return err
		}
		t.t.Attempt++
		t.t.VisibleAt, t.t.LastError = p.VisibleAt, p.Error
		t.token, t.owner, t.until = "", "", p.VisibleAt
		s.taskHeap(t.t.Queue).fix(t)
		s.notify(round.QueueActivity)
		return nil
	})
}

// DeadLetterActivity implements round.Store.
func (s *Store) DeadLetterActivity(ctx context.Context, p *round.DeadLetterActivityParams) error {
	return s.step(ctx, OpDeadLetterActivity, func(w *writes) error {
		var (
			in *instance
			l  = p.Letter
		)
		if err := w.read(func() error {
			t, err := s.claimed(p.TaskID, p.Token)
			if err != nil {
				return err
			}
			if l.Activity == nil {
				tc := t.t
				l.Activity = &tc
			}
			in = s.instance(t.t.InstanceID)
			return nil
		}); err != nil {
			return err
		}
		// The letter and the incident first, the task last: a crash
		// before its removal leaves it claimed until the claim runs out,
		// never lost.
		return s.deadLetterWrites(w, in, []round.DeadLetter{l}, func() error {
			t, err := s.claimed(p.TaskID, p.Token)
			if err != nil {
				return err
			}
			s.removeTask(t)
			return nil
		})
	})
}
