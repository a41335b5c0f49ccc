package postgres_test

import (
	"testing"

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
