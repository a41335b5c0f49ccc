package providertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// base is the clock reading every case starts from: UTC, whole seconds, so
// every store keeps it exactly.
var base = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

const (
	// node is the node id of the workers the suite plays.
	node = "node-1"
	// leaseFor is the lease and claim duration of the suite's workers.
	leaseFor = time.Minute
	// waitTimeout bounds every wait on a channel.
	waitTimeout = 10 * time.Second
	// execID is the execution id of events and tasks that do not care.
	execID = "exec-1"
)

// at returns the clock reading d after base.
func at(d time.Duration) time.Time { return base.Add(d) }

// bundle is one case's store, with its mode's interface set.
type bundle struct {
	store provider.Store
	tx    provider.TxStore    // set in transactional mode
	lease provider.LeaseStore // set in peek-lock mode
}

// setup makes a fresh store and checks that it implements its mode.
// requireOneOrder skips a test of the queue order across instances on a
// store of more than one partition: such a store orders each partition's
// messages and tasks, and a dequeue or claim visits the partitions one
// after the other (see provider.DequeueParams.Partitions).
func (b *bundle) requireOneOrder(t *testing.T) {
	t.Helper()
	if p, ok := b.store.(provider.Partitioned); ok && p.Partitions() > 1 {
		t.Skipf("the store has %d partitions: the order across instances holds within a partition", p.Partitions())
	}
}

func setup(t *testing.T, factory Factory) *bundle {
	t.Helper()
	s := factory(t)
	require.NotNil(t, s, "factory returned a nil store")
	b := &bundle{store: s}
	switch mode := s.Mode(); mode {
	case provider.ModeTransactional:
		tx, ok := s.(provider.TxStore)
		require.True(t, ok, "store reports mode %s but does not implement provider.TxStore", mode)
		b.tx = tx
	case provider.ModePeekLock:
		ls, ok := s.(provider.LeaseStore)
		require.True(t, ok, "store reports mode %s but does not implement provider.LeaseStore", mode)
		b.lease = ls
	default:
		require.FailNow(t, "store reports an unknown mode", "mode %d", int(mode))
	}
	return b
}

// steps runs fn on the store's round steps: inside one RunRound in
// transactional mode, directly on the store in peek-lock mode.
func (b *bundle) steps(ctx context.Context, fn func(ctx context.Context, s provider.Steps) error) error {
	if b.tx != nil {
		return b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error { return fn(ctx, tx) })
	}
	return fn(ctx, b.lease)
}

// signal builds a valid message: a raised event keyed by the message id.
func signal(t *testing.T, id, instanceID string) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(id, instanceID, "", id, &history.EventRaised{
		Name: "poke", Payload: []byte("payload of " + id), IdempotencyKey: id, Sender: "user:alice",
	})
	require.NoError(t, err)
	m.Actor = history.UserActor("alice")
	return m
}

// queued returns m as a store must hand it back after enqueueing it at now:
// zero VisibleAt and EnqueuedAt take now.
func queued(m provider.Message, now time.Time) provider.Message {
	if m.VisibleAt.IsZero() {
		m.VisibleAt = now
	}
	if m.EnqueuedAt.IsZero() {
		m.EnqueuedAt = now
	}
	return m
}

// messageIDs returns the ids of msgs in order.
func messageIDs(msgs []provider.Message) []string {
	ids := make([]string, len(msgs))
	for i := range msgs {
		ids[i] = msgs[i].ID
	}
	return ids
}

// enqueue adds messages outside a round.
func (b *bundle) enqueue(t *testing.T, now time.Time, msgs ...provider.Message) {
	t.Helper()
	require.NoError(t, b.store.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: msgs, Now: now}))
}

// delivery is the batch of one instance taken from the queue.
type delivery struct {
	InstanceID string
	Messages   []provider.Message
}

