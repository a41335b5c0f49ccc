package round

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// loaded is what a round knows of an instance's stored history before it
// processes its messages.
type loaded struct {
	entry *cacheEntry
	// cold is true when the state was not cached and was loaded.
	cold bool
	// events holds stored events from seq from on, when the round loaded
	// some: a cold round loads its current execution (or everything, when
	// no snapshot is stored).
	events []history.Event
	from   int64
	// projectedSeq is the seq the stored projections were folded to, on a
	// cold round (0 when none are stored); projections behind the history
	// are folded again.
	projectedSeq int64
}

// corrupt returns the dead-letter error of an instance whose stored history
// cannot be trusted.
func corrupt(id string, err error) error {
	return &DeadLetterError{Reason: provider.ReasonCorruptHistory, Err: fmt.Errorf("history of %s: %w", id, err)}
}

// loadErr classifies an error of loading history: a stored event that
// does not decode names its seq in a *history.ChainError and dead-letters
// the round; anything else is retried.
func loadErr(id string, err error) error {
	var ce *history.ChainError
	if errors.As(err, &ce) {
		return corrupt(id, err)
	}
	return fmt.Errorf("load history of %s: %w", id, err)
}

// load returns the state of an instance at the start of a round. A cached
// state is used only when the stored event at its seq still has its hash
// and nothing follows it (the store's head, when the dequeue told it, or
// else a read of the history's tail): another node may have written the
// instance, or it may have been purged and started again with the same id.
// A cold round starts from the stored snapshot and reads the current
// execution's events only, after checking that the stored history ends
// where the snapshot says and that the events it reads keep their hash
// chain; one whose dequeue found no stored event reads nothing.
func (r *Runner) load(ctx context.Context, ops roundOps, id string, head *provider.Head) (*loaded, error) {
	if entry := r.cache.take(id); entry != nil && head != nil {
		if head.Seq == entry.snap.LastSeq && bytes.Equal(head.Hash, entry.snap.LastHash) {
			return &loaded{entry: entry}, nil
		}
		entry.close()
	} else if entry != nil {
		snap := entry.snap
		tail, err := ops.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: max(snap.LastSeq, 1)})
		if err != nil {
			entry.close()
			return nil, loadErr(id, err)
		}
		switch {
		case snap.LastSeq == 0 && len(tail) == 0:
			return &loaded{entry: entry}, nil
		case len(tail) == 1 && tail[0].Seq == snap.LastSeq && bytes.Equal(tail[0].Hash, snap.LastHash):
			return &loaded{entry: entry}, nil
		}
		entry.close()
	}
	l := &loaded{cold: true}
	if head != nil && head.Seq == 0 {
		// The store read the head with the dequeue, the instance locked:
		// it has no history, so no snapshot to read and nothing to load
		// (a new instance's first round, such as a start's).
		l.entry, l.from = &cacheEntry{instanceID: id, snap: NewSnapshot(id)}, 1
		return l, nil
	}
	snap, err := r.storedSnapshot(ctx, ops, id)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		events, err := ops.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
		if err != nil {
			return nil, loadErr(id, err)
		}
		if err := history.Verify(events); err != nil {
			return nil, corrupt(id, err)
		}
		if snap, err = Fold(id, events); err != nil {
			return nil, corrupt(id, err)
		}
		l.entry, l.events, l.from = &cacheEntry{instanceID: id, snap: snap}, events, 1
		return l, nil
	}
	l.projectedSeq, l.from = snap.LastSeq, snap.ExecutionStartSeq
	events, err := ops.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: l.from})
	if err != nil {
		return nil, loadErr(id, err)
	}
	at := snap.LastSeq - l.from
	if at >= int64(len(events)) || events[at].Seq != snap.LastSeq || !bytes.Equal(events[at].Hash, snap.LastHash) {
		return nil, corrupt(id, &history.ChainError{InstanceID: id, Seq: snap.LastSeq,
			Reason: "the stored history does not hold the event the stored snapshot was folded to"})
	}
	if err := history.VerifyFrom(l.from-1, events[0].PrevHash, events); err != nil {
		return nil, corrupt(id, err)
	}
	// The stored snapshot leaves out the execution's idempotency keys.
	snap.RememberKeys(events[:at+1])
	for i := at + 1; i < int64(len(events)); i++ {
		if err := snap.Apply(&events[i], nil); err != nil {
			return nil, corrupt(id, err)
		}
	}
	l.entry, l.events = &cacheEntry{instanceID: id, snap: snap}, events
	return l, nil
}

// storedSnapshot returns the instance's stored snapshot, or nil when there
// is none or it cannot be used (then the round folds the whole history).
func (r *Runner) storedSnapshot(ctx context.Context, ops roundOps, id string) (*Snapshot, error) {
	data, seq, err := ops.GetSnapshot(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load snapshot of %s: %w", id, err)
	}
	snap, err := UnmarshalSnapshot(data)
	if err == nil && (snap.InstanceID != id || snap.LastSeq != seq || !snap.Started() || snap.ExecutionStartSeq < 1 || snap.ExecutionStartSeq > seq) {
		err = fmt.Errorf("snapshot of instance %q at seq %d starting its execution at %d, stored at seq %d",
			snap.InstanceID, snap.LastSeq, snap.ExecutionStartSeq, seq)
	}
	if err != nil {
		r.log.WarnContext(ctx, "stored snapshot unusable; folding the whole history", slog.String("instance_id", id), slog.Any("error", err))
		return nil, nil
	}
	return snap, nil
}
