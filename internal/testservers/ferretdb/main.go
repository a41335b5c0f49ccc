// Command ferretdb runs a MongoDB wire-compatible server for Chronicle's
// MongoDB provider tests: FerretDB embedded with its SQLite backend,
// listening on TCP. It runs until it is killed (SIGINT or SIGTERM stop it
// cleanly).
//
// It lives in its own Go module so that FerretDB's dependencies stay out of
// Chronicle's go.mod. scripts/services.sh builds and starts it.
//
//	ferretdb --listen 127.0.0.1:27017 --dir /path/to/data
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "chronicle-ferretdb"), "directory for the SQLite databases (created if missing)")
	verbose := flag.Bool("v", false, "log FerretDB's informational messages and warnings too (every failed command is a warning), not only its errors")
	flag.Parse()

	if err := run(*listen, *dir, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}

func run(listen, dir string, verbose bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	// FerretDB wants a file: URI naming an existing directory, ending in "/".
	// Commits need not reach the disk: the data is a test's, and fsync
	// would set the pace (FerretDB adds WAL journaling and a busy
	// timeout itself).
	sqliteURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs) + "/", RawQuery: "_pragma=synchronous(off)"}).String()

	level := slog.LevelError
	if verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	if err != nil {
		return err
	}

	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	// MongoDBURI waits for the listener that Run starts.
	fmt.Fprintf(os.Stderr, "ferretdb: serving %s (SQLite data in %s)\n", f.MongoDBURI(), abs)

	err = <-done
	fmt.Fprintln(os.Stderr, "ferretdb: stopped")
	return err
}