// take dequeues the visible messages of one instance at now (of instanceID
// when it is set), at most limit, and acks all of them. It returns nil when
// no instance has work. It checks what every batch must satisfy.
func (b *bundle) take(t *testing.T, now time.Time, limit int, instanceID string) *delivery {
	t.Helper()
	ctx := t.Context()
	var d *delivery
	if b.tx != nil {
		err := b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, Limit: limit, InstanceID: instanceID})
			if err != nil || batch == nil {
				return err
			}
			d = &delivery{InstanceID: batch.InstanceID, Messages: batch.Messages}
			return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: batch.InstanceID, MessageIDs: messageIDs(batch.Messages)})
		})
		require.NoError(t, err)
	} else {
		l, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{
			Now: now, LockedUntil: now.Add(leaseFor), Owner: node, Limit: limit, InstanceID: instanceID,
		})
		require.NoError(t, err)
		if l == nil {
			return nil
		}
		require.NotEmpty(t, l.Token, "lease without a token")
		d = &delivery{InstanceID: l.InstanceID, Messages: l.Messages}
		require.NoError(t, b.lease.AckLease(ctx, &provider.AckLeaseParams{Lease: l, MessageIDs: messageIDs(l.Messages)}))
	}
	if d == nil {
		return nil
	}
	require.NotEmpty(t, d.Messages, "a batch of instance %s without messages", d.InstanceID)
	require.LessOrEqual(t, len(d.Messages), limit, "batch exceeds its limit")
	if instanceID != "" {
		require.Equal(t, instanceID, d.InstanceID, "batch of another instance than asked for")
	}
	for _, m := range d.Messages {
		require.Equal(t, d.InstanceID, m.InstanceID, "batch of %s holds message %s of another instance", d.InstanceID, m.ID)
		require.False(t, m.VisibleAt.After(now), "message %s delivered before its VisibleAt", m.ID)
	}
	return d
}

// drain takes and acks every message visible at now, in delivery order.
func (b *bundle) drain(t *testing.T, now time.Time) []provider.Message {
	t.Helper()
	var out []provider.Message
	for range 1000 {
		d := b.take(t, now, 100, "")
		if d == nil {
			return out
		}
		out = append(out, d.Messages...)
	}
	require.FailNow(t, "the queue does not drain: the same messages come back after their ack")
	return nil
}

// nextVisible returns NextVisibleAt of the orchestration queue.
func (b *bundle) nextVisible(t *testing.T) (time.Time, bool) {
	t.Helper()
	next, ok, err := b.store.NextVisibleAt(t.Context(), &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration})
	require.NoError(t, err)
	return next, ok
}

// nextTask returns NextVisibleAt of the activity queue for queues.
func (b *bundle) nextTask(t *testing.T, queues ...string) (time.Time, bool) {
	t.Helper()
	next, ok, err := b.store.NextVisibleAt(t.Context(), &provider.NextVisibleAtParams{Queue: provider.QueueActivity, Queues: queues})
	require.NoError(t, err)
	return next, ok
}

// letters builds the dead letters of the messages with the given ids the way
// the round runner does.
func letters(msgs []provider.Message, ids []string, reason provider.Reason, text string, now time.Time) ([]provider.DeadLetter, error) {
	var out []provider.DeadLetter
	for _, id := range ids {
		i := slices.IndexFunc(msgs, func(m provider.Message) bool { return m.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("message %s was not delivered", id)
		}
		m := msgs[i]
		out = append(out, provider.DeadLetter{
			ID: provider.DeadLetterID(m.ID, m.EnqueuedAt), InstanceID: m.InstanceID, Message: &m,
			Reason: reason, Error: text, Node: node, At: now, Attempts: m.Attempts + 1,
			Status: provider.DeadLetterDead,
		})
	}
	return out, nil
}

// deadLetter dequeues the visible messages of instanceID at now and moves
// those with the given ids to the dead-letter store (DeadLetterMessages in
// transactional mode, DeadLetterLeased in peek-lock mode); the others stay
// queued. It returns the letters it wrote.
func (b *bundle) deadLetter(t *testing.T, now time.Time, instanceID string, ids []string, reason provider.Reason, text string) []provider.DeadLetter {
	t.Helper()
	ctx := t.Context()
	var written []provider.DeadLetter
	if b.tx != nil {
		var found bool
		err := b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, Limit: 100, InstanceID: instanceID})
			if err != nil || batch == nil {
				return err
			}
			found = true
			if written, err = letters(batch.Messages, ids, reason, text, now); err != nil {
				return err
			}
			return tx.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: instanceID, Letters: written})
		})
		require.NoError(t, err)
		require.True(t, found, "instance %s has no visible messages to dead-letter", instanceID)
		return written
	}
	l, err := b.lease.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(leaseFor), Owner: node, Limit: 100, InstanceID: instanceID})
	require.NoError(t, err)
	require.NotNil(t, l, "instance %s has no visible messages to dead-letter", instanceID)
	written, err = letters(l.Messages, ids, reason, text, now)
	require.NoError(t, err)
	require.NoError(t, b.lease.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: l, Letters: written}))
	require.NoError(t, b.lease.AckLease(ctx, &provider.AckLeaseParams{Lease: l}))
	return written
}

