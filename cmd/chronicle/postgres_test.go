package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
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

// TestPostgresUI serves the console on PostgreSQL: the demo data seeded
// into a fresh schema is listed and verified, a redrive in the console is
// recorded, and once a worker runs (the demo's engine, which has the fix)
// the console shows the refund completed.
func TestPostgresUI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := pgtest.URL(t)
	store := pgtest.NewStore(t, postgres.Options{})
	demo, err := demodata.Seed(ctx, store)
	require.NoError(t, err)
	defer demo.Close()

	r := startUI(t, "--store", url, "--schema", store.Schema(), "ui", "--listen", "127.0.0.1:0", "--actions", "--user", "ops")
	base := "http://" + r.addr
	c := client(t)
	code, body := get(t, c, base+"/instances")
	require.Equal(t, http.StatusOK, code, body)
	require.Len(t, instanceRows.FindAllString(body, -1), 8)
	_, body = get(t, c, base+"/instance?id=CLM-1001")
	require.Contains(t, body, `class="chain ok" id="chain-status">Hash chain verified`)
	require.Contains(t, body, `<svg class="timeline"`)

	code, body = redrive(t, c, base)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "redriven by ops.")
	letters, err := demo.Engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{InstanceID: "REF-4001"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, "user:ops", letters[0].ResolvedBy)

	// The deployment's worker: the demo engine on the same schema, its
	// clock set to the wall clock the console's redrive was stamped with.
	demo.Clock.Set(time.Now())
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- demo.Run(runCtx) }()
	in, err := demo.Engine.Wait(ctx, "REF-4001")
	stop()
	require.NoError(t, <-ran)
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, in.Status)
	_, body = get(t, c, base+"/instance?id=REF-4001")
	require.Contains(t, body, `<span class="status status-completed">completed</span>`)
	r.close(t)
	require.Contains(t, r.stdout.String(), "the deployment's workers apply actions")
	if u, err := neturl.Parse(url); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			require.NotContains(t, r.stdout.String(), pw, "the password is not printed")
		}
	}
}

// TestPostgresConcurrency: on PostgreSQL the tool shows the instances
// waiting for a concurrency slot, the same as on the memory store.
func TestPostgresConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", url, "--schema", schema}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, _, stderr := cli("migrate")
	require.Equal(t, 0, code, stderr)

	store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	e, err := chronicle.New(store, chronicle.Options{NodeID: "test"})
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, chronicle.RegisterWorkflow(e, "gate", func(ctx *chronicle.Context, in string) (string, error) {
		var s string
		err := ctx.WaitEvent("go", nil).Get(&s)
		return in + s, err
	}))
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		_, err := e.Start(ctx, "gate", id, &chronicle.StartOptions{InstanceID: id, Concurrency: &chronicle.Concurrency{Key: "acme", Limit: 1}})
		require.NoError(t, err)
	}
	drainEngine(t, e)

	code, stdout, stderr := cli("concurrency", "list", "--waiting")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^acme\s+1\s+1\s+2\s+a-2$`, stdout)
	code, stdout, stderr = cli("instance", "show", "a-3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "concurrency key acme (limit 1), position 2, behind a-1, since ")
	code, stdout, stderr = cli("--json", "concurrency", "show", "acme")
	require.Equal(t, 0, code, stderr)
	var set slotSetJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &set))
	require.Len(t, set.Holders, 1)
	require.Equal(t, "a-1", set.Holders[0].InstanceID)
	require.Len(t, set.Waiters, 2)
	require.Equal(t, []string{"a-2", "a-3"}, []string{set.Waiters[0].InstanceID, set.Waiters[1].InstanceID})
}
