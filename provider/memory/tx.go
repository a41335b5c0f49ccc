package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// tx stages the writes of one transactional round; commit applies them
// together under the store's lock.
type tx struct {
	s       *Store
	locked  []*instance
	appends map[*instance][]history.Event
	projs   []*provider.Projections
	msgs    []provider.EnqueueMessagesParams
	tasks   []provider.EnqueueActivitiesParams
	cancels []provider.CancelActivitiesParams
	resets  []provider.ResetProjectionsParams
	letters map[*instance][]provider.DeadLetter
	acks    map[*instance][]string
	// abandons are failed deliveries recorded inside the round.
	abandons map[*instance]provider.AbandonMessagesParams
	// mark is where the staged lists stood when the last instance was
	// dequeued: AbandonMessages cuts them back to it.
	mark   txMark
	closed bool
	// parks and wakes are staged ParkInstance and WakeInstances; slotLocks
	// the slot sets the round locked, slotSaves their states before its
	// changes, latest last.
	parks     []string
	wakes     []string
	slotLocks []*slotSet
	slotSaves []slotSave
	// completions are the activity completions of the round, applied
	// first at commit; their results are seen by a dequeue of their
	// instance.
	completions []provider.CompleteActivityParams
	// claimed are tasks enqueued claimed (EnqueueClaimedActivity).
	claimed []provider.EnqueueClaimedActivityParams
}

// txMark records the lengths of a tx's staged lists.
type txMark struct{ projs, msgs, tasks, cancels, resets, parks, wakes, slotSaves, claimed int }

var errTxClosed = errors.New("memory: transaction already ended")

// CompletesInRound implements provider.ActivityTxStore: a transactional
// store's rounds complete activity tasks.
func (s *Store) CompletesInRound() bool { return s.mode == provider.ModeTransactional }

// RunRound implements provider.TxStore.
func (s *Store) RunRound(ctx context.Context, fn func(ctx context.Context, tx provider.Tx) error) (err error) {
	if s.mode != provider.ModeTransactional {
		return fmt.Errorf("memory: RunRound on a %s store", s.mode)
	}
	t := &tx{s: s, appends: map[*instance][]history.Event{}, letters: map[*instance][]provider.DeadLetter{}, acks: map[*instance][]string{}}
	defer func() {
		if p := recover(); p != nil {
			t.rollback()
			panic(p)
		}
	}()
	if err := fn(ctx, t); err != nil {
		t.rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		t.rollback()
		return err
	}
	f := s.faultFor(OpCommit)
	if f != nil && !f.AfterEffect {
		t.rollback()
		return f.Err
	}
	if err := t.commit(); err != nil {
		return err
	}
	if f != nil {
		return f.Err
	}
	return nil
}

func (t *tx) step(ctx context.Context, op Op, fn func() error) error {
	if t.closed {
		return errTxClosed
	}
	return t.s.do(ctx, op, fn)
}

func (t *tx) rollback() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.restoreSlots(0)
	t.unlock()
}

// unlock releases the instances; callers hold s.mu.
func (t *tx) unlock() {
	t.closed = true
	for _, in := range t.locked {
		in.lockedBy = nil
		t.s.reindex(in)
	}
	if len(t.locked) > 0 {
		t.s.notify(provider.QueueOrchestration)
	}
	t.locked = nil
	t.unlockSlots()
}

