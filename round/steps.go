package round

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// roundState is what one round of one instance carries from step to step.
type roundState struct {
	ops roundOps
	id  string
	now time.Time
	// loaded is what load found. Its events and from grow toward seq 1
	// when since reads more of the stored history.
	loaded
	// baseSeq is the seq of the last stored event when the round began:
	// the round's own events follow it.
	baseSeq int64
	// snap is the instance's state; the round's events are applied to it
	// as they are produced.
	snap *Snapshot
	rep  *Report
	// appended are the events the round appends: its accepted messages,
	// then its turn's events.
	appended []history.Event
	// work is what the round's events (and, on a cold peek-lock round, the
	// open schedules) need enqueued or cancelled.
	work *Work
	// endedAtLoad is whether the instance's execution had ended when the
	// round loaded it.
	endedAtLoad bool
	// ended is what an execution that had ended before the round still
	// owed, derived before the round's messages change the snapshot.
	ended *Work
	// letters are the dead letters of messages the round cannot process;
	// acks the ids of messages it is done with; pins the execution a
	// message without one was judged against, by message id.
	letters []provider.DeadLetter
	acks    []string
	pins    map[string]string
	// msgs is the round's batch, as dequeued.
	msgs []provider.Message
}

// process runs steps 2–8 of a round on one instance: load, classify the
// messages, run the turn, derive the work, write. head is the stored
// history's last event when the store told it with the dequeue. The
// instance's cache entry is the caller's when process succeeds, and closed
// when it fails.
func (r *Runner) process(ctx context.Context, ops roundOps, id string, msgs []provider.Message, head *provider.Head, now time.Time) (_ *cacheEntry, _ *Report, err error) {
	l, err := r.load(ctx, ops, id, head)
	if err != nil {
		return nil, nil, err
	}
	rs := &roundState{
		ops: ops, id: id, now: now, loaded: *l, baseSeq: l.entry.snap.LastSeq, snap: l.entry.snap,
		rep: &Report{InstanceID: id, Cold: l.cold}, work: &Work{}, msgs: msgs,
	}
	defer func() {
		if err != nil {
			rs.entry.close()
		}
	}()
	if err := r.opts.Hooks.crash(ctx, AfterLoad, id); err != nil {
		return nil, nil, err
	}
	rs.endedAtLoad = rs.snap.Ended
	if err := r.deriveEndedWork(ctx, rs); err != nil {
		return nil, nil, err
	}
	if err := r.classifyMessages(ctx, rs, msgs); err != nil {
		return nil, nil, err
	}
	if err := r.runTurn(ctx, rs); err != nil {
		return nil, nil, err
	}
	if err := r.deriveWork(ctx, rs); err != nil {
		return nil, nil, err
	}
	if err := r.write(ctx, rs); err != nil {
		return nil, nil, err
	}
	rs.rep.Status, rs.rep.ExecutionID = rs.entry.snap.Status, rs.entry.snap.ExecutionID
	if snap := rs.entry.snap; snap.LastSeq > 0 {
		rs.rep.Head = &provider.Head{Seq: snap.LastSeq, Hash: snap.LastHash}
	}
	return rs.entry, rs.rep, nil
}

// since returns the history from seq from through the round's events so
// far, loading the stored part the round has not read yet.
func (rs *roundState) since(ctx context.Context, from int64) ([]history.Event, error) {
	from = max(from, 1)
	if from > rs.baseSeq {
		return rs.appended[from-rs.baseSeq-1:], nil
	}
	if rs.events == nil || rs.from > from {
		events, err := rs.ops.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: rs.id, FromSeq: from})
		if err != nil {
			return nil, loadErr(rs.id, err)
		}
		// In a transaction the load may see the round's own append.
		n := rs.baseSeq - from + 1
		if int64(len(events)) < n || events[0].Seq != from {
			return nil, fmt.Errorf("load history of %s: %w: %d events from seq %d, snapshot at seq %d", rs.id, provider.ErrConflict, len(events), from, rs.baseSeq)
		}
		rs.events, rs.from = events[:n], from
	}
	old := rs.events[from-rs.from : rs.baseSeq-rs.from+1]
	return append(old[:len(old):len(old)], rs.appended...), nil
}

