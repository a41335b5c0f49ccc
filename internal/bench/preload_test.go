package bench_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/bench"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

func TestPreloadPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.NewStore(t, postgres.Options{})
	schema := pgx.Identifier{store.Schema()}.Sanitize()
	count := func(table, where string) int {
		t.Helper()
		var n int
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+schema+`.`+table+` `+where).Scan(&n))
		return n
	}
	var seen []int
	res, err := bench.PreloadPostgres(ctx, store, 30_000, func(done int) { seen = append(seen, done) })
	require.NoError(t, err)
	require.Equal(t, 0, res.Existing)
	require.Equal(t, 30_000, res.Added)
	require.Equal(t, []int{25_000, 30_000}, seen, "progress after each chunk")
	// The template and its copies: every instance ended, with its history
	// and task ids, and nothing queued.
	require.Equal(t, 30_001, count("instances", "WHERE status = 'completed' AND record_seq IS NOT NULL AND snapshot IS NOT NULL"))
	require.Equal(t, 30_001, count("instances", ""))
	require.Equal(t, 30_001*12, count("history", ""))
	require.Equal(t, 30_001*3, count("activity_task_ids", ""))
	var executions int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(DISTINCT execution_id) FROM `+schema+`.history`).Scan(&executions))
	require.Equal(t, 30_001, executions, "one execution id per instance")
	require.Zero(t, count("messages", ""))
	require.Zero(t, count("activity_tasks", ""))
	var id, exec string
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT instance_id, execution_id FROM `+schema+`.instances WHERE instance_id LIKE $1 ORDER BY instance_id DESC LIMIT 1`,
		bench.PreloadPrefix+"%").Scan(&id, &exec))
	rec, err := store.GetInstance(ctx, id)
	require.NoError(t, err)
	require.Equal(t, exec, rec.ExecutionID)
	events, err := store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id})
	require.NoError(t, err)
	require.Len(t, events, 12)

	res, err = bench.PreloadPostgres(ctx, store, 30_000, nil)
	require.NoError(t, err)
	require.Equal(t, 30_000, res.Existing)
	require.Zero(t, res.Added, "a second preload of the same size adds nothing")
	require.Equal(t, 30_001, count("instances", ""))
}

func TestDBWorkCountsAScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.NewStore(t, postgres.Options{})
	pool := store.Pool()
	require.NoError(t, bench.FlushStats(ctx, pool))
	before, err := bench.ReadDBWork(ctx, pool, store.Schema())
	require.NoError(t, err)
	// A count of a whole table is a sequential scan.
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{store.Schema()}.Sanitize()+`.history`).Scan(&n))
	require.NoError(t, bench.FlushStats(ctx, pool))
	after, err := bench.ReadDBWork(ctx, pool, store.Schema())
	require.NoError(t, err)
	d := after.Sub(before)
	h, ok := d.Table("history")
	require.True(t, ok)
	require.Equal(t, int64(1), h.SeqScans)
	m, ok := d.Table("messages")
	require.True(t, ok)
	require.Zero(t, m.SeqScans)
	require.Positive(t, d.Commits)
}
