package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testTransactional covers what only transactional stores promise: a round
// is all or nothing, and dequeues skip locked instances without waiting.
func testTransactional(t *testing.T, factory Factory) {
	t.Run("ErrorRollsBackTheRound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		boom := errors.New("boom")
		r := runFullRound(t, b, t.Context(), func(context.CancelFunc) error { return boom })
		require.ErrorIs(t, r.err, boom, "RunRound does not return the error of its function")
		r.requireRolledBack(t, b)
	})

	t.Run("CancelledContextRollsBackTheRound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The function cancels the round's context after its last write and
		// returns nil: the commit must not happen.
		r := runFullRound(t, b, ctx, func(cancel context.CancelFunc) error { cancel(); return nil })
		require.ErrorIs(t, r.err, context.Canceled)
		r.requireRolledBack(t, b)
	})

	t.Run("CommitKeepsEveryWrite", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		r := runFullRound(t, b, t.Context(), func(context.CancelFunc) error { return nil })
		require.NoError(t, r.err)

		require.Equal(t, r.events, b.load(t, "inst-a", 1))
		data, seq := b.snapshotOf(t, "inst-a")
		require.Equal(t, r.proj.Snapshot, data)
		require.Equal(t, r.proj.Seq, seq)
		got := b.instanceOf(t, "inst-a")
		require.Contains(t, got.Incident, string(provider.ReasonPanic), "the instance does not show the round's dead letter")
		rec := *r.proj.Instance
		rec.Incident = got.Incident
		require.Equal(t, &rec, got)
		require.Equal(t, r.letters, b.listLetters(t, provider.ListDeadLettersParams{}))

		l := b.claim(t, at(time.Hour))
		require.NotNil(t, l)
		require.Equal(t, queuedTask(r.task, at(time.Second)), l.Task)
		require.Equal(t, []provider.Message{queued(r.enqueued, at(time.Second))}, b.drain(t, at(time.Hour)),
			"acked and dead-lettered messages must be gone, the enqueued one there")
	})

	t.Run("DequeueTellsTheHistoryHead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-h"))
		events := chain("inst-h", nil, startEvent(t, execID), raisedEvent(t, "m-1"))
		for _, want := range []provider.Head{{}, {Seq: 2, Hash: events[1].Hash}} {
			require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
				batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: node, Limit: 10})
				if err != nil {
					return err
				}
				require.NotNil(t, batch)
				if batch.Head != nil { // a store may leave it to the runner to read
					require.Equal(t, want.Seq, batch.Head.Seq)
					require.Equal(t, want.Hash, batch.Head.Hash)
				}
				if want.Seq == 0 {
					return tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-h", Events: events})
				}
				return nil
			}))
		}
	})

	t.Run("UnackedMessagesStayQueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"))
		var first []string
		require.NoError(t, b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: node, Limit: 10})
			if batch != nil {
				first = messageIDs(batch.Messages)
			}
			return err
		}))
		require.Equal(t, []string{"m-1", "m-2"}, first)
		require.Equal(t, []string{"m-1", "m-2"}, messageIDs(b.drain(t, base)), "messages dequeued but not acked were lost")
	})

	t.Run("DequeueSkipsLockedInstances", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-a", "inst-a"), signal(t, "m-b", "inst-b"))

		locked := make(chan string, 1)
		release := make(chan struct{})
		holderDone := make(chan error, 1)
		go func() {
			holderDone <- b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
				batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "holder", Limit: 10})
				if err != nil {
					return err
				}
				if batch == nil {
					return errors.New("no instance to lock")
				}
				locked <- batch.InstanceID
				select {
				case <-release:
					return nil // no ack: the messages stay
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
		released := false
		releaseHolder := func() {
			if !released {
				released = true
				close(release)
			}
		}
		defer releaseHolder()

		var held string
		select {
		case held = <-locked:
		case err := <-holderDone:
			require.FailNow(t, "the holding round ended before it locked an instance", "%v", err)
		case <-time.After(waitTimeout):
			require.FailNow(t, "timed out waiting for the holding round to lock an instance")
		}
		other := map[string]string{"inst-a": "inst-b", "inst-b": "inst-a"}[held]
		require.NotEmpty(t, other, "the holding round locked unknown instance %q", held)

		// dequeue runs a round that dequeues with p and acks what it got; it
		// must not wait for the held instance.
		dequeue := func(p provider.DequeueParams) *provider.Batch {
			t.Helper()
			type result struct {
				batch *provider.Batch
				err   error
			}
			res := make(chan result, 1)
			go func() {
				var got *provider.Batch
				err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
					batch, err := tx.DequeueInstance(ctx, &p)
					if err != nil || batch == nil {
						return err
					}
					got = batch
					return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: batch.InstanceID, MessageIDs: messageIDs(batch.Messages)})
				})
				res <- result{got, err}
			}()
			select {
			case r := <-res:
				require.NoError(t, r.err)
				return r.batch
			case <-time.After(waitTimeout):
				require.FailNow(t, "DequeueInstance waited for a locked instance instead of skipping it")
				return nil
			}
		}
		batch := dequeue(provider.DequeueParams{Now: base, Owner: "other", Limit: 10})
		require.NotNil(t, batch, "the unlocked instance was not dequeued")
		require.Equal(t, other, batch.InstanceID, "an instance locked by an open round was dequeued again")
		require.Nil(t, dequeue(provider.DequeueParams{Now: base, Owner: "other", Limit: 10}), "only the locked instance has work")
		require.Nil(t, dequeue(provider.DequeueParams{Now: base, Owner: "other", Limit: 10, InstanceID: held}), "the locked instance was dequeued by name")

		releaseHolder()
		select {
		case err := <-holderDone:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			require.FailNow(t, "timed out waiting for the holding round to commit")
		}
		d := b.take(t, base, 10, "")
		require.NotNil(t, d, "the released instance's messages are gone")
		require.Equal(t, held, d.InstanceID)
		require.Nil(t, b.take(t, base, 10, ""))
	})
}

