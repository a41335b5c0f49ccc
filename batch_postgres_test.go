package chronicle_test

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// A batch on PostgreSQL, its query translated to SQL: it terminates the
// running instances of one region two a second, is paused, its node
// goes away, and a node that comes later resumes it and finishes it,
// each selected instance terminated once and no other touched.
func TestPostgresBatch(t *testing.T) {
	t.Parallel()
	testBatchResumedByAnotherNode(t, pgtest.NewStore(t, postgres.Options{}))
}

// testBatchResumedByAnotherNode runs the batch of TestPostgresBatch on
// store, its query translated by the store's search.
func testBatchResumedByAnotherNode(t *testing.T, store provider.Store) {
	env, _ := batchEnv(t, chronicletest.Store(store))
	e, ctx := env.Engine(), env.Context()
	uk := startWaiters(env, "uk", 30, waiterIn{})
	fr := startWaiters(env, "fr", 5, waiterIn{})
	env.RunUntilIdle()
	o := ukBatch(chronicle.BatchTerminate)
	o.Where, o.Rate = "region = 'uk' AND status = 'running'", 2
	id, err := e.StartBatch(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(1500 * time.Millisecond)
	if err := e.PauseBatch(ctx, id, "handover", "alice"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Second)
	d, err := e.DescribeBatch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != chronicle.BatchPaused || d.Done == 0 || d.Done >= 30 {
		t.Fatalf("paused batch: %+v", d)
	}
	// The node is gone; another comes later and resumes the batch.
	later, _ := batchEnv(t, chronicletest.Store(store), chronicletest.StartAt(env.Now().Add(time.Hour)), chronicletest.IDPrefix("b-"))
	if err := later.Engine().ResumeBatch(ctx, id, "", "bob"); err != nil {
		t.Fatal(err)
	}
	later.RunUntilIdle()
	d, err = later.Engine().DescribeBatch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantProgress(t, d, chronicle.BatchCompleted, 30, 30, 0, 0)
	for _, u := range uk {
		events, err := later.Engine().History(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(events, history.KindExecutionTerminated); n != 1 {
			t.Errorf("%s terminated %d times", u, n)
		}
	}
	for _, f := range fr {
		if s := statusOf(t, later, f); s != chronicle.StatusRunning {
			t.Errorf("unselected %s is %s", f, s)
		}
	}
	events, err := later.Engine().History(ctx, chronicle.BatchInstanceID(id))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(events, history.KindExecutionStarted); n < 2 {
		t.Errorf("%d executions of the batch over 15 pages, want it to continue as new", n)
	}
}
