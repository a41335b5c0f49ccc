package postgres

import (
	"context"
	"log/slog"

	"github.com/chronicleflow/chronicle/provider"
)

// SetAfterCommit installs the test hook that runs after a round's commit;
// its error is returned as the round's.
func SetAfterCommit(s *Store, hook func() error) { s.afterCommit = hook }

// BackendPID returns the server process id of a round's connection.
func BackendPID(tx provider.Tx) uint32 { return tx.(*roundTx).tx.Conn().PgConn().PID() }

// MigrateTo applies the embedded migrations up to version only.
func MigrateTo(ctx context.Context, s *Store, version int) (int, error) {
	return migrate(ctx, s.pool, s.schema, version)
}

// DefaultLogger returns the logger of Options without one.
func DefaultLogger() *slog.Logger {
	o, _ := Options{URL: "postgres://x"}.withDefaults()
	return o.Logger
}
