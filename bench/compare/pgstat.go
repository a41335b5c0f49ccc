package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbStats are a database's cumulative statistics at one moment: its row
// of pg_stat_database and its tables' rows of pg_stat_user_tables.
type dbStats struct {
	Commits, Rollbacks                  int64
	Inserted, Updated, Deleted          int64
	Fetched, Returned, BlksHit, BlksRed int64
	// Tables is keyed by schema.table.
	Tables map[string]tableStats
}

// tableStats are one table's scan counts.
type tableStats struct {
	SeqScan, SeqTupRead, IdxScan int64
}

// snapshot reads the statistics of the database at dbURL, on a connection
// of its own that it closes.
func snapshot(ctx context.Context, dbURL string) (*dbStats, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(ctx) }()
	s := &dbStats{Tables: map[string]tableStats{}}
	err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,
		tup_fetched, tup_returned, blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&s.Commits, &s.Rollbacks, &s.Inserted, &s.Updated, &s.Deleted, &s.Fetched, &s.Returned, &s.BlksHit, &s.BlksRed)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_database: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT schemaname || '.' || relname, coalesce(seq_scan, 0), coalesce(seq_tup_read, 0),
		coalesce(idx_scan, 0) FROM pg_stat_user_tables`)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_user_tables: %w", err)
	}
	for rows.Next() {
		var name string
		var t tableStats
		if err := rows.Scan(&name, &t.SeqScan, &t.SeqTupRead, &t.IdxScan); err != nil {
			return nil, err
		}
		s.Tables[name] = t
	}
	return s, rows.Err()
}

// work is the database work of one run: the difference of two snapshots.
type work struct {
	Commits   int64 `json:"commits"`
	Rollbacks int64 `json:"rollbacks"`
	Inserted  int64 `json:"rows_inserted"`
	Updated   int64 `json:"rows_updated"`
	Deleted   int64 `json:"rows_deleted"`
	// TuplesRead is tup_fetched + tup_returned.
	TuplesRead int64 `json:"tuples_read"`
	BlksHit    int64 `json:"shared_buffer_hits"`
	BlksRead   int64 `json:"blocks_read"`
	// SeqScans counts sequential scans and the tuples they read, by table
	// (schema.table), for the tables scanned.
	SeqScans map[string]seqScans `json:"seq_scans,omitempty"`
}

// seqScans are one table's sequential scans in a run.
type seqScans struct {
	Scans      int64 `json:"scans"`
	TuplesRead int64 `json:"tuples_read"`
}

// since returns the work done from before to s.
func (s *dbStats) since(before *dbStats) work {
	w := work{
		Commits: s.Commits - before.Commits, Rollbacks: s.Rollbacks - before.Rollbacks,
		Inserted: s.Inserted - before.Inserted, Updated: s.Updated - before.Updated, Deleted: s.Deleted - before.Deleted,
		TuplesRead: s.Fetched + s.Returned - before.Fetched - before.Returned,
		BlksHit:    s.BlksHit - before.BlksHit, BlksRead: s.BlksRed - before.BlksRed,
		SeqScans: map[string]seqScans{},
	}
	for name, t := range s.Tables {
		b := before.Tables[name]
		if d := t.SeqScan - b.SeqScan; d > 0 {
			w.SeqScans[name] = seqScans{Scans: d, TuplesRead: t.SeqTupRead - b.SeqTupRead}
		}
	}
	return w
}

// server creates, watches and drops the databases of the runs, on a
// connection to the database its URL names.
type server struct {
	base  *url.URL
	admin *pgx.Conn
}

// connectServer connects to the server at rawURL, a postgres:// URL.
func connectServer(ctx context.Context, rawURL string) (*server, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("the server must be named by a postgres:// URL, not %q", rawURL)
	}
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return &server{base: u, admin: conn}, nil
}

// close closes the connection.
func (s *server) close(ctx context.Context) error { return s.admin.Close(ctx) }

// createDatabase creates a fresh database named prefix_<random> and
// returns its name and URL.
func (s *server) createDatabase(ctx context.Context, prefix string) (name, dbURL string, err error) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // crypto/rand.Read never returns an error
	name = prefix + "_" + hex.EncodeToString(suffix)
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", name, err)
	}
	u := *s.base
	u.Path, u.RawPath = "/"+name, ""
	return name, u.String(), nil
}

// dropDatabase drops a database the benchmark created, closing what is
// still connected to it.
func (s *server) dropDatabase(ctx context.Context, name string) error {
	_, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// waitDisconnected waits until no client is connected to the database: a
// backend's statistics are flushed when it exits, so the next snapshot
// holds all of its work.
func (s *server) waitDisconnected(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		err := s.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = $1 AND backend_type = 'client backend'`, name).Scan(&n)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%d connections to %s stay open: %w", n, name, ctx.Err())
		}
	}
}

// dbPrefix names the databases of one run: compare_<workload>_<system>.
func dbPrefix(workload, system string) string {
	return strings.ToLower("compare_" + workload + "_" + system)
}

// errNoServer is returned when no server URL is given.
var errNoServer = errors.New("no PostgreSQL server: set -url or CHRONICLE_TEST_PG_URL")

// info describes the server: its version and the settings that bear on
// commit cost and statistics.
func (s *server) info(ctx context.Context) (string, error) {
	var version, sync, fsync, autovacuum, planCache string
	err := s.admin.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
		current_setting('fsync'), current_setting('autovacuum'), current_setting('plan_cache_mode')`).
		Scan(&version, &sync, &fsync, &autovacuum, &planCache)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PostgreSQL %s (synchronous_commit %s, fsync %s, autovacuum %s, plan_cache_mode %s)",
		version, sync, fsync, autovacuum, planCache), nil
}
