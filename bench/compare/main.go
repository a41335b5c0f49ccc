package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

// defaultURL is the server used when neither -url nor
// CHRONICLE_TEST_PG_URL names one.
const defaultURL = "postgres://root@127.0.0.1:5432/test"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	url := os.Getenv("CHRONICLE_TEST_PG_URL")
	if url == "" {
		url = defaultURL
	}
	var c Config
	fs.StringVar(&c.URL, "url", url, "PostgreSQL server (postgres:// URL); each run creates a database of its own there and drops it (default: CHRONICLE_TEST_PG_URL or "+defaultURL+")")
	workloads := fs.String("workloads", "W1,W2,W3", "workloads to run, in order: W1, W2, W3")
	fs.IntVar(&c.W1, "w1", 1000, "W1's workflows")
	fs.IntVar(&c.W2, "w2", 200, "W2's workflows")
	fs.IntVar(&c.W3, "w3", 500, "W3's signals")
	fs.IntVar(&c.Runs, "runs", 3, "runs of each system per workload, alternated")
	fs.DurationVar(&c.Poll, "poll", 5*time.Millisecond, "the poller's interval between two status reads of a workflow that has not ended")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "bound on each run")
	fs.BoolVar(&c.Keep, "keep", false, "keep the runs' databases")
	fs.IntVar(&c.ChronicleOrchestrationWorkers, "chronicle-orchestration-workers", 0, "Chronicle's orchestration workers (0: the engine's default)")
	fs.IntVar(&c.ChronicleActivityWorkers, "chronicle-activity-workers", 0, "Chronicle's activity workers (0: the engine's default)")
	fs.BoolVar(&c.ChronicleEagerActivities, "chronicle-eager-activities", false, "Chronicle hands a workflow's next activity to the worker that completed the one before, claimed (Options.EagerActivities)")
	statements := fs.Bool("statements", false, "count the statements Chronicle's store sends in each run, by kind, and write them to standard error")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file (- for standard output, instead of the text)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.ToUpper(strings.TrimSpace(w)); w != "" {
			c.Workloads = append(c.Workloads, w)
		}
	}
	c.Progress = os.Stderr
	if *statements {
		c.Statements = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := Compare(ctx, c)
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if *jsonOut == "-" {
			_, err = os.Stdout.Write(data)
			return err
		}
		if err := os.WriteFile(*jsonOut, data, 0o644); err != nil {
			return err
		}
	}
	return rep.WriteText(os.Stdout)
}
