package fuzz_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// The workflows machine runs on any provider through provider.Store alone:
// it knows the instances it started and the children their histories
// schedule, reads their queues with ListMessages and ListQueuedActivities,
// and injects faults with providertest.Faulty. A backend adds what the
// contract has no method for: an empty store per check, and a census of
// the whole store, which proves that the machine's view misses nothing.

// wfBackend is a store the workflows machine runs on.
type wfBackend struct {
	name string
	mode provider.Mode
	// open returns an empty store for one check; a memory store crashes
	// or stalls its steps between two record writes as mid plans.
	open func(t *rapid.T, mid *midStep) provider.FullStore
	// census tells what the whole store holds.
	census func(t *rapid.T, s provider.Store) wfCensus
	// waiting, when set, tells whether a call of the test waits for a
	// lock that another transaction holds (only a paused round can hold
	// one), so that such a wait fails the check instead of hanging it.
	waiting func(ctx context.Context) bool
	// partial says the backend cannot exercise every action the
	// coverage checks count (MongoDB: no stall between two writes of a
	// step, and too few checks for the rarest human-task races), so a
	// long run does not require them.
	partial bool
}

// wfCensus is what a whole store holds: the instances with history, sorted,
// and how many messages and activity tasks are queued.
type wfCensus struct {
	instances       []string
	messages, tasks int
}

// wfMemory runs the machine on a new memory store per check.
func wfMemory(mode provider.Mode) *wfBackend {
	return &wfBackend{
		name: "memory " + mode.String(),
		mode: mode,
		open: func(_ *rapid.T, mid *midStep) provider.FullStore {
			return memory.New(memory.Options{Mode: mode, Fault: mid.fault, BetweenWrites: mid.between})
		},
		census: func(_ *rapid.T, s provider.Store) wfCensus {
			ms := s.(*memory.Store)
			return wfCensus{instances: ms.InstanceIDs(), messages: len(ms.QueuedMessages()), tasks: len(ms.QueuedActivities())}
		},
	}
}

// wfPostgresTables are the tables of the postgres provider's schema
// (migrations/0001_init.sql) but schema_migrations.
var wfPostgresTables = []string{
	"instances", "history", "messages", "activity_task_ids", "activity_tasks", "dead_letters",
	"human_tasks", "human_task_events", "custom_projections", "tombstones",
}

