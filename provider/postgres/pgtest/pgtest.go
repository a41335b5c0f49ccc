// Package pgtest gives tests a PostgreSQL server and isolated Chronicle
// stores on it, so that any package's tests can run against the postgres
// provider.
//
// The server is named by the CHRONICLE_TEST_PG_URL environment variable
// (default postgres://127.0.0.1:5432/test). When it cannot be reached,
// tests are skipped with a loud message, except under CI=true, where they
// fail: CI must not pass by testing nothing.
//
//	func TestSomething(t *testing.T) {
//		store := pgtest.NewStore(t, postgres.Options{})
//		...
//	}
//
// Every store lives in a schema of its own, chronicle_test_<random>,
// migrated when it is created and dropped with everything in it when the
// test ends, so tests may run in parallel and never see each other's data.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider/postgres"
)

// EnvURL is the environment variable naming the test server.
const EnvURL = "CHRONICLE_TEST_PG_URL"

// DefaultURL is the test server used when EnvURL is unset.
const DefaultURL = "postgres://127.0.0.1:5432/test"

// probeTimeout bounds the check that the server is reachable.
const probeTimeout = 5 * time.Second

var (
	probeMu sync.Mutex
	probed  = map[string]error{}
)

// URL returns the test server's URL. When the server cannot be reached it
// skips the test with a loud message, or fails it when the environment has
// CI=true. The reachability check runs once per URL and process.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		url = DefaultURL
	}
	err := probeOnce(url)
	if err != nil {
		msg := fmt.Sprintf("!!! PostgreSQL test server %s is unreachable (%v): set %s to a reachable server", url, err, EnvURL)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true, so this fails instead of skipping")
		}
		t.Skip(msg + "; skipping")
	}
	return url
}

// probeOnce returns the outcome of probe(url), probing each URL once per
// process.
func probeOnce(url string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	err, ok := probed[url]
	if !ok {
		err = probe(url)
		probed[url] = err
	}
	return err
}

func probe(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // a probe: only the ping's answer matters
	return conn.Ping(ctx)
}

// Schema returns a new, unused schema name and drops that schema, with
// everything in it, when the test ends. It does not create the schema.
func Schema(t testing.TB) string {
	t.Helper()
	url := URL(t)
	schema := randomSchema(t, "chronicle_test_")
	t.Cleanup(func() { Drop(t, url, schema) })
	return schema
}

// randomSchema returns prefix followed by 16 random hex digits.
func randomSchema(t testing.TB, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// Drop drops schema and everything in it.
func Drop(t testing.TB, url, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer func() { _ = conn.Close(ctx) }() // the drop's own error is reported below
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// NewStore returns a store on a fresh, migrated schema of the test server
// (opts.Schema and opts.MigrateOnStart are overridden; opts.URL defaults
// to [URL]). The store is closed and its schema dropped when the test
// ends.
func NewStore(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	if opts.Pool == nil && opts.URL == "" {
		opts.URL = URL(t)
	}
	opts.Schema = Schema(t)
	s := migrated(t, opts)
	t.Cleanup(s.Close)
	return s
}

// migrated opens a store on opts.Schema, migrating it.
func migrated(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.MigrateOnStart = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.New(ctx, opts)
	if err != nil {
		t.Fatalf("pgtest: new store: %v", err)
	}
	return s
}

// EnvCitusURL is the environment variable naming the coordinator of a
// Citus cluster for the Citus tests (scripts/citus.sh url). A database on
// it must have the citus extension and the workers added.
const EnvCitusURL = "CHRONICLE_TEST_CITUS_URL"

// CitusURL returns the Citus coordinator of EnvCitusURL. When the variable
// is unset it skips the test with a loud message, under CI=true too:
// Citus is not in Debian's packages and cannot be installed from this
// repository's files (docs/scaling.md says how to build it, and
// scripts/services.sh starts a local cluster when it is installed). A set
// but unreachable coordinator fails the test.
func CitusURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvCitusURL)
	if url == "" {
		t.Skip("!!! " + EnvCitusURL + " is unset: skipping the Citus test. Citus is not in Debian's packages and cannot be " +
			"installed from this repository's files; build it as docs/scaling.md says, and make services starts a local " +
			"cluster (scripts/citus.sh) and sets the variable")
	}
	err := probeOnce(url)
	if err != nil {
		t.Fatalf("pgtest: the Citus coordinator %s=%s is unreachable: %v", EnvCitusURL, url, err)
	}
	return url
}

// NewCitusStore returns a store whose tables are distributed on the Citus
// cluster of [CitusURL], in a fresh schema of its own (opts.Schema,
// opts.MigrateOnStart and opts.Citus are overridden; opts.URL defaults to
// CitusURL). The store is closed and its schema dropped, with its shards
// on the workers, when the test ends.
func NewCitusStore(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	url := CitusURL(t)
	schema := randomSchema(t, "chronicle_citus_")
	t.Cleanup(func() { Drop(t, url, schema) })
	s := openCitus(t, url, schema, opts)
	t.Cleanup(s.Close)
	return s
}

