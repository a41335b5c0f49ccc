package chronicle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/replay"
)

// Tombstone is what remains of a purged instance.
type Tombstone = provider.Tombstone

// ReplayReport is what replaying a history against the current code found.
type ReplayReport = replay.Report

// ErrTombstoneMismatch is returned by VerifyArchive when an archived
// history does not end where its tombstone says.
var ErrTombstoneMismatch = errors.New("chronicle: archive does not match its tombstone")

// Verify checks the hash chain of an instance's whole history and returns
// nil or a *history.ChainError naming the first broken seq (also when a
// stored event does not decode).
func (e *Engine) Verify(ctx context.Context, instanceID string) error {
	events, err := e.History(ctx, instanceID)
	var broken *history.ChainError
	if errors.As(err, &broken) {
		return broken
	}
	if err != nil {
		return err
	}
	return history.Verify(events)
}

// VerifyResult is the verification of one instance.
type VerifyResult struct {
	InstanceID string
	Events     int
	// Err is nil for a sound chain, a *history.ChainError for a broken one.
	Err error
}

// VerifyAll checks the hash chain of every instance of the store and
// returns one result per instance, in id order.
func (e *Engine) VerifyAll(ctx context.Context) ([]VerifyResult, error) {
	var out []VerifyResult
	after := ""
	for {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: r.InstanceID, FromSeq: 1})
			var broken *history.ChainError
			switch {
			case errors.As(err, &broken):
				// A stored event that does not decode is a broken link of
				// this instance's chain; the others are still checked.
				out = append(out, VerifyResult{InstanceID: r.InstanceID, Events: int(r.LastSeq), Err: broken})
				continue
			case err != nil:
				return nil, err
			}
			out = append(out, VerifyResult{InstanceID: r.InstanceID, Events: len(events), Err: history.Verify(events)})
		}
		if len(recs) < 500 {
			return out, nil
		}
		after = recs[len(recs)-1].InstanceID
	}
}

// ArchiveFunc receives the whole history of an instance before it is
// purged; when it returns an error, the instance is not purged.
type ArchiveFunc func(ctx context.Context, instanceID string, events []Event) error

// ArchiveJSONL returns an ArchiveFunc that writes each history as JSON
// Lines to dir/<escaped instance id>.jsonl, synced to disk, followed by
// the instance's checkpoint proofs when the engine signs checkpoints
// ([ArchiveProofs]), so that the archive verifies offline
// ([VerifyExport]).
func ArchiveJSONL(dir string) ArchiveFunc {
	return func(ctx context.Context, instanceID string, events []Event) error {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := history.WriteJSONL(&buf, events); err != nil {
			return err
		}
		if err := history.WriteCheckpointsJSONL(&buf, ArchiveProofs(ctx)); err != nil {
			return err
		}
		f, err := os.OpenFile(ArchivePath(dir, instanceID), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			return errors.Join(err, f.Close())
		}
		if err := f.Sync(); err != nil {
			return errors.Join(err, f.Close())
		}
		return f.Close()
	}
}

// ArchivePath is the file ArchiveJSONL writes an instance's history to.
func ArchivePath(dir, instanceID string) string {
	return filepath.Join(dir, url.PathEscape(instanceID)+".jsonl")
}

// PurgeOptions select the instances to purge. Only ended instances
// (completed, failed, terminated) are ever purged.
type PurgeOptions struct {
	// InstanceIDs purges these instances.
	InstanceIDs []string
	// CompletedBefore, when set, purges every ended instance whose last
	// change is older than it.
	CompletedBefore time.Time
	// By is the operator, recorded on the tombstones. Required.
	By string
	// Archive, when set, receives each history before it is deleted.
	Archive ArchiveFunc
	// Limit bounds the instances purged by CompletedBefore; zero means
	// 1000.
	Limit int
}

// PurgeReport tells what Purge did.
type PurgeReport struct {
	Purged []Tombstone
	// Skipped maps instance ids to why they were not purged (still
	// running, unknown, archive failed).
	Skipped map[string]string
}

// Purge deletes ended instances — history, projections, tasks, dead
// letters — after handing each history to the archive callback, and keeps
// a tombstone (last seq, last hash, when, by whom) so an archived history
// can still be proven to be the purged one. Running instances are never
// touched. With Options.Checkpoints, a checkpoint whose leaves are the
// signed tombstones of the instances to purge (their final heads) is
// written before anything is deleted, and the archive callback finds
// their proofs with [ArchiveProofs]; when the store keeps checkpoints and
// the engine cannot sign, Purge returns ErrPurgeUnsigned and deletes
// nothing.
//
// An instance under a legal hold is not purged: it is skipped, and Purge
// returns, with its report, a *HeldError naming every held instance it
// skipped (matched by ErrHeld).
func (e *Engine) Purge(ctx context.Context, o PurgeOptions) (rep *PurgeReport, err error) {
	by, err := e.actor(o.By)
	if err != nil || o.By == "" {
		return nil, invalid("PurgeOptions.By must name the operator")
	}
	return e.purge(ctx, o, by)
}

