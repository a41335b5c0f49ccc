package chronicle_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"

	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// peekLockStore returns a mongo store on the FerretDB test server, which
// runs peek-lock rounds (it has no transactions).
func peekLockStore(t *testing.T) provider.Store {
	t.Helper()
	s := mongotest.NewStore(t, chmongo.Options{})
	if s.Mode() != provider.ModePeekLock {
		t.Fatalf("store on FerretDB runs %s rounds, want peek-lock", s.Mode())
	}
	return s
}

// TestMongoEndToEnd runs the end-to-end workflows on the mongo provider
// over the FerretDB test server: peek-lock rounds, each subtest in a
// database of its own.
func TestMongoEndToEnd(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, peekLockStore)
}

// TestMongoEndToEndTransactional runs them on the replica set named by
// CHRONICLE_TEST_MONGO_URL, skipped loudly without one.
func TestMongoEndToEndTransactional(t *testing.T) {
	url := mongotest.ReplicaSetURL(t)
	t.Parallel()
	testEndToEnd(t, func(t *testing.T) provider.Store { return mongotest.NewStoreAt(t, url, chmongo.Options{}) })
}

// TestMongoRoundsSurviveCutConnections runs the loan workflow on a mongo
// store reached through a proxy that closes every open connection when a
// chosen store call begins (the lease, an append, the projections, an
// enqueue, an activity's completion, the ack): each cut fails a round or
// an activity half-way. The instance still ends with the history a
// memory run gives (the same events, once each), a valid chain, and projections equal to its fold.
func TestMongoRoundsSurviveCutConnections(t *testing.T) {
	t.Parallel()
	ref := setup(t)
	registerLoan(t, ref.engine)
	want := runLoan(t, ref, nil)

	upstream, err := url.Parse(mongotest.URL(t))
	require.NoError(t, err)
	proxy := newCutProxy(t, upstream.Host)
	store := mongotest.NewStoreAt(t, "mongodb://"+proxy.addr()+"/?directConnection=true", chmongo.Options{})
	cutAt := map[string]bool{
		"LeaseInstance": true, "AppendHistory": true, "SaveProjections": true, "EnqueueActivities": true,
		"CompleteActivity": true, "EnqueueMessages": true, "AckLease": true,
	}
	var mu sync.Mutex
	faulty := providertest.Faulty(store, func(op string) *providertest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if cutAt[op] {
			delete(cutAt, op)
			proxy.cut()
		}
		return nil
	})
	obs := &failureCounter{}
	b := setupOn(t, faulty, chronicle.Options{Logger: slog.New(slog.DiscardHandler), MaxDeliveries: 50, Observer: obs,
		RoundLease: 2 * time.Second, ActivityLease: 2 * time.Second})
	registerLoan(t, b.engine)

	failures := 0
	retry := func(what string, fn func() error) {
		t.Helper()
		for i := 0; ; i++ {
			err := fn()
			if err == nil {
				return
			}
			failures++
			require.Less(t, i, 5, "%s keeps failing: %v", what, err)
		}
	}
	retry("start", func() error {
		_, err := b.engine.Start(b.ctx, "loan", 4200, &chronicle.StartOptions{InstanceID: "loan-1"})
		if errors.Is(err, chronicle.ErrInstanceExists) {
			return nil
		}
		return err
	})
	// drain runs rounds and activities until nothing is left; when
	// nothing can run it moves the clock past the round and activity
	// leases a cut call may have left behind, a few times, before it
	// calls the store drained.
	drain := func() {
		idle := 0
		for i := 0; idle < 3; i++ {
			require.Less(t, i, 2000, "work left after 2000 steps")
			worked, err := b.engine.RunOnce(b.ctx)
			switch {
			case err != nil:
				failures++
			case worked:
				idle = 0
			default:
				idle++
				b.clock.Advance(3 * time.Second)
			}
		}
	}
	drain()
	retry("raise", func() error {
		return b.engine.RaiseEvent(b.ctx, "loan-1", "documents", "payslips", &chronicle.RaiseOptions{IdempotencyKey: "u1"})
	})
	drain()
	b.clock.Advance(time.Minute)
	drain()
	b.clock.Advance(time.Hour)
	drain()
	mu.Lock()
	require.Empty(t, cutAt, "every planned cut happened")
	mu.Unlock()
	require.Greater(t, proxy.cuts(), 0)
	failed := failures + obs.count()
	// A cut at the start of a fenced step meets its fence read, which the
	// driver retries on a new connection; a cut before a write (a
	// client's enqueue) fails the call.
	require.Greater(t, failed, 0, "a cut failed a client call, a round or an activity")
	t.Logf("%d cuts: %d failed client calls and calls of RunOnce, %d failed rounds and activity attempts", proxy.cuts(), failures, obs.count())

	// The clock moved otherwise than in the memory run, so times differ;
	// every step happened once all the same.
	kinds := func(events []history.Event) map[history.Kind]int {
		n := map[history.Kind]int{}
		for _, e := range events {
			n[e.Kind]++
		}
		return n
	}
	require.Equal(t, kinds(want), kinds(b.history(t, "loan-1")))
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "loan-1").Status)
	require.NoError(t, b.engine.Verify(b.ctx, "loan-1"))
	diffs, err := b.engine.CheckProjections(b.ctx, "loan-1")
	require.NoError(t, err)
	require.Empty(t, diffs, "stored projections equal the fold of history")
	letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
	require.NoError(t, err)
	require.Empty(t, letters)
}

