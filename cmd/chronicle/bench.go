package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

// benchJSON is one line of bench's JSON output.
type benchJSON struct {
	Store              string  `json:"store"`
	Workload           string  `json:"workload"`
	Instances          int     `json:"instances"`
	Seconds            float64 `json:"seconds"`
	WorkflowsPerSecond float64 `json:"workflows_per_second"`
	Rounds             int64   `json:"rounds"`
	RoundsPerSecond    float64 `json:"rounds_per_second"`
	AllocsPerRound     float64 `json:"allocs_per_round"`
	PeakHeapMiB        float64 `json:"peak_heap_mib"`
	P50Millis          float64 `json:"p50_ms,omitempty"`
	P99Millis          float64 `json:"p99_ms,omitempty"`
	KiBPerIdle         float64 `json:"kib_per_idle_instance,omitempty"`
	P50FirstMillis     float64 `json:"p50_first_ms,omitempty"`
	P50LastMillis      float64 `json:"p50_last_ms,omitempty"`
	StartSeconds       float64 `json:"start_seconds,omitempty"`
	PeakRSSMiB         float64 `json:"peak_rss_mib,omitempty"`
	Checkpoints        int64   `json:"checkpoints,omitempty"`
	// Preloaded counts the ended instances the store held before the run
	// (--preload).
	Preloaded int `json:"preloaded,omitempty"`
	// LimitKeys and ActivityLimitKeys are the keys of the concurrency
	// limit of one of W1's and BACKLOG's workflows and activities
	// (--limit-keys, --activity-limit-keys).
	LimitKeys         int `json:"limit_keys,omitempty"`
	ActivityLimitKeys int `json:"activity_limit_keys,omitempty"`
	// DB is the database work per workflow, on PostgreSQL.
	DB *dbWorkJSON `json:"db_per_workflow,omitempty"`
	// ColdRounds counts the rounds that read their instance's state from
	// the store instead of the executor cache.
	ColdRounds int64 `json:"cold_rounds"`
}

// dbWorkJSON is the database work of a run divided by its workflows.
// Commits, tuples and buffer hits are the database's (every session of
// it counts); rows and scans are those of the bench schema's tables.
type dbWorkJSON struct {
	Commits       float64          `json:"commits"`
	Inserted      float64          `json:"rows_inserted"`
	Updated       float64          `json:"rows_updated"`
	Deleted       float64          `json:"rows_deleted"`
	TuplesRead    float64          `json:"tuples_read"`
	BufferHits    float64          `json:"buffer_hits"`
	BufferReads   float64          `json:"buffer_reads"`
	SeqScans      map[string]int64 `json:"seq_scans,omitempty"`
	SeqTuplesRead map[string]int64 `json:"seq_tuples_read,omitempty"`
	// TableBufferHits are the shared-buffer hits of each table of the
	// bench schema and its indexes, per workflow.
	TableBufferHits map[string]float64 `json:"table_buffer_hits,omitempty"`
	// RoundTrips are the statements and batches the run's connections
	// sent, each one round trip to the server (schedules only).
	RoundTrips float64 `json:"round_trips,omitempty"`
}

// roundTrips is a pgx tracer counting the statements and batches sent,
// each a round trip to the server (a batch is one, whatever it holds).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// perWorkflow divides the work d of a run by its n workflows; sequential
// scans stay totals, by table, listing only tables that had some.
func perWorkflow(d *bench.DBWork, n int) *dbWorkJSON {
	f := float64(max(n, 1))
	out := &dbWorkJSON{
		Commits: float64(d.Commits) / f, TuplesRead: float64(d.TuplesReturned+d.TuplesFetched) / f,
		BufferHits: float64(d.BufferHits) / f, BufferReads: float64(d.BufferReads) / f,
	}
	for _, t := range d.Tables {
		if t.BufferHits > 0 {
			if out.TableBufferHits == nil {
				out.TableBufferHits = map[string]float64{}
			}
			out.TableBufferHits[t.Name] = float64(t.BufferHits) / f
		}
		out.Inserted += float64(t.Inserted) / f
		out.Updated += float64(t.Updated) / f
		out.Deleted += float64(t.Deleted) / f
		if t.SeqScans > 0 {
			if out.SeqScans == nil {
				out.SeqScans, out.SeqTuplesRead = map[string]int64{}, map[string]int64{}
			}
			out.SeqScans[t.Name], out.SeqTuplesRead[t.Name] = t.SeqScans, t.SeqTuples
		}
	}
	return out
}