// purge is Purge by the actor by.
func (e *Engine) purge(ctx context.Context, o PurgeOptions, by string) (rep *PurgeReport, err error) {
	ids := append([]string(nil), o.InstanceIDs...)
	if !o.CompletedBefore.IsZero() {
		limit := o.Limit
		if limit <= 0 {
			limit = 1000
		}
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{Terminal: true, UpdatedBefore: o.CompletedBefore, Limit: limit})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids = append(ids, r.InstanceID)
		}
	}
	rep = &PurgeReport{Skipped: map[string]string{}}
	held := &HeldError{}
	free := ids[:0:0]
	for _, id := range ids {
		if e.validateID("instance id", id) == nil {
			if err := e.checkNotHeld(ctx, id); err != nil {
				var he *HeldError
				if !errors.As(err, &he) {
					return rep, err
				}
				held.Holds = append(held.Holds, he.Holds...)
				rep.Skipped[id] = err.Error()
				continue
			}
		}
		free = append(free, id)
	}
	ids = free
	defer func() {
		if err == nil && len(held.Holds) > 0 {
			err = held
		}
	}()
	signed, err := e.signTombstones(ctx, ids)
	if err != nil {
		return rep, err
	}
	defer func() {
		if ferr := e.finishPurge(ctx, signed, rep.Purged); ferr != nil {
			err = errors.Join(err, fmt.Errorf("sign what the purge left to sign: %w", ferr))
		}
	}()
	for _, id := range ids {
		if err := e.validateID("instance id", id); err != nil {
			rep.Skipped[id] = err.Error()
			continue
		}
		rec, err := e.store.GetInstance(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			// A purge that stopped after deleting the record is finished
			// (its history went to the archive the first time).
			ts, err := e.resumePurge(ctx, id, by)
			if err != nil {
				return rep, err
			}
			if ts == nil {
				rep.Skipped[id] = "not found"
				continue
			}
			e.runner.ForgetInstance(id)
			rep.Purged = append(rep.Purged, *ts)
			continue
		}
		if err != nil {
			return rep, err
		}
		if !rec.Status.Terminal() {
			rep.Skipped[id] = "instance is " + string(rec.Status)
			continue
		}
		if o.Archive != nil {
			events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
			if err != nil {
				return rep, err
			}
			actx := ctx
			if e.cp != nil {
				proofs, err := e.CheckpointProofs(ctx, id)
				if err != nil {
					return rep, err
				}
				actx = context.WithValue(ctx, proofsKey{}, proofs)
			}
			if err := o.Archive(actx, id, events); err != nil {
				rep.Skipped[id] = "archive failed: " + err.Error()
				continue
			}
		}
		ts, err := e.purgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: id, By: by, Now: e.now()})
		switch {
		case errors.Is(err, provider.ErrHeld):
			// Held after the check above: the store refused it.
			h, gerr := e.GetHold(ctx, id)
			if gerr != nil || h == nil {
				h = &LegalHold{InstanceID: id}
			}
			held.Holds = append(held.Holds, *h)
			rep.Skipped[id] = (&HeldError{Holds: []LegalHold{*h}}).Error()
			continue
		case errors.Is(err, provider.ErrInvalidState), errors.Is(err, provider.ErrNotFound):
			rep.Skipped[id] = err.Error()
			continue
		case err != nil:
			return rep, err
		}
		e.runner.ForgetInstance(id)
		rep.Purged = append(rep.Purged, *ts)
	}
	return rep, nil
}

// resumePurge finishes a purge of id that stopped half-way, and returns
// its tombstone (the one the purge began with, which Purge signed before
// it deleted anything); nil when none is unfinished or the store cannot
// purge.
func (e *Engine) resumePurge(ctx context.Context, id, by string) (*provider.Tombstone, error) {
	s, ok := e.store.(provider.PurgeStore)
	if !ok {
		return nil, nil
	}
	ts, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: id, By: by, Now: e.now(), OnlyUnfinished: true})
	if errors.Is(err, provider.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finish the purge of %s: %w", id, err)
	}
	return ts, nil
}

// GetTombstone returns the tombstone of a purged instance.
func (e *Engine) GetTombstone(ctx context.Context, instanceID string) (*Tombstone, error) {
	ts, err := e.getTombstone(ctx, instanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: no tombstone for %s", ErrInstanceNotFound, instanceID)
	}
	return ts, err
}

