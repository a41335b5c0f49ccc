package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestCheckpointPublishCommands publishes the demo data's checkpoint log
// to a directory, reads the note with the standard note verifier, then
// truncates and forks the checkpoints in the database: checkpoint verify
// and doctor report each.
func TestCheckpointPublishCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tmp := t.TempDir()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", url, "--schema", schema}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	const origin = "chronicle.example/claims-test"
	key := filepath.Join(tmp, "k.key")
	code, stdout, stderr := cli("keygen", "--id", "2026-11", "--out", key, "--origin", origin)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, key+".vkey")
	code, _, stderr = cli("migrate")
	require.Equal(t, 0, code, stderr)
	store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	demo, err := demodata.Seed(ctx, store)
	require.NoError(t, err)
	demo.Close()

	dir := filepath.Join(tmp, "published")
	code, _, stderr = cli("--sign-key", key, "checkpoint", "publish", "--dir", dir, "--origin", origin)
	require.Equal(t, 1, code, "published with no checkpoint stored: %s", stderr)
	code, _, stderr = cli("--sign-key", key, "checkpoint", "write")
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = cli("--sign-key", key, "checkpoint", "publish", "--dir", dir, "--origin", origin)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "at size 1")

	// Standard tooling opens the note with the verifier key.
	vkey, err := os.ReadFile(key + ".vkey")
	require.NoError(t, err)
	v, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
	require.NoError(t, err)
	msg, err := os.ReadFile(filepath.Join(dir, "1.checkpoint"))
	require.NoError(t, err)
	n, err := note.Open(msg, note.VerifierList(v))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(n.Text, origin+"\n1\n"))

	pub := key + ".pub"
	// A witness cosigns it.
	wkey := filepath.Join(tmp, "w.key")
	code, _, stderr = cli("keygen", "--id", "w1", "--out", wkey)
	require.Equal(t, 0, code, stderr)
	wctx, stopWitness := context.WithCancel(ctx)
	defer stopWitness()
	addr, served := make(chan string, 1), make(chan int, 1)
	var wout, werr bytes.Buffer
	go func() {
		served <- runWith(wctx, []string{"witness", "serve", "--listen", "127.0.0.1:0", "--name", "witness.example/w1", "--key", wkey,
			"--dir", filepath.Join(tmp, "witness"), "--log", origin + "=" + pub}, &wout, &werr, hooks{witnessServing: func(a string) { addr <- a }})
	}()
	witness := "http://" + <-addr
	code, stdout, stderr = cli("--sign-key", key, "checkpoint", "publish", "--dir", dir, "--origin", origin, "--witness", witness)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "\n— witness.example/w1 ")

	code, stdout, _ = cli("checkpoint", "verify", "--published", dir, "--key", pub)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "ok: the store holds it")
	code, _, _ = cli("checkpoint", "verify", "--published", dir)
	require.Equal(t, 2, code)

	// Truncated: the checkpoint rows deleted.
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "checkpoints"}.Sanitize())
	require.NoError(t, err)
	code, stdout, _ = cli("checkpoint", "verify", "--published", dir, "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "truncated")
	code, stdout, _ = cli("doctor", "--key", pub, "--published", dir)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "published checkpoint 1: chronicle: checkpoint 1 was published")

	// Forked: a new chain signed with the key. It is not published over
	// the old one.
	code, _, stderr = cli("--sign-key", key, "checkpoint", "write")
	require.Equal(t, 0, code, stderr)
	code, stdout, _ = cli("history", "verify", "--all", "--key", pub)
	require.Equal(t, 0, code, "the re-signed chain verifies on its own: %s", stdout)
	code, _, stderr = cli("--sign-key", key, "checkpoint", "publish", "--dir", dir, "--origin", origin, "--witness", witness)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "two histories")
	require.Contains(t, stderr, "the witness's latest cosigned size is 1")
	code, stdout, _ = cli("--json", "checkpoint", "verify", "--published", dir, "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, `"problem": "forked"`)

	stopWitness()
	require.Equal(t, 0, <-served, werr.String())
	require.Contains(t, wout.String(), "witness.example/w1+")
}