func runBench(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var workloads listFlag
	fs.Var(&workloads, "workload", "workloads to run: W1 (sequence), W2 (fan-out), W3 (signal latency), W4 (signal latency as history grows), BACKLOG (start-to-completion of workflows started at once), START (starting workflows one call after the other, no worker running), IDLE (memory per parked instance); default W1,W2,W3")
	instances := fs.Int("instances", 200, "workflows per workload (W3, W4: signals)")
	orch := fs.Int("orchestration-workers", 4, "rounds run at once")
	act := fs.Int("activity-workers", 8, "activities run at once")
	group := fs.Int("round-group", 0, "instances a round transaction takes at most (group commit); 0 takes the engine's default")
	eager := fs.Bool("eager-activities", false, "hand a workflow's next activity to the worker that completed the one before, claimed (Options.EagerActivities)")
	keep := fs.Bool("keep", false, "keep the benchmark's PostgreSQL schema instead of dropping it")
	startMany := fs.Bool("start-many", false, "start W1, W2 and BACKLOG workflows with one StartMany call instead of a Start call each")
	checkpoints := fs.Duration("checkpoints", 0, "sign checkpoints with a fresh key at this interval (1s, say) while the workloads run; 0: none")
	publish := fs.String("publish", "", "with --checkpoints, publish every checkpoint's note to this append-only `DIR`")
	preload := fs.Int("preload", 0, "PostgreSQL: fill each workload's schema with this many ended W1 instances and their histories before it runs (with --schema, ones already there count)")
	attributes := fs.Bool("attributes", false, "declare search attributes (customer, amount, items, region, express) and start W1, W2 and BACKLOG workflows with a value of each")
	queries := fs.Bool("query", false, "PostgreSQL: time the search queries (one customer's completed orders in a created_at range, first 50; a count by status) on a schema preloaded (--preload) with attributes; runs no workload unless --workload names some")
	queryRuns := fs.Int("query-runs", 11, "with --query: timed runs of each query (the median is reported)")
	limitKeys := fs.Int("limit-keys", 0, "start each W1 and BACKLOG workflow with a concurrency limit of 1 on one of N keys (customer-<i mod N>); 0: no limit; without --workload, runs W1")
	activityLimitKeys := fs.Int("activity-limit-keys", 0, "run the activities of each W1 and BACKLOG workflow with a concurrency limit of 1 on one of N keys (customer-<i mod N>); 0: no limit")
	explain := fs.Bool("explain", false, "with --query: print EXPLAIN (ANALYZE, BUFFERS) of each query on a generic plan")
	schedules := fs.Int("schedules", 0, "run the schedules workload with this many schedules firing every minute, and measure each firing's delay from its nominal time; runs no other workload unless --workload names some")
	cronAligned := fs.Bool("cron", false, "with --schedules: every schedule fires on the cron \"* * * * *\", all at the start of each minute, instead of every minute at phases spread over the minute")
	cacheSize := fs.Int("cache-size", 0, "executors the engine keeps between rounds (0: the engine's default, 1000)")
	window := fs.Duration("duration", 3*time.Minute, "with --schedules: how long the firings are measured (whole minutes), from the schedules' first firings")
	encrypt := fs.Bool("encrypt", false, "start each W1 and BACKLOG workflow with a data subject (one of 1,000), so that its payloads are stored sealed with AES-256-GCM; keys in --keys DIR (made on first use) or else in a temporary directory, made before the run")
	partitions := fs.Int("partitions", 0, "PostgreSQL: create the benchmark's schema with this many partitions (0: one); the engine leases them")
	citus := fs.Bool("citus", false, "PostgreSQL: distribute the benchmark's schema by partition on the Citus cluster of the store's coordinator (docs/scaling.md)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	c.partitions = *partitions
	c.citus = *citus
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if *queries {
		if !isPostgres(c.storeURL) {
			return usagef(cmd, "--query needs a postgres:// store")
		}
		if *preload <= 0 && c.schema == "" {
			return usagef(cmd, "--query needs --preload N (or --schema naming a preloaded schema)")
		}
		if err := c.queryBench(*keep, *preload, *queryRuns, *explain); err != nil {
			return err
		}
		if len(workloads) == 0 {
			return nil
		}
	}
	if *schedules < 0 {
		return usagef(cmd, "--schedules must not be negative")
	}
	if *schedules > 0 {
		if *window < time.Minute {
			return usagef(cmd, "--duration must be at least a minute")
		}
		if err := c.scheduleBench(*keep, bench.ScheduleConfig{Schedules: *schedules, Cron: *cronAligned, Window: *window,
			OrchestrationWorkers: *orch, ActivityWorkers: *act, RoundGroup: *group, CacheSize: *cacheSize}); err != nil {
			return err
		}
		if len(workloads) == 0 {
			return nil
		}
	}
	keys, err := c.keyProvider()
	if err != nil {
		return err
	}
	if *limitKeys < 0 || *activityLimitKeys < 0 {
		return usagef(cmd, "--limit-keys and --activity-limit-keys must not be negative")
	}
	limited := *limitKeys > 0 || *activityLimitKeys > 0
	if len(workloads) == 0 {
		workloads = listFlag{bench.W1, bench.W2, bench.W3}
		if limited {
			workloads = listFlag{bench.W1}
		}
	}
	if *instances <= 0 {
		return usagef(cmd, "--instances must be positive")
	}
	if *preload < 0 {
		return usagef(cmd, "--preload must not be negative")
	}
	if *preload > 0 && !isPostgres(c.storeURL) {
		return usagef(cmd, "--preload needs a postgres:// store")
	}
	for i, w := range workloads {
		workloads[i] = strings.ToUpper(w)
		switch workloads[i] {
		case bench.W1, bench.Backlog:
		case bench.W2, bench.W3, bench.W4, bench.Start, bench.Idle:
			if limited {
				return usagef(cmd, "--limit-keys and --activity-limit-keys apply to W1 and BACKLOG, not %s", workloads[i])
			}
		default:
			return usagef(cmd, "unknown workload %q: use W1, W2, W3, W4, BACKLOG, START or IDLE", w)
		}
	}
	var rows []benchJSON
	if !c.json {
		fmt.Fprintf(c.stdout, "%-8s %-7s %9s %8s %12s %8s %10s %12s %10s %10s %9s %9s\n",
			"STORE", "W", "INSTANCES", "SECONDS", "WORKFLOWS/S", "ROUNDS", "ROUNDS/S", "ALLOCS/ROUND", "PEAK HEAP", "PEAK RSS", "P50", "P99")
	}
	for _, w := range workloads {
		store, done, err := c.benchStore(*keep)
		if err != nil {
			return err
		}
		var (
			pg        *postgres.Store
			preloaded int
		)
		if s, ok := store.(*postgres.Store); ok {
			pg = s
		}
		if *preload > 0 && pg != nil {
			if preloaded, err = c.preload(pg, *preload); err != nil {
				done()
				return err
			}
		}
		var before *bench.DBWork
		if pg != nil {
			before = c.dbWork(pg)
		}
		res, err := bench.Run(c.ctx, store, bench.Config{Workload: w, Instances: *instances, OrchestrationWorkers: *orch, ActivityWorkers: *act, StartMany: *startMany, RoundGroup: *group, EagerActivities: *eager, Checkpoints: *checkpoints, Publish: *publish, Attributes: *attributes, Encrypt: *encrypt, Keys: keys,
			LimitKeys: *limitKeys, ActivityLimitKeys: *activityLimitKeys, CacheSize: *cacheSize})
		var work *bench.DBWork
		if err == nil && before != nil {
			if after := c.dbWork(pg); after != nil {
				work = after.Sub(before)
			}
		}
		done()
		if err != nil {
			return err
		}
		row := benchJSON{
			Store: c.benchStoreName(), Workload: res.Workload, Instances: res.Instances, Seconds: res.Duration.Seconds(),
			WorkflowsPerSecond: res.WorkflowsPerSecond(), Rounds: res.Rounds, RoundsPerSecond: res.RoundsPerSecond(),
			AllocsPerRound: res.AllocsPerRound, PeakHeapMiB: float64(res.PeakHeap) / (1 << 20),
			P50Millis: millis(res.P50), P99Millis: millis(res.P99), KiBPerIdle: res.BytesPerIdle / 1024,
			P50FirstMillis: millis(res.P50First), P50LastMillis: millis(res.P50Last), StartSeconds: res.StartDuration.Seconds(),
			PeakRSSMiB: float64(res.PeakRSS) / (1 << 20), Checkpoints: res.Checkpoints, Preloaded: preloaded,
			LimitKeys: *limitKeys, ActivityLimitKeys: *activityLimitKeys, ColdRounds: res.ColdRounds,
		}
		if work != nil {
			row.DB = perWorkflow(work, res.Workflows)
		}
		rows = append(rows, row)
		if !c.json {
			lat := func(v float64) string {
				if v == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2fms", v)
			}
			fmt.Fprintf(c.stdout, "%-8s %-7s %9d %8.2f %12.1f %8d %10.1f %12.0f %7.1fMiB %7.1fMiB %9s %9s\n",
				row.Store, row.Workload, row.Instances, row.Seconds, row.WorkflowsPerSecond, row.Rounds, row.RoundsPerSecond,
				row.AllocsPerRound, row.PeakHeapMiB, row.PeakRSSMiB, lat(row.P50Millis), lat(row.P99Millis))
			if row.ColdRounds > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s %d cold rounds (state read from the store, not the executor cache)\n", "", "", row.ColdRounds)
			}
			if row.StartSeconds > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s started %d workflows in %.2fs from one goroutine\n", "", "", row.Instances, row.StartSeconds)
			}
			if row.P50LastMillis > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s p50 of the first %d signals %s, of the last %d %s (%.2f×)\n", "", "",
					bench.WindowW4, lat(row.P50FirstMillis), bench.WindowW4, lat(row.P50LastMillis), row.P50LastMillis/row.P50FirstMillis)
			}
			if row.LimitKeys > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s workflows limited to 1 at once per key, over %d keys\n", "", "", row.LimitKeys)
			}
			if row.ActivityLimitKeys > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s activities limited to 1 at once per key, over %d keys\n", "", "", row.ActivityLimitKeys)
			}
			if row.Preloaded > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s on a store preloaded with %d ended instances\n", "", "", row.Preloaded)
			}
			if d := row.DB; d != nil {
				fmt.Fprintf(c.stdout, "%-8s %-7s per workflow: %.1f commits, rows %.1f inserted / %.1f updated / %.1f deleted, %.0f tuples read, %.0f buffer hits, %.1f buffer reads\n",
					"", "", d.Commits, d.Inserted, d.Updated, d.Deleted, d.TuplesRead, d.BufferHits, d.BufferReads)
				names := slices.Sorted(maps.Keys(d.SeqScans))
				if len(names) == 0 {
					fmt.Fprintf(c.stdout, "%-8s %-7s sequential scans: none\n", "", "")
				}
				for _, name := range names {
					fmt.Fprintf(c.stdout, "%-8s %-7s sequential scans of %s: %d, reading %d rows\n", "", "", name, d.SeqScans[name], d.SeqTuplesRead[name])
				}
			}
			if row.KiBPerIdle > 0 {
				fmt.Fprintf(c.stdout, "%-8s %-7s %.1f KiB of heap and stack per parked instance (store, snapshot and cached executor)\n", "", "", row.KiBPerIdle)
			}
		}
	}
	if c.json {
		return c.printJSON(rows)
	}
	return nil
}

