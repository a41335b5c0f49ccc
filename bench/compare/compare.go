package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Config configures a comparison.
type Config struct {
	// URL names the PostgreSQL server (a postgres:// URL); each run gets a
	// database of its own there, dropped afterwards.
	URL string
	// Workloads lists the workloads to run, in order (W1, W2, W3).
	Workloads []string
	// W1, W2 and W3 size the workloads: workflows for W1 and W2, signals
	// for W3.
	W1, W2, W3 int
	// Runs is how many runs of each system each workload gets, alternated.
	Runs int
	// Poll is the poller's interval between two status reads of a workflow
	// that has not ended.
	Poll time.Duration
	// Timeout bounds each run.
	Timeout time.Duration
	// Keep keeps the runs' databases instead of dropping them.
	Keep bool
	// ChronicleOrchestrationWorkers and ChronicleActivityWorkers size
	// Chronicle's engine; 0 takes the engine's defaults.
	ChronicleOrchestrationWorkers, ChronicleActivityWorkers int
	// ChronicleEagerActivities sets chronicle.Options.EagerActivities.
	ChronicleEagerActivities bool
	// Progress, when set, is told of each run as it ends.
	Progress io.Writer
	// Statements, when set, gets the statements Chronicle's store sent in
	// each run, counted by kind (see statementCounter); the store then
	// runs on a pool of its own that counts them.
	Statements io.Writer
}

// Run is one run of a workload on one system.
type Run struct {
	Workload string `json:"workload"`
	System   string `json:"system"`
	Number   int    `json:"run"`
	// Database is the database the run created (and dropped, unless
	// Config.Keep).
	Database string `json:"database"`
	// Instances counts the workflows (W3: the signals).
	Instances int `json:"instances"`
	// Seconds runs from the first start (W3: signal) to the last
	// completion (W3: receipt) seen.
	Seconds float64 `json:"seconds"`
	// PerSecond is Instances over Seconds.
	PerSecond float64 `json:"workflows_per_second"`
	// StartSeconds is how long starting every workflow took.
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// Polls counts the status reads of the poller.
	Polls int `json:"status_polls"`
	// P50Millis and P99Millis are W3's latencies, in milliseconds.
	P50Millis float64 `json:"p50_ms,omitempty"`
	P99Millis float64 `json:"p99_ms,omitempty"`
	// Work is the database work of the run, the system's start and stop
	// included, its migration not.
	Work work `json:"db_work"`
}

// Summary is the medians of one workload's runs on one system.
type Summary struct {
	// Workload, System and Instances are the runs'.
	Workload  string `json:"workload"`
	System    string `json:"system"`
	Instances int    `json:"instances"`
	// Runs counts the runs summarized.
	Runs int `json:"runs"`
	// PerSecond, P50Millis and P99Millis are the medians of the runs'.
	PerSecond float64 `json:"workflows_per_second"`
	P50Millis float64 `json:"p50_ms,omitempty"`
	P99Millis float64 `json:"p99_ms,omitempty"`
	// StartSeconds is the median of the runs' times to start every
	// workflow (W1, W2).
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// PerWorkflow is the database work per workflow (W3: per signal).
	PerWorkflow PerWorkflow `json:"db_work_per_workflow"`
}

// PerWorkflow is database work divided by a run's workflows.
type PerWorkflow struct {
	// Commits is xact_commit.
	Commits float64 `json:"commits"`
	// Inserted, Updated and Deleted are tup_inserted, tup_updated and
	// tup_deleted.
	Inserted float64 `json:"rows_inserted"`
	Updated  float64 `json:"rows_updated"`
	Deleted  float64 `json:"rows_deleted"`
	// TuplesRead is tup_fetched + tup_returned.
	TuplesRead float64 `json:"tuples_read"`
	// BlksHit is blks_hit, the shared buffer hits.
	BlksHit float64 `json:"shared_buffer_hits"`
	// Polls is the poller's status reads.
	Polls float64 `json:"status_polls"`
	// SeqScans is sequential scans per workflow by table.
	SeqScans map[string]float64 `json:"seq_scans,omitempty"`
	// SeqTuples is the tuples those scans read per workflow by table.
	SeqTuples map[string]float64 `json:"seq_scan_tuples,omitempty"`
}

