package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
)

// Reconnect delays of the work-hint listener.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// WorkHint implements provider.Notifier. The returned channel is closed when
// this store enqueues work on q or releases an instance (at once, without
// a round trip; its own NOTIFY, which comes back to its listener, wakes
// nobody again), when a NOTIFY of another store on the same schema arrives
// (each store keeps one listening connection, opened by the first call),
// and when that connection fails or reconnects, since hints may have been
// missed meanwhile.
func (s *Store) WorkHint(q provider.Queue) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil && !s.closed {
		s.listener = startLoop(s.listen)
	}
	return s.hints.Channel(q)
}

// wake closes the current hint channel of q: work arrived. Those of the
// orchestration queue are counted in arrivals.
func (s *Store) wake(q provider.Queue) {
	if q == provider.QueueOrchestration {
		s.arrivals.Add(1)
	}
	s.hints.Wake(q)
}

// announce makes new work on q known: it wakes this process's workers at
// once and has the notifier NOTIFY q's channel for other processes. Callers
// announce after the commit that queued the work (or whose outcome is
// unknown), never inside it: PostgreSQL serializes the commits of
// notifying transactions, holding a database-wide lock through each one's
// WAL flush, so a NOTIFY per write transaction would make every commit
// wait for the others.
func (s *Store) announce(q provider.Queue) {
	s.wake(q)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.announced[q] = true
	if s.notifier == nil {
		s.notifier = startLoop(s.notifyLoop)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// notifyLoop sends one NOTIFY per announced channel, in one statement on
// a pooled connection outside any round, then waits NotifyInterval before
// the next, so that announcements in between coalesce. A NOTIFY that
// fails is lost: the workers of other processes find the work by their
// safety poll. When ctx ends it sends what is still announced and returns.
func (s *Store) notifyLoop(ctx context.Context) {
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-s.kick:
		case <-ctx.Done():
			s.sendNotifications(context.WithoutCancel(ctx))
			return
		}
		s.sendNotifications(ctx)
		pause.Reset(s.notifyInterval)
		select {
		case <-pause.C:
		case <-ctx.Done():
			s.sendNotifications(context.WithoutCancel(ctx))
			return
		}
	}
}

// notifyTimeout bounds one NOTIFY statement.
const notifyTimeout = 5 * time.Second

// sendNotifications sends the announced NOTIFYs.
func (s *Store) sendNotifications(ctx context.Context) {
	s.mu.Lock()
	var channels []string
	for q := range s.announced {
		channels = append(channels, s.channels[q])
	}
	clear(s.announced)
	s.mu.Unlock()
	if len(channels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	payload := ""
	if pid := s.listenerPID.Load(); pid != 0 {
		payload = strconv.FormatUint(uint64(pid), 10)
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify(c, $2) FROM unnest($1::text[]) AS c", channels, payload); err != nil {
		s.log.WarnContext(ctx, "work-hint notification lost; other processes find the work by polling",
			slog.String("schema", s.schema), slog.Any("error", err))
	}
}

// wakeAll closes every hint channel.
func (s *Store) wakeAll() {
	s.arrivals.Add(1)
	s.hints.WakeAll()
}

// ListenerApplicationName is the application_name of the connection that
// listens for work hints of a schema, as pg_stat_activity shows it.
func ListenerApplicationName(schema string) string { return "chronicle-listener:" + schema }

// listener is the goroutine that LISTENs for the store.
type listener struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// startLoop runs loop in a goroutine until the returned listener is
// stopped: the store's work-hint listener and its notifier.
func startLoop(loop func(ctx context.Context)) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		loop(ctx)
	}()
	return l
}

// listen keeps a connection listening on the store's channels until ctx
// ends, reconnecting with exponential backoff.
func (s *Store) listen(ctx context.Context) {
	cfg := s.pool.Config().ConnConfig
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// Operators see what the long-lived idle connection is for.
	cfg.RuntimeParams["application_name"] = ListenerApplicationName(s.schema)
	backoff := listenMinBackoff
	for {
		connected, err := s.listenOnce(ctx, cfg)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = listenMinBackoff
		}
		s.log.WarnContext(ctx, "work-hint listener failed; reconnecting",
			slog.String("schema", s.schema), slog.Duration("after", backoff), slog.Any("error", err))
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

// listenOnce connects, listens and forwards notifications until the
// connection fails; connected reports whether it got that far.
func (s *Store) listenOnce(ctx context.Context, cfg *pgx.ConnConfig) (connected bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		// The connection is discarded either way; listenOnce reports
		// why it stopped, and a failed Close adds nothing to act on.
		_ = conn.Close(closeCtx)
	}()
	queues := make(map[string]provider.Queue, len(s.channels))
	for q, ch := range s.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
		queues[ch] = q
	}
	// This store's NOTIFYs carry the listener's backend from now on; its
	// own, whose announce woke the workers already, are not hints.
	self := strconv.FormatUint(uint64(conn.PgConn().PID()), 10)
	s.listenerPID.Store(conn.PgConn().PID())
	defer s.listenerPID.Store(0)
	// Notifications sent before LISTEN took effect are lost: let waiting
	// workers look for themselves.
	s.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if n.Payload == self {
			continue
		}
		if q, ok := queues[n.Channel]; ok {
			s.wake(q)
		}
	}
}
