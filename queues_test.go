package chronicle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

func TestQueueStats(t *testing.T) {
	t.Parallel()
	b := setup(t, chronicle.Options{RetryJitter: func() float64 { return 0 }})
	failures := 1
	activity(t, b.engine, "flaky", func(context.Context, string) (string, error) {
		if failures > 0 {
			failures--
			return "", errors.New("bureau unavailable")
		}
		return "ok", nil
	})
	register(t, b.engine, "wf", func(ctx *chronicle.Context, in string) (string, error) {
		return chronicle.CallActivity[string](ctx, "flaky", in, nil)
	})
	stats := func() chronicle.QueueStats {
		t.Helper()
		s, err := b.engine.QueueStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, b.clock.Now(), s.At)
		return s
	}

	require.Equal(t, chronicle.QueueStats{At: t0}, stats(), "nothing queued")

	b.start(t, "wf", "i", "x")
	b.clock.Advance(3 * time.Second)
	s := stats()
	require.Equal(t, chronicle.QueueStat{Queued: true, Next: t0, OldestAge: 3 * time.Second}, s.Orchestration, "the start has waited 3s")
	require.False(t, s.Activity.Queued)

	b.drain(t) // the round schedules the activity; its first attempt fails
	s = stats()
	require.False(t, s.Orchestration.Queued)
	require.True(t, s.Activity.Queued, "the retry is queued")
	require.True(t, s.Activity.Next.After(s.At), "and not due yet")
	require.Zero(t, s.Activity.OldestAge)

	b.clock.Advance(2 * time.Second)
	s = stats()
	require.Equal(t, s.At.Sub(s.Activity.Next), s.Activity.OldestAge)
	require.Greater(t, s.Activity.OldestAge, time.Duration(0), "the retry is overdue")

	b.drain(t)
	require.Equal(t, "ok", result[string](t, b, "i"))
	require.Equal(t, chronicle.QueueStats{At: b.clock.Now()}, stats(), "nothing left")
}