// sortedLetters returns letters sorted by id, the order of ListDeadLetters.
func sortedLetters(ls ...[]provider.DeadLetter) []provider.DeadLetter {
	out := slices.Concat(ls...)
	slices.SortFunc(out, func(a, b provider.DeadLetter) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// listLetters returns ListDeadLetters(p).
func (b *bundle) listLetters(t *testing.T, p provider.ListDeadLettersParams) []provider.DeadLetter {
	t.Helper()
	ls, err := b.deadLetters(t).ListDeadLetters(t.Context(), &p)
	require.NoError(t, err)
	return ls
}

// getLetter returns GetDeadLetter(id), which must exist.
func (b *bundle) getLetter(t *testing.T, id string) provider.DeadLetter {
	t.Helper()
	dl, err := b.deadLetters(t).GetDeadLetter(t.Context(), id)
	require.NoError(t, err)
	require.NotNil(t, dl)
	return *dl
}

// resolve calls ResolveDeadLetter.
func (b *bundle) resolve(t *testing.T, id string, status provider.DeadLetterStatus, by string, now time.Time) error {
	t.Helper()
	return b.deadLetters(t).ResolveDeadLetter(t.Context(), &provider.ResolveDeadLetterParams{ID: id, Status: status, By: by, Now: now})
}

// incident returns the Incident of the instance record, which must exist.
func (b *bundle) incident(t *testing.T, instanceID string) string {
	t.Helper()
	rec, err := b.store.GetInstance(t.Context(), instanceID)
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec.Incident
}

// activity builds the task of the ActivityScheduled event at seq, with
// every field set.
func activity(instanceID, executionID string, seq int64, queue string) provider.ActivityTask {
	return provider.ActivityTask{
		ID: provider.ActivityTaskID(instanceID, executionID, seq), InstanceID: instanceID, ExecutionID: executionID,
		ScheduledSeq: seq, Name: "charge-card", Queue: queue, Input: []byte(`{"amount":42}`), Attempt: 1,
		Retry: history.RetryPolicy{
			MaxAttempts: 5, InitialInterval: time.Second, MaxInterval: time.Minute, Multiplier: 2,
			NonRetryable: []string{"CardDeclined"},
		},
		Timeout: 30 * time.Second,
	}
}

// queuedTask returns task as a store must hand it back after enqueueing it
// at now.
func queuedTask(task provider.ActivityTask, now time.Time) provider.ActivityTask {
	if task.VisibleAt.IsZero() {
		task.VisibleAt = now
	}
	if task.EnqueuedAt.IsZero() {
		task.EnqueuedAt = now
	}
	return task
}

// enqueueTasks adds activity tasks through the round steps.
func (b *bundle) enqueueTasks(t *testing.T, now time.Time, tasks ...provider.ActivityTask) {
	t.Helper()
	require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
		return s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: tasks, Now: now})
	}))
}

// claim claims a task of queues at now for leaseFor; nil when there is none.
func (b *bundle) claim(t *testing.T, now time.Time, queues ...string) *provider.ActivityLease {
	t.Helper()
	l, err := b.store.ClaimActivity(t.Context(), &provider.ClaimActivityParams{
		Queues: queues, Owner: node, Now: now, LockedUntil: now.Add(leaseFor),
	})
	require.NoError(t, err)
	if l != nil {
		require.NotEmpty(t, l.Token, "claim without a token")
		require.Equal(t, node, l.Owner)
		require.Equal(t, now.Add(leaseFor), l.LockedUntil)
		require.False(t, l.Task.VisibleAt.After(now), "task %s claimed before its VisibleAt", l.Task.ID)
	}
	return l
}

