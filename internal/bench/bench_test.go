package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

func TestWorkloadsRun(t *testing.T) {
	t.Parallel()
	for _, w := range []string{bench.W1, bench.W2, bench.W3} {
		t.Run(w, func(t *testing.T) {
			t.Parallel()
			res, err := bench.Run(context.Background(), memory.New(memory.Options{}), bench.Config{Workload: w, Instances: 20})
			require.NoError(t, err)
			require.Equal(t, 20, res.Workflows)
			require.Positive(t, res.Rounds)
			require.Positive(t, res.AllocsPerRound)
			if w == bench.W3 {
				require.Positive(t, res.P50)
				require.GreaterOrEqual(t, res.P99, res.P50)
			} else {
				require.Equal(t, int64(map[string]int{bench.W1: 3, bench.W2: 20}[w]*20), res.Activities)
			}
		})
	}
	t.Run("W1Checkpoints", func(t *testing.T) {
		t.Parallel()
		store := memory.New(memory.Options{})
		res, err := bench.Run(context.Background(), store, bench.Config{Workload: bench.W1, Instances: 20, Checkpoints: time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, 20, res.Workflows)
		latest, err := store.LatestCheckpoint(context.Background())
		require.NoError(t, err, "the run wrote no checkpoint")
		require.GreaterOrEqual(t, latest.Number, res.Checkpoints)
	})
	_, err := bench.Run(context.Background(), memory.New(memory.Options{}), bench.Config{Workload: "W9", Instances: 1})
	require.Error(t, err)
	_, err = bench.Run(context.Background(), memory.New(memory.Options{}), bench.Config{Workload: bench.W4, Instances: 1})
	require.ErrorContains(t, err, "at least 2")
}

func TestNewWorkloadsRun(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, c bench.Config) *bench.Result {
		t.Helper()
		res, err := bench.Run(context.Background(), memory.New(memory.Options{}), c)
		require.NoError(t, err)
		require.Equal(t, c.Instances, res.Workflows)
		return res
	}
	t.Run("W4", func(t *testing.T) {
		t.Parallel()
		res := run(t, bench.Config{Workload: bench.W4, Instances: 10})
		require.Positive(t, res.P50First)
		require.Positive(t, res.P50Last)
	})
	t.Run("BACKLOG", func(t *testing.T) {
		t.Parallel()
		res := run(t, bench.Config{Workload: bench.Backlog, Instances: 20, StartMany: true})
		require.Positive(t, res.P50, "every workflow took time from its start to its completion")
		require.GreaterOrEqual(t, res.P99, res.P50)
		require.Positive(t, res.StartDuration)
	})
	t.Run("START", func(t *testing.T) {
		t.Parallel()
		res := run(t, bench.Config{Workload: bench.Start, Instances: 20})
		require.Zero(t, res.Rounds, "no worker ran")
		require.Equal(t, res.Duration, res.StartDuration)
	})
}

// W1 with concurrency limits: every workflow and every activity runs
// under its key's limit of one (recorded in its start and its scheduled
// activities), and all complete.
func TestW1WithConcurrencyLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, startMany := range []bool{false, true} {
		store := memory.New(memory.Options{})
		res, err := bench.Run(ctx, store, bench.Config{Workload: bench.W1, Instances: 20, LimitKeys: 3, ActivityLimitKeys: 4, StartMany: startMany})
		require.NoError(t, err)
		require.Equal(t, 20, res.Workflows)
		require.Equal(t, int64(60), res.Activities)

		e, err := chronicle.New(store, chronicle.Options{})
		require.NoError(t, err)
		insts, err := e.ListInstances(ctx, chronicle.InstanceFilter{Workflow: "sequence-keyed", Limit: 100})
		require.NoError(t, err)
		require.Len(t, insts, 20)
		keys := map[string]bool{}
		for _, in := range insts {
			events, err := e.History(ctx, in.ID)
			require.NoError(t, err)
			var scheduled int
			for _, ev := range events {
				a, err := ev.Attributes()
				require.NoError(t, err)
				switch a := a.(type) {
				case *history.ExecutionStarted:
					require.NotNil(t, a.Concurrency, "%s started without a limit", in.ID)
					require.Equal(t, 1, a.Concurrency.Limit)
					keys[a.Concurrency.Key] = true
				case *history.ActivityScheduled:
					require.NotNil(t, a.Concurrency, "%s scheduled an activity without a limit", in.ID)
					require.Equal(t, 1, a.Concurrency.Limit)
					scheduled++
				}
			}
			require.Equal(t, 3, scheduled)
		}
		require.Equal(t, map[string]bool{"customer-0": true, "customer-1": true, "customer-2": true}, keys)
		set, err := store.GetSlots(ctx, "customer-0")
		require.NoError(t, err)
		require.Empty(t, set.Holders, "every slot was given back")
		require.Empty(t, set.Waiters)
	}
	_, err := bench.Run(ctx, memory.New(memory.Options{}), bench.Config{Workload: bench.W2, Instances: 1, LimitKeys: 2})
	require.ErrorContains(t, err, "W1 and BACKLOG")
	_, err = bench.Run(ctx, memory.New(memory.Options{}), bench.Config{Workload: bench.W1, Instances: 1, ActivityLimitKeys: -1})
	require.ErrorContains(t, err, "negative")
}