// Report is a whole comparison.
type Report struct {
	// Server is the server's URL, its password hidden.
	Server string `json:"server"`
	// ServerInfo is its version and the settings that bear on the numbers.
	ServerInfo string `json:"server_info"`
	// DBOSVersion is the version of DBOS Transact this program was built
	// with.
	DBOSVersion string `json:"dbos_version"`
	// GoVersion is the Go release, system and architecture.
	GoVersion string `json:"go_version"`
	// CPUs counts the logical CPUs.
	CPUs int `json:"cpus"`
	// LoadBefore and LoadAfter are the system's load averages (1, 5, 15
	// minutes) at the start and at the end.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// Started is when the comparison started.
	Started time.Time `json:"started"`
	// Runs are every run, in the order they ran.
	Runs []Run `json:"runs"`
	// Summaries are the medians of each workload on each system.
	Summaries []Summary `json:"summaries"`
}

// drivers are the systems compared, in the order each round of runs
// takes them.
var drivers = []driver{chronicleDriver, dbosDriver}

// Compare runs every workload of c on every system, alternating them run
// by run, and summarizes the runs.
func Compare(ctx context.Context, c Config) (*Report, error) {
	if c.URL == "" {
		return nil, errNoServer
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	if c.Poll <= 0 {
		c.Poll = 5 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	srv, err := connectServer(ctx, c.URL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = srv.close(context.WithoutCancel(ctx)) }()
	rep := &Report{
		Server: srv.base.Redacted(), DBOSVersion: moduleVersion("github.com/dbos-inc/dbos-transact-golang"),
		GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		LoadBefore: loadAverage(), Started: time.Now().UTC(),
	}
	if rep.ServerInfo, err = srv.info(ctx); err != nil {
		return nil, err
	}
	for _, w := range c.Workloads {
		n := map[string]int{W1: c.W1, W2: c.W2, W3: c.W3}[w]
		if n <= 0 {
			return nil, fmt.Errorf("unknown workload %q or no size for it (W1, W2, W3)", w)
		}
		for number := 1; number <= c.Runs; number++ {
			for _, d := range drivers {
				r, err := runOnce(ctx, srv, d, c, w, n)
				if err != nil {
					return nil, fmt.Errorf("%s on %s, run %d: %w", w, d.name, number, err)
				}
				r.Number = number
				rep.Runs = append(rep.Runs, *r)
				if c.Progress != nil {
					fmt.Fprintf(c.Progress, "%s %-9s run %d: %d in %.2fs, %.1f/s%s\n", w, d.name, number, n, r.Seconds, r.PerSecond, latency(r))
				}
			}
		}
		for _, d := range drivers {
			rep.Summaries = append(rep.Summaries, summarize(w, d.name, rep.Runs))
		}
	}
	rep.LoadAfter = loadAverage()
	return rep, nil
}

func latency(r *Run) string {
	if r.P50Millis == 0 {
		return ""
	}
	return fmt.Sprintf(", p50 %.2f ms, p99 %.2f ms", r.P50Millis, r.P99Millis)
}

// runOnce runs workload on a fresh database: it migrates the system's
// tables, notes the database's statistics, opens the system, runs the
// workload, closes the system and notes the statistics again once every
// connection has ended (a backend flushes its statistics when it exits).
func runOnce(ctx context.Context, srv *server, d driver, c Config, workload string, n int) (_ *Run, err error) {
	name, dbURL, err := srv.createDatabase(ctx, dbPrefix(workload, d.name))
	if err != nil {
		return nil, err
	}
	if !c.Keep {
		defer func() {
			if dropErr := srv.dropDatabase(context.WithoutCancel(ctx), name); dropErr != nil && err == nil {
				err = dropErr
			}
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if err := d.migrate(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := srv.waitDisconnected(ctx, name); err != nil {
		return nil, err
	}
	before, err := snapshot(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	sys, err := d.open(ctx, dbURL, c)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	m, runErr := runWorkload(ctx, sys, workload, n, c.Poll)
	if closeErr := sys.close(ctx); runErr == nil && closeErr != nil {
		runErr = fmt.Errorf("close: %w", closeErr)
	}
	if cs, ok := sys.(*chronicleSystem); ok && cs.counter != nil && runErr == nil {
		runErr = cs.counter.write(c.Statements, fmt.Sprintf("%s %s", workload, d.name), n)
	}
	if runErr != nil {
		return nil, runErr
	}
	if err := srv.waitDisconnected(ctx, name); err != nil {
		return nil, err
	}
	after, err := snapshot(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	return &Run{
		Workload: workload, System: d.name, Database: name, Instances: n,
		Seconds: m.Duration.Seconds(), PerSecond: m.perSecond(), StartSeconds: m.StartDuration.Seconds(), Polls: m.Polls,
		P50Millis: millis(m.P50), P99Millis: millis(m.P99),
		Work: after.since(before),
	}, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize takes the medians of the runs of workload on system.
func summarize(workload, system string, runs []Run) Summary {
	s := Summary{Workload: workload, System: system}
	var rate, p50, p99, starts []float64
	per := map[string][]float64{}
	scans, tuples := map[string][]float64{}, map[string][]float64{}
	var mine []Run
	for _, r := range runs {
		if r.Workload == workload && r.System == system {
			mine = append(mine, r)
		}
	}
	for _, r := range mine {
		s.Instances, s.Runs = r.Instances, s.Runs+1
		rate, p50, p99 = append(rate, r.PerSecond), append(p50, r.P50Millis), append(p99, r.P99Millis)
		starts = append(starts, r.StartSeconds)
		n := float64(r.Instances)
		w := r.Work
		for k, v := range map[string]int64{"commits": w.Commits, "ins": w.Inserted, "upd": w.Updated, "del": w.Deleted,
			"read": w.TuplesRead, "hit": w.BlksHit, "polls": int64(r.Polls)} {
			per[k] = append(per[k], float64(v)/n)
		}
		for t := range w.SeqScans {
			scans[t], tuples[t] = nil, nil
		}
	}
	// A table a run did not scan counts as 0 scans in that run.
	for t := range scans {
		for _, r := range mine {
			n := float64(r.Instances)
			scans[t] = append(scans[t], float64(r.Work.SeqScans[t].Scans)/n)
			tuples[t] = append(tuples[t], float64(r.Work.SeqScans[t].TuplesRead)/n)
		}
	}
	s.PerSecond, s.P50Millis, s.P99Millis, s.StartSeconds = median(rate), median(p50), median(p99), median(starts)
	s.PerWorkflow = PerWorkflow{
		Commits: median(per["commits"]), Inserted: median(per["ins"]), Updated: median(per["upd"]), Deleted: median(per["del"]),
		TuplesRead: median(per["read"]), BlksHit: median(per["hit"]), Polls: median(per["polls"]),
	}
	if len(scans) > 0 {
		s.PerWorkflow.SeqScans, s.PerWorkflow.SeqTuples = map[string]float64{}, map[string]float64{}
		for t := range scans {
			s.PerWorkflow.SeqScans[t], s.PerWorkflow.SeqTuples[t] = median(scans[t]), median(tuples[t])
		}
	}
	return s
}

// median returns the median of vs (the mean of the middle two of an even
// count), 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// moduleVersion returns the version of a module this program was built
// with, "unknown" when the build does not tell.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}

// loadAverage returns the system's load averages (1, 5 and 15 minutes)
// where /proc/loadavg tells them, "" otherwise.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
