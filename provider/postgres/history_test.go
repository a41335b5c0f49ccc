package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestLoadHistoryReadsEveryPage loads a history longer than the page the
// store reads at once, from the start and from the middle, on the pool and
// in a round.
func TestLoadHistoryReadsEveryPage(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	events := sealed(t, "long", 2_345)
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		return tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "long", Events: events})
	}))
	for _, from := range []int64{0, 1, 1_000, 1_001, 2_000, 2_345, 2_346} {
		got, err := s.LoadHistory(t.Context(), &provider.LoadHistoryParams{InstanceID: "long", FromSeq: from})
		require.NoError(t, err)
		want := events[max(from, 1)-1:]
		require.Len(t, got, len(want), "from seq %d", from)
		for i := range got {
			require.Equal(t, want[i].Seq, got[i].Seq)
			require.Equal(t, want[i].Hash, got[i].Hash)
		}
	}
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		got, err := tx.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "long", FromSeq: 1})
		if err != nil {
			return err
		}
		require.Len(t, got, len(events))
		require.Equal(t, events[len(events)-1].Hash, got[len(got)-1].Hash)
		return nil
	}))
}
