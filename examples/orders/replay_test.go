package main

import (
	"context"
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

// historiesDir holds the histories of the demo's four orders (settled
// after a payment retry, settled after an approval, cancelled by the
// customer, expired), as `chronicle history export` writes them. `go test
// ./examples/orders -run TestRecordedHistoriesReplay -record` records them
// again (after a change of the workflow that is meant to change history,
// say).
const historiesDir = "testdata/histories"

var record = flag.Bool("record", false, "record "+historiesDir+" again by running the demo")

// replayEngine returns an engine that only replays: on an empty store,
// with the order workflow as the demo registers it, or order under the
// same name when it is not nil. Replay runs no activity, so none is
// registered.
func replayEngine(t *testing.T, order func(*chronicle.Context, Order) (Result, error)) *chronicle.Engine {
	t.Helper()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "replay", SearchAttributes: searchAttributes})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	if order == nil {
		order = demoWorkflows(nil).order
	}
	require.NoError(t, orderWorkflow.Register(e, order))
	return e
}

// recordHistories runs the demo and writes the history of each order to
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

// TestRecordedHistoriesReplay is the replay test a shop keeps in CI: every
// recorded order must replay against the code as it is now.
func TestRecordedHistoriesReplay(t *testing.T) {
	if *record {
		recordHistories(t)
	}
	sum := chronicletest.Replay(t, replayEngine(t, nil), historiesDir)
	require.Len(t, sum.Results, len(orders))
	for _, r := range sum.Results {
		require.True(t, r.Ended, "%s ended in history", r.InstanceID)
		require.Equal(t, string(orderWorkflow), r.Workflow, "%s", r.InstanceID)
	}
}

// TestReplayFindsAnIncompatibleChange replays the recorded orders against
// the workflow with a fraud check added, as is, for large orders: an
// activity before the stock is reserved. Each large order diverges where
// history holds the first step of the old code, and the replay names it;
// the small order, which takes the path it took before, replays. Guarded
// with Version, the same change replays: recorded orders go on without the
// check, new ones get it.
func TestReplayFindsAnIncompatibleChange(t *testing.T) {
	t.Parallel()
	w := demoWorkflows(nil)
	fraudCheck := func(ctx *chronicle.Context, o Order) error {
		if o.Total < approvalThreshold {
			return nil
		}
		_, err := chronicle.CallActivity[string](ctx, "fraud-check", o.ID, nil)
		return err
	}
	unguarded := func(ctx *chronicle.Context, o Order) (Result, error) {
		if err := fraudCheck(ctx, o); err != nil {
			return Result{}, err
		}
		return w.order(ctx, o)
	}
	guarded := func(ctx *chronicle.Context, o Order) (Result, error) {
		if ctx.Version("fraud-check", chronicle.DefaultVersion, 1) == 1 {
			if err := fraudCheck(ctx, o); err != nil {
				return Result{}, err
			}
		}
		return w.order(ctx, o)
	}

	sum, err := replayEngine(t, unguarded).ReplayHistories(context.Background(), chronicle.HistoryDir(historiesDir))
	require.NoError(t, err)
	require.Len(t, sum.Results, len(orders))
	diverged := map[string]string{}
	for _, r := range sum.Results {
		if r.Divergence != nil {
			diverged[r.InstanceID] = r.Divergence.Error()
		} else {
			require.NoError(t, r.Problem(), "%s is a small order, unchanged", r.InstanceID)
		}
	}
	want := map[string]string{}
	for _, id := range []string{"ORD-1002", "ORD-1003", "ORD-1004"} {
		want[id] = `chronicle: nondeterminism in ` + id + ` at seq 3: history holds CustomStatusSet, code asked for ActivityScheduled "fraud-check"`
	}
	require.Equal(t, want, diverged)
	var nd *chronicle.NondeterminismError
	require.ErrorAs(t, sum.Err(), &nd)

	sum = chronicletest.Replay(t, replayEngine(t, guarded), historiesDir)
	ok, _, _, _ := sum.Counts()
	require.Equal(t, len(orders), ok)
}
