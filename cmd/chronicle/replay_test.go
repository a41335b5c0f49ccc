package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// parcelV1 is the workflow of a history recorded for TestReplayCommand;
// parcelV2 asks for another activity first.
func parcelV1(ctx *chronicle.Context, p string) (string, error) {
	return chronicle.CallActivity[string](ctx, "ship", p, nil)
}

func parcelV2(ctx *chronicle.Context, p string) (string, error) {
	if _, err := chronicle.CallActivity[string](ctx, "weigh", p, nil); err != nil {
		return "", err
	}
	return parcelV1(ctx, p)
}

// TestReplayCommand replays exported histories: the demo's against the
// demo's workflows, and one recorded with parcelV1 against parcelV2,
// registered on the demo engine, which diverges.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	r := runTool(t, tmp, hooks{}, "history", "export", "CLM-1001", "--out", filepath.Join(tmp, "CLM-1001.jsonl"))
	require.Equal(t, exitOK, r.code, r.stderr)

	ctx := context.Background()
	rec, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "record"})
	require.NoError(t, err)
	t.Cleanup(rec.Close)
	require.NoError(t, chronicle.RegisterWorkflow(rec, "parcel", parcelV1))
	require.NoError(t, chronicle.RegisterActivity(rec, "ship", func(_ context.Context, p string) (string, error) { return "sent", nil }))
	_, err = rec.Start(ctx, "parcel", "P", &chronicle.StartOptions{InstanceID: "PCL-1"})
	require.NoError(t, err)
	drainEngine(t, rec)
	events, err := rec.History(ctx, "PCL-1")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, history.WriteJSONL(&buf, events))
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "parcels"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "parcels", "PCL-1.jsonl"), buf.Bytes(), 0o600))

	args := []string{"replay", "$TMP/CLM-1001.jsonl", "$TMP/parcels"}
	r = runTool(t, tmp, hooks{}, args...)
	require.Equal(t, exitFailure, r.code)
	checkGolden(t, "replay_files_unknown_workflow", transcript(args, r))

	v2 := hooks{demoEngine: func(e *chronicle.Engine) { require.NoError(t, chronicle.RegisterWorkflow(e, "parcel", parcelV2)) }}
	r = runTool(t, tmp, v2, args...)
	require.Equal(t, exitFailure, r.code)
	checkGolden(t, "replay_files_diverged", transcript(args, r))

	r = runTool(t, tmp, v2, append(args, "--json")...)
	require.Equal(t, exitFailure, r.code)
	var rows []replayJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 2)
	require.True(t, rows[0].OK)
	require.False(t, rows[1].OK)
	require.Equal(t, &divergenceJSON{Seq: 3, History: `ActivityScheduled "ship"`, Code: `ActivityScheduled "weigh"`}, rows[1].Divergence)

	v1 := hooks{demoEngine: func(e *chronicle.Engine) { require.NoError(t, chronicle.RegisterWorkflow(e, "parcel", parcelV1)) }}
	r = runTool(t, tmp, v1, args...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "2 histories: 2 ok, 0 diverged, 0 failed, 0 skipped\n")
}
