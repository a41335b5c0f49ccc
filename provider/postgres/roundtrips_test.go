package postgres_test

import (
	"context"
	"sync"
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
	trips := &tripCounter{}
	pool, s := tracedStore(t, trips, nil)

	// The instance's history holds one event, its queue two signals, and
	// a hold that has passed delays it.
	first := raisedEvent(t, "i-1", 1, "k-0", nil)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-0", "i-1")}, Now: base}))
	require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "n1"})
		require.NoError(t, err)
		require.NotNil(t, b)
		require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: first}))
		return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-0"}})
	}))
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1"), signal(t, "m-2", "i-1")}, Now: base}))
	_, err := pool.Exec(ctx, "UPDATE "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+" SET hold_until = $1 WHERE instance_id = 'i-1'", base)
	require.NoError(t, err)

	var dequeue, flush, empty int64
	require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		conn := postgres.RoundConn(tx)
		before := trips.on(conn)
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base.Add(1), Owner: "n1"})
		require.NoError(t, err)
		dequeue = trips.on(conn) - before
		require.NotNil(t, b)
		require.Equal(t, []string{"m-1", "m-2"}, []string{b.Messages[0].ID, b.Messages[1].ID})
		require.Equal(t, &provider.Head{Seq: 1, Hash: first[0].Hash}, b.Head)

		next := raisedEvent(t, "i-1", 2, "k-1", first[0].Hash)
		before = trips.on(conn)
		require.NoError(t, tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "i-1", Events: next}))
		require.NoError(t, tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "i-1", MessageIDs: []string{"m-1", "m-2"}}))
		require.NoError(t, tx.(provider.TxFlusher).Flush(ctx))
		flush = trips.on(conn) - before

		before = trips.on(conn)
		b, err = tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base.Add(1), Owner: "n1"})
		empty = trips.on(conn) - before
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

// tripCounter counts the round trips of each connection of a pool: each
// statement sent alone and each pipeline (the store's other work, a
// NOTIFY say, goes on other connections).
type tripCounter struct {
	mu sync.Mutex
	n  map[*pgx.Conn]int64
}

func (c *tripCounter) add(conn *pgx.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[*pgx.Conn]int64{}
	}
	c.n[conn]++
}

// on returns the round trips of conn so far.
func (c *tripCounter) on(conn *pgx.Conn) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[conn]
}

func (c *tripCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.add(conn)
	return ctx
}

func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *tripCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.add(conn)
	return ctx
}

func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedStore returns a store on a pool of its own whose connections run
// with tracer and the runtime parameters params.
func tracedStore(t *testing.T, tracer pgx.QueryTracer, params map[string]string) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, pgtest.NewStore(t, postgres.Options{Pool: pool})
}
