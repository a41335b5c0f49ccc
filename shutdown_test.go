package chronicle_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestRunReturnsWithinShutdownTimeout runs an activity that ignores its
// context and blocks until the test ends: Run, its context ended, still
// returns (ShutdownTimeout is 200ms; the test allows 10s), abandoning the
// attempt, whose result is not recorded.
func TestRunReturnsWithinShutdownTimeout(t *testing.T) {
	t.Parallel()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "stopping",
		ShutdownTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	// Released when the test ends, so that the hung goroutine ends too.
	t.Cleanup(func() { close(release) })
	require.NoError(t, chronicle.RegisterActivity(e, "hang", func(ctx context.Context, _ string) (string, error) {
		close(started)
		<-release // ignores ctx
		return "late", nil
	}))
	register(t, e, "wait-for-hang", func(ctx *chronicle.Context, in string) (string, error) {
		return chronicle.CallActivity[string](ctx, "hang", in, nil)
	})
	_, err = e.Start(context.Background(), "wait-for-hang", "x", &chronicle.StartOptions{InstanceID: "hung"})
	require.NoError(t, err)

	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		stop()
		t.Fatal("the activity did not start within 10s")
	}
	stop()
	select {
	case err := <-ran:
		require.NoError(t, err, "Run returns nil after its context ended")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end (ShutdownTimeout 200ms) while an activity ignores its context")
	}
	events, err := e.History(context.Background(), "hung")
	require.NoError(t, err)
	require.Zero(t, count(events, history.KindActivityCompleted), "the abandoned attempt recorded nothing")
	in, err := e.Describe(context.Background(), "hung")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusRunning, in.Status)
}
