package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestSubjectCommands erases a data subject and rotates the KEK with the
// tool on PostgreSQL, and shows payloads sealed, opened and erased.
func TestSubjectCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.NewStore(t, postgres.Options{})
	dir := t.TempDir()
	keysDir, kek1, kek2 := filepath.Join(dir, "keys"), filepath.Join(dir, "kek-1"), filepath.Join(dir, "kek-2")
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", pgtest.URL(t), "--schema", store.Schema()}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := cli("keys", "kek", "--id", "kek-1", "--out", kek1)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "KEK kek-1 written")

	keys, err := chronicle.NewFileKeyProvider(keysDir, kek1)
	require.NoError(t, err)
	e, err := chronicle.New(store, chronicle.Options{NodeID: "test", Keys: keys})
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, chronicle.RegisterWorkflow(e, "greet", func(ctx *chronicle.Context, name string) (string, error) {
		return "Dear " + name, nil
	}))
	for id, s := range map[string]string{"g-1": "C-1", "g-2": "C-2"} {
		_, err := e.Start(ctx, "greet", "Ada "+id, &chronicle.StartOptions{InstanceID: id, Subject: s})
		require.NoError(t, err)
	}
	for worked := true; worked; {
		worked, err = e.RunOnce(ctx)
		require.NoError(t, err)
	}

	withKeys := []string{"--keys", keysDir, "--kek", kek1}
	code, stdout, stderr = cli(append(withKeys, "history", "show", "g-1")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Dear Ada g-1")
	code, stdout, stderr = cli("history", "show", "g-1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "<sealed for data subject C-1")
	require.NotContains(t, stdout, "Ada")

	code, _, stderr = cli("subject", "erase", "C-1", "--reason", "request")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--by is required")
	code, stdout, stderr = cli(append(withKeys, "subject", "erase", "C-1", "--reason", "erasure request", "--by", "dpo", "--ticket", "DSR-1")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "subject C-1 erased")
	require.Contains(t, stdout, "instances: 1 (g-1)")

	code, stdout, stderr = cli(append(withKeys, "history", "show", "g-1")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "<erased: data subject C-1>")
	require.NotContains(t, stdout, "Ada")
	code, stdout, stderr = cli("history", "verify", "--all")
	require.Equal(t, 0, code, stdout+stderr)

	// Rotation: the remaining key moves under kek-2, which alone then
	// opens the other subject's payloads.
	code, _, stderr = cli("keys", "kek", "--id", "kek-2", "--out", kek2)
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = cli("--keys", keysDir, "--kek", kek2, "--kek", kek1, "keys", "rotate")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "1 data keys re-wrapped")
	code, stdout, stderr = cli("--keys", keysDir, "--kek", kek2, "history", "show", "g-2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Dear Ada g-2")
}
