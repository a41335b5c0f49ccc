package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

func TestPartitionsRecordedAtCreation(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := t.Context()
	open := func(p int) (*postgres.Store, error) {
		s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema, MigrateOnStart: true, Partitions: p})
		if err == nil {
			t.Cleanup(s.Close)
		}
		return s, err
	}
	s, err := open(16)
	require.NoError(t, err)
	require.Equal(t, 16, s.Partitions())

	// Zero opens the store with the count it recorded.
	s, err = open(0)
	require.NoError(t, err)
	require.Equal(t, 16, s.Partitions())

	// Another count is refused.
	_, err = open(8)
	var pe *postgres.PartitionsError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 16, pe.Recorded)
	require.Equal(t, 8, pe.Requested)
}

func TestPartitionsOfAMigratedStore(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := t.Context()
	s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	require.NoError(t, err)
	defer s.Close()
	_, err = postgres.MigrateTo(ctx, s, 8)
	require.NoError(t, err)
	// A store that existed before partitions has its rows in partition 0:
	// it has one partition, whatever the options of the Store migrating it.
	s2, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema, MigrateOnStart: true, Partitions: 16})
	var pe *postgres.PartitionsError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Recorded)
	require.Nil(t, s2)
	s3, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	require.NoError(t, err)
	defer s3.Close()
	require.Equal(t, 1, s3.Partitions())
}

// TestPartitionLeases runs providertest.PartitionLeases on a store of
// 16 partitions.
func TestPartitionLeases(t *testing.T) {
	t.Parallel()
	providertest.PartitionLeases(t, pgtest.NewStore(t, postgres.Options{Partitions: 16}))
}

func TestPartitionOf(t *testing.T) {
	t.Parallel()
	// The function is part of the stored format: these values never
	// change (FNV-1a 32-bit of the id, modulo the count).
	require.Equal(t, 0, provider.PartitionOf("order-1", 1))
	require.Equal(t, 0, provider.PartitionOf("order-1", 0))
	for id, want := range map[string][2]int{
		"order-1": {13, 1}, "order-2": {4, 0}, "loan-1": {9, 0}, "i-1": {14, 3}, "i-2": {11, 5},
	} {
		require.Equal(t, want[0], provider.PartitionOf(id, 16), id)
		require.Equal(t, want[1], provider.PartitionOf(id, 7), id)
	}
}
