// Package bench runs Chronicle's benchmark workloads on any store: W1, a
// workflow calling three activities in turn; W2, a workflow fanning out to
// twenty activities in parallel; W3, the latency from raising a signal to
// the round that resumes its workflow; W4, the same latency as one
// instance's history grows; BACKLOG, how long each of many workflows
// started at once takes to finish; SCHEDULES ([RunSchedules]), how late
// the firings of many schedules start. `chronicle bench` and the Go
// benchmarks run them; docs/benchmarks.md records the numbers.
package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
)

// Workloads.
const (
	W1 = "W1" // sequence: three activities in turn
	W2 = "W2" // fan-out: twenty activities in parallel
	W3 = "W3" // signal latency: raise → resumed
	W4 = "W4" // growing history: W3's latency, first signals against last
	// Backlog starts every workflow of W1 at once and measures each one's
	// time from start to completion.
	Backlog = "BACKLOG"
	// Start measures starting workflows, one Start call after the other
	// from one goroutine, while no worker runs.
	Start = "START"
	// Idle measures the memory an instance parked on a signal costs the
	// process (its cached executor included).
	Idle = "IDLE"
)

// Config configures one run.
type Config struct {
	Workload string
	// Instances is how many workflows W1 and W2 run, and how many signals
	// W3 raises.
	Instances int
	// OrchestrationWorkers and ActivityWorkers size the engine.
	OrchestrationWorkers int
	ActivityWorkers      int
	// Timeout bounds the run.
	Timeout time.Duration
	// StartMany starts W1's, W2's and BACKLOG's workflows with
	// Engine.StartMany instead of one Start call each.
	StartMany bool
	// RoundGroup sizes the engine's group commit (0: its default).
	RoundGroup int
	// EagerActivities is the engine's option of that name.
	EagerActivities bool
	// Checkpoints, when positive, has the engine sign checkpoints with a
	// fresh Ed25519 key at this interval (and EndDelay) while it runs.
	Checkpoints time.Duration
	// Publish, with Checkpoints, publishes every checkpoint's note to an
	// append-only directory (chronicle.DirPublisher), a new one under
	// that path for each run (each run's key signs a new chain).
	Publish string
	// Attributes declares [PreloadAttributes] and starts each workflow of
	// W1, W2 and BACKLOG with a value of each ([StartAttributes]), so that
	// every record the rounds write carries them.
	Attributes bool
	// LimitKeys, when positive, starts each workflow of W1 and BACKLOG
	// with a concurrency limit of one on one of LimitKeys keys
	// ([LimitKey]): the workflows of a key run one at a time, in the
	// order they were started (StartOptions.Concurrency).
	LimitKeys int
	// ActivityLimitKeys, when positive, runs W1's and BACKLOG's
	// activities with a concurrency limit of one on one of
	// ActivityLimitKeys keys, the same for the three activities of a
	// workflow (ActivityOptions.Concurrency): the "sequence-keyed"
	// workflow instead of "sequence".
	ActivityLimitKeys int
	// CacheSize bounds the executors the engine keeps between rounds (0:
	// its default, Options.CacheSize).
	CacheSize int
	// Encrypt starts each workflow of W1 and BACKLOG with a data subject
	// (one of 1,000: [SubjectOf]), so that its payloads are sealed, with
	// a file key provider in a temporary directory whose keys are made
	// before the run.
	Encrypt bool
	// Keys, with Encrypt, keeps the subjects' keys instead of a
	// temporary directory: a provider whose keys already exist.
	Keys chronicle.KeyProvider
}

// SubjectOf is the data subject of the i-th workflow of a run with
// Config.Encrypt.
func SubjectOf(i int) string { return LimitKey(i, 1000) }

// LimitKey is the concurrency key of the i-th workflow of a run with n
// keys (Config.LimitKeys, Config.ActivityLimitKeys).
func LimitKey(i, n int) string { return "customer-" + strconv.Itoa(i%n) }

// KeyedInput is the input of the "sequence-keyed" workflow: the number
// its activities count from and the concurrency key they run under.
type KeyedInput struct {
	N   int
	Key string
}

