package postgres

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// PartitionHint implements provider.PartitionNotifier: the channel is
// closed as WorkHint's is, but only for work in partition p (or of no
// known partition). Every NOTIFY of a store of several partitions names
// the partitions of the work it announces.
func (s *Store) PartitionHint(q provider.Queue, p int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil && !s.closed {
		s.listener = startLoop(s.listen)
	}
	return s.hints.PartitionChannel(q, p)
}

// wake closes the current hint channels of q: work arrived in parts (nil:
// in any partition). Those of the orchestration queue are counted in
// arrivals.
func (s *Store) wake(q provider.Queue, parts []int32) {
	if q == provider.QueueOrchestration {
		s.arrivals.Add(1)
	}
	s.wakeParts(q, parts)
}

// wakeParts closes the current hint channels of q and of its partitions
// parts (nil: of every partition) without counting an arrival.
func (s *Store) wakeParts(q provider.Queue, parts []int32) {
	if parts == nil || s.partitions <= 1 {
		s.hints.Wake(q)
		return
	}
	ps := make([]int, len(parts))
	for i, p := range parts {
		ps[i] = int(p)
	}
	s.hints.WakePartitions(q, ps...)
}

// announce makes new work on q in the partitions parts known (nil: in
// any; a store of one partition ignores them): it wakes this process's
// workers at once and has the notifier NOTIFY q's channel for other
// processes. Callers announce after the commit that queued the work (or
// whose outcome is unknown), never inside it: PostgreSQL serializes the
// commits of notifying transactions, holding a database-wide lock through
// each one's WAL flush, so a NOTIFY per write transaction would make every
// commit wait for the others.
func (s *Store) announce(q provider.Queue, parts []int32) {
	s.wake(q, parts)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	switch {
	case s.partitions <= 1:
		s.announced[q] = true
	case parts == nil:
		s.announced[q] = true
		delete(s.announcedParts, q)
	case !s.announced[q]:
		m := s.announcedParts[q]
		if m == nil {
			m = map[int32]bool{}
			s.announcedParts[q] = m
		}
		for _, p := range parts {
			m[p] = true
		}
	}
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
//
// The end of ctx does not interrupt a NOTIFY under way (each is bounded by
// notifyTimeout): one interrupted would be lost, and its connection, which
// pgx then closes in the background, waiting up to 15 seconds for the
// server to hang up, would hold up the pool's Close in the store's.
func (s *Store) notifyLoop(ctx context.Context) {
	send := context.WithoutCancel(ctx)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-s.kick:
		case <-ctx.Done():
			s.sendNotifications(send)
			return
		}
		s.sendNotifications(send)
		pause.Reset(s.notifyInterval)
		select {
		case <-pause.C:
		case <-ctx.Done():
			s.sendNotifications(send)
			return
		}
	}
}

// notifyTimeout bounds one NOTIFY statement.
const notifyTimeout = 5 * time.Second

// sendNotifications sends the announced NOTIFYs: one per channel. Its
// payload is the listener's backend (see listenOnce), followed, for work
// of known partitions of a store of several, by a colon and the
// partitions separated by commas ("4711:3,9"); a payload without a colon
// names every partition.
func (s *Store) sendNotifications(ctx context.Context) {
	s.mu.Lock()
	var channels []string
	var parts [][]int32
	for q := range s.announced {
		channels = append(channels, s.channels[q])
		parts = append(parts, nil)
	}
	for q, m := range s.announcedParts {
		channels = append(channels, s.channels[q])
		parts = append(parts, slices.Sorted(maps.Keys(m)))
	}
	clear(s.announced)
	clear(s.announcedParts)
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
	var err error
	if s.partitions <= 1 {
		_, err = s.pool.Exec(ctx, "SELECT pg_notify(c, $2) FROM unnest($1::text[]) AS c", channels, payload)
	} else {
		payloads := make([]string, len(channels))
		for i, ps := range parts {
			payloads[i] = partitionPayload(payload, ps)
		}
		_, err = s.pool.Exec(ctx, "SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS n(c, p)", channels, payloads)
	}
	if err != nil {
		s.log.WarnContext(ctx, "work-hint notification lost; other processes find the work by polling",
			slog.String("schema", s.schema), slog.Any("error", err))
	}
}

// maxPayload bounds a NOTIFY's payload below PostgreSQL's limit of 8000
// bytes; a list of partitions that would not fit names every partition.
const maxPayload = 7900

// partitionPayload returns the payload of a NOTIFY by the listener's
// backend self for work in the partitions parts (nil: in any).
func partitionPayload(self string, parts []int32) string {
	if parts == nil {
		return self
	}
	b := []byte(self)
	for i, p := range parts {
		if i == 0 {
			b = append(b, ':')
		} else {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
		if len(b) > maxPayload {
			return self
		}
	}
	return string(b)
}

// parsePayload splits a NOTIFY's payload into the sender's listener
// backend and the partitions of the work; parts is nil when the payload
// names no partition or names them in a form this version does not read
// (the work may then be in any partition).
func parsePayload(payload string) (sender string, parts []int32) {
	sender, list, ok := strings.Cut(payload, ":")
	if !ok {
		return sender, nil
	}
	for f := range strings.SplitSeq(list, ",") {
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return sender, nil
		}
		parts = append(parts, int32(p))
	}
	return sender, parts
}

// wakeAll closes every hint channel.
func (s *Store) wakeAll() {
	s.arrivals.Add(1)
	s.hints.WakeAll()
}

// ListenerApplicationName is the application_name of the connection that
// listens for work hints of a schema, as pg_stat_activity shows it.
func ListenerApplicationName(schema string) string { return "chronicle-listener:" + schema }

// listener is the goroutine that LISTENs for the store, or the one that
// sends its NOTIFYs.
type listener struct {
	cancel context.CancelFunc
	// stopping is closed when stop is called.
	stopping <-chan struct{}
	done     chan struct{}
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// startLoop runs loop in a goroutine until the returned listener is
// stopped: the store's work-hint listener and its notifier.
func startLoop(loop func(ctx context.Context)) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{cancel: cancel, stopping: ctx.Done(), done: make(chan struct{})}
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
		sender, parts := n.Payload, []int32(nil)
		if s.partitions > 1 {
			sender, parts = parsePayload(n.Payload)
		}
		if sender == self {
			continue
		}
		if q, ok := queues[n.Channel]; ok {
			s.wake(q, parts)
		}
	}
}
