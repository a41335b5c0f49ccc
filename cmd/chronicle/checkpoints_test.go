package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestCheckpointCommands signs a checkpoint of the demo data on
// PostgreSQL, exports a history with its proofs, then rewrites a history
// in the database with recomputed hashes: plain verification passes,
// verify --key fails and names the instance and seq, online and offline.
func TestCheckpointCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tmp := t.TempDir()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", url, "--schema", schema}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	offline := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	key := filepath.Join(tmp, "2026-11.key")
	code, stdout, stderr := offline("keygen", "--id", "2026-11", "--out", key)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "2026-11 ")
	code, _, _ = offline("keygen", "--id", "2026-11", "--out", key)
	require.Equal(t, 1, code, "keygen overwrote a key")
	pub := key + ".pub"

	code, _, stderr = cli("migrate")
	require.Equal(t, 0, code, stderr)
	store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	demo, err := demodata.Seed(ctx, store)
	require.NoError(t, err)
	demo.Close()

	code, _, stderr = cli("checkpoint", "write")
	require.Equal(t, 2, code, "checkpoint write without --sign-key: %s", stderr)
	code, stdout, stderr = cli("--sign-key", key, "checkpoint", "write")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "checkpoint 1: 8 instances, key 2026-11")
	code, stdout, _ = cli("--json", "checkpoint", "list")
	require.Equal(t, 0, code)
	var cps []checkpointJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &cps))
	require.Len(t, cps, 1)
	code, stdout, _ = cli("checkpoint", "list")
	require.Equal(t, 0, code)
	require.Equal(t, "NUMBER  AT                   KEY      LEAVES  HASH\n"+
		"1       "+when(cps[0].At)+"  2026-11  8       "+cps[0].Hash+"\n", stdout)
	code, stdout, _ = cli("history", "verify", "--all", "--key", pub)
	require.Equal(t, 0, code, stdout)
	// A purge that could not sign its tombstones is refused.
	code, _, stderr = cli("purge", "CLM-1002", "--by", "ops")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--sign-key")

	export := filepath.Join(tmp, "CLM-1001.jsonl")
	code, stdout, stderr = cli("history", "export", "CLM-1001", "--out", export)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "with 1 signed checkpoints")
	code, stdout, _ = offline("history", "verify", "--archive", export, "--key", pub)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "verified offline")

	// Rewrite CLM-1001 in the database: an actor changed, every hash
	// after it recomputed.
	events, err := store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "CLM-1001", FromSeq: 1})
	require.NoError(t, err)
	last := events[len(events)-1].Seq
	events[2].Actor = "forger"
	history.Seal(nil, events)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for i := range events {
		_, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "history"}.Sanitize()+` SET hash = $3, event = $4 WHERE instance_id = $1 AND seq = $2`,
			"CLM-1001", events[i].Seq, events[i].Hash, history.MarshalEvent(&events[i]))
		require.NoError(t, err)
	}
	code, stdout, _ = cli("history", "verify", "--all")
	require.Equal(t, 0, code, "plain verification should not see a resealed history: %s", stdout)
	code, stdout, _ = cli("history", "verify", "--all", "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Regexp(t, `CLM-1001 +FORGED at seq `+itoa(last), stdout)
	code, stdout, _ = cli("history", "verify", "CLM-1001", "--key", pub)
	require.Equal(t, 1, code, stdout)

	// The forged history, exported, fails offline too.
	forged := filepath.Join(tmp, "forged.jsonl")
	code, _, stderr = cli("history", "export", "CLM-1001", "--out", forged)
	require.Equal(t, 0, code, stderr)
	code, stdout, _ = offline("history", "verify", "--archive", forged, "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "FORGED at seq "+itoa(last))

	// The forger deletes the leaf rows that cover CLM-1001: the
	// checkpoint they belong to fails, and a sweep signs nothing over it.
	_, err = conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "checkpoint_leaves"}.Sanitize()+` WHERE instance_id = $1`, "CLM-1001")
	require.NoError(t, err)
	code, stdout, _ = cli("history", "verify", "--all", "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "CHECKPOINT GAP at 1")
	code, stdout, stderr = cli("--sign-key", key, "checkpoint", "write")
	require.Equal(t, 1, code, "checkpoint write signed over deleted leaves: %s", stdout)
	require.Contains(t, stderr, "refused to sign")
	code, stdout, _ = cli("doctor", "--key", pub)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "checkpoint chain broken at 1")

	// A keyring file that is not one.
	bad := filepath.Join(tmp, "bad.pub")
	require.NoError(t, os.WriteFile(bad, []byte("2026-11 not-base64!\n"), 0o644))
	code, _, stderr = offline("history", "verify", "--archive", export, "--key", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "line 1")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
