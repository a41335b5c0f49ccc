package mongo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

var base = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// raised is an EventRaised event of execution exec-1 keyed by corr.
func raised(t *testing.T, corr string) history.Event {
	t.Helper()
	payload, err := history.EncodeAttributes(&history.EventRaised{Name: "poke", IdempotencyKey: corr})
	require.NoError(t, err)
	return history.Event{ExecutionID: "exec-1", Kind: history.KindEventRaised, CorrelationID: corr, Payload: payload}
}

// sealed numbers events from seq and chains them onto prev.
func sealed(instanceID string, seq int64, prev []byte, events ...history.Event) []history.Event {
	for i := range events {
		events[i].Seq, events[i].InstanceID, events[i].At = seq+int64(i), instanceID, base.Add(time.Duration(seq+int64(i))*time.Second)
	}
	history.Seal(prev, events)
	return events
}

// TestOrphanKeyOfALongerBatchIsTakenOver: a round claimed the key of its
// event at seq 5 and crashed before it wrote the events. The next round's
// batch is longer (a timer came first): its event with that key lands at
// seq 6, in an append that also begins at seq 5. The orphan key must not
// block it (it did: the key was judged by the event at seq 5, which the
// same append was writing, and refused for good).
func TestOrphanKeyOfALongerBatchIsTakenOver(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	first := sealed("i", 1, nil, raised(t, "a"), raised(t, "b"), raised(t, "c"), raised(t, "d"))
	require.NoError(t, s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i", Events: first}))
	m1 := raised(t, "m1")
	k, ok := m1.Key()
	require.True(t, ok)
	require.NoError(t, chmongo.ClaimKey(ctx, s, "i", k, 5, 5))

	next := sealed("i", 5, first[3].Hash, raised(t, "timer"), m1)
	require.NoError(t, s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i", Events: next}))
	events, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i", FromSeq: 1})
	require.NoError(t, err)
	require.Len(t, events, 6)
	require.NoError(t, history.Verify(events))

	// The key is now used: another event with it is a conflict.
	again := sealed("i", 7, events[5].Hash, raised(t, "m1"))
	require.ErrorIs(t, s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i", Events: again}), provider.ErrConflict)
}

// TestZombieCancelSparesItsSuccessorsTasks: a zombie round cancels the
// activity tasks of every execution but its own, and stalls after its
// first read; meanwhile its lease runs out, a successor takes the
// instance and enqueues a task of a new execution. The zombie must fail
// its fence and leave that task queued (it cancelled it: the tasks were
// chosen after the fence).
func TestZombieCancelSparesItsSuccessorsTasks(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	start, err := provider.NewMessage("m-1", "i", "exec-1", "exec-1", &history.ExecutionStarted{Name: "wf"})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start}, Now: base}))
	zombie, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(time.Minute), Owner: "zombie"})
	require.NoError(t, err)
	require.NotNil(t, zombie)

	later := base.Add(2 * time.Minute)
	task := provider.ActivityTask{ID: provider.ActivityTaskID("i", "exec-2", 3), InstanceID: "i", ExecutionID: "exec-2", ScheduledSeq: 3, Name: "a"}
	chmongo.SetAfterFirstRead(s, func() {
		chmongo.SetAfterFirstRead(s, nil)
		successor, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: later, LockedUntil: later.Add(time.Minute), Owner: "successor"})
		require.NoError(t, err)
		require.NotNil(t, successor, "the zombie's lease ran out")
		require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: later, Lease: successor}))
	})
	err = s.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "i", OtherThan: "exec-1", Lease: zombie})
	require.ErrorIs(t, err, provider.ErrLeaseLost)
	queued, err := s.ListQueuedActivities(ctx, &provider.ListQueuedActivitiesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Len(t, queued, 1, "the successor's task is still queued")
	require.Equal(t, task.ID, queued[0].Task.ID)
}

