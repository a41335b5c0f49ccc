package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// dbosDriver runs DBOS Transact on its system database, the run's
// database, with DBOS's default configuration (its logger aside, which
// logs warnings and errors only, as Chronicle's does).
var dbosDriver = driver{
	name: "dbos",
	migrate: func(ctx context.Context, url string) error {
		// NewContext migrates the system database.
		dctx, err := dbos.NewContext(ctx, dbosConfig(url))
		if err != nil {
			return err
		}
		return dbos.Shutdown(dctx, 30*time.Second)
	},
	open: openDBOS,
}

// dbosConfig is the configuration of DBOS on the database at url.
func dbosConfig(url string) dbos.Config {
	return dbos.Config{
		AppName:     "compare",
		DatabaseURL: url,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// dbosSystem is a launched DBOS context.
type dbosSystem struct {
	ctx  dbos.Context
	seen chan struct{}
}

func openDBOS(ctx context.Context, url string, _ Config) (system, error) {
	dctx, err := dbos.NewContext(context.WithoutCancel(ctx), dbosConfig(url))
	if err != nil {
		return nil, err
	}
	s := &dbosSystem{ctx: dctx}
	dbos.RegisterWorkflow(dctx, dbosSequence, dbos.WithWorkflowName("sequence"))
	dbos.RegisterWorkflow(dctx, dbosFanout, dbos.WithWorkflowName("fanout"))
	dbos.RegisterWorkflow(dctx, s.listener, dbos.WithWorkflowName("listener"))
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	return s, nil
}

// dbosStep is the activity of W1 and W2, a step that does no work.
func dbosStep(n int) dbos.Step[int] {
	return func(context.Context) (int, error) { return n + 1, nil }
}

// dbosSequence is W1's workflow: three steps, one after the other.
func dbosSequence(ctx dbos.Context, n int) (int, error) {
	for range 3 {
		var err error
		if n, err = dbos.RunAsStep(ctx, dbosStep(n), dbos.WithStepName("step")); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// dbosFanout is W2's workflow: twenty steps at once, each started with
// dbos.Go (a step in a goroutine of its own, its step id drawn
// deterministically before it starts), waited for all.
func dbosFanout(ctx dbos.Context, n int) (int, error) {
	chans := make([]<-chan dbos.StepOutcome[int], 20)
	for i := range chans {
		ch, err := dbos.Go(ctx, dbosStep(n+i), dbos.WithStepName("step"))
		if err != nil {
			return 0, err
		}
		chans[i] = ch
	}
	for _, ch := range chans {
		if out := <-ch; out.Err != nil {
			return 0, out.Err
		}
	}
	return n, nil
}

// listener is W3's workflow: it receives n signals in turn and tells of
// each once Recv returned it (Recv consumes the message in a step).
func (s *dbosSystem) listener(ctx dbos.Context, n int) (int, error) {
	s.seen <- struct{}{} // waiting for the first
	for range n {
		if _, err := dbos.Recv[int](ctx, "ping", time.Minute); err != nil {
			return 0, err
		}
		s.seen <- struct{}{}
	}
	return n, nil
}

func (s *dbosSystem) start(ctx context.Context, workload, id string, input int) error {
	fn := map[string]dbos.Workflow[int, int]{W1: dbosSequence, W2: dbosFanout}[workload]
	_, err := dbos.RunWorkflow(s.ctx, fn, input, dbos.WithWorkflowID(id))
	return err
}

func (s *dbosSystem) ended(ctx context.Context, id string) (bool, error) {
	ws, err := dbos.ListWorkflows(s.ctx, dbos.WithFilterWorkflowIDs(id), dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return false, err
	}
	if len(ws) != 1 {
		return false, fmt.Errorf("%d workflows with id %s", len(ws), id)
	}
	switch ws[0].Status {
	case dbos.WorkflowStatusSuccess:
		return true, nil
	case dbos.WorkflowStatusError, dbos.WorkflowStatusCancelled, dbos.WorkflowStatusMaxRecoveryAttemptsExceeded:
		return true, fmt.Errorf("%w: %s %v", errEnded, ws[0].Status, ws[0].Error)
	}
	return false, nil
}

func (s *dbosSystem) listen(ctx context.Context, id string, n int) error {
	s.seen = make(chan struct{}, n+1)
	if _, err := dbos.RunWorkflow(s.ctx, s.listener, n, dbos.WithWorkflowID(id)); err != nil {
		return err
	}
	select {
	case <-s.seen:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *dbosSystem) signal(_ context.Context, id string, i int) error {
	return dbos.Send(s.ctx, id, i, "ping")
}

func (s *dbosSystem) resumed() <-chan struct{} { return s.seen }

func (s *dbosSystem) close(context.Context) error {
	return dbos.Shutdown(s.ctx, 30*time.Second)
}
