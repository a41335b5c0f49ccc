package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
)

// Schedules is the schedules workload: many schedules firing every
// minute, each firing starting a workflow that ends in its first round.
// It runs with [RunSchedules], not [Run].
const Schedules = "SCHEDULES"

// ScheduleConfig configures [RunSchedules].
type ScheduleConfig struct {
	// Schedules is how many schedules fire every minute.
	Schedules int
	// Cron fires them all with "* * * * *", at the start of each minute
	// (a burst of Schedules firings a minute); otherwise each fires every
	// minute as an interval whose phases are spread evenly over the
	// minute (a steady Schedules/60 firings a second).
	Cron bool
	// Window is how long the firings are measured (whole minutes;
	// default 3m), from the schedules' first firings (see Lead).
	Window time.Duration
	// Period is the interval schedules' period (default, and always with
	// Cron, a minute); shorter ones make short test runs.
	Period time.Duration
	// Lead is how long after the run's start the schedules may first
	// fire: the setup (creating them, their first rounds) must fit in it.
	// The window starts at the first whole minute after it. Default 1m
	// plus 20ms a schedule.
	Lead time.Duration
	// Drain is how long, after the window's end, the run waits for the
	// window's firings before it counts the missing ones as late.
	// Default 2m.
	Drain time.Duration
	// OrchestrationWorkers, ActivityWorkers and RoundGroup size the engine
	// (0: the engine's defaults).
	OrchestrationWorkers int
	ActivityWorkers      int
	RoundGroup           int
	// CacheSize bounds the executors the engine keeps between rounds
	// (0: the engine's default of 1,000). A schedule whose executor is
	// not cached replays its execution's history at each round.
	CacheSize int
	// Progress, when set, hears what the run is doing.
	Progress func(string)
}

// ScheduleResult is what [RunSchedules] measured.
type ScheduleResult struct {
	Schedules int
	Cron      bool
	// Setup is how long creating the schedules took, until each had run
	// its first round.
	Setup time.Duration
	// WindowStart and Window say which nominal times were measured.
	WindowStart time.Time
	Window      time.Duration
	// Expected counts the nominal times of the window; Started those whose
	// instance recorded ExecutionStarted before the drain ended; Recorded
	// those the schedule recorded as started.
	Expected, Started, Recorded int
	// Start is the delay from each firing's nominal time to the commit of
	// the round that recorded its instance's ExecutionStarted; Record the
	// delay to the time of the schedule's round that recorded the firing
	// as started (the round's clock reading). Firings that never got there
	// are left out of the percentiles and counted by Expected - Started.
	Start, Record Percentiles
	// Measured is the time from the window's start to the end of the
	// measure: the window, and as much of the drain as the window's
	// firings needed.
	Measured time.Duration
	// FiringsPerSecond is Started over Measured.
	FiringsPerSecond float64
	// Rounds and Activities count the rounds and activity attempts of the
	// window and drain (all instances).
	Rounds, Activities int64
	// CPU is the process's CPU time (user and system) over the window and
	// drain, where the system tells it; 0 otherwise.
	CPU time.Duration
	// PeakHeap and PeakRSS are the largest heap in use and resident set.
	PeakHeap, PeakRSS uint64
}

// Percentiles summarize delays.
type Percentiles struct {
	P50, P99, Max time.Duration
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	return Percentiles{P50: ds[len(ds)/2], P99: ds[min(len(ds)-1, len(ds)*99/100)], Max: ds[len(ds)-1]}
}

// scheduleObserver notes when each firing's instance first committed a
// round (the one recording its ExecutionStarted).
type scheduleObserver struct {
	rounds, activities atomic.Int64
	mu                 sync.Mutex
	started            map[string]time.Time
	running            map[string]bool // schedule instances that ran a round
}