// fullRound is a transactional round that uses every step, and what it
// wrote.
type fullRound struct {
	err      error
	events   []history.Event
	proj     *provider.Projections
	enqueued provider.Message
	task     provider.ActivityTask
	letters  []provider.DeadLetter
	// Inside the round: what it dequeued and the history it saw after its
	// append.
	dequeued []string
	seen     []history.Event
}

// runFullRound enqueues three messages of inst-a, then runs a round at
// base+1s that dequeues them, appends history, saves projections, enqueues
// a message of inst-b and an activity task, acks m-1 and m-2 and
// dead-letters m-3, and finally returns end(cancel), cancel cancelling ctx.
func runFullRound(t *testing.T, b *bundle, ctx context.Context, end func(cancel context.CancelFunc) error) *fullRound {
	t.Helper()
	b.enqueue(t, base, signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a"), signal(t, "m-3", "inst-a"))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	now := at(time.Second)
	r := &fullRound{
		events:   chain("inst-a", nil, startEvent(t, execID), raisedEvent(t, "m-1"), raisedEvent(t, "m-2")),
		proj:     projections(t, "inst-a", 3, "round", true),
		enqueued: signal(t, "n-1", "inst-b"),
		task:     activity("inst-a", execID, 4, ""),
	}
	r.err = b.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Owner: node, Limit: 10})
		if err != nil {
			return err
		}
		if batch == nil {
			return errors.New("nothing dequeued")
		}
		r.dequeued = messageIDs(batch.Messages)
		if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-a", Events: r.events}); err != nil {
			return err
		}
		if r.seen, err = tx.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "inst-a", FromSeq: 1}); err != nil {
			return err
		}
		if err := tx.SaveProjections(ctx, r.proj); err != nil {
			return err
		}
		if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{r.enqueued}, Now: now}); err != nil {
			return err
		}
		if err := tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{r.task}, Now: now}); err != nil {
			return err
		}
		if r.letters, err = letters(batch.Messages, []string{"m-3"}, provider.ReasonPanic, "turn panicked", now); err != nil {
			return err
		}
		if err := tx.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: "inst-a", Letters: r.letters}); err != nil {
			return err
		}
		if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-a", MessageIDs: []string{"m-1", "m-2"}}); err != nil {
			return err
		}
		return end(cancel)
	})
	require.Equal(t, []string{"m-1", "m-2", "m-3"}, r.dequeued)
	require.Equal(t, r.events, r.seen, "a round does not see its own append")
	return r
}

