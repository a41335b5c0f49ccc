package mongo_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// TestConformancePeekLock runs the conformance suite on the FerretDB test
// server, which has no transactions: the store runs peek-lock rounds.
func TestConformancePeekLock(t *testing.T) {
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStore(t, chmongo.Options{})
		if s.Mode() != provider.ModePeekLock {
			t.Fatalf("store on the FerretDB test server runs %s rounds, want peek-lock", s.Mode())
		}
		return s
	})
}

// TestConformanceTransactional runs the suite on the replica set named by
// CHRONICLE_TEST_MONGO_URL, skipped loudly without one.
func TestConformanceTransactional(t *testing.T) {
	url := mongotest.ReplicaSetURL(t)
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStoreAt(t, url, chmongo.Options{})
		if s.Mode() != provider.ModeTransactional {
			t.Fatalf("store on the replica set runs %s rounds, want transactional", s.Mode())
		}
		return s
	})
}