// scheduleBenchJSON is the JSON output of the schedules workload.
type scheduleBenchJSON struct {
	Store            string      `json:"store"`
	Workload         string      `json:"workload"`
	Schedules        int         `json:"schedules"`
	Spec             string      `json:"spec"`
	SetupSeconds     float64     `json:"setup_seconds"`
	WindowStart      time.Time   `json:"window_start"`
	WindowSeconds    float64     `json:"window_seconds"`
	MeasuredSeconds  float64     `json:"measured_seconds"`
	Expected         int         `json:"firings_expected"`
	Started          int         `json:"firings_started"`
	Recorded         int         `json:"firings_recorded"`
	FiringsPerSecond float64     `json:"firings_per_second"`
	Start            delayJSON   `json:"start_delay"`
	Record           delayJSON   `json:"record_delay"`
	Rounds           int64       `json:"rounds"`
	Activities       int64       `json:"activities"`
	CPUSeconds       float64     `json:"cpu_seconds"`
	PeakHeapMiB      float64     `json:"peak_heap_mib"`
	PeakRSSMiB       float64     `json:"peak_rss_mib"`
	DB               *dbWorkJSON `json:"db_per_firing,omitempty"`
}

// delayJSON summarizes firing delays.
type delayJSON struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// scheduleBench runs the schedules workload on a fresh store and prints
// its firing delays.
func (c *cli) scheduleBench(keep bool, cfg bench.ScheduleConfig) error {
	store, done, err := c.benchStore(keep)
	if err != nil {
		return err
	}
	defer done()
	pg, _ := store.(*postgres.Store)
	cfg.Progress = func(s string) { fmt.Fprintf(c.stderr, "chronicle: %s %s\n", time.Now().UTC().Format(time.TimeOnly), s) }
	var (
		before *bench.DBWork
		trips0 int64
	)
	measure := cfg
	if pg != nil {
		// The database work of the window only: snapshot when it starts.
		measure.Progress = func(s string) {
			cfg.Progress(s)
			if strings.HasPrefix(s, "measuring ") {
				before = c.dbWork(pg)
				trips0 = c.roundTrips.n.Load()
			}
		}
	}
	res, err := bench.RunSchedules(c.ctx, store, measure)
	if err != nil {
		return err
	}
	spec := "every 1m, phases spread over the minute"
	if res.Cron {
		spec = "cron * * * * *, all at :00"
	}
	row := scheduleBenchJSON{
		Store: c.benchStoreName(), Workload: bench.Schedules, Schedules: res.Schedules, Spec: spec,
		SetupSeconds: res.Setup.Seconds(), WindowStart: res.WindowStart.UTC(), WindowSeconds: res.Window.Seconds(), MeasuredSeconds: res.Measured.Seconds(),
		Expected: res.Expected, Started: res.Started, Recorded: res.Recorded, FiringsPerSecond: res.FiringsPerSecond,
		Start:  delayJSON{millis(res.Start.P50), millis(res.Start.P99), millis(res.Start.Max)},
		Record: delayJSON{millis(res.Record.P50), millis(res.Record.P99), millis(res.Record.Max)},
		Rounds: res.Rounds, Activities: res.Activities, CPUSeconds: res.CPU.Seconds(),
		PeakHeapMiB: float64(res.PeakHeap) / (1 << 20), PeakRSSMiB: float64(res.PeakRSS) / (1 << 20),
	}
	if before != nil {
		trips := c.roundTrips.n.Load() - trips0
		if after := c.dbWork(pg); after != nil {
			row.DB = perWorkflow(after.Sub(before), res.Started)
			row.DB.RoundTrips = float64(trips) / float64(max(res.Started, 1))
		}
	}
	if c.json {
		return c.printJSON([]scheduleBenchJSON{row})
	}
	w := c.stdout
	fmt.Fprintf(w, "%s: %d schedules, %s; created and running in %.1fs\n", row.Store, row.Schedules, spec, row.SetupSeconds)
	fmt.Fprintf(w, "window %s + %s: %d firings expected, %d started in %.0fs (%.1f/s), %d recorded by their schedule\n",
		res.WindowStart.UTC().Format(time.TimeOnly), res.Window, row.Expected, row.Started, row.MeasuredSeconds, row.FiringsPerSecond, row.Recorded)
	fmt.Fprintf(w, "delay nominal → ExecutionStarted committed: p50 %.0fms, p99 %.0fms, max %.0fms\n", row.Start.P50, row.Start.P99, row.Start.Max)
	fmt.Fprintf(w, "delay nominal → firing recorded by the schedule: p50 %.0fms, p99 %.0fms, max %.0fms\n", row.Record.P50, row.Record.P99, row.Record.Max)
	fmt.Fprintf(w, "%d rounds, %d activity attempts, %.1fs CPU of this process, peak heap %.1fMiB, peak RSS %.1fMiB\n",
		row.Rounds, row.Activities, row.CPUSeconds, row.PeakHeapMiB, row.PeakRSSMiB)
	if d := row.DB; d != nil {
		fmt.Fprintf(w, "per firing: %.1f commits, %.1f round trips, rows %.1f inserted / %.1f updated / %.1f deleted, %.0f tuples read, %.0f buffer hits\n",
			d.Commits, d.RoundTrips, d.Inserted, d.Updated, d.Deleted, d.TuplesRead, d.BufferHits)
		for _, name := range slices.Sorted(maps.Keys(d.SeqScans)) {
			fmt.Fprintf(w, "sequential scans of %s: %d, reading %d rows\n", name, d.SeqScans[name], d.SeqTuplesRead[name])
		}
	}
	return nil
}

