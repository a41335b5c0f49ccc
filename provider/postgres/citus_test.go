package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// TestCitusConformance runs the provider conformance suite on stores of
// 16 partitions whose tables are distributed on the Citus cluster of
// CHRONICLE_TEST_CITUS_URL (skipped, loudly, without it).
func TestCitusConformance(t *testing.T) {
	t.Parallel()
	// Distributing a schema takes seconds: the cases reuse schemas,
	// emptied between them.
	newStore := pgtest.CitusStores(t, postgres.Options{Partitions: 16})
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		s := newStore(t)
		require.Equal(t, 16, s.Partitions())
		return s
	})
}

// TestDistributeNeedsCitus: on a server without the citus extension,
// Distribute fails with ErrNoCitus and leaves the store as it was, and a
// store that asks for Citus on a schema that is not distributed is
// refused.
func TestDistributeNeedsCitus(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{Partitions: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.ErrorIs(t, s.Distribute(ctx), postgres.ErrNoCitus)
	require.False(t, s.Distributed())
	_, err := postgres.New(ctx, postgres.Options{URL: pgtest.URL(t), Schema: s.Schema(), Citus: true})
	require.ErrorContains(t, err, "not distributed by Citus")
	// The store still works as a plain one.
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Now: time.Now()}))
}
