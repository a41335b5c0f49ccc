package chronicle_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// The order workflow of the replay tests, in three versions: as recorded,
// changed incompatibly (a fraud check before the charge), and the same
// change guarded with Version.
func orderV1(ctx *chronicle.Context, amount int) (string, error) {
	receipt, err := chronicle.CallActivity[string](ctx, "charge", amount, nil)
	if err != nil {
		return "", err
	}
	if _, err := chronicle.WaitEvent[string](ctx, "shipped", nil); err != nil {
		return "", err
	}
	return receipt, nil
}

func orderFraudCheck(ctx *chronicle.Context, amount int) (string, error) {
	if _, err := chronicle.CallActivity[bool](ctx, "fraud-check", amount, nil); err != nil {
		return "", err
	}
	return orderV1(ctx, amount)
}

func orderFraudCheckVersioned(ctx *chronicle.Context, amount int) (string, error) {
	if ctx.Version("fraud-check", chronicle.DefaultVersion, 1) == 1 {
		if _, err := chronicle.CallActivity[bool](ctx, "fraud-check", amount, nil); err != nil {
			return "", err
		}
	}
	return orderV1(ctx, amount)
}

// recordOrders runs two orders with orderV1, one to its end and one
// waiting for its shipment, and exports their histories to a new folder.
func recordOrders(t *testing.T) (*bundle, string) {
	t.Helper()
	b := setup(t)
	register(t, b.engine, "order", orderV1)
	activity(t, b.engine, "charge", func(_ context.Context, amount int) (string, error) { return "RCPT-1", nil })
	b.start(t, "order", "ORD-1", 100)
	b.start(t, "order", "ORD-2", 200)
	b.drain(t)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "ORD-1", "shipped", "parcel", nil))
	b.drain(t)
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "ORD-1").Status)
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "ORD-2").Status)
	dir := t.TempDir()
	for _, id := range []string{"ORD-1", "ORD-2"} {
		var buf bytes.Buffer
		require.NoError(t, history.WriteJSONL(&buf, b.history(t, id)))
		require.NoError(t, os.WriteFile(chronicle.ArchivePath(dir, id), buf.Bytes(), 0o600))
	}
	return b, dir
}

// replayer returns an engine on an empty store with the order workflow fn
// registered, as a test of new code would make it.
func replayer(t *testing.T, fn func(*chronicle.Context, int) (string, error)) *chronicle.Engine {
	t.Helper()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	register(t, e, "order", fn)
	return e
}

func TestReplayHistoriesDir(t *testing.T) {
	t.Parallel()
	_, dir := recordOrders(t)
	ctx := context.Background()

	t.Run("SameCode", func(t *testing.T) {
		sum, err := replayer(t, orderV1).ReplayHistories(ctx, chronicle.HistoryDir(dir))
		require.NoError(t, err)
		require.NoError(t, sum.Err())
		require.Len(t, sum.Results, 2)
		for i, id := range []string{"ORD-1", "ORD-2"} {
			r := sum.Results[i]
			require.Equal(t, id, r.InstanceID)
			require.Equal(t, "order", r.Workflow)
			require.Equal(t, chronicle.ArchivePath(dir, id), r.Origin)
			require.Positive(t, r.Events)
		}
		require.True(t, sum.Results[0].Ended, "ORD-1 ended in history")
		require.False(t, sum.Results[1].Ended, "ORD-2 waits for its shipment")
	})

	t.Run("IncompatibleChangeNamesTheDivergence", func(t *testing.T) {
		sum, err := replayer(t, orderFraudCheck).ReplayHistories(ctx, chronicle.HistoryDir(dir))
		require.NoError(t, err)
		require.False(t, sum.OK())
		ok, skipped, diverged, failed := sum.Counts()
		require.Equal(t, [4]int{0, 0, 2, 0}, [4]int{ok, skipped, diverged, failed})
		for _, r := range sum.Results {
			require.NotNil(t, r.Divergence, r.InstanceID)
			require.Equal(t, r.InstanceID, r.Divergence.InstanceID)
			require.Equal(t, `ActivityScheduled "charge"`, r.Divergence.History)
			require.Equal(t, `ActivityScheduled "fraud-check"`, r.Divergence.Code)
			require.Equal(t, int64(3), r.Divergence.Seq, "after ExecutionStarted and TurnStarted")
		}
		err = sum.Err()
		var nd *chronicle.NondeterminismError
		require.ErrorAs(t, err, &nd)
		require.Contains(t, err.Error(), chronicle.ArchivePath(dir, "ORD-2")+": chronicle: nondeterminism in ORD-2 at seq 3: history holds ActivityScheduled \"charge\", code asked for ActivityScheduled \"fraud-check\"")
		var text bytes.Buffer
		require.NoError(t, sum.WriteText(&text))
		require.Contains(t, text.String(), "DIVERGED "+chronicle.ArchivePath(dir, "ORD-1")+" ORD-1 (order): at seq 3 history holds")
		require.Contains(t, text.String(), "2 histories: 0 ok, 2 diverged, 0 failed, 0 skipped\n")
	})

	t.Run("ChangeGuardedWithVersionPasses", func(t *testing.T) {
		sum, err := replayer(t, orderFraudCheckVersioned).ReplayHistories(ctx, chronicle.HistoryDir(dir))
		require.NoError(t, err)
		require.NoError(t, sum.Err())
		require.Len(t, sum.Results, 2)
	})

	t.Run("UnknownWorkflowFails", func(t *testing.T) {
		e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
		require.NoError(t, err)
		t.Cleanup(e.Close)
		sum, err := e.ReplayHistories(ctx, chronicle.HistoryDir(dir))
		require.NoError(t, err)
		require.ErrorIs(t, sum.Err(), chronicle.ErrUnknownWorkflow)
		_, _, _, failed := sum.Counts()
		require.Equal(t, 2, failed)
	})
}

