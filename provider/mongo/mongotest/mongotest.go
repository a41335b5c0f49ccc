// Package mongotest gives tests a MongoDB wire server and isolated
// Chronicle stores on it, so that any package's tests can run against the
// mongo provider.
//
// Two servers are known. The peek-lock server, named by
// CHRONICLE_TEST_FERRETDB_URL, else by the file .services/ferretdb.url of
// the checkout (where `make services` writes the URL of the FerretDB it
// started: another port than 27017 when that one is held by a server the
// checkout did not start), else mongodb://127.0.0.1:27017/, has no
// transactions: stores on
// it run peek-lock rounds. When it cannot be reached, tests are skipped
// with a loud message, except under CI=true, where they fail. The
// transactional server, a replica set named by CHRONICLE_TEST_MONGO_URL,
// is optional: without it the tests that need it are skipped with a loud
// message, under CI too, since no replica set runs there.
//
// Every store lives in a database of its own, chronicle_test_<random>,
// migrated when it is created and dropped when the test ends.
package mongotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
)

// Environment variables naming the test servers.
const (
	EnvFerretURL = "CHRONICLE_TEST_FERRETDB_URL"
	EnvMongoURL  = "CHRONICLE_TEST_MONGO_URL"
)

// DefaultFerretURL is the peek-lock test server used when EnvFerretURL is
// unset and no URL file is found.
const DefaultFerretURL = "mongodb://127.0.0.1:27017/"

// URLFile is where `make services` (scripts/services.sh) writes the URL of
// the FerretDB it started, relative to the checkout's root.
const URLFile = ".services/ferretdb.url"

// ferretURL returns the peek-lock test server's URL and where it was
// found: the environment variable, else the URL file in dir or the
// nearest folder above it that has one, else the default.
func ferretURL(getenv func(string) string, dir string) (url, from string) {
	if url := getenv(EnvFerretURL); url != "" {
		return url, EnvFerretURL
	}
	for d := dir; d != ""; {
		path := filepath.Join(d, URLFile)
		if data, err := os.ReadFile(path); err == nil {
			if url := strings.TrimSpace(string(data)); url != "" {
				return url, path
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return DefaultFerretURL, "the default"
}

var (
	mu      sync.Mutex
	clients = map[string]*mongo.Client{}
	probed  = map[string]error{}
)

// URL returns the peek-lock test server's URL, skipping the test loudly
// (failing it under CI=true) when the server cannot be reached.
func URL(t testing.TB) string {
	t.Helper()
	dir, _ := os.Getwd() // the package's folder under go test
	url, from := ferretURL(os.Getenv, dir)
	if _, err := client(url); err != nil {
		msg := fmt.Sprintf("!!! MongoDB wire test server (FerretDB) %s (from %s) is unreachable (%v): run `make services` or set %s", url, from, err, EnvFerretURL)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true, so this fails instead of skipping")
		}
		t.Skip(msg + "; skipping")
	}
	return url
}

// ReplicaSetURL returns the transactional test server's URL, or skips the
// test loudly when CHRONICLE_TEST_MONGO_URL is unset (also under CI, where
// no replica set runs) and fails it when the server is unreachable.
func ReplicaSetURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvMongoURL)
	if url == "" {
		t.Skip("!!! no MongoDB replica set: set " + EnvMongoURL + " to run the transactional-mode suites; skipping")
	}
	if _, err := client(url); err != nil {
		t.Fatalf("MongoDB replica set %s (%s) is unreachable: %v", url, EnvMongoURL, err)
	}
	return url
}

// Client returns a client of the server at url, shared by the process.
func Client(t testing.TB, url string) *mongo.Client {
	t.Helper()
	c, err := client(url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	return c
}

func client(url string) (*mongo.Client, error) {
	mu.Lock()
	defer mu.Unlock()
	if err, ok := probed[url]; ok {
		return clients[url], err
	}
	c, err := mongo.Connect(options.Client().ApplyURI(url).SetServerSelectionTimeout(5 * time.Second))
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
		cancel()
	}
	probed[url], clients[url] = err, c
	return c, err
}

// NewStore returns a migrated store in a fresh database of the peek-lock
// test server, dropped when the test ends. opts.Client and opts.Database
// are set by NewStore unless given.
func NewStore(t testing.TB, opts chmongo.Options) *chmongo.Store {
	t.Helper()
	return NewStoreAt(t, URL(t), opts)
}

// NewStoreAt is NewStore on the server at url.
func NewStoreAt(t testing.TB, url string, opts chmongo.Options) *chmongo.Store {
	t.Helper()
	if opts.Client == nil {
		opts.Client = Client(t, url)
	}
	if opts.Database == "" {
		opts.Database = Database()
	}
	opts.MigrateOnStart = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := chmongo.New(ctx, opts)
	if err != nil {
		t.Fatalf("mongotest: new store: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := opts.Client.Database(opts.Database).Drop(ctx); err != nil {
			t.Errorf("mongotest: drop database %s: %v", opts.Database, err)
		}
	})
	return s
}

// Database returns a fresh database name.
func Database() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "chronicle_test_" + hex.EncodeToString(b[:])
}