// deriveEndedWork derives, on a cold round whose mode repairs open work,
// what an execution that had already ended still owed (its parent's
// notice, the cancellation of its activities, the signals it sent): a
// peek-lock round may have crashed between its append and its enqueue. It
// runs before the round's messages, which can start the next execution and
// so hide the ended one from the snapshot; deriveWork merges it.
func (r *Runner) deriveEndedWork(ctx context.Context, rs *roundState) error {
	snap := rs.snap
	if !rs.cold || !rs.ops.repairsOpenWork() || !snap.Ended {
		return nil
	}
	rs.ended = &Work{Cancels: []provider.CancelActivitiesParams{{InstanceID: rs.id, ExecutionID: snap.ExecutionID}}}
	rs.ended.parentPending = snap.Parent != nil && snap.Status.Terminal()
	if len(snap.Signals) > 0 {
		// Signals the execution sent before it ended, whose outcome it
		// never recorded: the round that sent them may have died before
		// its enqueue.
		events, err := rs.since(ctx, snap.ExecutionStartSeq)
		if err != nil {
			return err
		}
		resends, err := snap.signalResends(events)
		if err != nil {
			return err
		}
		rs.ended.Messages = append(rs.ended.Messages, resends...)
		rs.dropNeedlessResends(rs.ended)
	}
	return rs.ended.finish(snap)
}

// classifyMessages judges each message against the snapshot, in batch
// order: an undecodable message or one out of deliveries becomes a dead
// letter, a duplicate or stale one is acked, a rejected one becomes a dead
// letter (or, for a child's start whose id is taken, a notice to its
// parent), and an accepted one becomes the next event, applied at once so
// that the next message is judged against it.
func (r *Runner) classifyMessages(ctx context.Context, rs *roundState, msgs []provider.Message) error {
	snap, rep := rs.snap, rs.rep
	for i := range msgs {
		m := msgs[i]
		if err := m.Validate(); err != nil {
			rs.letters = append(rs.letters, r.letter(&m, provider.ReasonUndecodable, err.Error(), rs.now))
			continue
		}
		if m.Attempts >= r.opts.MaxDeliveries {
			l := r.letter(&m, lastReason(m.LastError), fmt.Sprintf("%d failed deliveries; last error: %s", m.Attempts, m.LastError), rs.now)
			l.Attempts = m.Attempts // this delivery did not try again
			rs.letters = append(rs.letters, l)
			continue
		}
		if m.Kind.IsRecord() {
			// A legal hold's record is the instance's, not an
			// execution's: it joins the current one, also when a
			// redelivery finds it pinned to an earlier one.
			m.ExecutionID = ""
		}
		if m.ExecutionID == "" && snap.ExecutionID != "" && m.Kind != history.KindExecutionStarted {
			if rs.pins == nil {
				rs.pins = map[string]string{}
			}
			rs.pins[m.ID] = snap.ExecutionID
		}
		normalize(&m, snap)
		if m.Kind == history.KindExecutionRerun {
			if err := r.rerun(ctx, rs, &m); err != nil {
				return err
			}
			continue
		}
		src := signalSource(&m)
		if src != nil {
			handled, err := r.classifySignal(ctx, rs, &m, src)
			if err != nil {
				return err
			}
			if handled {
				continue
			}
		}
		verdict, reason, why := snap.Classify(&m)
		switch verdict {
		case Duplicate:
			rep.Duplicates++
			rs.acks = append(rs.acks, m.ID)
		case Stale:
			rep.Stale++
			rs.acks = append(rs.acks, m.ID)
			r.log.DebugContext(ctx, "stale message acked", slog.String("instance_id", rs.id), slog.String("execution_id", messageExecution(&m, snap)), slog.String("message", m.ID), slog.String("kind", string(m.Kind)), slog.String("why", why))
		case Reject:
			if reason == provider.ReasonAlreadyRunning {
				// A child's start whose id is taken: tell its parent.
				n, ok, err := snap.RefusedChildStart(&m)
				if err != nil {
					return err
				}
				if ok {
					rs.work.Messages = append(rs.work.Messages, n)
					rs.acks = append(rs.acks, m.ID)
					rep.Refused++
					r.log.InfoContext(ctx, "child start refused", slog.String("instance_id", rs.id), slog.String("execution_id", messageExecution(&m, snap)), slog.String("message", m.ID), slog.String("why", why))
					continue
				}
			}
			rs.letters = append(rs.letters, r.letter(&m, reason, why, rs.now))
		case Accept:
			if m.Kind == history.KindExecutionStarted && snap.Ended && !rs.endedAtLoad && rs.ops.repairsOpenWork() {
				// The batch ended the execution (a terminate, say) before
				// this start: a peek-lock round must not append the next
				// execution before the ended one's work (its parent's
				// notice) is queued, or a crash in between would hide that
				// work from every later round. The start, and every message
				// after it (their order matters: a restart's terminate and
				// start, say), stay queued for the next round.
				return nil
			}
			if m.Kind == history.KindExecutionStarted {
				wait, err := r.takeSlot(ctx, rs, &m, msgs[i+1:])
				if err != nil {
					return err
				}
				if wait {
					// The start, and every message after it, stay queued
					// while the instance is parked.
					return nil
				}
			}
			e := r.messageEvent(snap, &m, rs.now)
			if err := snap.Apply(&e, rs.work); err != nil {
				return fmt.Errorf("apply message %s: %w", m.ID, err)
			}
			if src != nil {
				// A signal another workflow sent: tell it it was delivered.
				if err := rs.tellSignal(src, &history.SignalDelivered{ExecutionID: snap.ExecutionID}); err != nil {
					return err
				}
			}
			rs.appended = append(rs.appended, e)
			rs.acks = append(rs.acks, m.ID)
			rep.Processed++
		}
	}
	return nil
}

