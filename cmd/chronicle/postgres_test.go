package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestPostgresCommands runs the tool against PostgreSQL: migrate a fresh
// schema, seed it with the demo data, list, verify, then tamper with a
// stored event and see verify fail.
func TestPostgresCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", url, "--schema", schema}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, _, stderr := cli("instances", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "run chronicle migrate")
	code, stdout, _ := cli("migrate")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, fmt.Sprintf("is at version %d", postgres.LatestSchemaVersion()))
	code, _, _ = cli("migrate")
	require.Equal(t, 0, code, "migrating twice is harmless")

	store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	demo, err := demodata.Seed(ctx, store)
	require.NoError(t, err)
	demo.Close()

	code, stdout, _ = cli("--json", "instances", "list")
	require.Equal(t, 0, code)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list, 8)
	code, stdout, _ = cli("history", "verify", "--all")
	require.Equal(t, 0, code, stdout)

	// Flip one byte of event 5 of CLM-1001 in the database.
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "history"}.Sanitize()+`
		SET event = set_byte(event, length(event) - 40, get_byte(event, length(event) - 40) # 1)
		WHERE instance_id = 'CLM-1001' AND seq = 5`)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	code, stdout, _ = cli("history", "verify", "CLM-1001")
	require.Equal(t, 1, code)
	require.Contains(t, stdout, "BROKEN at seq 5")
	code, _, _ = cli("history", "verify", "--all")
	require.Equal(t, 1, code)
}

// TestBench runs the benchmark command on a small workload: the numbers
// vary, the shape of the output does not.
func TestBench(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--json", "bench", "--instances", "10", "--workload", "W1,W3"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var rows []benchJSON
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "W1", rows[0].Workload)
	require.Equal(t, 10, rows[0].Instances)
	require.Positive(t, rows[0].RoundsPerSecond)
	require.Positive(t, rows[1].P50Millis)
	code = run(context.Background(), []string{"bench", "--instances", "0"}, &stdout, &stderr)
	require.Equal(t, 2, code)
}
