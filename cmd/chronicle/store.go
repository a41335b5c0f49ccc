package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

// checkStoreURL rejects a --store value no build could open, before any
// work is done: "memory", a postgres:// (postgresql://) URL, a mongodb://
// (mongodb+srv://) URL or an oracle:// URL.
func checkStoreURL(url string) error {
	switch {
	case url == "memory", isPostgres(url), isMongo(url), isOracle(url):
		return nil
	}
	return fmt.Errorf("unsupported --store %q: use \"memory\", a postgres:// URL, a mongodb:// URL or an oracle:// URL", url)
}

func isOracle(url string) bool { return strings.HasPrefix(url, "oracle://") }

func isMongo(url string) bool {
	return strings.HasPrefix(url, "mongodb://") || strings.HasPrefix(url, "mongodb+srv://")
}

func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// openStore opens the store named by url and returns it with the function
// that closes it. "memory" is a new, empty memory store (the caller seeds
// it with the demo data); a postgres:// URL selects PostgreSQL, with its
// tables under schema ("" for the provider's default); a mongodb:// URL
// selects MongoDB, with its collections in the database schema names (""
// for the URL's, else the provider's default); an oracle:// URL selects
// Oracle, with its objects in the schema (owner) schema names ("" for the
// connecting user's).
func openStore(ctx context.Context, url, schema string) (provider.Store, func(), error) {
	switch {
	case url == "memory":
		return memory.New(memory.Options{}), func() {}, nil
	case isPostgres(url):
		store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
		if err != nil {
			return nil, nil, err
		}
		return current(ctx, store, store.Close, store.SchemaVersion, postgres.LatestSchemaVersion(), "schema "+store.Schema())
	case isMongo(url):
		store, err := mongo.Open(ctx, url, mongo.Options{Database: schema, Logger: quietLogger()})
		if err != nil {
			return nil, nil, err
		}
		return current(ctx, store, store.Close, store.SchemaVersion, mongo.LatestSchemaVersion(), "database "+store.Database())
	case isOracle(url):
		// A build without cgo has no Oracle driver: Open says so.
		store, err := oracle.Open(ctx, url, oracle.Options{Schema: strings.ToUpper(schema), Logger: quietLogger()})
		if err != nil {
			return nil, nil, err
		}
		return current(ctx, store, store.Close, store.SchemaVersion, oracle.LatestSchemaVersion(), "schema "+store.Schema()+" (prefix "+store.Prefix()+")")
	}
	return nil, nil, checkStoreURL(url)
}

// quietLogger passes on the warnings of a store the tool opens, not its
// informational records (the mode it chose, say).
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// current returns store with its closer when its schema is at latest, and
// closes it with an error that says to run chronicle migrate otherwise;
// what names the schema in that error.
func current(ctx context.Context, store provider.Store, closeStore func(), version func(context.Context) (int, error), latest int, what string) (provider.Store, func(), error) {
	v, err := version(ctx)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	if v != latest {
		closeStore()
		return nil, nil, fmt.Errorf("%s is at version %d, this chronicle needs %d: run chronicle migrate", what, v, latest)
	}
	return store, closeStore, nil
}
