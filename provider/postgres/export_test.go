package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider"
)

// SetAfterCommit installs the test hook that runs after a round's commit;
// its error is returned as the round's.
func SetAfterCommit(s *Store, hook func() error) { s.afterCommit = hook }

// BackendPID returns the server process id of a round's connection.
func BackendPID(tx provider.Tx) uint32 { return tx.(*roundTx).tx.Conn().PgConn().PID() }

// MigrateTo applies the embedded migrations up to version only.
func MigrateTo(ctx context.Context, s *Store, version int) (int, error) {
	return migrate(ctx, s.pool, s.schema, version, s.createPartitions)
}

// DefaultLogger returns the logger of Options without one.
func DefaultLogger() *slog.Logger {
	o, _ := Options{URL: "postgres://x"}.withDefaults()
	return o.Logger
}

// QueueStatements returns the texts of the statements that pick queued
// work, by name, for the plan tests.
func QueueStatements(s *Store) map[string]string {
	return map[string]string{
		"dequeueLock":       s.sql.dequeueLock,
		"dequeuePick":       s.sql.dequeuePick,
		"claimActivity":     s.sql.claimActivity,
		"claimCandidate":    s.sql.claimCandidate,
		"claimOrder":        s.sql.claimOrder,
		"countClaims":       s.sql.countClaims,
		"nextOrchestration": s.sql.nextOrchestration,
		"nextActivity":      s.sql.nextActivity,
		"anyMessages":       s.sql.anyMessages,
	}
}

// NotifierStopping returns a channel closed when Close starts stopping
// the store's NOTIFY sender, or nil when none runs.
func NotifierStopping(s *Store) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notifier == nil {
		return nil
	}
	return s.notifier.stopping
}

// OrchestrationHint returns the orchestration queue's current hint
// channel without starting the store's listener (whose connection would
// close it).
func OrchestrationHint(s *Store) <-chan struct{} { return s.hints.Channel(provider.QueueOrchestration) }

// TxQueryRow runs sql in a round's transaction.
func TxQueryRow(ctx context.Context, tx provider.Tx, sql string, args ...any) pgx.Row {
	return tx.(*roundTx).tx.QueryRow(ctx, sql, args...)
}

// PartitionPayload and ParsePayload write and read the payload of a
// work-hint NOTIFY.
var (
	PartitionPayload = partitionPayload
	ParsePayload     = parsePayload
)

// ChannelName returns the NOTIFY channel of queue q of a schema.
func ChannelName(schema string, q provider.Queue) string { return channelName(schema, q) }

// Statements returns the texts of every statement of the store's
// statement set, by field name (the purge statements as purge0, purge1, …).
func Statements(s *Store) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(s.sql).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			if f.String() != "" {
				out[name] = f.String()
			}
		case reflect.Slice:
			for j := range f.Len() {
				out[fmt.Sprintf("%s%d", name, j)] = f.Index(j).String()
			}
		}
	}
	return out
}

// RCBatch sends the statements through the store's rcPool, as one
// write outside a round, and returns the row of the last one.
func RCBatch(ctx context.Context, s *Store, sqls ...string) pgx.Row {
	b := &pgx.Batch{}
	for _, sql := range sqls {
		b.Queue(sql)
	}
	br := s.rc.SendBatch(ctx, b)
	for range len(sqls) - 1 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return errRow{err}
		}
	}
	return closingRow{br.QueryRow(), br}
}

type closingRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r closingRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if closeErr := r.br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// RoundConn returns the connection of a round's transaction.
func RoundConn(tx provider.Tx) *pgx.Conn { return tx.(*roundTx).tx.Conn() }
