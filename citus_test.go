package chronicle_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// The Citus tests run on the Citus cluster of CHRONICLE_TEST_CITUS_URL
// (scripts/citus.sh), each store in a schema of its own whose tables are
// distributed by partition; without the variable they skip loudly.

// citusStores returns a maker of distributed stores of 16 partitions for
// the subtests of t (schemas reused, see pgtest.CitusStores).
func citusStores(t *testing.T) func(t *testing.T) provider.Store {
	t.Helper()
	newStore := pgtest.CitusStores(t, postgres.Options{Partitions: 16})
	return func(t *testing.T) provider.Store {
		s := newStore(t)
		require.True(t, s.Distributed())
		require.Equal(t, 16, s.Partitions())
		return s
	}
}

// TestCitusEndToEnd runs the end-to-end workflows on distributed stores.
func TestCitusEndToEnd(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, citusStores(t))
}

// TestCitusSignalWorkflow runs the signals between workflows on
// distributed stores: a signal is a write to another instance, in another
// partition (and shard) unless the two hash alike, so its round is a
// multi-shard transaction.
func TestCitusSignalWorkflow(t *testing.T) {
	t.Parallel()
	testSignalWorkflow(t, citusStores(t))
}
