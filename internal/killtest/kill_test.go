package killtest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// Environment of a worker process.
const (
	envWorker = "CHRONICLE_KILLTEST_WORKER" // the worker's node id
	envURL    = "CHRONICLE_KILLTEST_URL"
	envSchema = "CHRONICLE_KILLTEST_SCHEMA"
)

func TestMain(m *testing.M) {
	if node := os.Getenv(envWorker); node != "" {
		if err := work(node, os.Getenv(envURL), os.Getenv(envSchema)); err != nil {
			fmt.Fprintln(os.Stderr, "killtest worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// register registers the workflow and activities every process knows.
func register(e *chronicle.Engine) error {
	add := func(_ context.Context, n int) (int, error) { return n + 1, nil }
	for _, err := range []error{
		chronicle.RegisterActivity(e, "charge", add),
		chronicle.RegisterActivity(e, "ship", add),
		chronicle.RegisterWorkflow(e, "order", func(ctx *chronicle.Context, n int) (int, error) {
			n, err := chronicle.CallActivity[int](ctx, "charge", n, nil)
			if err != nil {
				return 0, err
			}
			if err := ctx.Sleep(100 * time.Millisecond); err != nil {
				return 0, err
			}
			v, err := chronicle.WaitEvent[int](ctx, "approve", nil)
			if err != nil {
				return 0, err
			}
			return chronicle.CallActivity[int](ctx, "ship", n+v, nil)
		}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// work runs a worker until the process is killed.
func work(node, url, schema string) error {
	ctx := context.Background()
	store, err := postgres.New(ctx, postgres.Options{URL: url, Schema: schema})
	if err != nil {
		return err
	}
	e, err := chronicle.New(store, chronicle.Options{
		NodeID: node, OrchestrationWorkers: 2, ActivityWorkers: 4, SafetyPoll: 200 * time.Millisecond,
		ActivityLease: 2 * time.Second, Logger: discard(),
		// Half the workers take a workflow's next activity claimed, and
		// are killed holding it too.
		EagerActivities: node == "w1" || node == "w3",
	})
	if err != nil {
		return err
	}
	if err := register(e); err != nil {
		return err
	}
	return e.Run(ctx)
}

// worker is one worker process the test kills and restarts.
type worker struct {
	node        string
	url, schema string
	cmd         *exec.Cmd
}

func (w *worker) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"="+w.node, envURL+"="+w.url, envSchema+"="+w.schema)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	w.cmd = cmd
}

func (w *worker) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	_ = w.cmd.Wait() // killed: its exit status says so and nothing else
}

// TestKillWorkersPostgres runs workflows with activities, timers and
// signals (each sent twice under one idempotency key) on three worker
// processes sharing one schema, kills a worker with SIGKILL every few
// hundred milliseconds and restarts it, and then checks that every
// instance completed, every chain verifies, each activity has exactly one
// completion, each signal key appears once, projections equal their fold
// and no dead letter was left.
func TestKillWorkersPostgres(t *testing.T) {
	url := pgtest.URL(t)
	testKillWorkers(t, url, pgtest.NewStore(t, postgres.Options{}))
}

// TestKillWorkersCitus is TestKillWorkersPostgres on a store of 16
// partitions distributed on the Citus cluster of CHRONICLE_TEST_CITUS_URL
// (skipped, loudly, without it): the workers open the schema without
// Options.Citus and find it distributed.
func TestKillWorkersCitus(t *testing.T) {
	url := pgtest.CitusURL(t)
	testKillWorkers(t, url, pgtest.NewCitusStore(t, postgres.Options{Partitions: 16}))
}

// testKillWorkers runs the kill test on store, whose server the workers
// reach at url.
func testKillWorkers(t *testing.T, url string, store *postgres.Store) {
	const instances, kills = 300, 30
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	client, err := chronicle.New(store, chronicle.Options{NodeID: "client", Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, register(client))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	workers := make([]*worker, 3)
	for i := range workers {
		workers[i] = &worker{node: "w" + strconv.Itoa(i), url: url, schema: store.Schema()}
		workers[i].start(t)
	}
	defer func() {
		for _, w := range workers {
			w.kill(t)
		}
	}()

	reqs := make([]chronicle.StartRequest, instances)
	for i := range reqs {
		reqs[i] = chronicle.StartRequest{Workflow: "order", Input: i}
	}
	ids, err := client.StartMany(ctx, reqs)
	require.NoError(t, err)
	// Each instance is approved twice with one key, the copies apart in
	// time, while workers die.
	raise := func(id string) {
		require.NoError(t, client.RaiseEvent(ctx, id, "approve", 1, &chronicle.RaiseOptions{IdempotencyKey: "approve-" + id}))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range ids {
			raise(id)
		}
		for _, id := range ids {
			raise(id)
		}
	}()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // the kill schedule, not a wait for work
		w := workers[rng.IntN(len(workers))]
		w.kill(t)
		w.start(t)
	}
	wg.Wait()

	for i, id := range ids {
		inst, err := client.Wait(ctx, id)
		require.NoError(t, err, "instance %d", i)
		require.Equal(t, chronicle.StatusCompleted, inst.Status, "%s: %v", id, inst.Failure)
		var out int
		require.NoError(t, inst.Result(&out))
		require.Equal(t, i+3, out, "%s: charge, approve and ship each add one", id)
		require.NoError(t, client.Verify(ctx, id))
		events, err := client.History(ctx, id)
		require.NoError(t, err)
		completions, signals := map[string]int{}, 0
		scheduled := 0
		for _, e := range events {
			switch e.Kind {
			case history.KindActivityScheduled:
				scheduled++
			case history.KindActivityCompleted:
				completions[e.CorrelationID]++
			case history.KindEventRaised:
				signals++
				require.Equal(t, "approve-"+id, e.CorrelationID)
			}
		}
		require.Equal(t, 2, scheduled, id)
		require.Len(t, completions, 2, "%s: every activity completed", id)
		for corr, n := range completions {
			require.Equal(t, 1, n, "%s: activity %s completed %d times", id, corr, n)
		}
		require.Equal(t, 1, signals, "%s: the signal key appears once", id)
		diffs, err := client.CheckProjections(ctx, id)
		require.NoError(t, err)
		require.Empty(t, diffs, id)
	}
	letters, err := client.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
	require.NoError(t, err)
	require.Empty(t, letters)
	t.Logf("%d instances completed through %d SIGKILLs of 3 workers", instances, kills)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