func (t *tx) commit() error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	defer t.unlock()
	// A claim may have been taken over since CompleteActivity.
	for i := range t.completions {
		if _, err := s.claimed(t.completions[i].TaskID, t.completions[i].Token); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	for in, events := range t.appends {
		skip, err := appendCheck(in, nil, events)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if skip {
			delete(t.appends, in)
		}
	}
	// Another round may have taken a task id since SaveProjections.
	for _, p := range t.projs {
		if err := s.takenTaskID(p); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	for i := range t.completions {
		c := &t.completions[i]
		s.enqueueMessages([]provider.Message{c.Result}, c.Now)
		if tk, err := s.claimed(c.TaskID, c.Token); err == nil {
			s.removeTask(tk)
		}
	}
	for in, events := range t.appends {
		in.append(events)
	}
	for _, r := range t.resets {
		s.resetProjections(r.InstanceID, r.Custom, false)
	}
	for _, p := range t.projs {
		s.saveProjections(p)
	}
	for _, p := range t.msgs {
		s.enqueueMessages(p.Messages, p.Now)
	}
	for _, p := range t.tasks {
		s.enqueueActivities(p.Tasks, p.Now)
	}
	for i := range t.claimed {
		s.enqueueClaimed(&t.claimed[i])
	}
	for i := range t.cancels {
		s.cancelActivities(&t.cancels[i])
	}
	for in, letters := range t.letters {
		s.deadLetter(in, letters)
	}
	for in, ids := range t.acks {
		s.removeMessages(in, ids)
	}
	for in, p := range t.abandons {
		s.abandon(in, p.MessageIDs, p.VisibleAt, p.Error)
	}
	for _, id := range t.parks {
		s.park(id)
	}
	s.wake(t.wakes)
	return nil
}

func (t *tx) holds(id string) (*instance, error) {
	for _, in := range t.locked {
		if in.id == id {
			return in, nil
		}
	}
	return nil, fmt.Errorf("memory: instance %s is not locked by this round", id)
}

// DequeueInstance implements provider.Tx.
func (t *tx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	var b *provider.Batch
	err := t.step(ctx, OpDequeueInstance, func() error {
		s := t.s
		s.mu.Lock()
		defer s.mu.Unlock()
		var in *instance
		if p.InstanceID != "" {
			in = s.instances[p.InstanceID]
			if in == nil || in.lockedBy != nil || in.holdUntil.After(p.Now) || len(visible(in, p.Now, 1))+len(t.completed(in, p.Now, 1)) == 0 {
				return nil
			}
			if n := t.completedTasks(in.id); n > 0 && s.openTasks[in.id] > n {
				return nil // other activities of the instance are open
			}
		} else {
			if in = s.next(p.Now); in == nil {
				return nil
			}
		}
		in.lockedBy = t
		s.reindex(in)
		t.locked = append(t.locked, in)
		t.mark = txMark{len(t.projs), len(t.msgs), len(t.tasks), len(t.cancels), len(t.resets), len(t.parks), len(t.wakes), len(t.slotSaves), len(t.claimed)}
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		msgs := visible(in, p.Now, limit)
		if p.InstanceID != "" {
			msgs = append(msgs, t.completed(in, p.Now, limit-len(msgs))...)
		}
		b = &provider.Batch{InstanceID: in.id, Messages: msgs, Head: &provider.Head{}}
		if n := len(in.events); n > 0 {
			b.Head.Seq, b.Head.Hash = in.events[n-1].Seq, in.events[n-1].Hash
		}
		return nil
	})
	return b, err
}

// GetSnapshot implements provider.Steps inside a transaction. Rounds read the
// snapshot before they stage one, so the committed snapshot is the one
// they see.
func (t *tx) GetSnapshot(ctx context.Context, id string) ([]byte, int64, error) {
	if t.closed {
		return nil, 0, errTxClosed
	}
	return t.s.GetSnapshot(ctx, id)
}

// LoadHistory implements provider.Steps inside a transaction: committed events
// followed by the round's staged ones.
func (t *tx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var out []history.Event
	err := t.step(ctx, OpLoadHistory, func() error {
		s := t.s
		s.mu.Lock()
		defer s.mu.Unlock()
		out = s.loadHistory(p.InstanceID, p.FromSeq)
		in := s.instances[p.InstanceID]
		if in == nil {
			return nil
		}
		for _, e := range t.appends[in] {
			if e.Seq >= p.FromSeq {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// AppendHistory implements provider.Steps.
func (t *tx) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	return t.step(ctx, OpAppendHistory, func() error {
		s := t.s
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instance(p.InstanceID)
		skip, err := appendCheck(in, t.appends[in], p.Events)
		if err != nil || skip {
			return err
		}
		t.appends[in] = append(t.appends[in], cloneEvents(p.Events)...)
		return nil
	})
}

// SaveProjections implements provider.Steps.
func (t *tx) SaveProjections(ctx context.Context, p *provider.Projections) error {
	return t.step(ctx, OpSaveProjections, func() error {
		t.s.mu.Lock()
		err := t.s.takenTaskID(p)
		t.s.mu.Unlock()
		if err != nil {
			return err
		}
		pc := *p
		t.projs = append(t.projs, &pc)
		return nil
	})
}

// EnqueueMessages implements provider.Steps.
func (t *tx) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return t.step(ctx, OpEnqueueMessages, func() error {
		t.msgs = append(t.msgs, provider.EnqueueMessagesParams{Messages: append([]provider.Message(nil), p.Messages...), Now: p.Now})
		return nil
	})
}

// EnqueueActivities implements provider.Steps.
func (t *tx) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	return t.step(ctx, OpEnqueueActivities, func() error {
		t.tasks = append(t.tasks, provider.EnqueueActivitiesParams{Tasks: append([]provider.ActivityTask(nil), p.Tasks...), Now: p.Now})
		return nil
	})
}

// CancelActivities implements provider.Steps.
func (t *tx) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	return t.step(ctx, OpCancelActivities, func() error {
		t.cancels = append(t.cancels, *p)
		return nil
	})
}

// ResetProjections implements provider.Steps; the reset applies before the
// round's own projection writes.
func (t *tx) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	return t.step(ctx, OpResetProjections, func() error {
		t.resets = append(t.resets, *p)
		return nil
	})
}

// DeadLetterMessages implements provider.Tx.
func (t *tx) DeadLetterMessages(ctx context.Context, p *provider.DeadLetterMessagesParams) error {
	return t.step(ctx, OpDeadLetterMessages, func() error {
		in, err := t.holds(p.InstanceID)
		if err != nil {
			return err
		}
		t.letters[in] = append(t.letters[in], p.Letters...)
		return nil
	})
}

// AckMessages implements provider.Tx.
func (t *tx) AckMessages(ctx context.Context, p *provider.AckMessagesParams) error {
	return t.step(ctx, OpAckMessages, func() error {
		in, err := t.holds(p.InstanceID)
		if err != nil {
			return err
		}
		t.acks[in] = append(t.acks[in], p.MessageIDs...)
		return nil
	})
}

// AbandonMessages implements provider.Tx: it drops the writes staged since
// the instance, the last one dequeued, was dequeued, and stages the
// abandon, which the commit applies before it unlocks the instance.
func (t *tx) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return t.step(ctx, OpAbandonMessages, func() error {
		in, err := t.holds(p.InstanceID)
		if err != nil {
			return err
		}
		if t.locked[len(t.locked)-1] != in {
			return fmt.Errorf("memory: abandon of %s, which is not the instance dequeued last", p.InstanceID)
		}
		delete(t.appends, in)
		delete(t.letters, in)
		delete(t.acks, in)
		m := t.mark
		t.projs, t.msgs, t.tasks, t.cancels, t.resets = t.projs[:m.projs], t.msgs[:m.msgs], t.tasks[:m.tasks], t.cancels[:m.cancels], t.resets[:m.resets]
		t.parks, t.wakes, t.claimed = t.parks[:m.parks], t.wakes[:m.wakes], t.claimed[:m.claimed]
		t.s.mu.Lock()
		t.restoreSlots(m.slotSaves)
		t.s.mu.Unlock()
		if t.abandons == nil {
			t.abandons = map[*instance]provider.AbandonMessagesParams{}
		}
		t.abandons[in] = provider.AbandonMessagesParams{
			InstanceID: p.InstanceID, MessageIDs: append([]string(nil), p.MessageIDs...), VisibleAt: p.VisibleAt, Error: p.Error,
		}
		return nil
	})
}