// queryBench preloads a schema with n instances carrying search
// attributes, vacuums and analyzes it as autovacuum would, and prints the
// timings of the search queries (and their plans).
func (c *cli) queryBench(keep bool, n, runs int, explain bool) error {
	store, done, err := c.benchStore(keep)
	if err != nil {
		return err
	}
	defer done()
	pg := store.(*postgres.Store)
	if n > 0 {
		if _, err := c.preloadWith(pg, n, true); err != nil {
			return err
		}
	}
	begin := time.Now()
	if _, err := pg.Pool().Exec(c.ctx, "VACUUM (ANALYZE) "+pgx.Identifier{pg.Schema(), "instances"}.Sanitize()); err != nil {
		return fmt.Errorf("vacuum the preloaded instances: %w", err)
	}
	fmt.Fprintf(c.stderr, "chronicle: VACUUM (ANALYZE) of instances took %.1fs\n", time.Since(begin).Seconds())
	res, err := bench.QueryBench(c.ctx, pg, bench.QueryConfig{Runs: runs, Explain: explain})
	if err != nil {
		return err
	}
	if c.json {
		type timing struct {
			Query    string  `json:"query"`
			Mode     string  `json:"plan_mode"`
			Median   float64 `json:"median_ms"`
			Min      float64 `json:"min_ms"`
			Max      float64 `json:"max_ms"`
			Rows     int     `json:"rows"`
			Runs     int     `json:"runs"`
			Instance int64   `json:"instances"`
		}
		var out []timing
		for _, t := range res.Timings {
			out = append(out, timing{t.Query, t.Mode, millis(t.Median), millis(t.Min), millis(t.Max), t.Rows, runs, res.Instances})
		}
		return c.printJSON(out)
	}
	fmt.Fprintf(c.stdout, "search queries on %d instances, %d timed runs each\n", res.Instances, runs)
	fmt.Fprintf(c.stdout, "%-40s %-8s %10s %10s %10s %6s\n", "QUERY", "PLANS", "MEDIAN", "MIN", "MAX", "ROWS")
	for _, t := range res.Timings {
		fmt.Fprintf(c.stdout, "%-40s %-8s %8.2fms %8.2fms %8.2fms %6d\n", t.Query, t.Mode, millis(t.Median), millis(t.Min), millis(t.Max), t.Rows)
	}
	for _, name := range []string{bench.QuerySelective, bench.QueryCountByStatus} {
		if plan, ok := res.Plans[name]; ok {
			fmt.Fprintf(c.stdout, "\nplan of %s (plan_cache_mode = force_generic_plan):\n%s\n", name, plan)
		}
	}
	return nil
}

