package oracle

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// Reconnect delays of the work-hint listener.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// WorkHint implements provider.Notifier. The returned channel is closed
// when this store enqueues work on q or releases an instance (at once,
// without a round trip), when the store's listener dequeues a wake
// message of another store on the same schema and prefix (each store runs
// one listener, started by the first call), and when the listener fails
// or reconnects, since wake-ups may have been missed meanwhile.
func (s *Store) WorkHint(q provider.Queue) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil && !s.closed {
		s.listener = startLoop(s.listen)
	}
	return s.hints.Channel(q)
}

// wake closes the current hint channel of q.
func (s *Store) wake(q provider.Queue) { s.hints.Wake(q) }

// wakeAll closes every hint channel.
func (s *Store) wakeAll() { s.hints.WakeAll() }

// enqueueWake enqueues, in the transaction of db, the wake messages of the
// queues that got work (see wakeSQL: ON_COMMIT visibility, coalesced).
// A wake-up that cannot be enqueued is logged and costs other processes
// their safety poll; it never fails the transaction, which a failed
// statement in Oracle leaves as it was.
func (s *Store) enqueueWake(ctx context.Context, db dbtx, orchestration, activity bool) {
	if !orchestration && !activity {
		return
	}
	var failure string
	_, err := db.ExecContext(ctx, s.sql.wake, named("orch", flag(orchestration)), named("act", flag(activity)),
		named("failure", sql.Out{Dest: &failure}))
	if err == nil && failure != "" {
		err = errors.New(failure)
	}
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "wake-up message not enqueued; other processes find the work by polling",
			slog.String("schema", s.names.schema), slog.String("prefix", s.names.prefix), slog.Any("error", err))
	}
}

// flag is the bind of a boolean: 1 or 0.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// loop is a goroutine of the store: the work-hint listener.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *loop) stop() {
	l.cancel()
	<-l.done
}

// startLoop runs fn in a goroutine until the returned loop is stopped.
func startLoop(fn func(ctx context.Context)) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		fn(ctx)
	}()
	return l
}

// listen keeps a connection dequeuing wake messages until ctx ends,
// reconnecting with exponential backoff.
func (s *Store) listen(ctx context.Context) {
	backoff := listenMinBackoff
	for {
		connected, err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = listenMinBackoff
		}
		s.log.WarnContext(ctx, "work-hint listener failed; reconnecting",
			slog.String("schema", s.names.schema), slog.String("prefix", s.names.prefix),
			slog.Duration("after", backoff), slog.Any("error", err))
		s.wakeAll()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenOnce takes a connection of the pool and dequeues wake messages on
// it, waiting up to ListenWait per call, until the connection fails or ctx
// ends (the driver breaks the call in flight); connected reports whether
// a dequeue succeeded.
func (s *Store) listenOnce(ctx context.Context) (connected bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	// The connection goes back to the pool, or is discarded by the driver
	// when it broke; listenOnce reports why it stopped.
	defer func() { _ = conn.Close() }()
	// Wake-ups sent before the listener ran are lost: let waiting workers
	// look for themselves.
	s.wakeAll()
	secs := int64(s.listenWait / time.Second)
	for {
		var orchestration, activity int64
		_, err := conn.ExecContext(ctx, s.sql.listen, named("orch", sql.Out{Dest: &orchestration}),
			named("act", sql.Out{Dest: &activity}), named("secs", secs))
		if err != nil {
			return connected, translate(err)
		}
		connected = true
		if orchestration == 1 {
			s.wake(provider.QueueOrchestration)
		}
		if activity == 1 {
			s.wake(provider.QueueActivity)
		}
	}
}