func (o *scheduleObserver) Round(s chronicle.RoundStats) {
	o.rounds.Add(1)
	if s.Err != nil || s.Processed == 0 {
		return
	}
	now := time.Now()
	if strings.HasPrefix(s.InstanceID, chronicle.SchedulePrefix) {
		o.mu.Lock()
		o.running[s.InstanceID] = true
		o.mu.Unlock()
		return
	}
	if strings.Contains(s.InstanceID, "@") {
		o.mu.Lock()
		if _, ok := o.started[s.InstanceID]; !ok {
			o.started[s.InstanceID] = now
		}
		o.mu.Unlock()
	}
}

func (o *scheduleObserver) Activity(chronicle.ActivityStats) { o.activities.Add(1) }

// scheduleID names the i-th schedule of the workload.
func scheduleID(i int) string { return fmt.Sprintf("bench-s%05d", i) }

// RunSchedules runs the schedules workload on store, which must hold no
// schedules with its ids ("bench-s…"): it creates the schedules (eight at
// a time), waits until each ran its first round, then measures the
// firings whose nominal times fall in the window.
func RunSchedules(ctx context.Context, store provider.Store, c ScheduleConfig) (*ScheduleResult, error) {
	if c.Schedules <= 0 {
		return nil, fmt.Errorf("bench: schedules: %d schedules", c.Schedules)
	}
	if c.Window <= 0 {
		c.Window = 3 * time.Minute
	}
	period := time.Minute
	if c.Period > 0 && !c.Cron {
		period = c.Period
	}
	c.Window = c.Window.Round(period)
	if c.Window < period {
		c.Window = period
	}
	if c.Drain <= 0 {
		c.Drain = 2 * time.Minute
	}
	progress := c.Progress
	if progress == nil {
		progress = func(string) {}
	}
	obs := &scheduleObserver{started: map[string]time.Time{}, running: map[string]bool{}}
	e, err := chronicle.New(store, chronicle.Options{
		NodeID: "bench", OrchestrationWorkers: c.OrchestrationWorkers, ActivityWorkers: c.ActivityWorkers,
		Observer: obs, SafetyPoll: time.Second, RoundGroup: c.RoundGroup, CacheSize: c.CacheSize,
	})
	if err != nil {
		return nil, err
	}
	if err := chronicle.RegisterWorkflow(e, "scheduled", func(_ *chronicle.Context, n int) (int, error) { return n, nil }); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	var (
		stopOnce sync.Once
		runErr   error
	)
	engineErr := func() error { // stops the engine; its error, if any
		stopOnce.Do(func() {
			stop()
			if err := <-done; err != nil {
				runErr = fmt.Errorf("bench: engine: %w", err)
			}
		})
		return runErr
	}
	peak := watchHeap(runCtx)

	res := &ScheduleResult{Schedules: c.Schedules, Cron: c.Cron, Window: c.Window}
	begin := time.Now()
	// Nothing fires before the window, so that the setup leaves no
	// backlog: every schedule starts at the window's start (plus its
	// phase).
	lead := c.Lead
	if lead <= 0 {
		lead = time.Minute + time.Duration(c.Schedules)*20*time.Millisecond
	}
	w0 := begin.Add(lead).Truncate(period).Add(period)
	w1 := w0.Add(c.Window)
	phase := func(i int) time.Duration { return time.Duration(int64(period) * int64(i) / int64(c.Schedules)) }
	specOf := func(i int) chronicle.ScheduleSpec {
		if c.Cron {
			return chronicle.ScheduleSpec{Cron: "* * * * *", Start: w0}
		}
		return chronicle.ScheduleSpec{Every: period, Start: w0.Add(phase(i))}
	}
	var (
		next    atomic.Int64
		created atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, 8)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= c.Schedules {
					return
				}
				err := e.CreateSchedule(ctx, scheduleID(i), chronicle.ScheduleOptions{
					Spec: specOf(i), Workflow: "scheduled", Input: i, Overlap: chronicle.OverlapAllowAll, Actor: "bench",
				})
				if err != nil {
					errs <- fmt.Errorf("bench: create schedule %d: %w", i, err)
					return
				}
				if n := created.Add(1); n%1000 == 0 {
					progress(fmt.Sprintf("created %d of %d schedules in %.1fs", n, c.Schedules, time.Since(begin).Seconds()))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, errorsJoin(err, engineErr())
	}
	// Wait until every schedule ran its first round (it set its status).
	for {
		obs.mu.Lock()
		n := len(obs.running)
		obs.mu.Unlock()
		if n >= c.Schedules {
			break
		}
		select {
		case <-ctx.Done():
			return nil, errorsJoin(ctx.Err(), engineErr())
		case <-time.After(10 * time.Millisecond):
		}
	}
	res.Setup = time.Since(begin)
	progress(fmt.Sprintf("%d schedules created and running after %.1fs", c.Schedules, res.Setup.Seconds()))

	if time.Now().After(w0) {
		progress(fmt.Sprintf("the setup ran past the window's start (%s): raise the lead", w0.Format(time.TimeOnly)))
	}
	res.WindowStart = w0
	inWindow := func(t time.Time) bool { return !t.Before(w0) && t.Before(w1) }
	expected := map[string]time.Time{}
	for i := 0; i < c.Schedules; i++ {
		for m := w0; m.Before(w1); m = m.Add(period) {
			n := m
			if !c.Cron {
				n = m.Add(phase(i))
			}
			expected[chronicle.ScheduleInstanceID(scheduleID(i), n)] = n
		}
	}
	res.Expected = len(expected)
	progress(fmt.Sprintf("measuring %d firings with nominal times from %s to %s", res.Expected, w0.Format(time.TimeOnly), w1.Format(time.TimeOnly)))
	select {
	case <-ctx.Done():
		return nil, errorsJoin(ctx.Err(), engineErr())
	case <-time.After(time.Until(w0)):
	}
	rounds0, acts0, cpu0 := obs.rounds.Load(), obs.activities.Load(), cpuTime()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	deadline := w1.Add(c.Drain)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		n := 0
		obs.mu.Lock()
		for id := range obs.started {
			if _, ok := expected[id]; ok {
				n++
			}
		}
		obs.mu.Unlock()
		if n == res.Expected && time.Now().After(w1) || time.Now().After(deadline) {
			break
		}
		if time.Since(lastReport) >= 20*time.Second {
			lastReport = time.Now()
			progress(fmt.Sprintf("%d of %d firings started", n, res.Expected))
		}
		select {
		case <-ctx.Done():
			return nil, errorsJoin(ctx.Err(), engineErr())
		case <-tick.C:
		}
	}
	res.Measured = time.Since(w0)
	res.Rounds, res.Activities = obs.rounds.Load()-rounds0, obs.activities.Load()-acts0
	res.CPU = cpuTime() - cpu0

	var startDelays []time.Duration
	obs.mu.Lock()
	for id, at := range obs.started {
		if n, ok := expected[id]; ok {
			startDelays = append(startDelays, at.Sub(n))
		}
	}
	obs.mu.Unlock()
	res.Started = len(startDelays)
	res.Start = percentiles(startDelays)
	res.FiringsPerSecond = float64(res.Started) / res.Measured.Seconds()

	// What the schedules recorded (the schedules keep their last 20
	// firings, more than a window's), read with the engine stopped.
	if err := engineErr(); err != nil {
		return nil, err
	}
	res.PeakHeap = <-peak
	progress("reading what the schedules recorded")
	var recordDelays []time.Duration
	for i := 0; i < c.Schedules; i++ {
		d, err := e.DescribeSchedule(ctx, scheduleID(i))
		if err != nil {
			return nil, errorsJoin(err, engineErr())
		}
		for _, f := range d.Recent {
			if f.Outcome == "started" && inWindow(f.Nominal) {
				recordDelays = append(recordDelays, f.At.Sub(f.Nominal))
			}
		}
	}
	res.Recorded = len(recordDelays)
	res.Record = percentiles(recordDelays)
	res.PeakRSS = peakRSS()
	return res, nil
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w (and %v)", a, b)
}
