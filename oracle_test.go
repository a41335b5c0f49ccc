package chronicle_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/oracle/oracletest"
)

// TestOracleEndToEnd runs the end-to-end workflows on the oracle provider
// against the server named by CHRONICLE_TEST_ORACLE_DSN, each subtest
// under an object prefix of its own. No Oracle server runs on the
// project's machines or in CI: without the variable the test is skipped
// with a loud message.
func TestOracleEndToEnd(t *testing.T) {
	oracletest.DSN(t)
	t.Parallel()
	testEndToEnd(t, func(t *testing.T) provider.Store {
		s := oracletest.NewStore(t, oracle.Options{})
		if s.Mode() != provider.ModeTransactional {
			t.Fatalf("oracle store runs %s rounds, want transactional", s.Mode())
		}
		return s
	})
}

// TestOracleOperations runs the schedule, batch, rerun and escalation tests of
// testOperations on the oracle provider, skipped loudly without
// CHRONICLE_TEST_ORACLE_DSN.
func TestOracleOperations(t *testing.T) {
	oracletest.DSN(t)
	t.Parallel()
	testOperations(t, func(t *testing.T) provider.Store { return oracletest.NewStore(t, oracle.Options{}) })
}
