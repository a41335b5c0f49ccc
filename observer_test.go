package chronicle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu         sync.Mutex
	rounds     []chronicle.RoundStats
	activities []chronicle.ActivityStats
}

func (r *recorder) Round(s chronicle.RoundStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, s)
}

func (r *recorder) Activity(s chronicle.ActivityStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activities = append(r.activities, s)
}

func TestObserverNamesInstanceAndExecution(t *testing.T) {
	t.Parallel()

	t.Run("RoundsAndAttempts", func(t *testing.T) {
		t.Parallel()
		obs := &recorder{}
		b := setup(t, chronicle.Options{Observer: obs})
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
		b.start(t, "wf", "i", "x")
		b.drain(t)
		b.advance(t, time.Second)
		require.Equal(t, "ok", result[string](t, b, "i"))
		exec := b.describe(t, "i").ExecutionID
		require.NotEmpty(t, exec)

		require.Len(t, obs.rounds, 2, "the start's round and the result's round")
		for _, s := range obs.rounds {
			require.Equal(t, "i", s.InstanceID)
			require.Equal(t, exec, s.ExecutionID)
			require.NoError(t, s.Err)
		}
		require.Equal(t, chronicle.StatusCompleted, obs.rounds[1].Status)
		require.True(t, obs.rounds[0].Cold, "a new instance's first round reads it from the store")
		require.False(t, obs.rounds[1].Cold, "the next finds its executor cached")
		require.Len(t, obs.activities, 2)
		for i, outcome := range []string{"retry", "completed"} {
			s := obs.activities[i]
			require.Equal(t, outcome, s.Outcome)
			require.Equal(t, i+1, s.Attempt)
			require.Equal(t, "flaky", s.Name)
			require.Equal(t, "i", s.InstanceID)
			require.Equal(t, exec, s.ExecutionID)
		}
		require.Equal(t, obs.activities[0].TaskID, obs.activities[1].TaskID)
	})

	t.Run("ColdWithoutACache", func(t *testing.T) {
		t.Parallel()
		obs := &recorder{}
		b := setup(t, chronicle.Options{Observer: obs, CacheSize: -1})
		activity(t, b.engine, "echo", func(_ context.Context, in string) (string, error) { return in, nil })
		register(t, b.engine, "wf", func(ctx *chronicle.Context, in string) (string, error) {
			return chronicle.CallActivity[string](ctx, "echo", in, nil)
		})
		b.start(t, "wf", "i", "x")
		b.drain(t)
		require.Equal(t, "x", result[string](t, b, "i"))
		require.Len(t, obs.rounds, 2)
		for _, s := range obs.rounds {
			require.True(t, s.Cold, "no executor is kept between rounds")
		}
	})

	t.Run("DeadLetteredStartNamesItsExecution", func(t *testing.T) {
		t.Parallel()
		obs := &recorder{}
		b := setup(t, chronicle.Options{Observer: obs})
		client := b.newEngine(t) // knows the workflow; the worker does not
		register(t, client, "echo", echo)
		_, err := client.Start(b.ctx, "echo", "x", &chronicle.StartOptions{InstanceID: "i"})
		require.NoError(t, err)
		b.drain(t)
		inst := b.describe(t, "i")
		require.Equal(t, chronicle.StatusPending, inst.Status)
		require.NotEmpty(t, inst.Incident)
		require.Len(t, obs.rounds, 1)
		s := obs.rounds[0]
		require.Equal(t, 1, s.DeadLettered)
		require.Equal(t, inst.ExecutionID, s.ExecutionID, "the execution the start message names")
	})
}

func TestLogRecordsNameInstanceAndExecution(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := setup(t, chronicle.Options{Logger: logger})
	failures := 1
	activity(t, b.engine, "flaky", func(context.Context, string) (string, error) {
		if failures > 0 {
			failures--
			return "", errors.New("bureau unavailable")
		}
		return "ok", nil
	})
	register(t, b.engine, "wf", func(ctx *chronicle.Context, in string) (string, error) {
		ctx.Logger().Info("calling the bureau")
		if _, err := chronicle.CallActivity[string](ctx, "flaky", in, nil); err != nil {
			return "", err
		}
		return chronicle.CallActivity[string](ctx, "unregistered", in, nil)
	})
	b.start(t, "wf", "i", "x")
	b.drain(t)
	b.advance(t, time.Second)
	exec := b.describe(t, "i").ExecutionID

	seen := map[string]bool{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		require.NoError(t, dec.Decode(&rec))
		msg := rec["msg"].(string)
		seen[msg] = true
		require.Equal(t, "i", rec["instance_id"], "record %q", msg)
		require.Equal(t, exec, rec["execution_id"], "record %q", msg)
	}
	for _, msg := range []string{"calling the bureau", "activity attempt failed", "activity dead-lettered"} {
		require.True(t, seen[msg], "no record %q among %v", msg, seen)
	}
}
