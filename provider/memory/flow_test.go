package memory_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// A wait at enqueue whose slot set an open round's transaction holds is
// left to the instance's first round: the enqueue neither waits for the
// round nor reads the set's uncommitted state (which the round's rollback
// would restore, dropping the waiter of a parked instance).
func TestEnqueueWaitingLeavesALockedSetToTheRound(t *testing.T) {
	s := memory.New(memory.Options{})
	ctx := t.Context()
	start, err := provider.NewMessage("m-b", "inst-b", "", "m-b", &history.EventRaised{Name: "poke"})
	require.NoError(t, err)
	err = s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		ok, err := tx.(provider.FlowSteps).AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: 1, Holder: "inst-a", Now: base})
		require.True(t, ok)
		if err != nil {
			return err
		}
		return s.EnqueueWaiting(ctx, &provider.EnqueueWaitingParams{
			Messages: []provider.Message{start}, Now: base,
			Waits: []provider.SlotWait{{InstanceID: "inst-b", Key: "k", Limit: 1}},
		})
	})
	require.NoError(t, err)
	rec, err := s.GetSlots(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, []provider.SlotHolder{{ID: "inst-a", Since: base}}, rec.Holders)
	require.Empty(t, rec.Waiters, "the wait was left to the round")
	msgs, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-b"})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the start is queued")
	_, ok, err := s.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration})
	require.NoError(t, err)
	require.True(t, ok, "and not parked")
}