// complete completes a claimed task with its result message at now.
func (b *bundle) complete(t *testing.T, l *provider.ActivityLease, now time.Time) provider.Message {
	t.Helper()
	res, err := provider.ActivityOutcome(&l.Task, []byte(`"done"`), nil)
	require.NoError(t, err)
	require.NoError(t, b.store.CompleteActivity(t.Context(), &provider.CompleteActivityParams{
		TaskID: l.Task.ID, Token: l.Token, Result: res, Now: now,
	}))
	return res
}

// zombieCalls makes every call a task's old claimer can make with lease l
// and checks that each returns ErrLeaseLost.
func (b *bundle) zombieCalls(t *testing.T, l *provider.ActivityLease, now time.Time) {
	t.Helper()
	ctx := t.Context()
	res, err := provider.ActivityOutcome(&l.Task, []byte(`"zombie"`), nil)
	require.NoError(t, err)
	require.ErrorIs(t, b.store.HeartbeatActivity(ctx, &provider.HeartbeatActivityParams{
		TaskID: l.Task.ID, Token: l.Token, LockedUntil: now.Add(time.Hour),
	}), provider.ErrLeaseLost, "HeartbeatActivity")
	require.ErrorIs(t, b.store.CompleteActivity(ctx, &provider.CompleteActivityParams{
		TaskID: l.Task.ID, Token: l.Token, Result: res, Now: now,
	}), provider.ErrLeaseLost, "CompleteActivity")
	require.ErrorIs(t, b.store.RetryActivity(ctx, &provider.RetryActivityParams{
		TaskID: l.Task.ID, Token: l.Token, VisibleAt: now.Add(time.Hour), Error: "zombie retry",
	}), provider.ErrLeaseLost, "RetryActivity")
	task := l.Task
	require.ErrorIs(t, b.store.DeadLetterActivity(ctx, &provider.DeadLetterActivityParams{
		TaskID: l.Task.ID, Token: l.Token, Letter: provider.DeadLetter{
			ID: provider.DeadLetterID(task.ID, task.EnqueuedAt), InstanceID: task.InstanceID, Activity: &task,
			Reason: provider.ReasonUnknownActivity, Error: "zombie", Node: node, At: now, Attempts: task.Attempt,
			Status: provider.DeadLetterDead,
		},
	}), provider.ErrLeaseLost, "DeadLetterActivity")
}

// startEvent builds an unsealed ExecutionStarted event; chain numbers and
// seals events.
func startEvent(t *testing.T, executionID string) history.Event {
	t.Helper()
	return event(t, executionID, executionID, &history.ExecutionStarted{
		Name: "approve-claim", Version: "v1", Input: []byte(`{"claim":7}`), BusinessKey: "claim-7",
	})
}

// markerEvent builds an unsealed MarkerRecorded event, which has no
// idempotency key.
func markerEvent(t *testing.T, name string) history.Event {
	t.Helper()
	return event(t, "", "", &history.MarkerRecorded{Marker: history.MarkerSideEffect, Name: name, Value: []byte(name)})
}

// raisedEvent builds an unsealed EventRaised event keyed by key.
func raisedEvent(t *testing.T, key string) history.Event {
	t.Helper()
	return event(t, "", key, &history.EventRaised{Name: "approved", Payload: []byte(key), IdempotencyKey: key})
}

// event builds an event of attrs; an empty executionID means execID.
func event(t *testing.T, executionID, correlationID string, attrs history.Attributes) history.Event {
	t.Helper()
	payload, err := history.EncodeAttributes(attrs)
	require.NoError(t, err)
	if executionID == "" {
		executionID = execID
	}
	return history.Event{
		ExecutionID: executionID, Kind: attrs.EventKind(), CorrelationID: correlationID,
		Actor: history.WorkerActor(node), Payload: payload,
	}
}

// chain numbers events after the log prev of instanceID (its whole history
// so far) and seals them onto it.
func chain(instanceID string, prev []history.Event, events ...history.Event) []history.Event {
	var prevHash []byte
	if len(prev) > 0 {
		prevHash = prev[len(prev)-1].Hash
	}
	return chainAt(instanceID, int64(len(prev))+1, prevHash, events...)
}

// chainAt numbers events from seq and seals them onto prevHash.
func chainAt(instanceID string, seq int64, prevHash []byte, events ...history.Event) []history.Event {
	out := slices.Clone(events)
	for i := range out {
		out[i].Seq = seq + int64(i)
		out[i].InstanceID = instanceID
		out[i].At = at(time.Duration(out[i].Seq) * time.Second)
	}
	history.Seal(prevHash, out)
	return out
}

