package providertest

import (
	"context"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testQueue covers the orchestration queue in either mode: enqueue order,
// limits, idempotent enqueue, default times, delayed visibility and the
// instance filter.
func testQueue(t *testing.T, factory Factory) {
	t.Run("MessagesComeBackInEnqueueOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		// Ids are deliberately out of lexical order: enqueue order is the
		// order of the slice and then of the calls, not of the ids.
		b.enqueue(t, base, signal(t, "m-c", "inst-a"), signal(t, "m-a", "inst-a"), signal(t, "m-b", "inst-a"))
		b.enqueue(t, at(time.Second), signal(t, "m-0", "inst-a"))
		b.enqueue(t, at(2*time.Second), signal(t, "m-z", "inst-a"), signal(t, "m-y", "inst-a"))

		d := b.take(t, at(3*time.Second), 100, "")
		require.NotNil(t, d)
		require.Equal(t, "inst-a", d.InstanceID)
		require.Equal(t, []string{"m-c", "m-a", "m-b", "m-0", "m-z", "m-y"}, messageIDs(d.Messages))
		require.Nil(t, b.take(t, at(3*time.Second), 100, ""), "acked messages were delivered again")
	})

	t.Run("LimitBoundsTheBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		var msgs []provider.Message
		for _, id := range []string{"m-1", "m-2", "m-3", "m-4", "m-5"} {
			msgs = append(msgs, signal(t, id, "inst-a"))
		}
		b.enqueue(t, base, msgs...)

		var got [][]string
		for d := b.take(t, base, 2, ""); d != nil; d = b.take(t, base, 2, "") {
			got = append(got, messageIDs(d.Messages))
			require.Less(t, len(got), 10, "the queue does not drain")
		}
		require.Equal(t, [][]string{{"m-1", "m-2"}, {"m-3", "m-4"}, {"m-5"}}, got)
	})

	t.Run("EnqueueIsIdempotentByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m1, m2 := signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a")
		b.enqueue(t, base, m1, m1, m2)
		// A second enqueue of a queued id leaves the queued message as it is,
		// even when the new one differs.
		changed := signal(t, "m-1", "inst-a")
		changed.CorrelationID, changed.Payload, changed.VisibleAt = "changed", []byte("changed"), at(time.Hour)
		b.enqueue(t, at(time.Second), changed, m2)

		require.Equal(t, []provider.Message{queued(m1, base), queued(m2, base)}, b.drain(t, at(2*time.Second)))
		require.Empty(t, b.drain(t, at(2*time.Hour)), "a duplicate enqueue left a second message")
	})

	t.Run("EnqueueInRoundIsIdempotentByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m1, m2 := signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a")
		b.enqueue(t, base, m1)
		changed := signal(t, "m-1", "inst-a")
		changed.Payload = []byte("changed")
		require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
			return s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{changed, m2, m2}, Now: at(time.Second)})
		}))
		require.Equal(t, []provider.Message{queued(m1, base), queued(m2, at(time.Second))}, b.drain(t, at(time.Second)))
	})

	t.Run("ZeroTimesTakeNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		now := at(5 * time.Second)
		m := signal(t, "m-1", "inst-a")
		require.True(t, m.VisibleAt.IsZero() && m.EnqueuedAt.IsZero())
		b.enqueue(t, now, m)

		require.Nil(t, b.take(t, now.Add(-time.Microsecond), 100, ""), "a message enqueued at Now was visible before Now")
		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, now, next)
		d := b.take(t, now, 100, "")
		require.NotNil(t, d)
		require.Equal(t, []provider.Message{queued(m, now)}, d.Messages, "the message does not round-trip")
	})

	t.Run("GivenTimesAreKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m := signal(t, "m-1", "inst-a")
		m.ExecutionID, m.VisibleAt, m.EnqueuedAt = execID, at(10*time.Second), at(time.Second)
		b.enqueue(t, at(5*time.Second), m)

		d := b.take(t, at(10*time.Second), 100, "")
		require.NotNil(t, d)
		require.Equal(t, []provider.Message{m}, d.Messages, "the message does not round-trip")
	})

	t.Run("DelayedVisibility", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		_, ok := b.nextVisible(t)
		require.False(t, ok, "NextVisibleAt of an empty queue")

		late := signal(t, "m-late", "inst-a")
		late.VisibleAt = at(10 * time.Second)
		soon := signal(t, "m-soon", "inst-b")
		soon.VisibleAt = at(5 * time.Second)
		b.enqueue(t, base, late, soon)

		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(5*time.Second), next)
		require.Nil(t, b.take(t, base, 100, ""))
		require.Nil(t, b.take(t, at(5*time.Second).Add(-time.Microsecond), 100, ""))

		d := b.take(t, at(5*time.Second), 100, "")
		require.NotNil(t, d)
		require.Equal(t, []string{"m-soon"}, messageIDs(d.Messages))
		next, ok = b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(10*time.Second), next)
		require.Nil(t, b.take(t, at(9*time.Second), 100, ""))

		d = b.take(t, at(10*time.Second), 100, "")
		require.NotNil(t, d)
		require.Equal(t, []string{"m-late"}, messageIDs(d.Messages))
		_, ok = b.nextVisible(t)
		require.False(t, ok, "NextVisibleAt after every message was acked")
	})

	t.Run("OnlyVisibleMessagesOfAnInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		later := signal(t, "m-later", "inst-a")
		later.VisibleAt = at(time.Minute)
		b.enqueue(t, base, later, signal(t, "m-now", "inst-a"))

		d := b.take(t, base, 100, "")
		require.NotNil(t, d)
		require.Equal(t, []string{"m-now"}, messageIDs(d.Messages), "a message was delivered before its VisibleAt")
		require.Nil(t, b.take(t, base, 100, ""))
		d = b.take(t, at(time.Minute), 100, "")
		require.NotNil(t, d)
		require.Equal(t, []string{"m-later"}, messageIDs(d.Messages))
	})

	t.Run("ListMessagesShowsQueuedMessagesOfOneInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		future := signal(t, "m-later", "inst-a")
		future.VisibleAt = at(time.Hour)
		b.enqueue(t, base, signal(t, "m-2", "inst-a"), future, signal(t, "m-1", "inst-a"), signal(t, "m-x", "inst-b"))
		ctx := context.Background()
		got, err := b.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Equal(t, []string{"m-2", "m-later", "m-1"}, messageIDs(got), "enqueue order, visible or not")
		require.Equal(t, at(time.Hour), got[1].VisibleAt)
		got, err = b.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a", Limit: 2})
		require.NoError(t, err)
		require.Len(t, got, 2)
		got, err = b.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-none"})
		require.NoError(t, err)
		require.Empty(t, got)
		// Acked messages are gone from the list.
		d := b.take(t, base, 100, "inst-a")
		require.NotNil(t, d)
		got, err = b.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Equal(t, []string{"m-later"}, messageIDs(got))
	})

	t.Run("InstanceFilter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-a", "inst-a"))
		b.enqueue(t, at(time.Second), signal(t, "m-b", "inst-b"))
		future := signal(t, "m-c", "inst-c")
		future.VisibleAt = at(time.Hour)
		b.enqueue(t, at(time.Second), future)

		now := at(2 * time.Second)
		d := b.take(t, now, 100, "inst-b")
		require.NotNil(t, d)
		require.Equal(t, []string{"m-b"}, messageIDs(d.Messages))
		require.Nil(t, b.take(t, now, 100, "inst-b"), "inst-b has no more messages")
		require.Nil(t, b.take(t, now, 100, "inst-c"), "inst-c has no visible message")
		require.Nil(t, b.take(t, now, 100, "inst-unknown"))
		d = b.take(t, now, 100, "")
		require.NotNil(t, d)
		require.Equal(t, "inst-a", d.InstanceID)
		require.Nil(t, b.take(t, now, 100, ""))
	})
}
