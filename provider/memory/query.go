package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// cloneRecord returns a copy of in's record with its incident.
func cloneRecord(in *instance) provider.InstanceRecord {
	r := copyRecord(in.record)
	r.Incident = in.incident
	return r
}

// ListInstances implements provider.Store.
func (s *Store) ListInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	var out []provider.InstanceRecord
	err := s.do(ctx, OpListInstances, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		ids := make([]string, 0, len(s.instances))
		for id, in := range s.instances {
			if in.record != nil && id > p.AfterID {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		limit := limitOf(p.Limit)
		for _, id := range ids {
			r := s.instances[id].record
			switch {
			case p.Status != "" && r.Status != p.Status,
				p.Name != "" && r.Name != p.Name,
				p.BusinessKey != "" && r.BusinessKey != p.BusinessKey,
				!p.CreatedFrom.IsZero() && r.CreatedAt.Before(p.CreatedFrom),
				!p.CreatedTo.IsZero() && !r.CreatedAt.Before(p.CreatedTo),
				!p.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(p.UpdatedBefore),
				p.Terminal && !r.Status.Terminal(),
				!query.Match(p.Where, r):
				continue
			}
			out = append(out, cloneRecord(s.instances[id]))
			if len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

func limitOf(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

func cloneTask(t *provider.TaskRecord) provider.TaskRecord {
	c := *t
	c.Roles = slices.Clone(t.Roles)
	return c
}

// GetTask implements provider.Store.
func (s *Store) GetTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	var out *provider.TaskRecord
	err := s.do(ctx, OpGetTask, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[s.taskOwner[taskID]]
		if in == nil || in.taskRecs[taskID] == nil {
			return fmt.Errorf("task %s: %w", taskID, provider.ErrNotFound)
		}
		c := cloneTask(in.taskRecs[taskID])
		out = &c
		return nil
	})
	return out, err
}

// ListTasks implements provider.Store.
func (s *Store) ListTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	var out []provider.TaskRecord
	err := s.do(ctx, OpListTasks, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		ids := make([]string, 0, len(s.taskOwner))
		for id, owner := range s.taskOwner {
			if id > p.AfterID && (p.InstanceID == "" || owner == p.InstanceID) {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		limit := limitOf(p.Limit)
		for _, id := range ids {
			t := s.instances[s.taskOwner[id]].taskRecs[id]
			switch {
			case p.Status != "" && t.Status != p.Status,
				p.Assignee != "" && t.Assignee != p.Assignee,
				p.Unassigned && t.Assignee != "",
				len(p.Roles) > 0 && !slices.ContainsFunc(t.Roles, func(r string) bool { return slices.Contains(p.Roles, r) }):
				continue
			}
			out = append(out, cloneTask(t))
			if len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// ListTaskEvents implements provider.Store.
func (s *Store) ListTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	var out []provider.TaskEventRecord
	err := s.do(ctx, OpListTaskEvents, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[p.InstanceID]
		if in == nil {
			return nil
		}
		for _, e := range in.taskEvents {
			if p.TaskID == "" || e.TaskID == p.TaskID {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Seq != out[j].Seq {
				return out[i].Seq < out[j].Seq
			}
			return out[i].TaskID < out[j].TaskID
		})
		return nil
	})
	return out, err
}

// GetCustomProjection implements provider.Store.
func (s *Store) GetCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	var out *provider.CustomRecord
	err := s.do(ctx, OpGetCustomProjection, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.instances[instanceID]
		if in == nil {
			return fmt.Errorf("projection %s of %s: %w", name, instanceID, provider.ErrNotFound)
		}
		c, ok := in.custom[name]
		if !ok {
			return fmt.Errorf("projection %s of %s: %w", name, instanceID, provider.ErrNotFound)
		}
		c.Data = append([]byte(nil), c.Data...)
		out = &c
		return nil
	})
	return out, err
}

// resetProjections drops an instance's built-in projections and the
// custom ones named (all of them when all is set); callers hold s.mu.
func (s *Store) resetProjections(id string, custom []string, all bool) {
	in := s.instances[id]
	if in == nil {
		return
	}
	for taskID := range in.taskRecs {
		delete(s.taskOwner, taskID)
	}
	in.snapshot, in.snapshotSeq, in.record = nil, 0, nil
	in.taskRecs, in.taskEvents = nil, nil
	if all {
		in.custom = nil
	}
	for _, name := range custom {
		delete(in.custom, name)
	}
}

// ResetProjections implements provider.Steps in peek-lock mode.
func (s *Store) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	return s.step(ctx, OpResetProjections, func(w *writes) error {
		// The snapshot goes first: once it is gone a cold round projects
		// afresh, whatever else a crash left.
		if err := w.write(func() error {
			if in := s.instances[p.InstanceID]; in != nil {
				in.snapshot, in.snapshotSeq = nil, 0
			}
			return nil
		}); err != nil {
			return err
		}
		return w.write(func() error {
			s.resetProjections(p.InstanceID, p.Custom, false)
			return nil
		})
	})
}

// PurgeInstance implements provider.Store.
func (s *Store) PurgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	var ts *provider.Tombstone
	err := s.step(ctx, OpPurgeInstance, func(w *writes) error {
		var (
			in   *instance
			t    *provider.Tombstone
			exec string
		)
		if err := w.read(func() error {
			in = s.instances[p.InstanceID]
			if in != nil && in.purging != nil {
				// An earlier purge stopped half-way: finish it.
				c := *in.purging
				t, exec = &c, in.purgingExec
				return nil
			}
			if p.OnlyUnfinished || in == nil || (in.record == nil && len(in.events) == 0) {
				return fmt.Errorf("purge %s: %w", p.InstanceID, provider.ErrNotFound)
			}
			if in.record == nil || !in.record.Status.Terminal() || in.lockedBy != nil {
				return fmt.Errorf("purge %s: %w: the instance has not ended", p.InstanceID, provider.ErrInvalidState)
			}
			if h := in.legalHold; h != nil {
				return fmt.Errorf("purge %s: %w (hold %s placed by %s)", p.InstanceID, provider.ErrHeld, h.HoldID, h.Actor)
			}
			if err := unfinishedRound(in, p.Now); err != nil {
				return fmt.Errorf("purge %s: %w", p.InstanceID, err)
			}
			if id := nextRunStart(in.msgs, in.record.ExecutionID); id != "" {
				return fmt.Errorf("purge %s: %w: message %s starts its next run", p.InstanceID, provider.ErrInvalidState, id)
			}
			for _, m := range in.msgs {
				if m.m.Kind.IsRecord() {
					return fmt.Errorf("purge %s: %w: message %s records a legal hold", p.InstanceID, provider.ErrInvalidState, m.m.ID)
				}
			}
			exec = in.record.ExecutionID
			t = &provider.Tombstone{InstanceID: in.id, PurgedAt: p.Now, PurgedBy: p.By}
			if n := len(in.events); n > 0 {
				t.LastSeq, t.LastHash = in.events[n-1].Seq, bytes.Clone(in.events[n-1].Hash)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := s.purgeWrites(w, in, t, exec); err != nil {
			return err
		}
		ts = t
		return nil
	})
	return ts, err
}

// purgeWrites deletes a purged instance one record at a time. The
// instance's own record is marked first with the tombstone (a marked
// instance is never leased, and a purge that finds the mark finishes the
// work with the same tombstone), the tombstone is kept next (once, however
// often the purge resumes), then dead letters, activity tasks with their
// remembered ids, messages, projections and history go, and the instance
// record last. The start of a run after exec, the ended execution, is
// kept: it starts the id afresh. Callers hold no lock.
func (s *Store) purgeWrites(w *writes, in *instance, t *provider.Tombstone, exec string) error {
	one := func(fn func()) error {
		return w.write(func() error {
			fn()
			return nil
		})
	}
	if err := one(func() {
		c := *t
		in.purging, in.purgingExec = &c, exec
		s.reindex(in)
	}); err != nil {
		return err
	}
	if err := one(func() {
		all := s.tombstones[in.id]
		if n := len(all); n > 0 && all[n-1].PurgedAt.Equal(t.PurgedAt) && all[n-1].LastSeq == t.LastSeq &&
			bytes.Equal(all[n-1].LastHash, t.LastHash) && all[n-1].PurgedBy == t.PurgedBy {
			return
		}
		kept := *t
		kept.LastHash = bytes.Clone(t.LastHash)
		s.tombstones[in.id] = append(all, kept)
	}); err != nil {
		return err
	}
	var letters, tasks, msgs []string
	_ = w.read(func() error {
		for id, l := range s.letters {
			if l.InstanceID == in.id {
				letters = append(letters, id)
			}
		}
		for id, owner := range s.taskInstance {
			if owner == in.id {
				tasks = append(tasks, id)
			}
		}
		for _, m := range in.msgs {
			if !provider.StartsNextRun(&m.m, exec) {
				msgs = append(msgs, m.m.ID)
			}
		}
		return nil
	})
	sort.Strings(letters)
	sort.Strings(tasks)
	for _, id := range letters {
		if err := one(func() { delete(s.letters, id) }); err != nil {
			return err
		}
	}
	for _, id := range tasks {
		if err := one(func() {
			if tk, ok := s.tasks[id]; ok {
				s.removeTask(tk)
			}
			delete(s.taskIDs, id)
			delete(s.taskInstance, id)
		}); err != nil {
			return err
		}
	}
	for _, id := range msgs {
		if err := one(func() { s.removeMessages(in, []string{id}) }); err != nil {
			return err
		}
	}
	if err := one(func() {
		s.resetProjections(in.id, nil, true)
		in.incident = ""
	}); err != nil {
		return err
	}
	if err := one(func() {
		in.events, in.keys = nil, map[history.Key]bool{}
	}); err != nil {
		return err
	}
	return one(func() {
		if s.instances[in.id] == in {
			delete(s.instances, in.id)
		}
		s.unready(in)
		// Messages enqueued while the purge ran start the id afresh.
		if len(in.msgs) > 0 {
			fresh := s.instance(in.id)
			for _, m := range in.msgs {
				m.inst = fresh
				fresh.msgs = append(fresh.msgs, m)
			}
			in.msgs = nil
			s.reindex(fresh)
		}
	})
}

// nextRunStart returns the id of the first queued message that starts a
// run after exec, or "".
func nextRunStart(msgs []*message, exec string) string {
	for _, m := range msgs {
		if provider.StartsNextRun(&m.m, exec) {
			return m.m.ID
		}
	}
	return ""
}

// unfinishedRound returns ErrInvalidState while a peek-lock round of in
// may still have work to do: its lease is live, or it ran out without an
// ack or abandon while its messages are still queued, so a redelivery will
// finish what it began (a child's final round enqueues its parent's notice
// after writing its terminal record). Callers hold s.mu.
func unfinishedRound(in *instance, now time.Time) error {
	if n := len(in.events); n > 0 && in.events[n-1].Seq > in.record.LastSeq {
		// A peek-lock round appended (a new run of the ended instance,
		// say) and has not written its projections: the record's ended
		// status is not the instance's.
		return fmt.Errorf("%w: history is at seq %d, its record at seq %d; a round has not finished", provider.ErrInvalidState, in.events[n-1].Seq, in.record.LastSeq)
	}
	switch {
	case in.lease == nil:
		return nil
	case in.lease.until.After(now):
		return fmt.Errorf("%w: a round of %s holds its lease until %s", provider.ErrInvalidState, in.lease.owner, in.lease.until.Format(time.RFC3339Nano))
	case len(visible(in, now, 1)) > 0:
		return fmt.Errorf("%w: a round of %s ended without an ack at %s; its messages wait for a redelivery", provider.ErrInvalidState, in.lease.owner, in.lease.until.Format(time.RFC3339Nano))
	}
	return nil
}

// GetTombstone implements provider.Store.
func (s *Store) GetTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	var out *provider.Tombstone
	err := s.do(ctx, OpGetTombstone, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		all := s.tombstones[instanceID]
		if len(all) == 0 {
			return fmt.Errorf("tombstone of %s: %w", instanceID, provider.ErrNotFound)
		}
		c := all[len(all)-1]
		c.LastHash = bytes.Clone(c.LastHash)
		out = &c
		return nil
	})
	return out, err
}

// ListTombstones implements provider.Store.
func (s *Store) ListTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	var out []provider.Tombstone
	err := s.do(ctx, OpListTombstones, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, t := range s.tombstones[instanceID] {
			t.LastHash = bytes.Clone(t.LastHash)
			out = append(out, t)
		}
		return nil
	})
	return out, err
}
