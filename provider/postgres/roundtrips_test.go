package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestWarmRoundTwoRoundTrips counts the round trips of a round on a store
// of one PostgreSQL server: the dequeue (the instance's lock, its
// messages, the head of its history and the clearing of a passed hold) is
// one, the round's deferred writes (the append with its check, the ack)
// another, and a dequeue that finds nothing one more. The dequeue returns
// what it read: the messages in order, the head, and the hold cleared.
func TestWarmRoundTwoRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	trips := &tripCounter{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := pgtest.NewStore(t, postgres.Options{Pool: pool})

	// The instance's history holds one event, its queue two signals, and
	// a hold that has passed delays it.
	first := []history.Event{{Seq: 1, InstanceID: "i-1", ExecutionID: "exec-1", Kind: history.KindEventRaised,
		CorrelationID: "k-0", At: base, Actor: "system", Payload: mustAttributes(t, "k-0")}}
	history.Seal(nil, first)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-0", "i-1")}, Now: base}))
	require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
		require.NoError(t, err)
		require.NotNil(t, b)
		require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: first}))
		return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-0"}})
	}))
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1"), signal(t, "m-2", "i-1")}, Now: base}))
	_, err = pool.Exec(ctx, "UPDATE "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+" SET hold_until = $1 WHERE instance_id = 'i-1'", base)
	require.NoError(t, err)

	var dequeue, flush, empty int64
	require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		before := trips.n.Load()
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base.Add(1), Owner: "n1"})
		require.NoError(t, err)
		dequeue = trips.n.Load() - before
		require.NotNil(t, b)
		require.Equal(t, []string{"m-1", "m-2"}, []string{b.Messages[0].ID, b.Messages[1].ID})
		require.Equal(t, &provider.Head{Seq: 1, Hash: first[0].Hash}, b.Head)

		next := []history.Event{{Seq: 2, InstanceID: "i-1", ExecutionID: "exec-1", Kind: history.KindEventRaised,
			CorrelationID: "k-1", At: base, Actor: "system", Payload: mustAttributes(t, "k-1")}}
		history.Seal(first[0].Hash, next)
		before = trips.n.Load()
		require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: next}))
		require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1", "m-2"}}))
		require.NoError(t, tx.(provider.TxFlusher).Flush(ctx))
		flush = trips.n.Load() - before

		before = trips.n.Load()
		b, err = tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base.Add(1), Owner: "n1"})
		empty = trips.n.Load() - before
		require.Nil(t, b)
		return err
	}))
	require.Equal(t, int64(1), dequeue, "round trips of the dequeue")
	require.Equal(t, int64(1), flush, "round trips of the round's writes")
	require.Equal(t, int64(1), empty, "round trips of a dequeue that finds nothing")

	var held bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT hold_until IS NOT NULL FROM "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+" WHERE instance_id = 'i-1'").Scan(&held))
	require.False(t, held, "the passed hold was cleared")
	events, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "i-1"})
	require.NoError(t, err)
	require.Len(t, events, 2)
}

func mustAttributes(t *testing.T, key string) []byte {
	t.Helper()
	payload, err := history.EncodeAttributes(&history.EventRaised{Name: "approved", IdempotencyKey: key})
	require.NoError(t, err)
	return payload
}

// tripCounter counts the round trips a pool makes: each statement sent
// alone and each pipeline.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