// ListTombstones returns the tombstones of every purge of an instance id,
// oldest first: an id reused after a purge keeps the proof of each
// archived history. It is empty when the id was never purged.
func (e *Engine) ListTombstones(ctx context.Context, instanceID string) ([]Tombstone, error) {
	return e.listTombstones(ctx, instanceID)
}

// VerifyArchive checks an archived history against its tombstone: the
// chain must hold from seq 1 and end at the tombstone's seq and hash.
func VerifyArchive(events []Event, ts *Tombstone) error {
	if err := history.Verify(events); err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: the archive is empty", ErrTombstoneMismatch)
	}
	last := events[len(events)-1]
	if last.InstanceID != ts.InstanceID || last.Seq != ts.LastSeq || !bytes.Equal(last.Hash, ts.LastHash) {
		return fmt.Errorf("%w: archive ends at %s seq %d, tombstone says %s seq %d", ErrTombstoneMismatch, last.InstanceID, last.Seq, ts.InstanceID, ts.LastSeq)
	}
	return nil
}

// ReplayHistory replays a stored or exported history against the
// engine's registered workflows and reports the first divergence, the
// commands produced and the result. It writes nothing.
func (e *Engine) ReplayHistory(events []Event) *ReplayReport {
	id := ""
	if len(events) > 0 {
		id = events[0].InstanceID
	}
	return e.replayer.Debug(id, events)
}

// HealthReport is what [Engine.CheckHealth] found in a store. It is
// healthy when every list is empty.
type HealthReport struct {
	// Instances counts the instances checked.
	Instances int
	// Incidents are the instances with an unresolved dead letter, those
	// whose start was dead-lettered included.
	Incidents []*Instance
	// DeadLetters are the dead letters waiting for an operator.
	DeadLetters []DeadLetter
	// FailingRounds are the instances whose queued messages had failed
	// deliveries and are being retried (a projection whose fold fails, a
	// store error), with the last error.
	FailingRounds []FailingRound
	// Projections are the instances whose history does not fold, or whose
	// stored projections differ from its fold.
	Projections []ProjectionProblem
}

// OK reports whether the check found nothing wrong.
func (r *HealthReport) OK() bool {
	return len(r.Incidents) == 0 && len(r.DeadLetters) == 0 && len(r.FailingRounds) == 0 && len(r.Projections) == 0
}

// FailingRound is an instance whose rounds fail and are retried.
type FailingRound struct {
	InstanceID string
	// MessageID is the queued message with the most failed deliveries.
	MessageID string
	Attempts  int
	LastError string
}

// ProjectionProblem is an instance whose projections fail to fold or to
// match its history.
type ProjectionProblem struct {
	InstanceID string
	// Err is set when the history does not fold (or cannot be read).
	Err error
	// Differences are those CheckProjections found.
	Differences []string
}

// CheckHealth looks over every instance of the store for what needs an
// operator: incidents, dead letters waiting, rounds that fail and are
// retried, and projections that fail to fold or differ from history
// (built-in ones and the custom projections registered on this engine).
// It reads the store only.
func (e *Engine) CheckHealth(ctx context.Context) (*HealthReport, error) {
	rep := &HealthReport{}
	after := ""
	for {
		page, err := e.ListInstances(ctx, InstanceFilter{AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, in := range page {
			rep.Instances++
			if in.Incident != "" {
				rep.Incidents = append(rep.Incidents, in)
			}
			queued, err := e.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: in.ID, Limit: 1000})
			if err != nil {
				return nil, err
			}
			var worst *provider.Message
			for i := range queued {
				if m := &queued[i]; m.Attempts > 0 && (worst == nil || m.Attempts > worst.Attempts) {
					worst = m
				}
			}
			if worst != nil {
				rep.FailingRounds = append(rep.FailingRounds, FailingRound{InstanceID: in.ID, MessageID: worst.ID, Attempts: worst.Attempts, LastError: worst.LastError})
			}
			if in.Status == StatusPending {
				continue // nothing stored to fold
			}
			diffs, err := e.CheckProjections(ctx, in.ID)
			if err != nil || len(diffs) > 0 {
				rep.Projections = append(rep.Projections, ProjectionProblem{InstanceID: in.ID, Err: err, Differences: diffs})
			}
		}
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].ID
	}
	after = ""
	for {
		letters, err := e.listDeadLetters(ctx, &provider.ListDeadLettersParams{Status: provider.DeadLetterDead, AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		rep.DeadLetters = append(rep.DeadLetters, letters...)
		if len(letters) < 500 {
			return rep, nil
		}
		after = letters[len(letters)-1].ID
	}
}