// startRequest returns the workflow, input and options of the i-th
// workflow of W1 and BACKLOG; the options are nil when c asks for none,
// as a plain start has.
func startRequest(c *Config, i int) chronicle.StartRequest {
	r := chronicle.StartRequest{Workflow: "sequence", Input: i}
	if c.ActivityLimitKeys > 0 {
		r.Workflow, r.Input = "sequence-keyed", KeyedInput{N: i, Key: LimitKey(i, c.ActivityLimitKeys)}
	}
	if c.Attributes || c.LimitKeys > 0 || c.Encrypt {
		r.Options = &chronicle.StartOptions{}
		if c.Encrypt {
			r.Options.Subject = SubjectOf(i)
		}
		if c.Attributes {
			r.Options.SearchAttributes = StartAttributes(i)
		}
		if c.LimitKeys > 0 {
			r.Options.Concurrency = &chronicle.Concurrency{Key: LimitKey(i, c.LimitKeys), Limit: 1}
		}
	}
	return r
}

// StartAttributes are the search attributes of the i-th workflow a run
// with Config.Attributes starts: the attributes of a preloaded copy.
func StartAttributes(i int) map[string]any {
	regions := []string{"af-south", "ap-east", "ap-south", "eu-north", "eu-west", "sa-east", "us-east", "us-west"}
	return map[string]any{
		"customer": fmt.Sprintf("customer-%05d", (i*7919)%PreloadCustomers),
		"amount":   float64((i*31)%100000) / 100,
		"items":    i%7 + 1,
		"region":   regions[i%8],
		"express":  i%5 == 0,
	}
}

// Result is what a run measured.
type Result struct {
	Workload  string
	Instances int
	Duration  time.Duration
	// Workflows counts completed workflows (W1, W2) or resumed signals (W3).
	Workflows int
	Rounds    int64
	// ColdRounds counts the rounds that read their instance's state from
	// the store (RoundStats.Cold): one per new instance, and one for each
	// replay after its executor left the cache.
	ColdRounds int64
	// Activities counts activity attempts.
	Activities int64
	// AllocsPerRound is the whole process's allocations divided by rounds.
	AllocsPerRound float64
	// PeakHeap is the largest heap in use seen during the run, in bytes.
	PeakHeap uint64
	// Checkpoints counts the checkpoints written while the workload ran
	// (Config.Checkpoints).
	Checkpoints int64
	// P50 and P99 are W3's and W4's signal-to-resume latencies, and
	// BACKLOG's start-to-completion times.
	P50, P99 time.Duration
	// P50First and P50Last are W4's signal-to-resume latencies of the
	// first and the last WindowW4 signals.
	P50First, P50Last time.Duration
	// StartDuration is how long starting the workflows of W1, W2 or
	// BACKLOG took, one after the other from one goroutine.
	StartDuration time.Duration
	// PeakRSS is the process's peak resident set (VmHWM) at the end of the
	// run, in bytes, where the system tells it (Linux); 0 otherwise.
	PeakRSS uint64
	// BytesPerIdle is Idle's heap and goroutine stack per parked instance,
	// after collection.
	BytesPerIdle float64
}

// WorkflowsPerSecond is Workflows over Duration.
func (r *Result) WorkflowsPerSecond() float64 { return float64(r.Workflows) / r.Duration.Seconds() }

// RoundsPerSecond is Rounds over Duration.
func (r *Result) RoundsPerSecond() float64 { return float64(r.Rounds) / r.Duration.Seconds() }

// WindowW4 is how many of W4's first and last signals are compared.
const WindowW4 = 200

// observer counts rounds and activities, times W3's resumes and notes when
// instances complete.
type observer struct {
	rounds, activities atomic.Int64
	mu                 sync.Mutex
	raised             map[string]time.Time
	latencies          []time.Duration
	resumed            chan struct{}
	// completed, for BACKLOG only, notes when each instance completed.
	completed map[string]time.Time
	// cold counts the cold rounds.
	cold atomic.Int64
}