// TestClaimOfADeadClaimerIsTakenOver: a claimer inserted its claim
// step and died before it wrote the claim into the task's hint. Once the
// claim has expired, the task is claimed again, as a takeover (it was
// once never claimed again: every claimer collided with the claim).
func TestClaimOfADeadClaimerIsTakenOver(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	task := provider.ActivityTask{ID: provider.ActivityTaskID("i", "exec-1", 2), InstanceID: "i", ExecutionID: "exec-1", ScheduledSeq: 2, Name: "a"}
	require.NoError(t, s.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base}))
	require.NoError(t, chmongo.InsertClaim(ctx, s, task.ID, 1, base.Add(time.Minute).UnixNano()))

	claim := func(now time.Time) *provider.ActivityLease {
		l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w", Now: now, LockedUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		return l
	}
	require.Nil(t, claim(base.Add(time.Second)), "the dead claimer's claim is live until it expires")
	l := claim(base.Add(2 * time.Minute))
	require.NotNil(t, l, "the task is claimed once the dead claim expired")
	require.Equal(t, task.ID, l.Task.ID)
	require.NotNil(t, l.Expired, "the dead claimer's attempt is not reported")
	require.NoError(t, s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: task.ID, Token: l.Token, Now: base.Add(2 * time.Minute),
		Result: mustResult(t, &l.Task)}))
}

func mustResult(t *testing.T, task *provider.ActivityTask) provider.Message {
	t.Helper()
	m, err := provider.ActivityOutcome(task, []byte{0xc0}, nil)
	require.NoError(t, err)
	return m
}

// TestInterruptedPurgeIsFinishedAndItsIDLeased: a purge that deleted the
// instance's record and stopped before its history, keys and epochs
// leaves its mark as the newest epoch, which keeps every round off the
// id. A purge of the id with OnlyUnfinished (what Engine.Purge and
// Engine.Start call when no record is found) finishes it with the same
// tombstone, and a start of the id queued meanwhile is kept and leased.
func TestInterruptedPurgeIsFinishedAndItsIDLeased(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	start := func(exec string) provider.Message {
		m, err := provider.NewMessage("start-"+exec, "i", exec, exec, &history.ExecutionStarted{Name: "w"})
		require.NoError(t, err)
		return m
	}
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start("exec-1")}, Now: base}))
	l, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: base, LockedUntil: base.Add(time.Minute), Owner: "n1", InstanceID: "i"})
	require.NoError(t, err)
	require.NotNil(t, l)
	events := sealed("i", 1, nil, raised(t, "a"))
	events[0].ExecutionID = "exec-1"
	history.Seal(nil, events)
	require.NoError(t, s.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i", Events: events, Lease: l}))
	require.NoError(t, s.SaveProjections(ctx, &provider.Projections{InstanceID: "i", Seq: 1, Instance: &provider.InstanceRecord{
		InstanceID: "i", ExecutionID: "exec-1", Name: "w", Status: provider.StatusCompleted, CreatedAt: base, UpdatedAt: base,
	}}))
	require.NoError(t, s.AckLease(ctx, &provider.AckLeaseParams{Lease: l, MessageIDs: []string{"start-exec-1"}}))

	crash := errors.New("crash")
	chmongo.SetBeforeWrite(s, func(what string) error {
		if what == "purge: history" {
			return crash
		}
		return nil
	})
	_, err = s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "i", By: "ops", Now: base.Add(time.Hour)})
	require.ErrorIs(t, err, crash)
	chmongo.SetBeforeWrite(s, nil)
	_, err = s.GetInstance(ctx, "i")
	require.ErrorIs(t, err, provider.ErrNotFound, "the purge did not stop after the record went")

	// The id is started again before the purge is finished.
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{start("exec-2")}, Now: base.Add(time.Hour)}))
	blocked, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: base.Add(time.Hour), LockedUntil: base.Add(time.Hour + time.Minute), Owner: "n1"})
	require.NoError(t, err)
	require.Nil(t, blocked, "a half-purged instance was leased")

	ts, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "i", By: "someone", Now: base.Add(2 * time.Hour), OnlyUnfinished: true})
	require.NoError(t, err)
	require.Equal(t, provider.Tombstone{InstanceID: "i", LastSeq: 1, LastHash: events[0].Hash, PurgedAt: base.Add(time.Hour), PurgedBy: "ops"}, *ts)
	got, err := s.ListTombstones(ctx, "i")
	require.NoError(t, err)
	require.Equal(t, []provider.Tombstone{*ts}, got)
	left, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i", FromSeq: 1})
	require.NoError(t, err)
	require.Empty(t, left)

	next, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: base.Add(2 * time.Hour), LockedUntil: base.Add(2*time.Hour + time.Minute), Owner: "n1"})
	require.NoError(t, err)
	require.NotNil(t, next, "the new run's start is never leased")
	require.Equal(t, "i", next.InstanceID)
	require.Len(t, next.Messages, 1)
	require.Equal(t, "start-exec-2", next.Messages[0].ID)
	_, err = s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "i", By: "ops", Now: base.Add(2 * time.Hour), OnlyUnfinished: true})
	require.ErrorIs(t, err, provider.ErrNotFound)
}

