package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Workloads.
const (
	W1 = "W1" // workflows of three sequential activities
	W2 = "W2" // workflows of twenty parallel activities
	W3 = "W3" // signal → the workflow has durably received it
)

// system is one workflow engine open on one database, running.
type system interface {
	// start starts one workflow of a W1 or W2 workload with a named id.
	start(ctx context.Context, workload, id string, input int) error
	// ended reports whether the workflow has ended, with an error if it
	// ended other than completed. It is one status read.
	ended(ctx context.Context, id string) (bool, error)
	// listen starts W3's listener, which receives n signals in turn, and
	// returns once it waits for the first.
	listen(ctx context.Context, id string, n int) error
	// signal sends the listener its signal i.
	signal(ctx context.Context, id string, i int) error
	// resumed receives a value each time the listener has durably received
	// a signal.
	resumed() <-chan struct{}
	// close stops the engine and closes its connections.
	close(ctx context.Context) error
}

// driver opens one of the systems compared.
type driver struct {
	// name is the system's name in reports.
	name string
	// migrate creates the system's tables in the database at url and
	// closes its connections.
	migrate func(ctx context.Context, url string) error
	// open opens the system on the database at url, migrated, and starts
	// its workers.
	open func(ctx context.Context, url string, c Config) (system, error)
}

// measure is what one run of a workload on one system measured.
type measure struct {
	// Workflows counts the workflows that completed (W1, W2) or the
	// signals received (W3).
	Workflows int
	// Duration runs from the first start (or signal) to the poller seeing
	// the last workflow complete (or the last signal received).
	Duration time.Duration
	// StartDuration is how long the starter took to start them all.
	StartDuration time.Duration
	// Polls counts the status reads of the poller.
	Polls int
	// P50 and P99 are W3's signal latencies.
	P50, P99 time.Duration
}

// perSecond is Workflows over Duration.
func (m *measure) perSecond() float64 { return float64(m.Workflows) / m.Duration.Seconds() }

// runWorkload runs workload on sys: W1 and W2 with one goroutine starting
// n workflows back to back with named ids and this one polling their
// status in start order, every poll interval until each has ended; W3 by
// sending n signals one after the other, each once the previous one was
// received.
func runWorkload(ctx context.Context, sys system, workload string, n int, poll time.Duration) (*measure, error) {
	if workload == W3 {
		return runSignals(ctx, sys, n, poll)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := make(chan string, n)
	startErr := make(chan error, 1)
	var startDuration time.Duration
	begin := time.Now()
	go func() {
		defer close(ids)
		for i := range n {
			if ctx.Err() != nil {
				return // the poller gave up
			}
			id := fmt.Sprintf("%s-%d", strings.ToLower(workload), i)
			if err := sys.start(ctx, workload, id, i); err != nil {
				startErr <- fmt.Errorf("start %s: %w", id, err)
				return
			}
			ids <- id
		}
		startDuration = time.Since(begin)
	}()
	m := &measure{}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for id := range ids {
		if err := waitEnded(ctx, sys, id, tick, &m.Polls); err != nil {
			return nil, err
		}
		m.Workflows++
	}
	m.Duration = time.Since(begin)
	select {
	case err := <-startErr:
		return nil, err
	default:
	}
	if m.Workflows != n {
		return nil, fmt.Errorf("%d of %d workflows started: %w", m.Workflows, n, ctx.Err())
	}
	m.StartDuration = startDuration // written before ids was closed
	return m, nil
}

// waitEnded polls id's status at each tick until it has ended.
func waitEnded(ctx context.Context, sys system, id string, tick *time.Ticker, polls *int) error {
	for {
		*polls++
		ended, err := sys.ended(ctx, id)
		if err != nil {
			return fmt.Errorf("status of %s: %w", id, err)
		}
		if ended {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s has not ended: %w", id, ctx.Err())
		}
	}
}

// runSignals is W3: the time from sending a signal to the listener having
// durably received it, one signal at a time.
func runSignals(ctx context.Context, sys system, n int, poll time.Duration) (*measure, error) {
	const id = "w3"
	if err := sys.listen(ctx, id, n); err != nil {
		return nil, fmt.Errorf("start the listener: %w", err)
	}
	lat := make([]time.Duration, n)
	begin := time.Now()
	for i := range n {
		sent := time.Now()
		if err := sys.signal(ctx, id, i); err != nil {
			return nil, fmt.Errorf("signal %d: %w", i, err)
		}
		select {
		case <-sys.resumed():
		case <-ctx.Done():
			return nil, fmt.Errorf("signal %d not received: %w", i, ctx.Err())
		}
		lat[i] = time.Since(sent)
	}
	m := &measure{Workflows: n, Duration: time.Since(begin)}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	if err := waitEnded(ctx, sys, id, tick, &m.Polls); err != nil {
		return nil, err
	}
	m.P50, m.P99 = percentile(lat, 50), percentile(lat, 99)
	return m, nil
}

// percentile returns the p-th percentile of ds (nearest rank), leaving ds
// as it was.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (len(s)*p + 99) / 100 // ceil(len·p/100), 1-based
	return s[max(rank, 1)-1]
}

// errEnded is the error of a workflow that ended other than completed.
var errEnded = errors.New("workflow did not complete")
