package mongo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

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

// TestConformancePeekLockPartitions16 runs the suite on a store of 16
// partitions on the FerretDB test server: every per-instance document
// carries its partition, and the queue queries name the partitions asked
// for.
func TestConformancePeekLockPartitions16(t *testing.T) {
	fields := newPartitionFields(t)
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
		if s.Mode() != provider.ModePeekLock || s.Partitions() != 16 {
			t.Fatalf("store on the FerretDB test server runs %s rounds on %d partitions, want peek-lock on 16", s.Mode(), s.Partitions())
		}
		fields.watch(t, mongotest.Client(t, mongotest.URL(t)), s)
		return s
	})
}

// partitionFields checks the field "pt" of the per-instance documents
// the conformance cases leave: each case's store is checked when the
// case ends, and the suite fails when a collection had no document in
// any case.
type partitionFields struct {
	mu      sync.Mutex
	checked map[string]int
}

// The per-instance collections, with the field holding the instance id.
var partitionedCollections = map[string]string{
	"instances": "_id", "history": "i", "messages": "i", "activity_tasks": "i", "dead_letters": "i",
	"human_tasks": "i", "human_task_events": "i", "custom_projections": "i",
}

func newPartitionFields(t *testing.T) *partitionFields {
	f := &partitionFields{checked: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() || t.Skipped() {
			return
		}
		t.Logf("documents checked for their partition: %v", f.checked)
		for c := range partitionedCollections {
			if f.checked[c] == 0 {
				t.Errorf("no document of %s was checked: the cases wrote none", c)
			}
		}
	})
	return f
}

// watch checks, when t ends and before its database is dropped, that
// every document of the per-instance collections of s carries the
// partition of its instance.
func (f *partitionFields) watch(t *testing.T, client *mongo.Client, s *chmongo.Store) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db := client.Database(s.Database())
		for c, field := range partitionedCollections {
			cur, err := db.Collection(c).Find(ctx, bson.D{})
			if err != nil {
				t.Errorf("read %s: %v", c, err)
				return
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil {
				t.Errorf("read %s: %v", c, err)
				return
			}
			for _, d := range docs {
				id, _ := d[field].(string)
				pt, ok := d["pt"]
				if !ok {
					t.Errorf("a document of %s (instance %q) has no pt", c, id)
					continue
				}
				if want := provider.PartitionOf(id, s.Partitions()); pt != int32(want) {
					t.Errorf("a document of %s of instance %q has pt %v, want %d", c, id, pt, want)
				}
			}
			f.mu.Lock()
			f.checked[c] += len(docs)
			f.mu.Unlock()
		}
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

// TestConformanceTransactionalPartitions16 runs the suite on a store of
// 16 partitions on the replica set named by CHRONICLE_TEST_MONGO_URL,
// skipped loudly without one.
func TestConformanceTransactionalPartitions16(t *testing.T) {
	url := mongotest.ReplicaSetURL(t)
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStoreAt(t, url, chmongo.Options{Partitions: 16})
		if s.Mode() != provider.ModeTransactional || s.Partitions() != 16 {
			t.Fatalf("store on the replica set runs %s rounds on %d partitions, want transactional on 16", s.Mode(), s.Partitions())
		}
		return s
	})
}