// runTurn runs the workflow code when the round accepted a message (only
// new events can move it) and seals the events it produces, applying each
// to the snapshot: the work they need is derived as they are applied.
func (r *Runner) runTurn(ctx context.Context, rs *roundState) error {
	if len(rs.appended) == 0 {
		return nil
	}
	snap, entry := rs.snap, rs.entry
	if onlyRecords(rs.appended) {
		// Records of a legal hold do not move workflow code; the code's
		// cached state no longer matches history, so the next turn
		// replays it.
		if c, ok := entry.turnState.(interface{ Close() }); ok {
			c.Close()
		}
		entry.turnState = nil
		return nil
	}
	in := &TurnInput{InstanceID: rs.id, Snapshot: snap, NewEvents: rs.appended, Now: rs.now, Node: r.opts.Node, Cached: entry.turnState}
	if in.Cached == nil {
		var err error
		if in.History, err = rs.since(ctx, snap.ExecutionStartSeq); err != nil {
			return err
		}
	}
	out, err := r.turn(ctx, in)
	if err != nil {
		return err
	}
	entry.turnState = out.Cached
	rs.appended = slices.Grow(rs.appended, len(out.Events))
	for i := range out.Events {
		e := out.Events[i]
		if e.Seq != snap.LastSeq+1 {
			return fmt.Errorf("turn of %s produced seq %d, want %d", rs.id, e.Seq, snap.LastSeq+1)
		}
		e.InstanceID, e.At = rs.id, rs.now
		if e.ExecutionID == "" {
			e.ExecutionID = snap.ExecutionID
		}
		if e.Actor == "" {
			e.Actor = r.actor
		}
		r.seal(snap, &e)
		if err := snap.Apply(&e, rs.work); err != nil {
			return fmt.Errorf("turn of %s produced an invalid event: %w", rs.id, err)
		}
		rs.appended = append(rs.appended, e)
	}
	return nil
}