// requireRolledBack checks that nothing the round wrote is visible.
func (r *fullRound) requireRolledBack(t *testing.T, b *bundle) {
	t.Helper()
	require.Empty(t, b.load(t, "inst-a", 1), "history of a rolled-back round")
	_, _, err := b.store.GetSnapshot(t.Context(), "inst-a")
	require.ErrorIs(t, err, provider.ErrNotFound, "snapshot of a rolled-back round")
	_, err = b.store.GetInstance(t.Context(), "inst-a")
	require.ErrorIs(t, err, provider.ErrNotFound, "instance record of a rolled-back round")
	require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{}), "dead letters of a rolled-back round")
	require.Nil(t, b.claim(t, at(time.Hour)), "activity task of a rolled-back round")
	_, ok := b.nextTask(t, "")
	require.False(t, ok, "activity task of a rolled-back round")
	d := b.take(t, at(time.Hour), 10, "")
	require.NotNil(t, d, "the round's messages were not put back")
	require.Equal(t, "inst-a", d.InstanceID, "message enqueued by a rolled-back round")
	require.Equal(t, []string{"m-1", "m-2", "m-3"}, messageIDs(d.Messages))
	require.Nil(t, b.take(t, at(time.Hour), 10, ""), "message enqueued by a rolled-back round")
}

// testTxFlusher covers provider.TxFlusher: the writes a round deferred
// are sent by Flush, and an abandon discards those of the instance it
// abandons, never those an earlier instance of the group flushed.
func testTxFlusher(t *testing.T, factory Factory) {
	t.Run("AbandonKeepsWhatAnEarlierInstanceFlushed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-a", "inst-a"))
		b.enqueue(t, at(time.Millisecond), signal(t, "m-b", "inst-b"))
		taskA, taskB := activity("inst-a", "exec-1", 2, ""), activity("inst-b", "exec-1", 2, "")
		err := b.tx.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
			f, ok := tx.(provider.TxFlusher)
			if !ok {
				t.Skip("providertest: SKIPPED: the store's Tx does not implement provider.TxFlusher")
			}
			for _, c := range []struct {
				instance string
				task     provider.ActivityTask
			}{{"inst-a", taskA}, {"inst-b", taskB}} {
				d, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: at(time.Second), Owner: node, Limit: 10})
				if err != nil {
					return err
				}
				require.NotNil(t, d)
				require.Equal(t, c.instance, d.InstanceID)
				if err := tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{c.task}, Now: at(time.Second)}); err != nil {
					return err
				}
				if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: c.instance, MessageIDs: messageIDs(d.Messages)}); err != nil {
					return err
				}
				if c.instance == "inst-a" {
					if err := f.Flush(ctx); err != nil {
						return err
					}
				}
			}
			return tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{
				InstanceID: "inst-b", MessageIDs: []string{"m-b"}, VisibleAt: at(time.Minute), Error: "abandoned",
			})
		})
		require.NoError(t, err)
		l := b.claim(t, at(2*time.Second))
		require.NotNil(t, l, "the flushed task of the first instance was lost")
		require.Equal(t, taskA.ID, l.Task.ID)
		require.Nil(t, b.claim(t, at(2*time.Second)), "the abandoned instance's deferred task was written")
		msgs := b.drain(t, at(time.Hour))
		require.Equal(t, []string{"m-b"}, messageIDs(msgs), "the first instance's ack was lost, or the abandoned one's kept")
		require.Equal(t, 1, msgs[0].Attempts)
	})
}