// appendEvents calls AppendHistory through the round steps.
func (b *bundle) appendEvents(ctx context.Context, instanceID string, events []history.Event) error {
	return b.steps(ctx, func(ctx context.Context, s provider.Steps) error {
		return s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: instanceID, Events: events})
	})
}

// load returns LoadHistory of instanceID from fromSeq.
func (b *bundle) load(t *testing.T, instanceID string, fromSeq int64) []history.Event {
	t.Helper()
	events, err := b.store.LoadHistory(t.Context(), &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: fromSeq})
	require.NoError(t, err)
	return events
}

// record builds an instance record with every field set; label tells
// records apart.
func record(instanceID string, seq int64, label string) *provider.InstanceRecord {
	return &provider.InstanceRecord{
		InstanceID: instanceID, ExecutionID: execID, Name: "approve-claim", Version: "v1",
		Status: provider.StatusCompleted, BusinessKey: "claim-" + label,
		BusinessParts: map[string]string{"region": "north", "label": label},
		CustomStatus:  []byte("status " + label), ParentID: "parent-" + label,
		CreatedAt: at(time.Second), UpdatedAt: at(time.Duration(seq) * time.Second),
		CompletedAt: at(time.Duration(seq) * time.Second), Output: []byte("output " + label),
		Failure:   &history.Failure{Message: "failure " + label, Type: "Err", NonRetryable: true, Details: []byte("details")},
		LastError: "last error " + label, LastSeq: seq,
	}
}

// projections builds the projections of instanceID folded to seq; without
// instance, the instance record is left unchanged.
func projections(t *testing.T, instanceID string, seq int64, label string, instance bool) *provider.Projections {
	t.Helper()
	snap := round.NewSnapshot(instanceID)
	snap.ExecutionID, snap.Name, snap.Status, snap.LastSeq, snap.CustomStatus = execID, "approve-claim", provider.StatusRunning, seq, []byte(label)
	data, err := round.MarshalSnapshot(snap)
	require.NoError(t, err)
	p := &provider.Projections{
		InstanceID: instanceID, Seq: seq, Snapshot: data,
		Tasks: []provider.TaskRecord{{
			TaskID: "task-1", InstanceID: instanceID, ExecutionID: execID, Name: "review", Status: provider.TaskOpen,
			Roles: []string{"reviewer"}, Payload: []byte(label), CreatedAt: at(time.Second), UpdatedAt: at(time.Second), Seq: seq,
		}},
		TaskEvents: []provider.TaskEventRecord{{
			InstanceID: instanceID, TaskID: "task-1", Seq: 2, Kind: history.KindTaskCreated,
			Actor: history.ActorSystem, At: at(2 * time.Second), Detail: "created",
		}},
		Custom: []provider.CustomRecord{{Name: "totals", Version: 1, InstanceID: instanceID, Seq: seq, Data: []byte(label)}},
	}
	if instance {
		p.Instance = record(instanceID, seq, label)
	}
	return p
}

// save calls SaveProjections through the round steps.
func (b *bundle) save(t *testing.T, p *provider.Projections) {
	t.Helper()
	require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
		return s.SaveProjections(ctx, p)
	}))
}

// snapshotOf returns GetSnapshot of instanceID, which must exist.
func (b *bundle) snapshotOf(t *testing.T, instanceID string) ([]byte, int64) {
	t.Helper()
	data, seq, err := b.store.GetSnapshot(t.Context(), instanceID)
	require.NoError(t, err)
	return data, seq
}

// instanceOf returns GetInstance of instanceID, which must exist.
func (b *bundle) instanceOf(t *testing.T, instanceID string) *provider.InstanceRecord {
	t.Helper()
	rec, err := b.store.GetInstance(t.Context(), instanceID)
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec
}

// waitClosed fails unless ch is closed within waitTimeout.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for "+what)
	}
}

// abandon calls AbandonMessages.
func (b *bundle) abandon(t *testing.T, instanceID string, ids []string, visibleAt time.Time, text string) {
	t.Helper()
	require.NoError(t, b.store.AbandonMessages(t.Context(), &provider.AbandonMessagesParams{
		InstanceID: instanceID, MessageIDs: ids, VisibleAt: visibleAt, Error: text,
	}))
}
