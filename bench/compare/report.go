package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// describe names a workload and its size.
func describe(workload string, n int) string {
	switch workload {
	case W1:
		return fmt.Sprintf("W1: %d workflows × 3 sequential activities", n)
	case W2:
		return fmt.Sprintf("W2: %d workflows × 20 parallel activities", n)
	case W3:
		return fmt.Sprintf("W3: %d signals → workflow received it", n)
	}
	return workload
}

// summary returns the summary of workload on system, nil if none.
func (r *Report) summary(workload, system string) *Summary {
	for i := range r.Summaries {
		if r.Summaries[i].Workload == workload && r.Summaries[i].System == system {
			return &r.Summaries[i]
		}
	}
	return nil
}

// workloads returns the report's workloads in the order they ran.
func (r *Report) workloads() []string {
	var ws []string
	for _, s := range r.Summaries {
		if !slices.Contains(ws, s.Workload) {
			ws = append(ws, s.Workload)
		}
	}
	return ws
}

// WriteText writes the report as text tables: throughput and its ratio,
// the runs, the database work per workflow and the sequential scans.
func (r *Report) WriteText(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Chronicle and DBOS Transact Go %s, one harness, %s at %s\n", r.DBOSVersion, r.ServerInfo, r.Server)
	fmt.Fprintf(&b, "%d CPUs, %s; load average %s at the start, %s at the end (%s)\n",
		r.CPUs, r.GoVersion, r.LoadBefore, r.LoadAfter, r.Started.Format("2006-01-02 15:04 UTC"))
	runs := 0
	for _, s := range r.Summaries {
		runs = max(runs, s.Runs)
	}
	fmt.Fprintf(&b, "medians of %d runs per system, alternated (chronicle, dbos, chronicle, ...); ratio = chronicle / dbos\n\n", runs)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\tchronicle\tdbos\tratio\t\n")
	for _, w := range r.workloads() {
		c, d := r.summary(w, "chronicle"), r.summary(w, "dbos")
		if c == nil || d == nil {
			continue
		}
		if w == W3 {
			fmt.Fprintf(tw, "%s, p50 / p99\t%.2f / %.2f ms\t%.2f / %.2f ms\t%.2f× / %.2f×\t\n", describe(w, c.Instances),
				c.P50Millis, c.P99Millis, d.P50Millis, d.P99Millis, c.P50Millis/d.P50Millis, c.P99Millis/d.P99Millis)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f wf/s\t%.1f wf/s\t%.2f×\t\n", describe(w, c.Instances), c.PerSecond, d.PerSecond, c.PerSecond/d.PerSecond)
		fmt.Fprintf(tw, "  starting them all, one after the other\t%.2f s\t%.2f s\t\t\n", c.StartSeconds, d.StartSeconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\nruns (per second; W3 signals per second)\n")
	for _, w := range r.workloads() {
		for _, sys := range []string{"chronicle", "dbos"} {
			var vs []string
			for _, run := range r.Runs {
				if run.Workload == w && run.System == sys {
					vs = append(vs, fmt.Sprintf("%.1f", run.PerSecond))
				}
			}
			fmt.Fprintf(&b, "  %s %-9s %s\n", w, sys, strings.Join(vs, "  "))
		}
	}

	b.WriteString("\ndatabase work per workflow (W3: per signal), medians; tuples read = tup_fetched + tup_returned\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := []string{"per workflow"}
	var cols []*Summary
	for _, w := range r.workloads() {
		for _, sys := range []string{"chronicle", "dbos"} {
			if s := r.summary(w, sys); s != nil {
				header, cols = append(header, w+" "+sys), append(cols, s)
			}
		}
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(header, "\t"))
	rows := []struct {
		name string
		get  func(*PerWorkflow) float64
	}{
		{"commits", func(p *PerWorkflow) float64 { return p.Commits }},
		{"rows inserted", func(p *PerWorkflow) float64 { return p.Inserted }},
		{"rows updated", func(p *PerWorkflow) float64 { return p.Updated }},
		{"rows deleted", func(p *PerWorkflow) float64 { return p.Deleted }},
		{"tuples read", func(p *PerWorkflow) float64 { return p.TuplesRead }},
		{"shared buffer hits", func(p *PerWorkflow) float64 { return p.BlksHit }},
		{"status polls", func(p *PerWorkflow) float64 { return p.Polls }},
	}
	for _, row := range rows {
		cells := []string{row.name}
		for _, s := range cols {
			cells = append(cells, fmt.Sprintf("%.1f", row.get(&s.PerWorkflow)))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\nsequential scans per workflow (W3: per signal), medians, by table\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	scanned := false
	for _, s := range cols {
		tables := make([]string, 0, len(s.PerWorkflow.SeqScans))
		for t := range s.PerWorkflow.SeqScans {
			tables = append(tables, t)
		}
		slices.Sort(tables)
		for _, t := range tables {
			scanned = true
			fmt.Fprintf(tw, "  %s %s\t%s\t%.3f scans\t%.0f tuples\t\n", s.Workload, s.System, t, s.PerWorkflow.SeqScans[t], s.PerWorkflow.SeqTuples[t])
		}
	}
	if !scanned {
		b.WriteString("  none\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(out, b.String())
	return err
}
