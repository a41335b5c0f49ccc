package chronicle_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

func TestDefaultLoggerWarnsOnStderr(t *testing.T) {
	t.Parallel()
	logger := chronicle.Options{}.WithDefaults().Logger
	require.True(t, logger.Enabled(context.Background(), slog.LevelWarn))
	require.True(t, logger.Enabled(context.Background(), slog.LevelError))
	require.False(t, logger.Enabled(context.Background(), slog.LevelInfo), "only warnings and errors by default")
}

// TestProjectionFoldErrorIsSeen checks that a custom projection whose fold
// fails, which blocks its instance's rounds, shows on standard error with
// the default logger, in CheckHealth as a failing round and, once
// dead-lettered, as an incident.
func TestProjectionFoldErrorIsSeen(t *testing.T) {
	// Not parallel: it points os.Stderr at a file while the engine's
	// default logger is made.
	path := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	stderr := os.Stderr
	os.Stderr = f
	b := setup(t) // default logger
	os.Stderr = stderr

	register(t, b.engine, "claim", func(ctx *chronicle.Context, _ string) (string, error) {
		return chronicle.WaitEvent[string](ctx, "go", nil)
	})
	require.NoError(t, chronicle.RegisterProjection(b.engine, "claims", 1, func(n int, e *chronicle.Event) (int, error) {
		if e.Kind == history.KindEventRaised {
			return n, errors.New("fold claims: cannot count the signal")
		}
		return n + 1, nil
	}))
	b.start(t, "claim", "c-1", "")
	b.drain(t)
	rep, err := b.engine.CheckHealth(b.ctx)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, 1, rep.Instances)

	require.NoError(t, b.engine.RaiseEvent(b.ctx, "c-1", "go", "!", nil))
	b.drain(t)
	logged, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(logged), "level=WARN")
	require.Contains(t, string(logged), "cannot count the signal", "the fold error reaches stderr")

	rep, err = b.engine.CheckHealth(b.ctx)
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Len(t, rep.FailingRounds, 1)
	require.Equal(t, "c-1", rep.FailingRounds[0].InstanceID)
	require.Equal(t, 1, rep.FailingRounds[0].Attempts)
	require.Contains(t, rep.FailingRounds[0].LastError, "cannot count the signal")

	for i := 0; i < 5; i++ {
		b.advance(t, time.Minute)
	}
	rep, err = b.engine.CheckHealth(b.ctx)
	require.NoError(t, err)
	require.Empty(t, rep.FailingRounds)
	require.Len(t, rep.DeadLetters, 1)
	require.Len(t, rep.Incidents, 1, "the incidents list shows the fold error")
	require.Equal(t, "c-1", rep.Incidents[0].ID)
	require.Contains(t, rep.Incidents[0].Incident, "cannot count the signal")
	list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{})
	require.NoError(t, err)
	require.Contains(t, list[0].Incident, "cannot count the signal")
}