// TestHalfWrittenDeadLetterThenRedrive: as the memory store's test of the
// same name, on MongoDB: DeadLetterLeased wrote the letter and stopped
// before it removed the message; the letter is redriven meanwhile, and
// the next delivery dead-letters the message again. The message must
// stay queued or in an unresolved letter.
func TestHalfWrittenDeadLetterThenRedrive(t *testing.T) {
	ctx := context.Background()
	s := mongotest.NewStore(t, chmongo.Options{})
	m, err := provider.NewMessage("m-1", "inst-a", "", "k-1", &history.EventRaised{Name: "poke", IdempotencyKey: "k-1"})
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: base}))
	deadLetter := func(now time.Time) error {
		t.Helper()
		l, err := s.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(time.Minute), Owner: "n", InstanceID: "inst-a"})
		require.NoError(t, err)
		require.NotNil(t, l, "the message is not delivered")
		require.Len(t, l.Messages, 1)
		q := l.Messages[0]
		return s.DeadLetterLeased(ctx, &provider.DeadLetterLeasedParams{Lease: l, Letters: []provider.DeadLetter{{
			ID: provider.DeadLetterID(q.ID, q.EnqueuedAt), InstanceID: "inst-a", Message: &q,
			Reason: provider.ReasonMaxDeliveries, Error: "too many", Node: "n", At: now, Attempts: q.Attempts + 1,
		}}})
	}
	crash := errors.New("crash")
	chmongo.SetBeforeWrite(s, func(what string) error {
		if what == "dead letter: remove m-1" {
			return crash
		}
		return nil
	})
	require.ErrorIs(t, deadLetter(base), crash)
	chmongo.SetBeforeWrite(s, nil)
	letters, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: "inst-a"})
	require.NoError(t, err)
	require.Len(t, letters, 1)

	redriveErr := s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: letters[0].ID, Status: provider.DeadLetterRedriven, By: "ops", Now: base.Add(time.Second)})
	require.NoError(t, deadLetter(base.Add(2*time.Minute)))

	queued, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a"})
	require.NoError(t, err)
	dead, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: "inst-a", Status: provider.DeadLetterDead})
	require.NoError(t, err)
	require.True(t, len(queued) == 1 || (len(dead) == 1 && dead[0].Message != nil && dead[0].Message.ID == "m-1"),
		"the message is lost: redrive %v, queued %v, unresolved letters %v", redriveErr, queued, dead)
	if len(dead) == 1 {
		require.NoError(t, s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: dead[0].ID, Status: provider.DeadLetterRedriven, By: "ops", Now: base.Add(3 * time.Minute)}))
		queued, err = s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Len(t, queued, 1, "the redrive queued nothing")
	}
}