func (o *observer) Round(s chronicle.RoundStats) {
	o.rounds.Add(1)
	if s.Cold {
		o.cold.Add(1)
	}
	if s.Err != nil || s.Processed == 0 {
		return
	}
	o.mu.Lock()
	if o.completed != nil && s.Status == chronicle.StatusCompleted {
		if _, ok := o.completed[s.InstanceID]; !ok {
			o.completed[s.InstanceID] = time.Now()
		}
	}
	at, ok := o.raised[s.InstanceID]
	if ok {
		delete(o.raised, s.InstanceID)
		o.latencies = append(o.latencies, time.Since(at))
	}
	o.mu.Unlock()
	if ok {
		o.resumed <- struct{}{}
	}
}

func (o *observer) Activity(chronicle.ActivityStats) { o.activities.Add(1) }

// Run runs one workload on store, which must be empty of instances with the
// ids it uses ("bench-…").
func Run(ctx context.Context, store provider.Store, c Config) (_ *Result, err error) {
	if c.Instances <= 0 {
		c.Instances = 100
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if c.LimitKeys < 0 || c.ActivityLimitKeys < 0 {
		return nil, fmt.Errorf("bench: LimitKeys (%d) and ActivityLimitKeys (%d) must not be negative", c.LimitKeys, c.ActivityLimitKeys)
	}
	if (c.LimitKeys > 0 || c.ActivityLimitKeys > 0) && c.Workload != W1 && c.Workload != Backlog {
		return nil, fmt.Errorf("bench: concurrency limits apply to W1 and BACKLOG, not %s", c.Workload)
	}
	if c.Workload == W4 && c.Instances < 2 {
		return nil, fmt.Errorf("bench: W4 compares its first and last signals: it needs at least 2, not %d", c.Instances)
	}
	obs := &observer{raised: map[string]time.Time{}, resumed: make(chan struct{}, 1)}
	if c.Workload == Backlog {
		obs.completed = map[string]time.Time{}
	}
	opts := chronicle.Options{
		NodeID: "bench", OrchestrationWorkers: c.OrchestrationWorkers, ActivityWorkers: c.ActivityWorkers,
		Observer: obs, SafetyPoll: time.Second, RoundGroup: c.RoundGroup, CacheSize: c.CacheSize, EagerActivities: c.EagerActivities,
	}
	if c.Attributes {
		opts.SearchAttributes = PreloadAttributes
	}
	if c.Encrypt && c.Keys != nil {
		opts.Keys = c.Keys
	} else if c.Encrypt {
		dir, err := os.MkdirTemp("", "chronicle-bench-keys-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		kek := filepath.Join(dir, "kek")
		if err := chronicle.GenerateKEK(kek, "bench"); err != nil {
			return nil, err
		}
		keys, err := chronicle.NewFileKeyProvider(filepath.Join(dir, "keys"), kek)
		if err != nil {
			return nil, err
		}
		// The subjects' keys exist before the run, as those of known
		// customers do: making one (a file written and synced) is not
		// the cost measured.
		for i := range min(c.Instances, 1000) {
			if _, err := keys.DataKey(ctx, SubjectOf(i), true); err != nil {
				return nil, err
			}
		}
		opts.Keys = keys
	}
	if c.Checkpoints > 0 {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		signer, err := chronicle.NewEd25519Signer("bench", key)
		if err != nil {
			return nil, err
		}
		opts.Checkpoints = &chronicle.CheckpointOptions{Signer: signer, Interval: c.Checkpoints, EndDelay: c.Checkpoints}
		if c.Publish != "" {
			if err := os.MkdirAll(c.Publish, 0o755); err != nil {
				return nil, err
			}
			path, err := os.MkdirTemp(c.Publish, "run-")
			if err != nil {
				return nil, err
			}
			dir, err := chronicle.NewDirPublisher(path)
			if err != nil {
				return nil, err
			}
			opts.Checkpoints.Publishers = []chronicle.Publisher{dir}
		}
	}
	e, err := chronicle.New(store, opts)
	if err != nil {
		return nil, err
	}
	if err := Register(e); err != nil {
		return nil, err
	}
	if c.Workload == Start {
		return starts(ctx, e, c)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() {
		stop()
		// Run returns nil once runCtx ends; anything else is a failure of
		// the engine that the numbers must not hide.
		if runErr := <-done; runErr != nil && err == nil {
			err = fmt.Errorf("bench: engine: %w", runErr)
		}
	}()

	peak := watchHeap(runCtx)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	res := &Result{Workload: c.Workload, Instances: c.Instances}
	switch c.Workload {
	case W1, W2, Backlog:
		request := func(i int) chronicle.StartRequest {
			if c.Workload == W2 {
				r := chronicle.StartRequest{Workflow: "fanout", Input: i}
				if c.Attributes {
					r.Options = &chronicle.StartOptions{SearchAttributes: StartAttributes(i)}
				}
				return r
			}
			return startRequest(&c, i)
		}
		ids := make([]string, c.Instances)
		started := make([]time.Time, c.Instances)
		if c.StartMany {
			reqs := make([]chronicle.StartRequest, c.Instances)
			for i := range reqs {
				reqs[i] = request(i)
			}
			if ids, err = e.StartMany(ctx, reqs); err != nil {
				return nil, err
			}
			for i := range started {
				started[i] = time.Now()
			}
		} else {
			for i := range ids {
				r := request(i)
				if ids[i], err = e.Start(ctx, r.Workflow, r.Input, r.Options); err != nil {
					return nil, err
				}
				started[i] = time.Now()
			}
		}
		res.StartDuration = time.Since(start)
		for _, id := range ids {
			inst, err := e.Wait(ctx, id)
			if err != nil {
				return nil, err
			}
			if inst.Status != chronicle.StatusCompleted {
				return nil, fmt.Errorf("bench: %s ended %s: %v", id, inst.Status, inst.Failure)
			}
			res.Workflows++
		}
		if c.Workload == Backlog {
			obs.mu.Lock()
			for i, id := range ids {
				// The observer hears of a round after its commit, so Wait
				// may have seen the last completion first.
				done, ok := obs.completed[id]
				if !ok {
					done = time.Now()
				}
				obs.latencies = append(obs.latencies, done.Sub(started[i]))
			}
			obs.mu.Unlock()
		}
	case W3, W4:
		if err := signals(ctx, e, obs, c.Workload, c.Instances); err != nil {
			return nil, err
		}
		res.Workflows = c.Instances
		if c.Workload == W4 {
			w := min(WindowW4, c.Instances/2)
			res.P50First, res.P50Last = median(obs.latencies[:w]), median(obs.latencies[len(obs.latencies)-w:])
		}
	case Idle:
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		for i := 0; i < c.Instances; i++ {
			id := fmt.Sprintf("bench-idle-%d", i)
			if _, err := e.Start(ctx, "listener", 1, &chronicle.StartOptions{InstanceID: id}); err != nil {
				return nil, err
			}
		}
		for i := 0; i < c.Instances; i++ {
			if err := settle(ctx, e, fmt.Sprintf("bench-idle-%d", i), 2); err != nil {
				return nil, err
			}
		}
		runtime.GC()
		var parked runtime.MemStats
		runtime.ReadMemStats(&parked)
		res.Workflows = c.Instances
		// Goroutine stacks of cached executors count too.
		used := func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc + m.StackInuse) }
		res.BytesPerIdle = (used(&parked) - used(&base)) / float64(c.Instances)
	default:
		return nil, fmt.Errorf("bench: unknown workload %q (W1, W2, W3, W4, BACKLOG, START or IDLE)", c.Workload)
	}
	res.Duration = time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.Rounds, res.Activities, res.ColdRounds = obs.rounds.Load(), obs.activities.Load(), obs.cold.Load()
	if res.Rounds > 0 {
		res.AllocsPerRound = float64(after.Mallocs-before.Mallocs) / float64(res.Rounds)
	}
	if cs, ok := store.(provider.CheckpointStore); ok && c.Checkpoints > 0 {
		if latest, err := cs.LatestCheckpoint(ctx); err == nil {
			res.Checkpoints = latest.Number
		}
	}
	stop()
	res.PeakHeap = <-peak
	if len(obs.latencies) > 0 {
		slices.Sort(obs.latencies)
		res.P50 = obs.latencies[len(obs.latencies)/2]
		res.P99 = obs.latencies[min(len(obs.latencies)-1, len(obs.latencies)*99/100)]
	}
	res.PeakRSS = peakRSS()
	return res, nil
}

// median returns the median of ds, which it leaves as it was.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// peakRSS reads the process's peak resident set from /proc/self/status;
// 0 where there is none.
func peakRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}

