package providertest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

func TestFaultyStoreFailsCallsBeforeOrAfterTheirEffect(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			plan := map[string]*providertest.Fault{}
			store := providertest.Faulty(memory.New(memory.Options{Mode: mode}), func(op string) *providertest.Fault {
				mu.Lock()
				defer mu.Unlock()
				f := plan[op]
				delete(plan, op)
				return f
			})
			fail := func(op string, after bool) {
				mu.Lock()
				defer mu.Unlock()
				plan[op] = &providertest.Fault{AfterEffect: after}
			}
			require.Equal(t, mode, store.Mode())
			msg := func(id string) provider.Message {
				m, err := provider.NewMessage(id, "i", "", id, &history.EventRaised{Name: "n", IdempotencyKey: id})
				require.NoError(t, err)
				return m
			}
			ctx := context.Background()
			list := func() int {
				ms, err := store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "i"})
				require.NoError(t, err)
				return len(ms)
			}
			fail("EnqueueMessages", false)
			require.ErrorIs(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{msg("a")}, Now: now}), providertest.ErrInjected)
			require.Equal(t, 0, list(), "a fault before the effect writes nothing")
			fail("EnqueueMessages", true)
			require.ErrorIs(t, store.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{msg("b")}, Now: now}), providertest.ErrInjected)
			require.Equal(t, 1, list(), "a fault after the effect reports failure of a call that happened")

			if tx, ok := store.(provider.TxStore); ok {
				ack := func(ctx context.Context, t provider.Tx) error {
					b, err := t.DequeueInstance(ctx, &provider.DequeueParams{Now: now, Limit: 10})
					if err != nil || b == nil {
						return errors.Join(err, errors.New("no batch"))
					}
					return t.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: b.InstanceID, MessageIDs: []string{b.Messages[0].ID}})
				}
				fail("AckMessages", false)
				require.ErrorIs(t, tx.RunRound(ctx, ack), providertest.ErrInjected)
				require.Equal(t, 1, list(), "a failed step rolls the round back")
				fail("RunRound", true)
				require.ErrorIs(t, tx.RunRound(ctx, ack), providertest.ErrInjected)
				require.Equal(t, 0, list(), "the commit happened although the caller saw an error")
			} else {
				ls := store.(provider.LeaseStore)
				fail("AckLease", true)
				l, err := ls.LeaseInstance(ctx, &provider.LeaseParams{Now: now, LockedUntil: now.Add(time.Minute), Limit: 10})
				require.NoError(t, err)
				require.ErrorIs(t, ls.AckLease(ctx, &provider.AckLeaseParams{Lease: l, MessageIDs: []string{"b"}}), providertest.ErrInjected)
				require.Equal(t, 0, list())
			}
		})
	}
}
