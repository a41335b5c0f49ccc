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

// newCitusStore returns a distributed store of 16 partitions.
func newCitusStore(t *testing.T) *postgres.Store {
	t.Helper()
	s := pgtest.NewCitusStore(t, postgres.Options{Partitions: 16})
	require.True(t, s.Distributed())
	return s
}

// TestCitusEndToEnd runs the end-to-end workflows on distributed stores.
func TestCitusEndToEnd(t *testing.T) {
	t.Parallel()
	pgtest.CitusURL(t)
	testEndToEnd(t, func(t *testing.T) provider.Store { return newCitusStore(t) })
}

// TestCitusSignalWorkflow runs the signals between workflows on
// distributed stores: a signal is a write to another instance, in another
// partition (and shard) unless the two hash alike, so its round is a
// multi-shard transaction.
func TestCitusSignalWorkflow(t *testing.T) {
	t.Parallel()
	pgtest.CitusURL(t)
	testSignalWorkflow(t, func(t *testing.T) provider.Store { return newCitusStore(t) })
}