// starts starts c.Instances workflows with generated ids, one Start call
// after the other, on an engine that does not run.
func starts(ctx context.Context, e *chronicle.Engine, c Config) (*Result, error) {
	res := &Result{Workload: c.Workload, Instances: c.Instances}
	begin := time.Now()
	for i := 0; i < c.Instances; i++ {
		if _, err := e.Start(ctx, "sequence", i, nil); err != nil {
			return nil, err
		}
	}
	res.Duration = time.Since(begin)
	res.StartDuration, res.Workflows, res.PeakRSS = res.Duration, c.Instances, peakRSS()
	return res, nil
}

// signals raises n signals, one at a time, on a workflow that waits for
// them in a loop, and records for each, in order, how long until its round
// ran.
func signals(ctx context.Context, e *chronicle.Engine, obs *observer, workload string, n int) error {
	id, err := e.Start(ctx, "listener", n, &chronicle.StartOptions{InstanceID: "bench-" + workload})
	if err != nil {
		return err
	}
	// Wait until the workflow waits, so the first latency is a resume.
	if err := settle(ctx, e, id, 2); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		obs.mu.Lock()
		obs.raised[id] = time.Now()
		obs.mu.Unlock()
		if err := e.RaiseEvent(ctx, id, "ping", i, nil); err != nil {
			return err
		}
		select {
		case <-obs.resumed:
		case <-ctx.Done():
			return fmt.Errorf("bench: signal %d not processed: %w", i, ctx.Err())
		}
	}
	inst, err := e.Wait(ctx, id)
	if err != nil {
		return err
	}
	if inst.Status != chronicle.StatusCompleted {
		return fmt.Errorf("bench: listener ended %s", inst.Status)
	}
	return nil
}

