package providertest

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

func (b *bundle) checkpoints(t *testing.T) provider.CheckpointStore {
	return capability[provider.CheckpointStore](t, b.store, "provider.CheckpointStore")
}

// testCheckpoints checks the CheckpointStore contract: a chain numbered
// without gaps, appends conditional on the latest, retries harmless,
// leaves kept and found by instance.
func testCheckpoints(t *testing.T, factory Factory) {
	seed := make([]byte, ed25519.SeedSize)
	signer, err := history.NewEd25519Signer("conformance", ed25519.NewKeyFromSeed(seed))
	require.NoError(t, err)
	at := time.Date(2026, 11, 24, 9, 0, 0, 123456000, time.UTC)
	sealed := func(t *testing.T, number int64, prev []byte, ids ...string) *history.Checkpoint {
		t.Helper()
		c := &history.Checkpoint{Number: number, PrevHash: prev, At: at.Add(time.Duration(number) * time.Second)}
		for i, id := range ids {
			c.Leaves = append(c.Leaves, history.CheckpointLeaf{InstanceID: id, Seq: int64(i + 1), Hash: history.ComputeHash(&history.Event{Seq: int64(i), InstanceID: id})})
		}
		require.NoError(t, c.Seal(signer))
		return c
	}

	t.Run("Chain", func(t *testing.T) {
		t.Parallel()
		s := setup(t, factory).checkpoints(t)
		ctx := t.Context()
		_, err := s.LatestCheckpoint(ctx)
		require.ErrorIs(t, err, provider.ErrNotFound)

		c1 := sealed(t, 1, nil, "inst-b", "inst-a")
		require.NoError(t, s.AppendCheckpoint(ctx, c1))
		require.NoError(t, s.AppendCheckpoint(ctx, c1), "a retried append is a no-op")
		require.ErrorIs(t, s.AppendCheckpoint(ctx, sealed(t, 1, nil, "inst-c")), provider.ErrConflict, "another checkpoint with a taken number")
		require.ErrorIs(t, s.AppendCheckpoint(ctx, sealed(t, 3, c1.Hash, "inst-c")), provider.ErrConflict, "a gap in the numbers")
		require.ErrorIs(t, s.AppendCheckpoint(ctx, sealed(t, 2, []byte("not the latest's hash"), "inst-c")), provider.ErrConflict)
		c2 := sealed(t, 2, c1.Hash, "inst-a", "inst-c")
		require.NoError(t, s.AppendCheckpoint(ctx, c2))

		latest, err := s.LatestCheckpoint(ctx)
		require.NoError(t, err)
		require.Equal(t, c2, latest, "the latest checkpoint, its leaves included, as appended")
		keys := &history.Keyring{}
		require.NoError(t, keys.Add(signer.KeyID(), signer.Public()))
		require.NoError(t, latest.Verify(keys), "a stored checkpoint verifies")

		all, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{})
		require.NoError(t, err)
		require.Equal(t, []history.Checkpoint{*c1, *c2}, all)
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: 1, Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []history.Checkpoint{*c2}, page)
		of, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{InstanceID: "inst-b"})
		require.NoError(t, err)
		require.Equal(t, []history.Checkpoint{*c1}, of, "only the checkpoints that cover the instance")
		none, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{InstanceID: "inst-z"})
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		s := setup(t, factory).checkpoints(t)
		ctx := t.Context()
		c1 := sealed(t, 1, nil, "inst-a")
		require.NoError(t, s.AppendCheckpoint(ctx, c1))
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			c := sealed(t, 2, c1.Hash, fmt.Sprintf("inst-%d", i))
			wg.Go(func() { errs[i] = s.AppendCheckpoint(ctx, c) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, provider.ErrConflict)
		}
		require.Equal(t, 1, won, "exactly one of the appends of checkpoint 2 wins")
	})

	t.Run("TombstoneLeaves", func(t *testing.T) {
		t.Parallel()
		s := setup(t, factory).checkpoints(t)
		ctx := t.Context()
		c1 := sealed(t, 1, nil, "inst-a", "inst-b")
		c1.Leaves[0].Purged = true // a signed tombstone of inst-a
		require.NoError(t, c1.Seal(signer))
		require.NoError(t, s.AppendCheckpoint(ctx, c1))
		latest, err := s.LatestCheckpoint(ctx)
		require.NoError(t, err)
		require.Equal(t, c1, latest, "the tombstone flag is kept")
		keys := &history.Keyring{}
		require.NoError(t, keys.Add(signer.KeyID(), signer.Public()))
		require.NoError(t, latest.Verify(keys))
		of, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{InstanceID: "inst-a"})
		require.NoError(t, err)
		require.Len(t, of, 1)
		leaf, _, ok := of[0].Leaf("inst-a")
		require.True(t, ok)
		require.True(t, leaf.Purged, "listed by instance, the tombstone flag is kept")
	})
}
