package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestCompareSmoke runs every workload once on both systems with a handful
// of workflows and checks that each run completed its workflows, that the
// statistics saw its database work, and that its database was dropped.
func TestCompareSmoke(t *testing.T) {
	url := pgtest.URL(t)
	// A bound for a hang, not for speed: six runs that each create, migrate
	// and drop a database take about a minute on a busy 2-core machine, and
	// `make ci` runs this test beside other jobs that load PostgreSQL (one
	// run took 154 s there).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Compare(ctx, Config{URL: url, Workloads: []string{W1, W2, W3}, W1: 5, W2: 2, W3: 5, Runs: 1, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 6 {
		t.Fatalf("%d runs, want 6 (3 workloads × 2 systems)", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if r.PerSecond <= 0 || r.Polls < 1 {
			t.Errorf("%s on %s: %.1f/s after %d polls", r.Workload, r.System, r.PerSecond, r.Polls)
		}
		// Each workflow (W3: each signal) is written in commits of its own.
		if r.Work.Commits < int64(r.Instances) || r.Work.Inserted < int64(r.Instances) || r.Work.TuplesRead == 0 {
			t.Errorf("%s on %s: database work %+v for %d workflows", r.Workload, r.System, r.Work, r.Instances)
		}
		if r.Workload == W3 && (r.P50Millis <= 0 || r.P99Millis < r.P50Millis) {
			t.Errorf("%s on %s: p50 %.2f ms, p99 %.2f ms", r.Workload, r.System, r.P50Millis, r.P99Millis)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, r := range rep.Runs {
		var left bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", r.Database).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left {
			t.Errorf("database %s of %s on %s was not dropped", r.Database, r.Workload, r.System)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"W1: 5 workflows × 3 sequential activities", "W2: 2 workflows", "W3: 5 signals", "commits", "shared buffer hits"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // descending: percentile sorts
	}
	if got := percentile(ds, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := percentile(ds, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := percentile(ds[:1], 99); got != 100*time.Millisecond {
		t.Errorf("p99 of one = %v, want 100ms", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile reordered its argument")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSummarizeCountsUnscannedRunsAsZero(t *testing.T) {
	runs := []Run{
		{Workload: W1, System: "x", Instances: 10, PerSecond: 1, Work: work{Commits: 100, SeqScans: map[string]seqScans{"s.t": {Scans: 30, TuplesRead: 60}}}},
		{Workload: W1, System: "x", Instances: 10, PerSecond: 3, Work: work{Commits: 300}},
		{Workload: W1, System: "x", Instances: 10, PerSecond: 2, Work: work{Commits: 200}},
		{Workload: W1, System: "y", Instances: 10, PerSecond: 9, Work: work{Commits: 900}},
	}
	s := summarize(W1, "x", runs)
	if s.Runs != 3 || s.PerSecond != 2 || s.PerWorkflow.Commits != 20 {
		t.Errorf("summary %+v: want 3 runs, median 2/s, 20 commits per workflow", s)
	}
	if s.PerWorkflow.SeqScans["s.t"] != 0 {
		t.Errorf("median seq scans of s.t = %v, want 0 (scanned in one run of three)", s.PerWorkflow.SeqScans["s.t"])
	}
}