// settle waits until an instance's history holds at least n events.
func settle(ctx context.Context, e *chronicle.Engine, id string, n int) error {
	for {
		events, err := e.History(ctx, id)
		if err == nil && len(events) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// watchHeap samples the heap in use until ctx ends and sends the peak.
func watchHeap(ctx context.Context) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-ctx.Done():
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// Register registers the workloads' workflows and their activity, which
// does no work: "sequence" (W1: three activities in turn),
// "sequence-keyed" (W1 with a concurrency limit of one on its activities'
// key: Config.ActivityLimitKeys), "fanout" (W2: twenty in parallel) and
// "listener" (W3: waits for n "ping" signals).
// The comparison benchmark registers the same.
func Register(e *chronicle.Engine) error {
	noop := func(_ context.Context, n int) (int, error) { return n + 1, nil }
	return firstErr(
		chronicle.RegisterActivity(e, "step", noop),
		chronicle.RegisterWorkflow(e, "sequence", func(ctx *chronicle.Context, n int) (int, error) {
			for i := 0; i < 3; i++ {
				var err error
				if n, err = chronicle.CallActivity[int](ctx, "step", n, nil); err != nil {
					return 0, err
				}
			}
			return n, nil
		}),
		chronicle.RegisterWorkflow(e, "sequence-keyed", func(ctx *chronicle.Context, in KeyedInput) (int, error) {
			opts := &chronicle.ActivityOptions{Concurrency: &chronicle.Concurrency{Key: in.Key, Limit: 1}}
			n := in.N
			for i := 0; i < 3; i++ {
				var err error
				if n, err = chronicle.CallActivity[int](ctx, "step", n, opts); err != nil {
					return 0, err
				}
			}
			return n, nil
		}),
		chronicle.RegisterWorkflow(e, "fanout", func(ctx *chronicle.Context, n int) (int, error) {
			fs := make([]chronicle.Future, 20)
			for i := range fs {
				fs[i] = ctx.CallActivity("step", n+i, nil)
			}
			return n, ctx.WhenAll(fs...)
		}),
		chronicle.RegisterWorkflow(e, "listener", func(ctx *chronicle.Context, n int) (int, error) {
			for i := 0; i < n; i++ {
				if _, err := chronicle.WaitEvent[int](ctx, "ping", nil); err != nil {
					return 0, err
				}
			}
			return n, nil
		}),
	)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