// preload fills the bench schema of store with n ended instances,
// reporting progress on stderr, and returns how many it holds.
func (c *cli) preload(store *postgres.Store, n int) (int, error) {
	return c.preloadWith(store, n, false)
}

// preloadWith is preload, with search attributes when attrs is set.
func (c *cli) preloadWith(store *postgres.Store, n int, attrs bool) (int, error) {
	last := time.Now()
	res, err := bench.PreloadPostgresWith(c.ctx, store, n, bench.PreloadOptions{Attributes: attrs, Progress: func(done int) {
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Fprintf(c.stderr, "chronicle: preloaded %d of %d instances\n", done, n)
		}
	}})
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(c.stderr, "chronicle: preload of schema %s: %d instances were there, %d added in %.1fs\n",
		store.Schema(), res.Existing, res.Added, res.Duration.Seconds())
	return res.Existing + res.Added, nil
}

// dbWork flushes the statistics of the store's connections and takes a
// snapshot of them; nil, with a note on stderr, when the server cannot.
func (c *cli) dbWork(store *postgres.Store) *bench.DBWork {
	err := bench.FlushStats(c.ctx, store.Pool())
	var w *bench.DBWork
	if err == nil {
		w, err = bench.ReadDBWork(c.ctx, store.Pool(), store.Schema())
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "chronicle: no database work figures: %v\n", err)
		return nil
	}
	return w
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *cli) benchStoreName() string {
	switch {
	case isPostgres(c.storeURL):
		return "postgres"
	case isMongo(c.storeURL):
		return "mongo"
	}
	return "memory"
}

