package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

// chronicleDriver runs Chronicle on its PostgreSQL store, in the store's
// default schema of the run's database, with the engine's default options
// (Config's worker counts aside, when set).
var chronicleDriver = driver{
	name: "chronicle",
	migrate: func(ctx context.Context, url string) error {
		store, err := postgres.Open(ctx, url, postgres.Options{MigrateOnStart: true})
		if err != nil {
			return err
		}
		store.Close()
		return nil
	},
	open: openChronicle,
}

// chronicleSystem is a running Chronicle engine.
type chronicleSystem struct {
	store  *postgres.Store
	engine *chronicle.Engine
	stop   context.CancelFunc
	done   chan error
	obs    *listenerObserver
	// counter, with -statements, counts the statements of the store's
	// pool, which the system then owns.
	counter *statementCounter
}

// listenerObserver tells of every committed round of W3's listener that
// processed messages: its start, then each signal.
type listenerObserver struct {
	mu   sync.Mutex
	id   string
	seen chan struct{}
}

// Round implements chronicle.Observer.
func (o *listenerObserver) Round(s chronicle.RoundStats) {
	if s.Err != nil || s.Processed == 0 {
		return
	}
	o.mu.Lock()
	id, seen := o.id, o.seen
	o.mu.Unlock()
	if id != "" && s.InstanceID == id {
		select {
		case seen <- struct{}{}:
		default: // the harness waits for no more than the buffer holds; never block the engine
		}
	}
}

// Activity implements chronicle.Observer.
func (o *listenerObserver) Activity(chronicle.ActivityStats) {}

func openChronicle(ctx context.Context, url string, c Config) (system, error) {
	opts := postgres.Options{URL: url}
	var counter *statementCounter
	if c.Statements != nil {
		var err error
		if counter, err = openCountedPool(ctx, url); err != nil {
			return nil, err
		}
		opts = postgres.Options{Pool: counter.pool}
	}
	store, err := postgres.New(ctx, opts)
	if err != nil {
		if counter != nil {
			counter.pool.Close()
		}
		return nil, err
	}
	obs := &listenerObserver{}
	e, err := chronicle.New(store, chronicle.Options{
		NodeID: "compare", Observer: obs,
		OrchestrationWorkers: c.ChronicleOrchestrationWorkers, ActivityWorkers: c.ChronicleActivityWorkers,
		EagerActivities: c.ChronicleEagerActivities,
	})
	if err == nil {
		err = bench.Register(e)
	}
	if err != nil {
		store.Close()
		if counter != nil {
			counter.pool.Close()
		}
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &chronicleSystem{store: store, engine: e, stop: stop, done: make(chan error, 1), obs: obs, counter: counter}
	go func() { s.done <- e.Run(runCtx) }()
	return s, nil
}

func (s *chronicleSystem) start(ctx context.Context, workload, id string, input int) error {
	name := map[string]string{W1: "sequence", W2: "fanout"}[workload]
	_, err := s.engine.Start(ctx, name, input, &chronicle.StartOptions{InstanceID: id})
	return err
}

func (s *chronicleSystem) ended(ctx context.Context, id string) (bool, error) {
	inst, err := s.engine.Describe(ctx, id)
	if err != nil {
		return false, err
	}
	switch inst.Status {
	case chronicle.StatusCompleted:
		return true, nil
	case chronicle.StatusFailed, chronicle.StatusTerminated:
		return true, fmt.Errorf("%w: %s %s", errEnded, inst.Status, inst.LastError)
	}
	return false, nil
}

func (s *chronicleSystem) listen(ctx context.Context, id string, n int) error {
	s.obs.mu.Lock()
	s.obs.id, s.obs.seen = id, make(chan struct{}, n+1)
	s.obs.mu.Unlock()
	if _, err := s.engine.Start(ctx, "listener", n, &chronicle.StartOptions{InstanceID: id}); err != nil {
		return err
	}
	// The first round runs the workflow up to its first wait.
	select {
	case <-s.obs.seen:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *chronicleSystem) signal(ctx context.Context, id string, i int) error {
	return s.engine.RaiseEvent(ctx, id, "ping", i, nil)
}

func (s *chronicleSystem) resumed() <-chan struct{} { return s.obs.seen }

func (s *chronicleSystem) close(context.Context) error {
	s.stop()
	err := <-s.done
	s.store.Close()
	if s.counter != nil {
		s.counter.pool.Close()
	}
	return err
}