func benchmark(b *testing.B, store func(b *testing.B) provider.Store, w string) {
	benchmarkWith(b, store, bench.Config{Workload: w})
}

func benchmarkWith(b *testing.B, store func(b *testing.B) provider.Store, c bench.Config) {
	w := c.Workload
	b.ReportAllocs()
	c.Instances, c.OrchestrationWorkers, c.ActivityWorkers = max(b.N, 1), 4, 8
	res, err := bench.Run(b.Context(), store(b), c)
	require.NoError(b, err)
	b.ReportMetric(res.WorkflowsPerSecond(), "workflows/s")
	b.ReportMetric(res.RoundsPerSecond(), "rounds/s")
	b.ReportMetric(res.AllocsPerRound, "allocs/round")
	if w == bench.W3 {
		b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	}
}

func memoryStore(*testing.B) provider.Store { return memory.New(memory.Options{}) }

func postgresStore(b *testing.B) provider.Store { return pgtest.NewStore(b, postgres.Options{}) }

func BenchmarkMemoryW1Sequence(b *testing.B)   { benchmark(b, memoryStore, bench.W1) }
func BenchmarkMemoryW2FanOut(b *testing.B)     { benchmark(b, memoryStore, bench.W2) }
func BenchmarkMemoryW3Signal(b *testing.B)     { benchmark(b, memoryStore, bench.W3) }
func BenchmarkPostgresW1Sequence(b *testing.B) { benchmark(b, postgresStore, bench.W1) }

// BenchmarkMemoryW1Limited is W1 with each workflow and its activities
// limited to one at once per key over 1,000 keys (compare with
// BenchmarkMemoryW1Sequence).
func BenchmarkMemoryW1Limited(b *testing.B) {
	benchmarkWith(b, memoryStore, bench.Config{Workload: bench.W1, LimitKeys: 1000, ActivityLimitKeys: 1000})
}

// BenchmarkMemoryW1LimitedStarts and BenchmarkMemoryW1Many are W1
// started with StartMany, with and without a limit of one at once per key
// over 1,000 keys: with 3000x, two of each key's three workflows wait.
func BenchmarkMemoryW1LimitedStarts(b *testing.B) {
	benchmarkWith(b, memoryStore, bench.Config{Workload: bench.W1, LimitKeys: 1000, StartMany: true})
}
func BenchmarkMemoryW1Many(b *testing.B) {
	benchmarkWith(b, memoryStore, bench.Config{Workload: bench.W1, StartMany: true})
}
func BenchmarkPostgresW2FanOut(b *testing.B) { benchmark(b, postgresStore, bench.W2) }
func BenchmarkPostgresW3Signal(b *testing.B) { benchmark(b, postgresStore, bench.W3) }

// BenchmarkPostgresW1Checkpoints is W1 with checkpoints signed every
// second, to compare with BenchmarkPostgresW1Sequence.
func BenchmarkPostgresW1Checkpoints(b *testing.B) {
	benchmarkWith(b, postgresStore, bench.Config{Workload: bench.W1, Checkpoints: time.Second})
}

// BenchmarkPostgresW1Attributes is W1 with five search attributes given
// at each start (compare with BenchmarkPostgresW1Sequence).
func BenchmarkPostgresW1Attributes(b *testing.B) {
	benchmarkWith(b, postgresStore, bench.Config{Workload: bench.W1, Attributes: true})
}

func TestSchedulesWorkloadRuns(t *testing.T) {
	t.Parallel()
	res, err := bench.RunSchedules(context.Background(), memory.New(memory.Options{}), bench.ScheduleConfig{
		Schedules: 20, Period: 2 * time.Second, Window: 4 * time.Second, Lead: time.Second, Drain: 30 * time.Second,
	})
	require.NoError(t, err)
	require.Equal(t, 40, res.Expected, "20 schedules, two periods")
	require.Equal(t, res.Expected, res.Started, "every firing of the window started")
	require.Equal(t, res.Expected, res.Recorded, "every firing of the window was recorded by its schedule")
	require.Positive(t, res.Start.P50)
	require.GreaterOrEqual(t, res.Start.P99, res.Start.P50)
	require.GreaterOrEqual(t, res.Start.Max, res.Start.P99)
	require.Positive(t, res.Record.P50)
	_, err = bench.RunSchedules(context.Background(), memory.New(memory.Options{}), bench.ScheduleConfig{})
	require.Error(t, err)
}

// TestEncryptSealsPayloads runs W1 with data subjects: every workflow
// completes and its stored input is sealed for its subject.
func TestEncryptSealsPayloads(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	res, err := bench.Run(context.Background(), store, bench.Config{Workload: bench.W1, Instances: 20, Encrypt: true})
	require.NoError(t, err)
	require.Equal(t, 20, res.Workflows)
	require.Equal(t, int64(60), res.Activities)
	ids := store.InstanceIDs()
	require.Len(t, ids, 20)
	for _, id := range ids {
		events, err := store.LoadHistory(context.Background(), &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
		require.NoError(t, err)
		a, err := events[0].Attributes()
		require.NoError(t, err)
		start := a.(*history.ExecutionStarted)
		subject, sealed := chronicle.SealedSubject(start.Input)
		require.True(t, sealed, "input of %s", id)
		require.Equal(t, start.Subject, subject)
	}
}
