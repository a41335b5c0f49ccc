// Package oracletest gives tests an Oracle server and isolated Chronicle
// stores on it, so that any package's tests can run against the oracle
// provider.
//
// The server is named by the CHRONICLE_TEST_ORACLE_DSN environment
// variable, a godror connect string (user="chronicle_test"
// password="…" connectString="127.0.0.1:1521/FREEPDB1"). No Oracle server
// can run on the project's machines or in its CI, so without the variable
// the tests that need one are skipped with a loud message — under CI=true
// too, and the test output says so. With the variable set, a server that
// cannot be reached (or a test binary built without cgo, which has no
// driver) fails the test.
//
//	func TestSomething(t *testing.T) {
//		store := oracletest.NewStore(t, oracle.Options{})
//		...
//	}
//
// Every store gets objects of its own: a random prefix CT_<hex> in the
// test user's schema, migrated when the store is created and dropped
// (tables, sequence, AQ queue and queue table) when the test ends, so
// tests may run in parallel and never see each other's data. The test
// user needs the grants the oracle package doc lists.
package oracletest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider/oracle"
)

// EnvDSN is the environment variable naming the test server.
const EnvDSN = "CHRONICLE_TEST_ORACLE_DSN"

// SkipMessage is what a test without a server is skipped with.
const SkipMessage = "!!! no Oracle server: set " + EnvDSN + " to run the Oracle suites; skipping"

// probeTimeout bounds the check that the server is reachable.
const probeTimeout = 15 * time.Second

var (
	mu     sync.Mutex
	pools  = map[string]*sql.DB{}
	probed = map[string]error{}
)

// DSN returns the test server's connect string. Without EnvDSN it skips
// the test loudly (also under CI, where no Oracle server runs); when the
// server named cannot be reached it fails the test. The check runs once
// per process.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skip(SkipMessage)
	}
	if _, err := pool(dsn); err != nil {
		t.Fatalf("Oracle test server of %s is unreachable: %v", EnvDSN, err)
	}
	return dsn
}

// DB returns a connection pool of the test server, shared by the process
// (DSN's checks apply).
func DB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := pool(DSN(t))
	if err != nil {
		t.Fatalf("connect to the Oracle test server: %v", err)
	}
	return db
}

func pool(dsn string) (*sql.DB, error) {
	mu.Lock()
	defer mu.Unlock()
	if err, ok := probed[dsn]; ok {
		return pools[dsn], err
	}
	db, err := sql.Open(oracle.DriverName, dsn)
	if err != nil {
		err = fmt.Errorf("%w (a cgo build with Oracle Instant Client is needed: %v)", err, oracle.ErrNeedsCgo)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err = db.PingContext(ctx)
		cancel()
	}
	probed[dsn], pools[dsn] = err, db
	return db, err
}

// Prefix returns a fresh object prefix, CT_ and 12 hex digits.
func Prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "CT_" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// NewStore returns a migrated store under a fresh prefix of the test
// server (opts.Prefix and opts.MigrateOnStart are overridden; opts.DB
// defaults to [DB]). The store is closed and its objects dropped when the
// test ends.
func NewStore(t testing.TB, opts oracle.Options) *oracle.Store {
	t.Helper()
	if opts.DB == nil && opts.DSN == "" {
		opts.DB = DB(t)
	}
	opts.Prefix = Prefix()
	opts.MigrateOnStart = true
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, err := oracle.New(ctx, opts)
	if err != nil {
		// A migration cut short leaves objects behind: drop what there is.
		if db := opts.DB; db != nil {
			schema := opts.Schema
			if schema == "" {
				_ = db.QueryRowContext(ctx, `SELECT SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA') FROM dual`).Scan(&schema)
			}
			if schema != "" {
				_ = oracle.DropObjects(ctx, db, schema, opts.Prefix)
			}
		}
		t.Fatalf("oracletest: new store: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		db := opts.DB
		if db == nil {
			var err error
			if db, err = pool(opts.DSN); err != nil {
				t.Errorf("oracletest: drop %s.%s: %v", s.Schema(), s.Prefix(), err)
				return
			}
		}
		if err := oracle.DropObjects(ctx, db, s.Schema(), s.Prefix()); err != nil {
			t.Errorf("oracletest: drop %s.%s: %v", s.Schema(), s.Prefix(), err)
		}
	})
	return s
}
