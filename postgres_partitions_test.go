package chronicle_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// statementLog records the text of every statement a pool's connections
// run, alone or in a batch.
type statementLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (l *statementLog) add(sql string) {
	l.mu.Lock()
	l.seen[sql]++
	l.mu.Unlock()
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(d.SQL)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// perInstanceTables are the tables whose rows belong to one instance
// (migration 0009).
var perInstanceTables = regexp.MustCompile(`\.(instances|history|messages|activity_task_ids|activity_tasks|dead_letters|human_tasks|human_task_events|custom_projections|tombstones|legal_holds)\b`)

// namesPart matches a statement that names a partition: a predicate
// part = … or an insert of the column.
var namesPart = regexp.MustCompile(`\bpart = |\(part, `)

// TestPostgresRoundStatementsNamePartition runs W1 on a store of 16
// partitions with every statement recorded, and checks that each
// statement on a per-instance table names the partition, as a table
// distributed by part needs to route it to one shard. The one exception
// is listed: the count of a concurrency key's live claims, which spans
// instances by definition (W1 runs without keys, so it is not expected).
func TestPostgresRoundStatementsNamePartition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := &statementLog{seen: map[string]int{}}
	_, store := storeOnPool(ctx, t, pgtest.Schema(t), postgres.Options{Partitions: 16}, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = log })

	res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 40})
	require.NoError(t, err)
	require.Equal(t, 40, res.Workflows)

	log.mu.Lock()
	defer log.mu.Unlock()
	var checked, missing []string
	for sql := range log.seen {
		if !perInstanceTables.MatchString(sql) || strings.Contains(sql, "schema_migrations") || isMigration(sql) {
			continue
		}
		checked = append(checked, sql)
		if !namesPart.MatchString(sql) {
			missing = append(missing, sql)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "statements on per-instance tables that do not name the partition")
	// The round's statements were seen: dequeue, history, projections,
	// activities, acks.
	require.Greater(t, len(checked), 12, "statements checked")
	for _, want := range []string{"FOR NO KEY UPDATE SKIP LOCKED", "INSERT INTO \"", "DELETE FROM"} {
		require.True(t, containsAny(checked, want), "a checked statement has %q", want)
	}
	t.Logf("%d statements on per-instance tables, each naming its partition", len(checked))
}

// isMigration reports DDL: the migrations run through the same pool.
func isMigration(sql string) bool {
	s := strings.TrimSpace(sql)
	for _, p := range []string{"CREATE ", "ALTER ", "DROP ", "COMMENT ", "-- "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(s, "CREATE TABLE") || strings.Contains(s, "CREATE INDEX")
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestPostgresEnginesSplitPartitions runs two engines on one store of 16
// partitions: they split the partitions between them and run every
// workflow, and when one stops the other takes its partitions.
func TestPostgresEnginesSplitPartitions(t *testing.T) {
	t.Parallel()
	testEnginesSplitPartitions(t, pgtest.NewStore(t, postgres.Options{Partitions: 16}), 40)
}

// testEnginesSplitPartitions runs two engines on store, a store of 16
// partitions: they split the partitions 8 and 8 and run n workflows
// started on one and awaited on the other; when one stops, the other
// takes every partition and runs one more.
func testEnginesSplitPartitions(t *testing.T, store provider.Store, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newEngine := func(node string) *chronicle.Engine {
		// Short leases renewed every 100ms, so the test takes no longer
		// than a few renewals.
		e, err := chronicle.New(store, chronicle.Options{NodeID: node, SafetyPoll: time.Second, PartitionLease: 300 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, chronicle.RegisterActivity(e, "double", func(_ context.Context, n int) (int, error) { return 2 * n, nil }))
		require.NoError(t, chronicle.RegisterWorkflow(e, "twice", func(ctx *chronicle.Context, n int) (int, error) {
			a, err := chronicle.CallActivity[int](ctx, "double", n, nil)
			if err != nil {
				return 0, err
			}
			return chronicle.CallActivity[int](ctx, "double", a, nil)
		}))
		return e
	}
	a, b := newEngine("node-a"), newEngine("node-b")
	runA, stopA := context.WithCancel(ctx)
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(runA) }()
	go func() { doneB <- b.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-doneB)
	}()

	require.Eventually(t, func() bool {
		pa, pb := a.Partitions(), b.Partitions()
		all := append(slices.Clone(pa), pb...)
		slices.Sort(all)
		return len(pa) == 8 && len(pb) == 8 && slices.Equal(all, provider.AllPartitions(16))
	}, time.Minute, 10*time.Millisecond, "the engines split the 16 partitions 8 and 8")

	ids := make([]string, n)
	for i := range ids {
		id, err := a.Start(ctx, "twice", i, &chronicle.StartOptions{InstanceID: fmt.Sprintf("twice-%d", i)})
		require.NoError(t, err)
		ids[i] = id
	}
	for i, id := range ids {
		inst, err := b.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, inst.Status, id)
		var got int
		require.NoError(t, inst.Result(&got))
		require.Equal(t, 4*i, got)
	}

	stopA()
	require.NoError(t, <-doneA)
	require.Eventually(t, func() bool {
		return slices.Equal(b.Partitions(), provider.AllPartitions(16))
	}, time.Minute, 10*time.Millisecond, "the engine left takes every partition")
	id, err := b.Start(ctx, "twice", 100, &chronicle.StartOptions{InstanceID: "twice-after"})
	require.NoError(t, err)
	inst, err := b.Wait(ctx, id)
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, inst.Status)
}

