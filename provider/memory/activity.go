package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// ClaimActivity implements provider.Store.
func (s *Store) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	var l *provider.ActivityLease
	err := s.do(ctx, OpClaimActivity, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		var best *task
		for _, q := range queuesOf(p.Queues) {
			h := s.taskHeaps[q]
			if h == nil {
				continue
			}
			i := firstInHeap(len(*h), h.Less, func(i int) bool { return s.claimable((*h)[i], p) })
			if i < 0 {
				continue
			}
			t := (*h)[i]
			if best == nil || t.orderAt().Before(best.orderAt()) || (t.orderAt().Equal(best.orderAt()) && t.seq < best.seq) {
				best = t
			}
		}
		if best == nil {
			return nil
		}
		for i := range p.Rates {
			if r := &p.Rates[i]; r.Matches(&best.t) {
				s.takeToken(r, p.Now)
			}
		}
		var expired *provider.ExpiredClaim
		if best.token != "" {
			expired = &provider.ExpiredClaim{Owner: best.owner, LockedUntil: best.until}
		}
		best.token, best.owner, best.until = s.token(), p.Owner, p.LockedUntil
		s.taskHeap(best.t.Queue).fix(best)
		l = &provider.ActivityLease{Task: best.t, Token: best.token, Owner: p.Owner, LockedUntil: p.LockedUntil, Expired: expired}
		return nil
	})
	return l, err
}

// claimed returns a task whose token matches; callers hold s.mu.
func (s *Store) claimed(id, token string) (*task, error) {
	t, ok := s.tasks[id]
	if !ok || t.token == "" || t.token != token {
		return nil, fmt.Errorf("activity task %s: %w", id, provider.ErrLeaseLost)
	}
	return t, nil
}

// HeartbeatActivity implements provider.Store.
func (s *Store) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
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

// CompleteActivity implements provider.Store.
func (s *Store) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	return s.step(ctx, OpCompleteActivity, func(w *writes) error {
		if err := w.read(func() error {
			_, err := s.claimed(p.TaskID, p.Token)
			return err
		}); err != nil {
			return err
		}
		// The result first, then the task: a crash between them leaves
		// the task claimed until its claim runs out, and its next attempt
		// enqueues a result of the same id (provider.ActivityResultID).
		if err := w.write(func() error {
			s.enqueueMessages([]provider.Message{p.Result}, p.Now)
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

// RetryActivity implements provider.Store.
func (s *Store) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
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
		s.notify(provider.QueueActivity)
		return nil
	})
}

// DeadLetterActivity implements provider.Store.
func (s *Store) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
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
		return s.deadLetterWrites(w, in, []provider.DeadLetter{l}, func() error {
			t, err := s.claimed(p.TaskID, p.Token)
			if err != nil {
				return err
			}
			s.removeTask(t)
			return nil
		})
	})
}

// claimable reports whether a claim with p may take t now: it is visible
// or its claim ran out, its concurrency key has a free slot and each rate
// limit matching it a token; callers hold s.mu.
func (s *Store) claimable(t *task, p *provider.ClaimActivityParams) bool {
	if t.claimableAt().After(p.Now) {
		return false
	}
	if k := t.t.ConcurrencyKey; k != "" && s.liveClaims(k, p.Now) >= t.t.ConcurrencyLimit {
		return false
	}
	for i := range p.Rates {
		if r := &p.Rates[i]; r.Matches(&t.t) && !s.hasToken(r, p.Now) {
			return false
		}
	}
	return true
}

// liveClaims counts the claims of tasks with key that run past now;
// callers hold s.mu.
func (s *Store) liveClaims(key string, now time.Time) int {
	n := 0
	for t := range s.keyed[key] {
		if t.token != "" && t.until.After(now) {
			n++
		}
	}
	return n
}

// rateWindow counts the claims of a rate limit's key in one window.
type rateWindow struct {
	start time.Time
	used  int
}

// hasToken reports whether r has a token left in the window of now;
// callers hold s.mu.
func (s *Store) hasToken(r *provider.RateLimit, now time.Time) bool {
	w := s.rates[r.Key]
	return w == nil || !w.start.Equal(r.Window(now)) || w.used < r.Tokens
}

// takeToken spends a token of r in the window of now; callers hold s.mu.
func (s *Store) takeToken(r *provider.RateLimit, now time.Time) {
	start := r.Window(now)
	w := s.rates[r.Key]
	if w == nil || !w.start.Equal(start) {
		w = &rateWindow{start: start}
		s.rates[r.Key] = w
	}
	w.used++
}

// CountClaims implements provider.FlowStore.
func (s *Store) CountClaims(ctx context.Context, key string, now time.Time) (int, error) {
	var n int
	err := s.do(ctx, OpCountClaims, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		n = s.liveClaims(key, now)
		return nil
	})
	return n, err
}
