package chronicle_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenHistory returns the stored golden history of a workflow, recording
// it first with -update.
func goldenHistory(t *testing.T, name string, record func(t *testing.T) []history.Event) []history.Event {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".jsonl")
	if *update && record != nil {
		var buf bytes.Buffer
		require.NoError(t, history.WriteJSONL(&buf, record(t)))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	f, err := os.Open(path)
	require.NoError(t, err, "run go test -run TestGolden -update to record it")
	defer f.Close()
	events, err := history.ReadJSONL(f)
	require.NoError(t, err)
	require.NoError(t, history.Verify(events))
	return events
}

// TestGoldenHistoriesReplay proves that the current code of the example
// workflows still replays histories recorded by earlier versions.
func TestGoldenHistoriesReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registerLoan(t, b.engine)
	register(t, b.engine, "review", reviewWorkflow)
	goldens := map[string]func(t *testing.T) []history.Event{
		"loan": func(t *testing.T) []history.Event {
			rb := setup(t)
			registerLoan(t, rb.engine)
			return runLoan(t, rb, nil)
		},
		"review": func(t *testing.T) []history.Event {
			rb := setup(t)
			register(t, rb.engine, "review", reviewWorkflow)
			rb.start(t, "review", "claim-7", claimReview{Claim: "C-7", Amount: 800})
			rb.drain(t)
			require.NoError(t, rb.engine.ClaimTask(rb.ctx, "review-C-7", chronicle.User{ID: "ana", Roles: []string{"adjuster"}}))
			rb.drain(t)
			require.NoError(t, rb.engine.CompleteTask(rb.ctx, "review-C-7", "approve", chronicle.User{ID: "ana"}))
			rb.drain(t)
			return rb.history(t, "claim-7")
		},
	}
	for name, record := range goldens {
		events := goldenHistory(t, name, record)
		rep := b.engine.ReplayHistory(events)
		require.True(t, rep.OK(), "%s: divergence %v, error %v", name, rep.Divergence, rep.Err)
		require.True(t, rep.Ended, name)
		require.NotEmpty(t, rep.Turns)
		require.NotEmpty(t, rep.Output)
	}
}

// TestGoldenHistoryAfterIncompatibleChange shows what an operator sees
// when a deploy breaks old histories: the first divergent seq.
func TestGoldenHistoryAfterIncompatibleChange(t *testing.T) {
	t.Parallel()
	events := goldenHistory(t, "loan", nil)
	b := setup(t)
	activity(t, b.engine, "score", func(_ context.Context, amount int) (int, error) { return amount / 100, nil })
	register(t, b.engine, "loan", func(ctx *chronicle.Context, amount int) (string, error) {
		score, err := chronicle.CallActivity[int](ctx, "score", amount, nil)
		if err != nil {
			return "", err
		}
		// The change: documents are no longer awaited; a fraud check runs.
		if _, err := chronicle.CallActivity[int](ctx, "fraud-check", score, nil); err != nil {
			return "", err
		}
		return "", ctx.Sleep(time.Hour)
	})
	rep := b.engine.ReplayHistory(events)
	require.False(t, rep.OK())
	require.NotNil(t, rep.Divergence)
	require.Equal(t, int64(6), rep.Divergence.Seq)
	require.Equal(t, "CustomStatusSet", rep.Divergence.History)
	require.Equal(t, `ActivityScheduled "fraud-check"`, rep.Divergence.Code)
	require.Len(t, rep.Turns, 2, "the turns before the divergence")
	require.Equal(t, []string{`#3 ActivityScheduled "score"`}, rep.Turns[0].Commands)
	require.False(t, rep.Ended)
}
