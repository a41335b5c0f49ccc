package round_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// renewSpy reports each lease renewal of a peek-lock store.
type renewSpy struct {
	*memory.Store
	renewed chan error
}

func (s renewSpy) RenewLease(ctx context.Context, p *provider.RenewLeaseParams) error {
	err := s.Store.RenewLease(ctx, p)
	s.renewed <- err
	return err
}

// TestLongPeekLockRoundKeepsItsLease checks that a round running longer
// than its lease renews it: another node cannot take the instance over
// meanwhile, and the round then acks as usual.
func TestLongPeekLockRoundKeepsItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := round.NewManualClock(t0)
	store := renewSpy{Store: memory.New(memory.Options{Mode: provider.ModePeekLock}), renewed: make(chan error, 10)}
	entered, proceed := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, in *round.TurnInput) (*round.TurnOutput, error) {
		close(entered)
		<-proceed
		return scripted.Turn(ctx, in)
	}
	const lease = 30 * time.Second
	long, err := round.NewRunner(store, round.RunnerOptions{Node: "slow", Turn: slow, Clock: clock, LeaseDuration: lease})
	require.NoError(t, err)
	other, err := round.NewRunner(store, round.RunnerOptions{Node: "other", Turn: scripted.Turn, Clock: clock, LeaseDuration: lease})
	require.NoError(t, err)
	m, err := scripted.StartMessage("i", scripted.Script{Steps: []scripted.Step{{Kind: scripted.Signal, Name: "go"}}})
	require.NoError(t, err)
	require.NoError(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: clock.Now()}))

	type result struct {
		rep *round.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := long.RunOnce(ctx)
		done <- result{rep, err}
	}()
	<-entered
	for i := 0; i < 4; i++ { // 40s in all: well past the first lease
		clock.Advance(lease / 3)
		select {
		case err := <-store.renewed:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the lease was not renewed")
		}
		rep, err := other.RunOnce(ctx)
		require.NoError(t, err)
		require.Nil(t, rep, "another node took over a round whose lease was renewed")
	}
	close(proceed)
	res := <-done
	require.NoError(t, res.err)
	require.False(t, res.rep.Failed)
	require.Equal(t, 1, res.rep.Processed)
	msgs, err := store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i"})
	require.NoError(t, err)
	require.Empty(t, msgs, "the start was acked")
}
