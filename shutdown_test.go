package chronicle_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
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
	var logs logBuffer
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "stopping",
		ShutdownTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
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
	require.Contains(t, logs.String(), "cancelling work in flight")
	require.Contains(t, logs.String(), "abandoning work that ignores its cancellation")
	events, err := e.History(context.Background(), "hung")
	require.NoError(t, err)
	require.Zero(t, count(events, history.KindActivityCompleted), "the abandoned attempt recorded nothing")
	in, err := e.Describe(context.Background(), "hung")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusRunning, in.Status)
}

// logBuffer collects log output written from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
