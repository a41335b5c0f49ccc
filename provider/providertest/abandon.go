package providertest

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testAbandonMessages covers AbandonMessages, the failed delivery of
// messages outside a round: it counts the failure and holds the instance.
func testAbandonMessages(t *testing.T, factory Factory) {
	t.Run("CountsAndHoldsTheInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		m1, m2 := signal(t, "m-1", "inst-a"), signal(t, "m-2", "inst-a")
		b.enqueue(t, base, m1, m2, signal(t, "n-1", "inst-b"))

		b.abandon(t, "inst-a", []string{"m-1", "no-such-message"}, at(time.Minute), "boom")
		b.abandon(t, "inst-a", []string{"m-1"}, at(2*time.Minute), "boom again")
		// The instance is held: none of its messages is delivered, not the
		// ones that were not abandoned nor one enqueued later.
		m3 := signal(t, "m-3", "inst-a")
		b.enqueue(t, at(time.Second), m3)
		d := b.take(t, at(time.Second), 100, "")
		require.NotNil(t, d)
		require.Equal(t, "inst-b", d.InstanceID, "a held instance was dequeued")
		require.Nil(t, b.take(t, at(time.Second), 100, ""), "a held instance was dequeued")
		require.Nil(t, b.take(t, at(time.Second), 100, "inst-a"), "a held instance was dequeued by name")
		next, ok := b.nextVisible(t)
		require.True(t, ok)
		require.Equal(t, at(2*time.Minute), next, "NextVisibleAt of a held instance")
		require.Nil(t, b.take(t, at(2*time.Minute).Add(-time.Microsecond), 100, ""), "a held instance was dequeued before VisibleAt")

		d = b.take(t, at(2*time.Minute), 100, "")
		require.NotNil(t, d, "a held instance was not released at VisibleAt")
		require.Equal(t, "inst-a", d.InstanceID)
		require.Equal(t, []string{"m-1", "m-2", "m-3"}, messageIDs(d.Messages), "a failure reordered the instance's messages")
		want := []provider.Message{queued(m1, base), queued(m2, base), queued(m3, at(time.Second))}
		want[0].Attempts, want[0].LastError = 2, "boom again"
		// The hold is the instance's: the messages keep the times they
		// were queued with, by which rounds order them.
		require.Equal(t, want, d.Messages)
	})

	t.Run("IgnoresAckedMessages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		require.NotNil(t, b.take(t, base, 100, ""))

		b.abandon(t, "inst-a", []string{"m-1"}, at(time.Minute), "late failure")
		require.Empty(t, b.drain(t, at(time.Hour)), "abandoning an acked message brought it back")
		_, ok := b.nextVisible(t)
		require.False(t, ok)
	})

	t.Run("OnlyTheNamedInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.enqueue(t, base, signal(t, "m-1", "inst-a"))
		b.abandon(t, "inst-b", []string{"m-1"}, at(time.Hour), "wrong instance")
		d := b.take(t, base, 100, "")
		require.NotNil(t, d, "a message was abandoned through another instance")
		require.Equal(t, 0, d.Messages[0].Attempts)
		require.Empty(t, d.Messages[0].LastError)
	})
}
