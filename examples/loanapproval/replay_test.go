package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// historiesDir holds histories recorded by running the demo, as `chronicle
// history export` writes them. `go test ./examples/loanapproval -run
// TestRecordedHistoriesReplay -record` records them again (after a change
// of the workflow that is meant to change history, say).
const historiesDir = "testdata/histories"

var record = flag.Bool("record", false, "record "+historiesDir+" again by running the demo")

// replayEngine returns an engine that only replays: on an empty store,
// with the demo's registrations and loan-approval replaced by loan when
// it is not nil.
func replayEngine(t *testing.T, loan func(*chronicle.Context, Application) (Decision, error)) *chronicle.Engine {
	t.Helper()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "replay"})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	out := newConsole(io.Discard)
	w := &workflows{out: out}
	if loan == nil {
		require.NoError(t, register(e, &activities{out: out}, w))
		return e
	}
	require.NoError(t, errors.Join(
		chronicle.RegisterWorkflow(e, loanApprovalWorkflow, loan),
		chronicle.RegisterWorkflow(e, propertyValuationWorkflow, w.propertyValuation),
	))
	return e
}

// recordHistories runs the demo and writes every history it made to
// historiesDir, replacing what was there.
func recordHistories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := demo(ctx, io.Discard)
	require.NoError(t, err)
	old, err := filepath.Glob(filepath.Join(historiesDir, "*.jsonl"))
	require.NoError(t, err)
	for _, f := range old {
		require.NoError(t, os.Remove(f))
	}
	archive := chronicle.ArchiveJSONL(historiesDir)
	for id, events := range res.Histories {
		require.NoError(t, archive(ctx, id, events))
	}
	t.Logf("recorded %d histories in %s", len(res.Histories), historiesDir)
}

// TestRecordedHistoriesReplay is the replay test a product keeps in CI:
// every recorded history must replay against the code as it is now.
func TestRecordedHistoriesReplay(t *testing.T) {
	if *record {
		recordHistories(t)
	}
	sum := chronicletest.Replay(t, replayEngine(t, nil), historiesDir)
	// Both applications and their property-valuation children.
	require.Len(t, sum.Results, 4)
	for _, r := range sum.Results {
		require.True(t, r.Ended, "%s ended in history", r.InstanceID)
	}
}

// fraudCheck is a change of the workflow: a new activity before the credit
// check. Instances recorded before it asked for the credit check first.
func fraudCheck(ctx *chronicle.Context, app Application) error {
	_, err := chronicle.CallActivity[bool](ctx, "fraud-check", app.ID, nil)
	return err
}

// TestReplayFindsAnIncompatibleChange replays the recorded histories
// against the workflow with the fraud check added as is: each application
// diverges where history holds the credit check, and the test names it.
// Guarded with Version, the same change replays: recorded instances go on
// without the check, new ones get it.
func TestReplayFindsAnIncompatibleChange(t *testing.T) {
	t.Parallel()
	w := &workflows{out: newConsole(io.Discard)}
	unguarded := func(ctx *chronicle.Context, app Application) (Decision, error) {
		if err := fraudCheck(ctx, app); err != nil {
			return Decision{}, err
		}
		return w.loanApproval(ctx, app)
	}
	guarded := func(ctx *chronicle.Context, app Application) (Decision, error) {
		if ctx.Version("fraud-check", chronicle.DefaultVersion, 1) == 1 {
			if err := fraudCheck(ctx, app); err != nil {
				return Decision{}, err
			}
		}
		return w.loanApproval(ctx, app)
	}

	sum, err := replayEngine(t, unguarded).ReplayHistories(context.Background(), chronicle.HistoryDir(historiesDir))
	require.NoError(t, err)
	require.Len(t, sum.Results, 4)
	diverged := map[string]string{}
	for _, r := range sum.Results {
		if r.Divergence != nil {
			diverged[r.InstanceID] = r.Divergence.Error()
		} else {
			require.NoError(t, r.Problem(), "the children are unchanged")
		}
	}
	require.Equal(t, map[string]string{
		"APP-1001": `chronicle: nondeterminism in APP-1001 at seq 3: history holds ActivityScheduled "credit-check", code asked for ActivityScheduled "fraud-check"`,
		"APP-1002": `chronicle: nondeterminism in APP-1002 at seq 3: history holds ActivityScheduled "credit-check", code asked for ActivityScheduled "fraud-check"`,
	}, diverged)
	var nd *chronicle.NondeterminismError
	require.ErrorAs(t, sum.Err(), &nd)

	chronicletest.Replay(t, replayEngine(t, guarded), historiesDir)
}