// CompleteActivity implements provider.ActivityTx: the claim is checked
// now and again at commit, which removes the task and enqueues its result
// before the round's other writes.
func (t *tx) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	return t.step(ctx, OpCompleteActivity, func() error {
		t.s.mu.Lock()
		_, err := t.s.claimed(p.TaskID, p.Token)
		t.s.mu.Unlock()
		if err != nil {
			return err
		}
		c := *p
		c.Result.SetDefaults(p.Now)
		t.completions = append(t.completions, c)
		return nil
	})
}

// completedTasks counts the tasks of instance id the round completed.
func (t *tx) completedTasks(id string) int {
	n := 0
	for i := range t.completions {
		if t.completions[i].Result.InstanceID == id {
			n++
		}
	}
	return n
}

// completed returns the results of the round's completions for in that
// are visible at now and not queued already, at most limit (none when
// limit is below 1); callers hold s.mu.
func (t *tx) completed(in *instance, now time.Time, limit int) []provider.Message {
	var out []provider.Message
	for i := range t.completions {
		m := &t.completions[i].Result
		if len(out) >= limit {
			break
		}
		if _, queued := t.s.messages[m.ID]; m.InstanceID != in.id || queued || m.VisibleAt.After(now) {
			continue
		}
		out = append(out, *m)
	}
	return out
}

// EnqueueClaimedActivity implements provider.ClaimingTx: the task is
// enqueued and claimed at commit, after the round's other enqueues.
func (t *tx) EnqueueClaimedActivity(ctx context.Context, p *provider.EnqueueClaimedActivityParams) error {
	return t.step(ctx, OpEnqueueActivities, func() error {
		t.claimed = append(t.claimed, *p)
		return nil
	})
}

// enqueueClaimed enqueues a task claimed, unless its id is known;
// callers hold s.mu.
func (s *Store) enqueueClaimed(p *provider.EnqueueClaimedActivityParams) {
	if s.taskIDs[p.Task.ID] {
		return
	}
	task := p.Task
	task.SetDefaults(p.Now)
	s.taskIDs[task.ID] = true
	s.taskInstance[task.ID] = task.InstanceID
	s.insertTask(task)
	tk := s.tasks[task.ID]
	tk.token, tk.owner, tk.until = p.Token, p.Owner, p.LockedUntil
	s.taskHeap(task.Queue).fix(tk)
}