// openCitus opens a distributed store on schema of the Citus coordinator
// url, migrating and distributing it if needed (opts.Schema,
// opts.MigrateOnStart and opts.Citus are overridden; opts.URL defaults to
// url).
func openCitus(t testing.TB, url, schema string, opts postgres.Options) *postgres.Store {
	t.Helper()
	if opts.Pool == nil && opts.URL == "" {
		opts.URL = url
	}
	opts.Schema, opts.MigrateOnStart, opts.Citus = schema, true, true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := postgres.New(ctx, opts)
	if err != nil {
		t.Fatalf("pgtest: new Citus store: %v", err)
	}
	if !s.Distributed() {
		t.Fatalf("pgtest: the Citus store of schema %s is not distributed", schema)
	}
	return s
}

// Stores returns a maker of stores for the subtests of t, as [NewStore]
// makes them, except that schemas are reused: migrating a new schema takes
// the server about 200 ms, most of the time of a suite of hundreds of
// small tests. When a subtest ends, its store is closed and its schema
// emptied as a new one is (every row deleted but those of the migrations
// and the settings, every sequence restarted), ready for the next
// subtest; every schema is dropped when t ends. A store made here differs
// from a new one only in what the server keeps of the rows deleted (dead
// tuples, statistics), which no result depends on. Give opts a URL rather
// than a Pool: a store closes the pool it opened, so nothing of a subtest
// writes to its schema once it is emptied.
func Stores(t testing.TB, opts postgres.Options) func(t testing.TB) *postgres.Store {
	t.Helper()
	url := URL(t)
	if opts.Pool == nil && opts.URL == "" {
		opts.URL = url
	}
	return reuse(t, url, "chronicle_test_", func(st testing.TB, schema string) *postgres.Store {
		st.Helper()
		o := opts
		o.Schema = schema
		return migrated(st, o)
	}, deleteRows)
}

// CitusStores returns a maker of distributed stores for the subtests of
// t, as [NewCitusStore] makes them, except that schemas are reused:
// distributing a schema's tables takes Citus seconds, which a suite of
// many small tests would spend again and again. When a subtest ends, its
// store is closed and its schema emptied (every table but the migrations
// and the settings TRUNCATEd), ready for the next subtest; every schema
// is dropped when t ends. Identity sequences are not reset, so a store
// made here may number its rows after those of an earlier test.
func CitusStores(t testing.TB, opts postgres.Options) func(t testing.TB) *postgres.Store {
	t.Helper()
	url := CitusURL(t)
	return reuse(t, url, "chronicle_citus_", func(st testing.TB, schema string) *postgres.Store {
		return openCitus(st, url, schema, opts)
	}, empty)
}

// reuse returns a maker of stores on schemas of the server url named
// prefix followed by random digits: open opens a store on a schema, new
// or one that empty has emptied after an earlier subtest. Every schema is
// dropped when t ends.
func reuse(t testing.TB, url, prefix string, open func(st testing.TB, schema string) *postgres.Store,
	empty func(url, schema string) error) func(t testing.TB) *postgres.Store {
	t.Helper()
	var (
		mu      sync.Mutex
		free    []string
		schemas []string
	)
	t.Cleanup(func() {
		for _, schema := range schemas {
			Drop(t, url, schema)
		}
	})
	return func(st testing.TB) *postgres.Store {
		st.Helper()
		mu.Lock()
		schema := ""
		if n := len(free); n > 0 {
			schema, free = free[n-1], free[:n-1]
		}
		mu.Unlock()
		if schema == "" {
			schema = randomSchema(st, prefix)
			mu.Lock()
			schemas = append(schemas, schema)
			mu.Unlock()
		}
		s := open(st, schema)
		st.Cleanup(func() {
			s.Close()
			if err := empty(url, schema); err != nil {
				st.Errorf("pgtest: empty schema %s: %v", schema, err)
				return
			}
			mu.Lock()
			free = append(free, schema)
			mu.Unlock()
		})
		return s
	}
}

// deleteRows deletes every row of schema but those of schema_migrations and
// store_settings, and restarts its sequences, in one transaction: on the
// few rows a test writes, far cheaper than TRUNCATE, which gives every
// table and index a new file.
func deleteRows(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // the deletes' own error is returned
	tables, err := baseTables(ctx, conn, schema)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, table := range tables {
		b.Queue("DELETE FROM " + table)
	}
	b.Queue(`SELECT count(setval(s.seqrelid, s.seqstart, false)) FROM pg_sequence s
JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, schema)
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// baseTables returns the quoted names of schema's tables but
// schema_migrations and store_settings.
func baseTables(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	rows, err := conn.Query(ctx, `
SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
WHERE table_schema = $1 AND table_type = 'BASE TABLE' AND table_name NOT IN ('schema_migrations', 'store_settings')
ORDER BY table_name`, schema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// empty truncates every table of schema but schema_migrations and
// store_settings.
func empty(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // the truncate's own error is returned
	tables, err := baseTables(ctx, conn, schema)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "TRUNCATE "+strings.Join(tables, ", "))
	return err
}
