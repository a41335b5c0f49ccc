package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

func TestNotifyPayload(t *testing.T) {
	for _, c := range []struct {
		self  string
		parts []int32
		want  string
	}{
		{"4711", nil, "4711"},
		{"", nil, ""},
		{"4711", []int32{3}, "4711:3"},
		{"", []int32{0, 9, 15}, ":0,9,15"},
	} {
		got := postgres.PartitionPayload(c.self, c.parts)
		require.Equal(t, c.want, got)
		sender, parts := postgres.ParsePayload(got)
		require.Equal(t, c.self, sender, got)
		require.Equal(t, c.parts, parts, got)
	}
	// A list that would pass PostgreSQL's limit names every partition.
	many := make([]int32, 3000)
	for i := range many {
		many[i] = int32(i)
	}
	require.Equal(t, "1", postgres.PartitionPayload("1", many))
	// A payload this version cannot read names every partition: the work
	// may be in any.
	for _, p := range []string{"1:", "1:x", "1:3,-2", "1:3,,4", "1:99999999999"} {
		sender, parts := postgres.ParsePayload(p)
		require.Equal(t, "1", sender, p)
		require.Nil(t, parts, p)
	}
}

// TestNotifyPayloadOnTheWire listens on a schema's orchestration channel:
// a store of one partition sends the payload of before (its listener's
// backend alone), a store of two partitions adds the partition of the
// work it announces.
func TestNotifyPayloadOnTheWire(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		partitions int
		suffix     string
	}{{1, ""}, {2, ":1"}} {
		t.Run(fmt.Sprint(c.partitions), func(t *testing.T) {
			t.Parallel()
			s := pgtest.NewStore(t, postgres.Options{Partitions: c.partitions})
			// The store's own listener connected: its backend is the payload.
			waitClosed(t, s.WorkHint(provider.QueueOrchestration), "the listener to connect")
			conn := adminConn(t)
			_, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{postgres.ChannelName(s.Schema(), provider.QueueOrchestration)}.Sanitize())
			require.NoError(t, err)
			id := "i-0"
			for i := 1; provider.PartitionOf(id, c.partitions) != c.partitions-1; i++ {
				id = fmt.Sprintf("i-%d", i)
			}
			require.NoError(t, s.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", id)}, Now: base}))
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			n, err := conn.WaitForNotification(ctx)
			require.NoError(t, err)
			pid, _, _ := strings.Cut(n.Payload, ":")
			require.Regexp(t, `^[0-9]+$`, pid, "the payload starts with the listener's backend: %q", n.Payload)
			require.Equal(t, c.suffix, strings.TrimPrefix(n.Payload, pid), "payload %q", n.Payload)
		})
	}
}

// TestCloseSendsTheNotificationUnderWay: a NOTIFY the store is sending
// when Close is called is sent, not interrupted (it was: lost, and its
// connection closed in the background, which kept the pool's Close
// waiting up to 15 seconds).
func TestCloseSendsTheNotificationUnderWay(t *testing.T) {
	t.Parallel()
	underWay := make(chan context.Context, 1)
	release := make(chan struct{})
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = &notifyTracer{underWay: underWay, release: release}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Released before the pool closes, should the test fail first.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	var logged lockedBuffer
	s := pgtest.NewStore(t, postgres.Options{Pool: pool, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	conn := adminConn(t)
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{postgres.ChannelName(s.Schema(), provider.QueueOrchestration)}.Sanitize())
	require.NoError(t, err)

	require.NoError(t, s.EnqueueMessages(t.Context(), &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base}))
	var sendCtx context.Context
	select {
	case sendCtx = <-underWay:
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for the NOTIFY")
	}
	stopping := postgres.NotifierStopping(s)
	require.NotNil(t, stopping)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.Close()
	}()
	waitClosed(t, stopping, "Close to stop the sender")
	require.NoError(t, sendCtx.Err(), "Close canceled the NOTIFY under way")
	releaseOnce()
	waitClosed(t, closed, "Close to return")

	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err, "the NOTIFY under way was sent")
	require.Equal(t, postgres.ChannelName(s.Schema(), provider.QueueOrchestration), n.Channel)
	require.NotContains(t, logged.String(), "notification lost")
}

// notifyTracer hands the context of the first pg_notify statement to
// underWay and holds the statement until release is closed.
type notifyTracer struct {
	once     sync.Once
	underWay chan<- context.Context
	release  <-chan struct{}
}

func (n *notifyTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "pg_notify") {
		n.once.Do(func() {
			n.underWay <- ctx
			<-n.release
		})
	}
	return ctx
}

func (*notifyTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
