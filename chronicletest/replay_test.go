package chronicletest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// replayShipment is the workflow of the Replay tests as recorded;
// replayShipmentChanged asks for an activity first, and
// replayShipmentVersioned guards that change with Version.
func replayShipment(ctx *chronicle.Context, parcel string) (string, error) {
	return chronicle.CallActivity[string](ctx, "ship", parcel, nil)
}

func replayShipmentChanged(ctx *chronicle.Context, parcel string) (string, error) {
	if _, err := chronicle.CallActivity[string](ctx, "weigh", parcel, nil); err != nil {
		return "", err
	}
	return replayShipment(ctx, parcel)
}

func replayShipmentVersioned(ctx *chronicle.Context, parcel string) (string, error) {
	if ctx.Version("weigh", chronicle.DefaultVersion, 1) == 1 {
		if _, err := chronicle.CallActivity[string](ctx, "weigh", parcel, nil); err != nil {
			return "", err
		}
	}
	return replayShipment(ctx, parcel)
}

// recordShipments runs two shipments with replayShipment and exports
// their histories to a new folder.
func recordShipments(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "record"})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	require.NoError(t, chronicle.RegisterWorkflow(e, "shipment", replayShipment))
	require.NoError(t, chronicle.RegisterActivity(e, "ship", func(_ context.Context, p string) (string, error) { return "sent " + p, nil }))
	dir := t.TempDir()
	for _, id := range []string{"SHP-1", "SHP-2"} {
		_, err := e.Start(ctx, "shipment", "parcel of "+id, &chronicle.StartOptions{InstanceID: id})
		require.NoError(t, err)
	}
	for worked := true; worked; {
		worked, err = e.RunOnce(ctx)
		require.NoError(t, err)
	}
	for _, id := range []string{"SHP-1", "SHP-2"} {
		events, err := e.History(ctx, id)
		require.NoError(t, err)
		require.Equal(t, history.KindExecutionCompleted, events[len(events)-1].Kind)
		var buf bytes.Buffer
		require.NoError(t, history.WriteJSONL(&buf, events))
		require.NoError(t, os.WriteFile(chronicle.ArchivePath(dir, id), buf.Bytes(), 0o600))
	}
	return dir
}

func replayEngine(t *testing.T, fn func(*chronicle.Context, string) (string, error)) *chronicle.Engine {
	t.Helper()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	require.NoError(t, chronicle.RegisterWorkflow(e, "shipment", fn))
	return e
}

// replayT records what Replay reports instead of failing the test.
type replayT struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  string
}

func (f *replayT) Helper()             {}
func (f *replayT) Logf(string, ...any) {}
func (f *replayT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *replayT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// replayOn runs Replay with a replayT, in a goroutine of its own so that
// Fatalf can end it as testing does.
func replayOn(t *testing.T, e *chronicle.Engine, dir string) (*replayT, *chronicle.ReplaySummary) {
	f := &replayT{TB: t}
	var sum *chronicle.ReplaySummary
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum = chronicletest.Replay(f, e, dir)
	}()
	<-done
	return f, sum
}

func TestReplayPasses(t *testing.T) {
	t.Parallel()
	dir := recordShipments(t)
	sum := chronicletest.Replay(t, replayEngine(t, replayShipment), dir)
	require.Len(t, sum.Results, 2)
	sum = chronicletest.Replay(t, replayEngine(t, replayShipmentVersioned), dir)
	require.Len(t, sum.Results, 2)
}

func TestReplayFailsNamingEachDivergence(t *testing.T) {
	t.Parallel()
	dir := recordShipments(t)
	f, sum := replayOn(t, replayEngine(t, replayShipmentChanged), dir)
	require.Empty(t, f.fatal)
	require.Len(t, sum.Results, 2)
	require.Len(t, f.errors, 2)
	for i, id := range []string{"SHP-1", "SHP-2"} {
		require.Equal(t, chronicle.ArchivePath(dir, id)+": chronicle: nondeterminism in "+id+
			` at seq 3: history holds ActivityScheduled "ship", code asked for ActivityScheduled "weigh"`, f.errors[i])
	}
}

func TestReplayFailsWithoutHistories(t *testing.T) {
	t.Parallel()
	e := replayEngine(t, replayShipment)
	f, sum := replayOn(t, e, t.TempDir())
	require.Nil(t, sum)
	require.Contains(t, f.fatal, "no histories to replay")

	f, _ = replayOn(t, e, filepath.Join(t.TempDir(), "missing"))
	require.True(t, strings.Contains(f.fatal, "no such file"), f.fatal)
}