// wfPostgres runs the machine on one postgres store for the whole test,
// on a schema of its own (created and dropped by pgtest), emptied before
// every check. It skips the test loudly without a server, and fails it
// under CI=true.
func wfPostgres(t *testing.T) *wfBackend {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	// A paused round holds a connection while another node's round, its
	// activity worker and clients go on.
	cfg.MaxConns = 8
	// The name tells the test's sessions from those of tests running
	// alongside; see waiting.
	var b [8]byte
	_, _ = rand.Read(b[:])
	appName := "chronicle-rapid-" + hex.EncodeToString(b[:])
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	// A call cancelled while it waits for a lock (see wfMachine.meanwhile)
	// must end its statement on the server too, at once: by default the
	// client only drops the connection, and the server would go on
	// waiting, holding the locks of the call's transaction.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 10 * time.Second}
	}
	// Commits need not wait for the disk: durability across a crash of
	// the server is not under test, and fsync would set the pace.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := pgtest.NewStore(t, postgres.Options{Pool: pool})
	schema := pgx.Identifier{store.Schema()}.Sanitize()
	tables := make([]string, len(wfPostgresTables))
	for i, name := range wfPostgresTables {
		tables[i] = schema + "." + name
	}
	return &wfBackend{
		name: "postgres",
		mode: provider.ModeTransactional,
		open: func(t *rapid.T, _ *midStep) provider.FullStore {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Without arguments Exec uses the simple protocol, which runs
			// both statements.
			_, err := pool.Exec(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY; ALTER SEQUENCE "+schema+".lease_tokens RESTART")
			if err != nil {
				t.Fatalf("empty the store: %v", err)
			}
			return store
		},
		census: func(t *rapid.T, _ provider.Store) wfCensus {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var c wfCensus
			rows, err := pool.Query(ctx, "SELECT DISTINCT instance_id FROM "+schema+".history ORDER BY instance_id")
			if err == nil {
				c.instances, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err == nil {
				err = pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+schema+".messages), (SELECT count(*) FROM "+schema+".activity_tasks)").Scan(&c.messages, &c.tasks)
			}
			if err != nil {
				t.Fatalf("census: %v", err)
			}
			return c
		},
		waiting: func(ctx context.Context) bool {
			var n int
			// Only a wait for a transaction that sits idle (the paused
			// round's) counts: sessions also wait briefly at commit for
			// the database-wide lock of transactions that sent NOTIFY,
			// which tests running alongside take too.
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity w
				WHERE w.application_name = $1 AND w.wait_event_type = 'Lock'
				AND EXISTS (SELECT 1 FROM pg_stat_activity b
					WHERE b.pid = ANY (pg_blocking_pids(w.pid)) AND b.state = 'idle in transaction')`, appName).Scan(&n)
			return err == nil && n > 0
		},
	}
}

// wfPostgresChecks caps the checks of TestRapidWorkflowsPostgres: a check
// costs thousands of round trips and hundreds of commits (0.4 s on a
// 2-core machine, over 1 s with -race), so the postgres run does far fewer
// checks than the memory runs. The CI run of the rapid tests
// (-rapid.checks=1000) gets wfPostgresChecks, about a minute; the race
// detector's run gets wfPostgresRaceChecks: it is there to find data
// races, and the concurrency of this test is that of the memory runs.
const (
	wfPostgresChecks     = 150
	wfPostgresRaceChecks = 40
)

// TestRapidWorkflowsPostgres runs the workflows machine of
// TestRapidWorkflowsTransactional against a PostgreSQL store: the same
// actions, faults (providertest.Faulty) and invariants, fewer checks.
func TestRapidWorkflowsPostgres(t *testing.T) {
	backend := wfPostgres(t)
	limit := wfPostgresChecks
	if raceEnabled {
		limit = wfPostgresRaceChecks
	}
	capRapidChecks(t, limit)
	testRapidWorkflows(t, backend)
}

// capRapidChecks lowers -rapid.checks to at most n until the test ends.
// rapid.Check has no per-call setting: it reads its flag, a package
// variable of rapid, when it starts, so the flag is set through the flag
// package and restored by a cleanup. The tests of this package do not run
// in parallel, so no other rapid.Check sees the lowered value.
func capRapidChecks(t *testing.T, n int) {
	t.Helper()
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid registers no -rapid.checks flag")
	}
	old := f.Value.String()
	checks, err := strconv.Atoi(old)
	require.NoError(t, err)
	if checks <= n {
		return
	}
	require.NoError(t, f.Value.Set(strconv.Itoa(n)))
	t.Cleanup(func() { _ = f.Value.Set(old) })
	t.Logf("running %d checks instead of -rapid.checks=%d", n, checks)
}

// wfMongo runs the machine on one mongo store on the FerretDB test server
// (peek-lock rounds: FerretDB has no transactions), in a database of its
// own, emptied before every check. It skips the test loudly without a
// server, and fails it under CI=true.
func wfMongo(t *testing.T) *wfBackend {
	// The store is shared by the checks; its crash hook reaches the
	// current check's plan (see midStep.mongoFault).
	var mid atomic.Pointer[midStep]
	store := mongotest.NewStore(t, chmongo.Options{BeforeWrite: func(what string) error {
		if c := mid.Load(); c != nil {
			return c.mongoFault(what)
		}
		return nil
	}})
	require.Equal(t, provider.ModePeekLock, store.Mode(), "the FerretDB test server should give a peek-lock store")
	db := mongotest.Client(t, mongotest.URL(t)).Database(store.Database())
	return &wfBackend{
		name:    "mongo peek-lock",
		mode:    provider.ModePeekLock,
		partial: true,
		open: func(t *rapid.T, c *midStep) provider.FullStore {
			mid.Store(c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			names, err := db.ListCollectionNames(ctx, bson.D{})
			if err != nil {
				t.Fatalf("empty the store: %v", err)
			}
			for _, name := range names {
				if name == "chronicle_meta" {
					continue
				}
				if _, err := db.Collection(name).DeleteMany(ctx, bson.D{}); err != nil {
					t.Fatalf("empty the store: %v", err)
				}
			}
			return store
		},
		census: func(t *rapid.T, _ provider.Store) wfCensus {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var c wfCensus
			var docs []struct {
				I string `bson:"i"`
			}
			cur, err := db.Collection("history").Find(ctx, bson.D{})
			if err == nil {
				err = cur.All(ctx, &docs)
			}
			if err == nil {
				for _, d := range docs {
					c.instances = append(c.instances, d.I)
				}
				slices.Sort(c.instances)
				c.instances = slices.Compact(c.instances)
				var n int64
				n, err = db.Collection("messages").CountDocuments(ctx, bson.D{})
				c.messages = int(n)
				if err == nil {
					n, err = db.Collection("activity_tasks").CountDocuments(ctx, bson.D{{Key: "d", Value: false}})
					c.tasks = int(n)
				}
			}
			if err != nil {
				t.Fatalf("census: %v", err)
			}
			return c
		},
	}
}

// wfMongoChecks caps the checks of TestRapidWorkflowsMongo: every store
// call is a round trip to FerretDB, which filters most queries in Go over
// a scan of its SQLite table (about 2 s a check on a 2-core machine).
// CI raises the cap with CHRONICLE_RAPID_MONGO_CHECKS (the Makefile's
// RAPID_MONGO_CHECKS), so that what a short run misses is found there
// before a newcomer's `make test` finds it.
const (
	wfMongoChecks     = 40
	wfMongoRaceChecks = 10
)

// wfMongoChecksEnv names the variable that sets the cap of
// TestRapidWorkflowsMongo's checks instead of wfMongoChecks.
const wfMongoChecksEnv = "CHRONICLE_RAPID_MONGO_CHECKS"

// TestRapidWorkflowsMongo runs the workflows machine of
// TestRapidWorkflowsPeekLock against a mongo store on FerretDB: the same
// actions (crashes, zombies, restarts, human tasks), faults and
// invariants, fewer checks.
func TestRapidWorkflowsMongo(t *testing.T) {
	backend := wfMongo(t)
	limit := wfMongoChecks
	if v := os.Getenv(wfMongoChecksEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q is not a number of checks", wfMongoChecksEnv, v)
		require.Positive(t, n, "%s must be positive", wfMongoChecksEnv)
		limit = n
	}
	if raceEnabled {
		limit = min(limit, wfMongoRaceChecks)
	}
	capRapidChecks(t, limit)
	testRapidWorkflows(t, backend)
}
