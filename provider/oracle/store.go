package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// DriverName is the database/sql driver the store uses: godror, which a
// cgo build registers.
const DriverName = "godror"

// ErrNeedsCgo is returned by [New] in a build without cgo.
var ErrNeedsCgo = errors.New("oracle: the oracle provider needs a cgo build (CGO_ENABLED=1) and Oracle Instant Client at run time")

// Store is the Oracle provider: a [provider.TxStore], [provider.FullStore]
// and [provider.Notifier] on a database/sql pool of the godror driver.
// Create it with [New] or [Open]; it is safe for concurrent use, and any
// number of stores in any number of processes may share one schema and
// prefix.
type Store struct {
	db         *sql.DB
	ownsDB     bool
	names      names
	log        *slog.Logger
	sql        *statements
	listenWait time.Duration

	mu sync.Mutex
	// hints are the channels WorkHint hands out, closed on a wake-up.
	hints provider.Hints
	// locked counts the open rounds of this store holding each instance;
	// NextVisibleAt leaves those instances out, as it cannot see the
	// row locks of other sessions.
	locked   map[string]int
	listener *loop
	closed   bool

	// afterCommit, set by this package's tests, runs after a round's
	// successful commit; its error is returned as the round's, modelling
	// a commit whose outcome the caller cannot know.
	afterCommit func() error
}

var (
	_ provider.TxStore   = (*Store)(nil)
	_ provider.FullStore = (*Store)(nil)
	_ provider.Notifier  = (*Store)(nil)
)