// failureCounter counts failed rounds and activity attempts.
type failureCounter struct {
	mu sync.Mutex
	n  int
}

func (f *failureCounter) Round(s chronicle.RoundStats) {
	if s.Err != nil {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
	}
}

func (f *failureCounter) Activity(s chronicle.ActivityStats) {
	if s.Err != nil || s.Outcome == "lease-lost" {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
	}
}

func (f *failureCounter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// cutProxy forwards TCP connections to a server and closes all of them
// on demand, as a network failure would.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	n      int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cut closes every open connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	p.n++
}

func (p *cutProxy) cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// TestCheckpointDetectsRewrittenHistoryOnMongo: an operator rewrites an
// instance's history documents with recomputed hashes; the chain still
// verifies, the signed checkpoints name the instance and seq.
func TestCheckpointDetectsRewrittenHistoryOnMongo(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	store := mongotest.NewStore(t, chmongo.Options{})
	b := setupOn(t, store, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "m-1", "m-2")
	events := b.history(t, "m-1")
	last := events[len(events)-1].Seq

	forged := resealed(t, events, 2)
	hist := mongotest.Client(t, mongotest.URL(t)).Database(store.Database()).Collection("history")
	cur, err := hist.Find(b.ctx, bson.D{{Key: "i", Value: "m-1"}})
	require.NoError(t, err)
	var docs []struct {
		ID     string   `bson:"_id"`
		First  int64    `bson:"f"`
		Events [][]byte `bson:"ev"`
	}
	require.NoError(t, cur.All(b.ctx, &docs))
	for _, d := range docs {
		for j := range d.Events {
			d.Events[j] = history.MarshalEvent(&forged[d.First-1+int64(j)])
		}
		_, err := hist.UpdateOne(b.ctx, bson.D{{Key: "_id", Value: d.ID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "ev", Value: d.Events}, {Key: "lh", Value: forged[d.First-1+int64(len(d.Events))-1].Hash}}}})
		require.NoError(t, err)
	}
	require.NoError(t, b.engine.Verify(b.ctx, "m-1"), "plain chain verification should pass on a resealed history")
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	requireMismatch(t, rep, "m-1", last)
}

// TestMongoOperations runs the operations of docs/operations.md on the
// mongo provider over the FerretDB test server (peek-lock rounds): a
// schedule that is backfilled and catches up after every node was down, a
// batch paused on one node and finished by another, the reruns and a
// human task's escalation.
func TestMongoOperations(t *testing.T) {
	t.Parallel()
	testOperations(t, peekLockStore)
}

// TestMongoOperationsTransactional runs them on the replica set named by
// CHRONICLE_TEST_MONGO_URL, skipped loudly without one.
func TestMongoOperationsTransactional(t *testing.T) {
	url := mongotest.ReplicaSetURL(t)
	t.Parallel()
	testOperations(t, func(t *testing.T) provider.Store { return mongotest.NewStoreAt(t, url, chmongo.Options{}) })
}

// testOperations runs the schedule, batch, rerun and task escalation
// tests that TestPostgresSchedule, TestPostgresBatch, TestPostgresRerun
// and TestTaskEscalationPostgres run on PostgreSQL, on stores made by
// newStore.
func testOperations(t *testing.T, newStore func(t *testing.T) provider.Store) {
	t.Run("Schedule", func(t *testing.T) {
		t.Parallel()
		testScheduleCatchup(t, newStore(t))
	})
	t.Run("Batch", func(t *testing.T) {
		t.Parallel()
		testBatchResumedByAnotherNode(t, newStore(t))
	})
	t.Run("Rerun", func(t *testing.T) {
		t.Parallel()
		testRerunOn(t, newStore)
	})
	t.Run("TaskEscalation", func(t *testing.T) {
		t.Parallel()
		testTaskEscalationOn(t, newStore(t))
	})
}