// onlyRecords reports whether every event is a record workflow code never
// sees (see [history.Kind.IsRecord]).
func onlyRecords(events []history.Event) bool {
	for i := range events {
		if !events[i].Kind.IsRecord() {
			return false
		}
	}
	return true
}

// deriveWork completes the round's work once all of its events are
// applied: the parent's notice of an execution that ended is read from the
// final snapshot. A cold round whose mode repairs open work (peek-lock,
// whose append and enqueue do not commit together) adds what every open
// schedule of the current execution needs, what an execution that ended
// before the round owed, and the starts of children an ended execution
// scheduled in a round whose messages came again (see lostSends);
// enqueueing is idempotent, so work already queued is not doubled.
func (r *Runner) deriveWork(ctx context.Context, rs *roundState) error {
	if err := rs.work.finish(rs.snap); err != nil {
		return err
	}
	if !rs.cold || !rs.ops.repairsOpenWork() {
		return nil
	}
	current, err := rs.since(ctx, rs.snap.ExecutionStartSeq)
	if err != nil {
		return err
	}
	open, err := rs.snap.OpenWork(current)
	if err != nil {
		return err
	}
	rs.dropNeedlessResends(open)
	rs.work.merge(open)
	if rs.ended != nil {
		rs.work.merge(rs.ended)
	}
	lost, err := rs.lostSends(ctx)
	if err != nil || lost == nil {
		return err
	}
	rs.dropNeedlessResends(lost)
	rs.work.merge(lost)
	return nil
}

// write records the round: pins and dead letters, the append, the
// projections, the work, the ack. A transactional round commits all of it
// or nothing; a peek-lock round's writes land one by one, and this order
// keeps a crash between any two of them safe. Pins come before the
// append, since a redelivery after it must be judged against the
// execution the first delivery targeted, not one the round started.
// Schedules are appended before their work is enqueued, so that no work
// item exists for a schedule history does not hold (a crash in between is
// repaired by the next cold round). Messages are acked last, so that a
// crash before the ack redelivers them and they are judged duplicates.
func (r *Runner) write(ctx context.Context, rs *roundState) error {
	if err := rs.ops.pin(ctx, rs.pins); err != nil {
		return fmt.Errorf("pin messages of %s: %w", rs.id, err)
	}
	if err := r.writeDeadLetters(ctx, rs); err != nil {
		return err
	}
	if err := r.enqueueEndedWork(ctx, rs); err != nil {
		return err
	}
	if err := r.appendEvents(ctx, rs); err != nil {
		return err
	}
	if err := r.opts.Hooks.crash(ctx, AfterAppend, rs.id); err != nil {
		return err
	}
	if err := r.saveProjections(ctx, rs); err != nil {
		return err
	}
	if err := r.opts.Hooks.crash(ctx, AfterProject, rs.id); err != nil {
		return err
	}
	if err := r.enqueueWork(ctx, rs); err != nil {
		return err
	}
	if err := r.releaseSlots(ctx, rs); err != nil {
		return err
	}
	if err := r.opts.Hooks.crash(ctx, AfterEnqueue, rs.id); err != nil {
		return err
	}
	if err := r.opts.Hooks.crash(ctx, BeforeAck, rs.id); err != nil {
		return err
	}
	if err := rs.ops.ack(ctx, rs.id, rs.acks); err != nil {
		return fmt.Errorf("ack messages of %s: %w", rs.id, err)
	}
	return nil
}

