package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Checkpoint operations, for fault injection.
const (
	OpAppendCheckpoint Op = "AppendCheckpoint"
	OpLatestCheckpoint Op = "LatestCheckpoint"
	OpListCheckpoints  Op = "ListCheckpoints"
)

var _ provider.CheckpointStore = (*Store)(nil)

func cloneCheckpoint(c *history.Checkpoint) history.Checkpoint {
	out := *c
	out.PrevHash, out.Root, out.Hash, out.Signature = bytes.Clone(c.PrevHash), bytes.Clone(c.Root), bytes.Clone(c.Hash), bytes.Clone(c.Signature)
	out.Leaves = make([]history.CheckpointLeaf, len(c.Leaves))
	for i, l := range c.Leaves {
		l.Hash = bytes.Clone(l.Hash)
		out.Leaves[i] = l
	}
	return out
}

// AppendCheckpoint implements provider.CheckpointStore.
func (s *Store) AppendCheckpoint(ctx context.Context, c *history.Checkpoint) error {
	return s.do(ctx, OpAppendCheckpoint, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := len(s.checkpoints)
		if c.Number >= 1 && c.Number <= int64(n) {
			if bytes.Equal(s.checkpoints[c.Number-1].Hash, c.Hash) {
				return nil
			}
			return fmt.Errorf("checkpoint %d: %w: another checkpoint has its number", c.Number, provider.ErrConflict)
		}
		var prev []byte
		if n > 0 {
			prev = s.checkpoints[n-1].Hash
		}
		if c.Number != int64(n)+1 || !bytes.Equal(c.PrevHash, prev) {
			return fmt.Errorf("checkpoint %d: %w: the latest is %d", c.Number, provider.ErrConflict, n)
		}
		s.checkpoints = append(s.checkpoints, cloneCheckpoint(c))
		return nil
	})
}

// LatestCheckpoint implements provider.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context) (*history.Checkpoint, error) {
	var out *history.Checkpoint
	err := s.do(ctx, OpLatestCheckpoint, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := len(s.checkpoints) - 1; i >= 0; i-- {
			if s.checkpoints[i].Number != 0 { // 0: deleted by a test
				c := cloneCheckpoint(&s.checkpoints[i])
				out = &c
				return nil
			}
		}
		return fmt.Errorf("latest checkpoint: %w", provider.ErrNotFound)
	})
	return out, err
}

// ListCheckpoints implements provider.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, p *provider.ListCheckpointsParams) ([]history.Checkpoint, error) {
	var out []history.Checkpoint
	err := s.do(ctx, OpListCheckpoints, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		limit := limitOf(p.Limit)
		for i := max(p.AfterNumber, 0); i < int64(len(s.checkpoints)) && len(out) < limit; i++ {
			c := &s.checkpoints[i]
			if c.Number == 0 {
				continue
			}
			if p.InstanceID != "" {
				if _, _, ok := c.Leaf(p.InstanceID); !ok {
					continue
				}
			}
			out = append(out, cloneCheckpoint(c))
		}
		return nil
	})
	return out, err
}

// DeleteCheckpoint removes a stored checkpoint, bypassing every check, as
// an operator with write access to the database could: tests show that
// verification reports the gap. It reports whether the checkpoint existed.
func (s *Store) DeleteCheckpoint(number int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if number < 1 || number > int64(len(s.checkpoints)) || s.checkpoints[number-1].Number == 0 {
		return false
	}
	s.checkpoints[number-1] = history.Checkpoint{}
	return true
}

// RewriteHistory replaces the stored history of an instance with what
// rewrite returns for a copy of it, renumbered from 1 and sealed afresh
// (hashes recomputed), bypassing every check: what an operator with write
// access to the database could do. Plain chain verification cannot tell;
// signed checkpoints can. It reports whether the instance had history.
func (s *Store) RewriteHistory(instanceID string, rewrite func(events []history.Event) []history.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil || len(in.events) == 0 {
		return false
	}
	events := rewrite(cloneEvents(in.events))
	for i := range events {
		events[i].Seq = int64(i) + 1
	}
	history.Seal(nil, events)
	in.events = slices.Clip(events)
	return true
}

// DeleteHistory removes an instance's history and records without a
// purge and without a tombstone, bypassing every check, as an operator
// with write access to the database could. It reports whether the
// instance existed.
func (s *Store) DeleteHistory(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil {
		return false
	}
	s.unready(in)
	delete(s.instances, instanceID)
	return true
}

// TamperRows are the rows [Store.Tamper] hands out to change: copies of
// the store's histories, instance records, tombstones and checkpoints
// (with their leaves), which replace the store's when the function
// returns.
type TamperRows struct {
	// Histories holds each instance's events by id; an id removed from
	// both Histories and Records is deleted with everything it had.
	Histories map[string][]history.Event
	// Records holds the instance records by id (an instance without a
	// record has history only).
	Records map[string]*provider.InstanceRecord
	// Tombstones holds every purge's tombstone by id, oldest first.
	Tombstones map[string][]provider.Tombstone
	// Checkpoints are in number order; one with a zero Number is deleted.
	Checkpoints []history.Checkpoint
}

// Tamper lets f edit, delete and insert the rows of every table, bypassing
// every check and every hash, as an operator with full write access to the
// database could: tests of tamper evidence use it. Events are kept as f
// leaves them (reseal them with history.Seal to forge a chain plain
// verification accepts).
func (s *Store) Tamper(f func(rows *TamperRows)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := &TamperRows{
		Histories:  map[string][]history.Event{},
		Records:    map[string]*provider.InstanceRecord{},
		Tombstones: map[string][]provider.Tombstone{},
	}
	for id, in := range s.instances {
		if len(in.events) > 0 {
			rows.Histories[id] = cloneEvents(in.events)
		}
		if in.record != nil {
			r := copyRecord(in.record)
			rows.Records[id] = &r
		}
	}
	for id, ts := range s.tombstones {
		rows.Tombstones[id] = slices.Clone(ts)
	}
	for i := range s.checkpoints {
		rows.Checkpoints = append(rows.Checkpoints, cloneCheckpoint(&s.checkpoints[i]))
	}
	f(rows)
	for id, in := range s.instances {
		_, h := rows.Histories[id]
		_, r := rows.Records[id]
		if !h && !r {
			s.unready(in)
			delete(s.instances, id)
		}
	}
	for id, events := range rows.Histories {
		s.instance(id).events = slices.Clip(cloneEvents(events))
	}
	for id, rec := range rows.Records {
		in := s.instance(id)
		r := copyRecord(rec)
		in.record = &r
		if _, ok := rows.Histories[id]; !ok {
			in.events = nil
		}
	}
	s.tombstones = map[string][]provider.Tombstone{}
	for id, ts := range rows.Tombstones {
		if len(ts) > 0 {
			s.tombstones[id] = slices.Clone(ts)
		}
	}
	s.checkpoints = s.checkpoints[:0]
	for i := range rows.Checkpoints {
		s.checkpoints = append(s.checkpoints, cloneCheckpoint(&rows.Checkpoints[i]))
	}
}