// New returns a store on the pool or DSN of opts. With MigrateOnStart it
// migrates the schema first; otherwise it reads the schema version and
// logs a warning when it is not [LatestSchemaVersion]. The error of bad
// options wraps [ErrInvalidOptions] and names every bad field; in a build
// without cgo New returns [ErrNeedsCgo].
func New(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !cgoBuild {
		return nil, ErrNeedsCgo
	}
	s := &Store{
		db: opts.DB, log: opts.Logger, listenWait: opts.ListenWait,
		locked: map[string]int{},
	}
	if s.db == nil {
		if s.db, err = sql.Open(DriverName, opts.DSN); err != nil {
			return nil, fmt.Errorf("oracle: open %s pool: %w", DriverName, err)
		}
		s.ownsDB = true
	}
	if err := s.start(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Open is [New] with opts.DSN set to dsn.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	opts.DSN = dsn
	return New(ctx, opts)
}

func (s *Store) start(ctx context.Context, opts Options) error {
	schema := opts.Schema
	if schema == "" {
		if err := s.db.QueryRowContext(ctx, `SELECT SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA') FROM dual`).Scan(&schema); err != nil {
			return failf(err, "read the current schema")
		}
		if err := ValidateSchema(schema); err != nil {
			return fmt.Errorf("%w: the session's current schema cannot be used (%w); set Schema", ErrInvalidOptions, err)
		}
	}
	s.names = names{schema: strings.ToUpper(schema), prefix: opts.Prefix}
	s.sql = newStatements(s.names)
	if err := s.checkSession(ctx); err != nil {
		return err
	}
	if opts.MigrateOnStart {
		_, err := s.Migrate(ctx)
		return err
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v != LatestSchemaVersion() {
		s.log.WarnContext(ctx, "chronicle schema is not at the version this package expects; run Migrate",
			slog.String("schema", s.names.schema), slog.String("prefix", s.names.prefix),
			slog.Int("version", v), slog.Int("expected", LatestSchemaVersion()))
	}
	return nil
}

// checkSession refuses sessions whose comparisons and sorts of text are
// linguistic: pages of instances, tasks and dead letters are ordered by
// id and continue after an id, which needs binary order (the default,
// unless NLS_LANG names a language with another sort).
func (s *Store) checkSession(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT parameter, value FROM nls_session_parameters WHERE parameter IN ('NLS_SORT', 'NLS_COMP')`)
	if err != nil {
		return failf(err, "read the session's NLS settings")
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return failf(err, "read the session's NLS settings")
		}
		if !strings.EqualFold(value, "BINARY") {
			bad = append(bad, name+"="+value)
		}
	}
	if err := rows.Err(); err != nil {
		return failf(err, "read the session's NLS settings")
	}
	if len(bad) > 0 {
		return fmt.Errorf("oracle: the session has %s; the store needs NLS_SORT=BINARY and NLS_COMP=BINARY (set NLS_LANG to AMERICAN_AMERICA.AL32UTF8, or NLS_SORT and NLS_COMP in the environment)", strings.Join(bad, ", "))
	}
	return nil
}

// Close stops the work-hint listener and, when the store opened the pool
// from a DSN, closes the pool. It is safe to call more than once. Rounds
// still running fail.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	l := s.listener
	s.listener = nil
	s.mu.Unlock()
	if l != nil {
		l.stop()
	}
	if s.ownsDB && s.db != nil {
		// The pool is gone either way; its Close reports only connections
		// that failed to close.
		_ = s.db.Close()
	}
}

// Schema returns the schema holding the store's objects, upper-case.
func (s *Store) Schema() string { return s.names.schema }

// Prefix returns the prefix of the store's object names, upper-case.
func (s *Store) Prefix() string { return s.names.prefix }

// DB returns the store's connection pool.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the quoted, qualified name of one of the store's tables,
// named as [Tables] lists them ("instances", "history", …), for
// operators' and tests' own queries.
func (s *Store) Table(name string) string { return s.names.object(strings.ToUpper(name)) }

// Mode implements provider.Store: rounds run in one transaction.
func (s *Store) Mode() provider.Mode { return provider.ModeTransactional }

// dbtx is what the provider's statements run on: the pool (each statement
// its own transaction, committed on success) or a transaction.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readCommitted are the options of every transaction the store begins:
// READ COMMITTED whatever the session's default (a logon trigger may make
// it SERIALIZABLE), so that a statement sees every commit before it began
// and a lock, once taken, protects the newest row version.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// inTx runs fn in a transaction of its own and commits when fn returns
// nil; what names the operation in the commit's error.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return failf(err, "%s: begin", what)
	}
	committed := false
	defer func() {
		// A panic in fn must not leave the transaction, and the row
		// locks it holds, open until ctx ends.
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		// fn's error is the one to report; a connection whose rollback
		// failed is discarded by the driver.
		_ = tx.Rollback()
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("oracle: %s: commit: %w", what, translateCommit(err))
	}
	return nil
}

// named is sql.Named: every statement binds by name, so a name used twice
// in a statement is bound once.
func named(name string, value any) sql.NamedArg { return sql.Named(name, value) }

// Binds longer than these go as temporary LOBs: SQL caps RAW binds at
// 2,000 bytes and VARCHAR2 binds at 4,000 bytes (a string may grow up to
// fourfold when converted to the database character set).
const (
	maxInlineBytes = 2000
	maxInlineText  = 1000
)

// blobArg is the bind of a BLOB column's value: NULL for no bytes (Oracle
// does not tell an empty BLOB bind from NULL), a RAW for short values and
// a temporary LOB for long ones.
func blobArg(b []byte) any {
	switch {
	case len(b) == 0:
		return nil
	case len(b) > maxInlineBytes:
		return largeBlob(b)
	}
	return b
}

// textArg is the bind of a CLOB column's value: NULL for "" (as Oracle
// stores it anyway), a VARCHAR2 for short values, a temporary LOB for
// long ones.
func textArg(s string) any {
	switch {
	case s == "":
		return nil
	case len(s) > maxInlineText:
		return largeText(s)
	}
	return s
}

// timeArg is the bind of a time column: Unix nanoseconds, NULL for the
// zero time.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// Times the NUMBER(19) nanosecond columns can hold.
var (
	minTime = time.Unix(0, -1<<63).UTC()
	maxTime = time.Unix(0, 1<<63-1).UTC()
)

// checkTime refuses a time the store cannot keep exactly.
func checkTime(what string, t time.Time) error {
	if !t.IsZero() && (t.Before(minTime) || t.After(maxTime)) {
		return fmt.Errorf("oracle: %s %s is outside the times the store keeps (%d to %d)", what, t.Format(time.RFC3339), minTime.Year(), maxTime.Year())
	}
	return nil
}

// strScan scans a text column into a string, NULL as "".
type strScan struct{ p *string }

// Scan implements sql.Scanner.
func (s strScan) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*s.p = ""
	case string:
		*s.p = v
	case []byte:
		*s.p = string(v)
	default:
		*s.p = fmt.Sprint(v)
	}
	return nil
}

// intScan scans a NUMBER column into an int64, NULL as 0. The driver gives
// numbers as int64, float64 or decimal text.
type intScan struct{ p *int64 }

// Scan implements sql.Scanner.
func (s intScan) Scan(v any) error {
	n, _, err := scanNumber(v)
	*s.p = n
	return err
}

// timeScan scans a nanosecond column into a UTC time, NULL as the zero
// time.
type timeScan struct{ p *time.Time }

// Scan implements sql.Scanner.
func (s timeScan) Scan(v any) error {
	n, ok, err := scanNumber(v)
	if err != nil || !ok {
		*s.p = time.Time{}
		return err
	}
	*s.p = time.Unix(0, n).UTC()
	return nil
}

// scanNumber converts a scanned NUMBER to an int64; ok is false for NULL.
func scanNumber(v any) (n int64, ok bool, err error) {
	switch v := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return v, true, nil
	case int:
		return int64(v), true, nil
	case uint64:
		return int64(v), true, nil
	case float64:
		return int64(v), true, nil
	case []byte:
		n, err = strconv.ParseInt(string(v), 10, 64)
	default:
		n, err = strconv.ParseInt(fmt.Sprint(v), 10, 64)
	}
	if err != nil {
		return 0, false, fmt.Errorf("oracle: scan number %v: %w", v, err)
	}
	return n, true, nil
}

// affected runs a statement and returns the number of rows it changed.
func affected(ctx context.Context, db dbtx, query string, args ...any) (int64, error) {
	r, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func limitOf(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}