// writeDeadLetters moves the round's dead letters out of the queue. They
// go first, before the append: they are not part of what the round
// appends, and a round that keeps failing later (a peek-lock round
// repairing projections that a broken fold cannot write, say) must still
// move them out of the queue.
func (r *Runner) writeDeadLetters(ctx context.Context, rs *roundState) error {
	if len(rs.letters) == 0 {
		return nil
	}
	if err := rs.ops.deadLetter(ctx, rs.id, rs.letters); err != nil {
		return fmt.Errorf("dead-letter messages of %s: %w", rs.id, err)
	}
	rs.rep.DeadLettered = len(rs.letters)
	for _, l := range rs.letters {
		r.log.WarnContext(ctx, "message dead-lettered", slog.String("instance_id", rs.id), slog.String("execution_id", messageExecution(l.Message, rs.snap)), slog.String("message", l.Message.ID), slog.String("reason", string(l.Reason)), slog.String("error", l.Error))
	}
	return nil
}

// enqueueEndedWork queues, before anything is appended, the messages an
// execution that ended before the round still owed (its parent's notice),
// which a cold peek-lock round re-derived: once the round appends the start
// of the next execution, no later round sees the ended one as current and
// derives that work again, so it must be queued first. Enqueueing is
// idempotent; enqueueWork queues it again with the rest.
func (r *Runner) enqueueEndedWork(ctx context.Context, rs *roundState) error {
	if rs.ended == nil || len(rs.ended.Messages) == 0 {
		return nil
	}
	prioritize(rs.ended.Messages, rs.snap.Priority)
	if err := rs.ops.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: rs.ended.Messages, Now: rs.now}); err != nil {
		return fmt.Errorf("enqueue the ended execution's messages of %s: %w", rs.id, err)
	}
	return nil
}

// appendEvents appends the round's events, conditional on the next seq.
// In peek-lock mode the append decides the round: everything after it
// (projections, work, ack) follows from history and is redone by a later
// round when a crash cuts it short.
func (r *Runner) appendEvents(ctx context.Context, rs *roundState) error {
	if len(rs.appended) == 0 {
		return nil
	}
	if err := rs.ops.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: rs.id, Events: rs.appended}); err != nil {
		return fmt.Errorf("append history of %s: %w", rs.id, err)
	}
	rs.rep.Appended = len(rs.appended)
	return nil
}

// saveProjections writes the snapshot, the instance record and the
// product projections after the append, so that they are never ahead of
// history. A cold round whose stored projections are behind history (a
// crash after an append) folds them again even when it appends nothing.
func (r *Runner) saveProjections(ctx context.Context, rs *roundState) error {
	if len(rs.appended) == 0 && (!rs.cold || rs.projectedSeq >= rs.snap.LastSeq) {
		return nil
	}
	since := func(from int64) ([]history.Event, error) { return rs.since(ctx, from) }
	p, err := r.projections(ctx, rs.entry, rs.appended, since)
	if err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	if err := rs.ops.SaveProjections(ctx, p); err != nil {
		return fmt.Errorf("save projections of %s: %w", rs.id, err)
	}
	return nil
}

// enqueueWork enqueues the messages and activity tasks the round's events
// scheduled and cancels the activities of executions that ended. It runs
// after the append: a schedule is in history before its work is queued.
func (r *Runner) enqueueWork(ctx context.Context, rs *roundState) error {
	work := rs.work
	prioritize(work.Messages, rs.snap.Priority)
	if len(work.Messages) > 0 {
		if err := rs.ops.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: work.Messages, Now: rs.now}); err != nil {
			return fmt.Errorf("enqueue messages of %s: %w", rs.id, err)
		}
	}
	if len(work.Activities) > 0 {
		if err := rs.ops.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: work.Activities, Now: rs.now}); err != nil {
			return fmt.Errorf("enqueue activities of %s: %w", rs.id, err)
		}
	}
	for i := range work.Cancels {
		if err := rs.ops.CancelActivities(ctx, &work.Cancels[i]); err != nil {
			return fmt.Errorf("cancel activities of %s: %w", rs.id, err)
		}
	}
	return nil
}
