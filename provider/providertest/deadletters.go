package providertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testDeadLetters covers the dead-letter store: moving messages and tasks
// there, listing and paging, the instance's incident, redrive and discard.
func testDeadLetters(t *testing.T, factory Factory) {
	t.Run("MovedMessagesAreListedAndNoLongerDelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.save(t, projections(t, "inst-a", 1, "a", true))
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"), signal(t, "m-3", "inst-a"), signal(t, "n-1", "inst-b"))
		lettersA := b.deadLetter(t, at(time.Second), "inst-a", []string{"m-1", "m-3"}, provider.ReasonPanic, "turn panicked: boom")
		lettersB := b.deadLetter(t, at(2*time.Second), "inst-b", []string{"n-1"}, provider.ReasonUndecodable, "bad payload")

		require.Equal(t, []string{"m-2"}, messageIDs(b.drain(t, at(time.Hour))), "dead-lettered messages are still delivered")

		all := sortedLetters(lettersA, lettersB)
		require.Equal(t, all, b.listLetters(t, provider.ListDeadLettersParams{}), "dead letters do not round-trip")
		for _, dl := range all {
			require.Equal(t, dl, b.getLetter(t, dl.ID))
		}
		require.Equal(t, sortedLetters(lettersA), b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-a"}))
		require.Equal(t, lettersB, b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-b"}))
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-c"}))
		require.Equal(t, all, b.listLetters(t, provider.ListDeadLettersParams{Status: provider.DeadLetterDead}))
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{Status: provider.DeadLetterRedriven}))
		require.Equal(t, all[:2], b.listLetters(t, provider.ListDeadLettersParams{Limit: 2}))

		// Paging one by one visits every letter once, in id order.
		var paged []provider.DeadLetter
		after := ""
		for range len(all) + 1 {
			page := b.listLetters(t, provider.ListDeadLettersParams{AfterID: after, Limit: 1})
			if len(page) == 0 {
				break
			}
			require.Len(t, page, 1)
			paged = append(paged, page...)
			after = page[0].ID
		}
		require.Equal(t, all, paged)
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-b", AfterID: lettersB[0].ID}))

		require.Contains(t, b.incident(t, "inst-a"), string(provider.ReasonPanic), "the instance does not show its incident")
		// A later projection write keeps the incident: it is not folded.
		b.save(t, projections(t, "inst-a", 2, "a2", true))
		require.Contains(t, b.incident(t, "inst-a"), string(provider.ReasonPanic), "a projection write cleared the incident")
	})

	t.Run("RedriveRequeuesWithAttemptsReset", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.save(t, projections(t, "inst-a", 1, "a", true))
		m := signal(t, "m-1", "inst-a")
		b.enqueue(t, base, m)
		b.abandon(t, "inst-a", []string{"m-1"}, base, "first failure")
		dead := b.deadLetter(t, at(time.Second), "inst-a", []string{"m-1"}, provider.ReasonMaxDeliveries, "too many deliveries")
		require.Len(t, dead, 1)
		require.Contains(t, b.incident(t, "inst-a"), string(provider.ReasonMaxDeliveries), "the instance does not show its incident")
		require.Nil(t, b.take(t, at(time.Hour), 100, ""))

		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterRedriven, "user:ops", at(time.Minute)))
		want := dead[0]
		want.Status, want.ResolvedBy, want.ResolvedAt = provider.DeadLetterRedriven, "user:ops", at(time.Minute)
		require.Equal(t, want, b.getLetter(t, dead[0].ID))
		require.Equal(t, []provider.DeadLetter{want}, b.listLetters(t, provider.ListDeadLettersParams{Status: provider.DeadLetterRedriven}))
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{Status: provider.DeadLetterDead}))
		require.Empty(t, b.incident(t, "inst-a"), "a resolved dead letter is still the instance's incident")

		require.ErrorIs(t, b.resolve(t, dead[0].ID, provider.DeadLetterRedriven, "user:ops", at(2*time.Minute)), provider.ErrInvalidState)
		require.ErrorIs(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(2*time.Minute)), provider.ErrInvalidState)
		require.Equal(t, want, b.getLetter(t, dead[0].ID), "a second resolution changed the record")

		// The message is queued again, visible at the redrive's Now, with
		// its delivery count reset; dead-lettered again it is a new letter.
		require.Nil(t, b.take(t, at(time.Minute).Add(-time.Microsecond), 100, "inst-a"), "a redriven message was visible before the redrive")
		again := b.deadLetter(t, at(time.Minute), "inst-a", []string{"m-1"}, provider.ReasonPanic, "still failing")
		require.Len(t, again, 1)
		redriven := *again[0].Message
		require.Equal(t, 0, redriven.Attempts, "redrive did not reset Attempts")
		require.Equal(t, at(time.Minute), redriven.VisibleAt)
		require.NotEqual(t, dead[0].Message.EnqueuedAt, redriven.EnqueuedAt, "a redriven message is enqueued anew")
		require.Equal(t, m.Payload, redriven.Payload)
		require.Equal(t, m.Kind, redriven.Kind)
		require.Equal(t, m.CorrelationID, redriven.CorrelationID)
		require.NotEqual(t, dead[0].ID, again[0].ID)
		require.Len(t, b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-a"}), 2)
		incident := b.incident(t, "inst-a")
		require.Contains(t, incident, string(provider.ReasonPanic), "the incident is not the newest unresolved dead letter")
		require.NotContains(t, incident, string(provider.ReasonMaxDeliveries), "the incident shows a resolved dead letter")
	})

	t.Run("ListDefaultsToAHundred", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		var written []provider.DeadLetter
		for _, c := range []struct {
			instanceID string
			n          int
		}{{"inst-a", 60}, {"inst-b", 41}} {
			var msgs []provider.Message
			var ids []string
			for i := range c.n {
				m := signal(t, fmt.Sprintf("m-%s-%03d", c.instanceID, i), c.instanceID)
				msgs, ids = append(msgs, m), append(ids, m.ID)
			}
			b.enqueue(t, base, msgs...)
			written = append(written, b.deadLetter(t, at(time.Second), c.instanceID, ids, provider.ReasonRejected, "rejected")...)
		}
		all := sortedLetters(written)
		require.Len(t, all, 101)
		require.Equal(t, all[:100], b.listLetters(t, provider.ListDeadLettersParams{}), "Limit zero means 100")
		require.Equal(t, all[100:], b.listLetters(t, provider.ListDeadLettersParams{AfterID: all[99].ID}))
		require.Len(t, b.listLetters(t, provider.ListDeadLettersParams{Limit: 101}), 101)
	})

	t.Run("IncidentIsTheNewestUnresolved", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.save(t, projections(t, "inst-a", 1, "a", true))
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		older := b.deadLetter(t, at(time.Second), "inst-a", []string{"m-1"}, provider.ReasonNondeterminism, "code changed")
		b.enqueue(t, at(2*time.Second), signal(t, "m-2", "inst-a"))
		newer := b.deadLetter(t, at(3*time.Second), "inst-a", []string{"m-2"}, provider.ReasonPanic, "turn panicked")
		require.Len(t, older, 1)
		require.Len(t, newer, 1)

		incident := b.incident(t, "inst-a")
		require.Contains(t, incident, string(provider.ReasonPanic))
		require.NotContains(t, incident, string(provider.ReasonNondeterminism))
		require.NoError(t, b.resolve(t, newer[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		require.Contains(t, b.incident(t, "inst-a"), string(provider.ReasonNondeterminism),
			"resolving the newest dead letter hid the older unresolved one")
		require.NoError(t, b.resolve(t, older[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		require.Empty(t, b.incident(t, "inst-a"))
	})

	t.Run("DiscardOnlyRecords", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.save(t, projections(t, "inst-a", 1, "a", true))
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		dead := b.deadLetter(t, at(time.Second), "inst-a", []string{"m-1"}, provider.ReasonNotStarted, "not started")
		require.Len(t, dead, 1)

		require.NoError(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		want := dead[0]
		want.Status, want.ResolvedBy, want.ResolvedAt = provider.DeadLetterDiscarded, "user:ops", at(time.Minute)
		require.Equal(t, want, b.getLetter(t, dead[0].ID))
		require.Empty(t, b.incident(t, "inst-a"))
		require.Nil(t, b.take(t, at(time.Hour), 100, ""), "a discarded message was queued again")
		require.ErrorIs(t, b.resolve(t, dead[0].ID, provider.DeadLetterRedriven, "user:ops", at(2*time.Minute)), provider.ErrInvalidState)
		require.ErrorIs(t, b.resolve(t, dead[0].ID, provider.DeadLetterDiscarded, "user:ops", at(2*time.Minute)), provider.ErrInvalidState)
		require.Nil(t, b.take(t, at(time.Hour), 100, ""))
		require.Equal(t, want, b.getLetter(t, dead[0].ID))
	})

	t.Run("ResolveRejectsBadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		require.ErrorIs(t, b.resolve(t, "no-such-letter", provider.DeadLetterRedriven, "user:ops", base), provider.ErrNotFound)
		require.ErrorIs(t, b.resolve(t, "no-such-letter", provider.DeadLetterDiscarded, "user:ops", base), provider.ErrNotFound)

		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		dead := b.deadLetter(t, at(time.Second), "inst-a", []string{"m-1"}, provider.ReasonRejected, "rejected")
		require.Len(t, dead, 1)
		for _, status := range []provider.DeadLetterStatus{provider.DeadLetterDead, "", "bogus"} {
			require.Error(t, b.resolve(t, dead[0].ID, status, "user:ops", at(time.Minute)), "status %q", status)
		}
		require.Equal(t, dead[0], b.getLetter(t, dead[0].ID), "a rejected resolution changed the record")
		require.Nil(t, b.take(t, at(time.Hour), 100, ""))
	})

	t.Run("ActivityTaskIsMovedAndRedriven", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("inst-a", execID, 2, "")
		b.enqueueTasks(t, base, task)
		l := b.claim(t, base)
		require.NotNil(t, l)
		claimed := l.Task
		letter := provider.DeadLetter{
			ID: provider.DeadLetterID(task.ID, claimed.EnqueuedAt), InstanceID: "inst-a", Activity: &claimed,
			Reason: provider.ReasonUnknownActivity, Error: `no activity named "charge-card"`, Node: node,
			At: at(time.Second), Attempts: 1, Status: provider.DeadLetterDead,
		}
		require.NoError(t, b.store.DeadLetterActivity(t.Context(), &provider.DeadLetterActivityParams{TaskID: task.ID, Token: l.Token, Letter: letter}))

		require.Nil(t, b.claim(t, at(time.Hour)), "a dead-lettered task is still claimable")
		require.ErrorIs(t, b.store.HeartbeatActivity(t.Context(), &provider.HeartbeatActivityParams{
			TaskID: task.ID, Token: l.Token, LockedUntil: at(time.Hour),
		}), provider.ErrLeaseLost, "the claim of a dead-lettered task still holds")
		require.Equal(t, []provider.DeadLetter{letter}, b.listLetters(t, provider.ListDeadLettersParams{InstanceID: "inst-a"}))
		require.Equal(t, letter, b.getLetter(t, letter.ID))
		require.Empty(t, b.drain(t, at(time.Hour)), "dead-lettering a task enqueued a message")

		require.NoError(t, b.resolve(t, letter.ID, provider.DeadLetterRedriven, "user:ops", at(time.Minute)))
		require.Equal(t, provider.DeadLetterRedriven, b.getLetter(t, letter.ID).Status)
		require.Nil(t, b.claim(t, at(time.Minute).Add(-time.Microsecond)), "a redriven task was visible before the redrive")
		l2 := b.claim(t, at(time.Minute))
		require.NotNil(t, l2, "a redriven task is not claimable")
		require.Equal(t, task.ID, l2.Task.ID)
		require.Equal(t, task.Name, l2.Task.Name)
		require.Equal(t, task.Input, l2.Task.Input)
		require.Equal(t, at(time.Minute), l2.Task.VisibleAt)
		b.complete(t, l2, at(time.Minute))
		require.Equal(t, []string{provider.ActivityResultID(task.ID)}, messageIDs(b.drain(t, at(time.Hour))))
	})
}

// testDiscardActivity: discarding an activity task's dead letter fails the
// activity, so its workflow does not wait forever.
func testDiscardActivity(t *testing.T, factory Factory) {
	t.Run("DiscardedActivityFailsForGood", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := activity("i-1", execID, 3, "")
		b.enqueueTasks(t, base, task)
		l := b.claim(t, base)
		require.NotNil(t, l)
		letter := provider.DeadLetter{ID: provider.DeadLetterID(task.ID, l.Task.EnqueuedAt), InstanceID: "i-1", Activity: &l.Task,
			Reason: provider.ReasonUnknownActivity, Error: "no activity named x", Node: "n1", At: base, Attempts: 1, Status: provider.DeadLetterDead}
		require.NoError(t, b.store.DeadLetterActivity(t.Context(), &provider.DeadLetterActivityParams{TaskID: task.ID, Token: l.Token, Letter: letter}))
		require.NoError(t, b.resolve(t, letter.ID, provider.DeadLetterDiscarded, "user:ops", at(time.Minute)))
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, history.KindActivityFailed, msgs[0].Kind)
		require.Equal(t, provider.ActivityResultID(task.ID), msgs[0].ID)
		a, err := history.DecodeAttributes(msgs[0].Kind, msgs[0].Payload)
		require.NoError(t, err)
		f := a.(*history.ActivityFailed).Failure
		require.True(t, f.NonRetryable)
		require.Contains(t, f.Message, "discarded by user:ops")
		require.Nil(t, b.claim(t, at(time.Hour)), "the task is not requeued")
	})
}