func TestReplayHistoriesFiles(t *testing.T) {
	t.Parallel()
	b, dir := recordOrders(t)
	ctx := context.Background()
	e := replayer(t, orderV1)

	t.Run("EmptyFolderIsAnError", func(t *testing.T) {
		_, err := e.ReplayHistories(ctx, chronicle.HistoryDir(t.TempDir()))
		require.ErrorIs(t, err, chronicle.ErrNoHistories)
		_, err = e.ReplayHistories(ctx, chronicle.HistoryFiles())
		require.ErrorIs(t, err, chronicle.ErrNoHistories)
	})

	t.Run("MissingFolderIsAnError", func(t *testing.T) {
		_, err := e.ReplayHistories(ctx, chronicle.HistoryDir(filepath.Join(dir, "nope")))
		require.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("CorruptFileFailsAloneAndTheOthersReplay", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.jsonl")
		require.NoError(t, os.WriteFile(bad, []byte("{not json\n"), 0o600))
		empty := filepath.Join(t.TempDir(), "empty.jsonl")
		require.NoError(t, os.WriteFile(empty, nil, 0o600))
		sum, err := e.ReplayHistories(ctx, chronicle.HistoryFiles(bad, dir, empty))
		require.NoError(t, err)
		require.Len(t, sum.Results, 4)
		require.ErrorIs(t, sum.Results[0].Err, history.ErrCorrupt)
		require.Equal(t, bad, sum.Results[0].Origin)
		require.True(t, sum.Results[1].OK())
		require.True(t, sum.Results[2].OK())
		require.ErrorIs(t, sum.Results[3].Err, chronicle.ErrNoHistories)
		require.ErrorIs(t, sum.Err(), history.ErrCorrupt)
		require.True(t, strings.HasPrefix(sum.Results[0].Problem().Error(), bad+": "), sum.Results[0].Problem())
	})

	t.Run("FileOfSeveralInstances", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, history.WriteJSONL(&buf, b.history(t, "ORD-2")))
		require.NoError(t, history.WriteJSONL(&buf, b.history(t, "ORD-1")))
		both := filepath.Join(t.TempDir(), "both.jsonl")
		require.NoError(t, os.WriteFile(both, buf.Bytes(), 0o600))
		sum, err := replayer(t, orderFraudCheck).ReplayHistories(ctx, chronicle.HistoryFiles(both))
		require.NoError(t, err)
		require.Len(t, sum.Results, 2)
		require.Equal(t, "ORD-2", sum.Results[0].Divergence.InstanceID)
		require.Equal(t, "ORD-1", sum.Results[1].Divergence.InstanceID)
	})

	t.Run("CancelledContext", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := e.ReplayHistories(cctx, chronicle.HistoryDir(dir))
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestReplayHistoriesStore(t *testing.T) {
	t.Parallel()
	b, _ := recordOrders(t)
	// A start whose input does not decode is dead-lettered: the instance
	// has no history to replay. (The engine refuses such an input; a client
	// without the code does not know the type.)
	client, err := chronicle.NewClient(b.store, chronicle.ClientOptions{Clock: b.clock})
	require.NoError(t, err)
	_, err = client.Start(b.ctx, "order", "not a number", &chronicle.StartOptions{InstanceID: "ORD-3"})
	require.NoError(t, err)
	b.drain(t)
	ctx := context.Background()

	sum, err := replayer(t, orderFraudCheck).ReplayHistories(ctx, chronicle.StoreHistories(b.engine))
	require.NoError(t, err)
	require.Len(t, sum.Results, 3)
	require.Equal(t, "ORD-1", sum.Results[0].Divergence.InstanceID)
	require.Equal(t, "ORD-2", sum.Results[1].Divergence.InstanceID)
	require.Equal(t, "store", sum.Results[1].Origin)
	require.Equal(t, "ORD-3", sum.Results[2].InstanceID)
	require.Contains(t, sum.Results[2].Skipped, "dead-lettered")
	require.True(t, sum.Results[2].OK())

	sum, err = replayer(t, orderFraudCheckVersioned).ReplayHistories(ctx, chronicle.StoreHistories(b.engine))
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	ok, skipped, _, _ := sum.Counts()
	require.Equal(t, 2, ok)
	require.Equal(t, 1, skipped)

	// The engine that runs the code replays its own store too; ids select.
	sum, err = b.engine.ReplayHistories(ctx, chronicle.StoreHistories(b.engine, "ORD-2", "ORD-9"))
	require.NoError(t, err)
	require.Len(t, sum.Results, 2)
	require.True(t, sum.Results[0].OK())
	require.ErrorIs(t, sum.Results[1].Err, chronicle.ErrInstanceNotFound)
	require.False(t, errors.Is(sum.Err(), chronicle.ErrUnknownWorkflow))
}