// benchStore returns a fresh store for one workload: a new memory store,
// or a new, migrated PostgreSQL schema that is dropped afterwards.
func (c *cli) benchStore(keep bool) (provider.Store, func(), error) {
	if c.storeURL == "memory" {
		return memory.New(memory.Options{}), func() {}, nil
	}
	if isMongo(c.storeURL) {
		return c.benchMongo(keep)
	}
	if isOracle(c.storeURL) {
		return nil, nil, errors.New("bench runs on the memory, postgres:// and mongodb:// stores; an Oracle store is measured with its gated suites (CHRONICLE_TEST_ORACLE_DSN)")
	}
	if !isPostgres(c.storeURL) {
		return nil, nil, checkStoreURL(c.storeURL)
	}
	schema := c.schema
	drop := false
	if schema == "" {
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix) // crypto/rand.Read never returns an error: it crashes the program instead
		schema, drop = "chronicle_bench_"+hex.EncodeToString(suffix), !keep
	}
	cfg, err := pgxpool.ParseConfig(c.storeURL)
	if err != nil {
		return nil, nil, err
	}
	// The name lets the database-work figures wait for the statistics of
	// connections the run closed (bench.FlushStats).
	cfg.ConnConfig.RuntimeParams["application_name"] = "chronicle-bench:" + schema
	c.roundTrips = &roundTrips{}
	cfg.ConnConfig.Tracer = c.roundTrips
	pool, err := pgxpool.NewWithConfig(c.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	store, err := postgres.New(c.ctx, postgres.Options{Pool: pool, Schema: schema, MigrateOnStart: true, Partitions: c.partitions, Citus: c.citus})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return store, func() {
		store.Close()
		pool.Close()
		if drop {
			if err := dropSchema(c.ctx, c.storeURL, schema); err != nil {
				// The numbers are printed; the run still succeeds, and the
				// operator learns what to clean up.
				fmt.Fprintf(c.stderr, "chronicle: drop bench schema %s: %v\n", schema, err)
			}
		}
	}, nil
}

// dropSchema drops a schema the benchmark created.
func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if err == nil {
		// The drop's statistics reach the server before the next
		// workload's first snapshot, not when this backend exits
		// (PostgreSQL 15+; before, the figures may include the drop).
		_, _ = conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	}
	return errors.Join(err, conn.Close(ctx))
}

// benchMongo returns a store in a fresh MongoDB database (or the one
// --schema names), dropped afterwards unless it was named or keep is set.
func (c *cli) benchMongo(keep bool) (provider.Store, func(), error) {
	db := c.schema
	drop := false
	if db == "" {
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		db, drop = "chronicle_bench_"+hex.EncodeToString(suffix), !keep
	}
	store, err := mongo.Open(c.ctx, c.storeURL, mongo.Options{Database: db, MigrateOnStart: true, Logger: quietLogger()})
	if err != nil {
		return nil, nil, err
	}
	return store, func() {
		if drop {
			if err := store.DropDatabase(c.ctx); err != nil {
				fmt.Fprintf(c.stderr, "chronicle: drop bench database %s: %v\n", db, err)
			}
		}
		store.Close()
	}, nil
}