// TestPostgresPartitionWakeups runs three engines, each on a store of its
// own, on a schema of two partitions: two hold one partition each and the
// third none. Work started in one partition by a fourth store wakes a
// worker of the engine holding it and of the engine holding none (which
// looks at every partition), and no worker of the engine holding the
// other partition.
func TestPostgresPartitionWakeups(t *testing.T) {
	t.Parallel()
	client := pgtest.NewStore(t, postgres.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	engines := make([]*chronicle.Engine, 3)
	done := make(chan error, len(engines))
	for i := range engines {
		store, err := postgres.New(ctx, postgres.Options{URL: pgtest.URL(t), Schema: client.Schema()})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		// Leases renewed every second: they settle in a few renewals
		// and stay put while the test looks. No safety poll meanwhile.
		e, err := chronicle.New(store, chronicle.Options{NodeID: fmt.Sprintf("node-%d", i), SafetyPoll: time.Minute, PartitionLease: 3 * time.Second})
		require.NoError(t, err)
		require.NoError(t, chronicle.RegisterActivity(e, "double", func(_ context.Context, n int) (int, error) { return 2 * n, nil }))
		require.NoError(t, chronicle.RegisterWorkflow(e, "once", func(ctx *chronicle.Context, n int) (int, error) {
			return chronicle.CallActivity[int](ctx, "double", n, nil)
		}))
		engines[i] = e
		go func() { done <- e.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range engines {
			require.NoError(t, <-done)
		}
	}()
	var owner, other, fallback *chronicle.Engine
	require.Eventually(t, func() bool {
		owner, other, fallback = nil, nil, nil
		for _, e := range engines {
			switch p := e.Partitions(); {
			case len(p) == 0:
				fallback = e
			case slices.Equal(p, []int{0}):
				owner = e
			case slices.Equal(p, []int{1}):
				other = e
			}
		}
		return owner != nil && other != nil && fallback != nil
	}, time.Minute, 10*time.Millisecond, "two engines hold one partition each, the third none")

	id := "wake-0"
	for i := 1; provider.PartitionOf(id, 2) != 0; i++ {
		id = fmt.Sprintf("wake-%d", i)
	}
	type counts struct{ woke, skipped uint64 }
	hints := func(e *chronicle.Engine) (orch, act counts) {
		orch.woke, orch.skipped = chronicle.HintWakeups(e, provider.QueueOrchestration)
		act.woke, act.skipped = chronicle.HintWakeups(e, provider.QueueActivity)
		return orch, act
	}
	ownerOrch, ownerAct := hints(owner)
	otherOrch, otherAct := hints(other)
	fallbackOrch, fallbackAct := hints(fallback)

	starter, err := chronicle.NewClient(client, chronicle.ClientOptions{})
	require.NoError(t, err)
	_, err = starter.Start(ctx, "once", 21, &chronicle.StartOptions{InstanceID: id})
	require.NoError(t, err)
	inst, err := starter.Wait(ctx, id)
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, inst.Status)

	// The workflow's start, activity and result were announced in
	// partition 0; the other engine skipped them all.
	require.Eventually(t, func() bool {
		o, a := hints(other)
		return o.skipped+o.woke >= otherOrch.skipped+otherOrch.woke+2 && a.skipped+a.woke > otherAct.skipped+otherAct.woke
	}, time.Minute, 10*time.Millisecond, "the engine holding partition 1 sees the hints of partition 0")
	o, a := hints(other)
	require.Equal(t, otherOrch.woke, o.woke, "a hint of partition 0 woke an orchestration worker of the engine holding partition 1")
	require.Equal(t, otherAct.woke, a.woke, "a hint of partition 0 woke an activity worker of the engine holding partition 1")
	for _, c := range []struct {
		name     string
		e        *chronicle.Engine
		orch, ac counts
	}{{"the engine holding partition 0", owner, ownerOrch, ownerAct}, {"the engine holding no partition", fallback, fallbackOrch, fallbackAct}} {
		require.Eventually(t, func() bool {
			o, a := hints(c.e)
			return o.woke > c.orch.woke && a.woke > c.ac.woke
		}, time.Minute, 10*time.Millisecond, "%s is woken for partition 0's work", c.name)
		o, a := hints(c.e)
		require.Equal(t, c.orch.skipped, o.skipped, "%s skipped a hint", c.name)
		require.Equal(t, c.ac.skipped, a.skipped, "%s skipped a hint", c.name)
	}
}

// count returns how many statements were logged, and forgets them.
func (l *statementLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.seen {
		n += c
	}
	clear(l.seen)
	return n
}
