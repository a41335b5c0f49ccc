package chronicle_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// TestMongoEndToEndPartitions16 runs the end-to-end workflows on stores of 16 partitions
// over the FerretDB test server.
func TestMongoEndToEndPartitions16(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
		if s.Partitions() != 16 {
			t.Fatalf("store has %d partitions, want 16", s.Partitions())
		}
		return s
	})
}

// TestMongoEnginesSplitPartitions runs two engines on one MongoDB store
// of 16 partitions (peek-lock rounds on the FerretDB test server): they
// split the partitions by their leases and run every workflow, looking in
// their own partitions, and when one stops the other takes its partitions.
func TestMongoEnginesSplitPartitions(t *testing.T) {
	t.Parallel()
	testEnginesSplitPartitions(t, mongotest.NewStore(t, chmongo.Options{Partitions: 16}), 20)
}
