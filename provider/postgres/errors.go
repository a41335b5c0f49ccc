package postgres

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrRetryable is wrapped by errors that PostgreSQL raises when concurrent
// transactions collide (serialization failure, deadlock, lock timeout): the
// operation changed nothing and can be retried as it is. A round that fails
// with it is put back by the runner like any failed round.
var ErrRetryable = errors.New("postgres: transient conflict, retry")

// PostgreSQL error codes the provider translates.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeUndefinedTable       = "42P01"
	codeUndefinedColumn      = "42703"
	codeInvalidSchemaName    = "3F000"
)

// PartitionsError reports a store opened with a partition count
// ([Options].Partitions) other than the one recorded when it was created.
type PartitionsError struct {
	Schema    string
	Recorded  int
	Requested int
}

// Error implements error.
func (e *PartitionsError) Error() string {
	return fmt.Sprintf("postgres: schema %s was created with %d partitions, opened with %d; the count cannot change (leave Options.Partitions 0 to use the recorded one)",
		e.Schema, e.Recorded, e.Requested)
}

// ErrNotMigrated is matched by a *[NotMigratedError].
var ErrNotMigrated = errors.New("postgres: schema not migrated")

// NotMigratedError reports that the store's schema lacks a table or
// column this package uses: a migration was not applied. Run `chronicle
// migrate` (or [Store.Migrate], or set [Options].MigrateOnStart).
type NotMigratedError struct {
	// Missing is what the server found missing (its message:
	// `relation "chronicle.checkpoints" does not exist`).
	Missing string
	// Migration names the embedded migration that creates it
	// ("0003_checkpoints.sql"), or is empty when it is not known.
	Migration string
	// Err is the server's error (a *pgconn.PgError).
	Err error
}

// Error implements error.
func (e *NotMigratedError) Error() string {
	if e.Migration != "" {
		return fmt.Sprintf("postgres: %s: migration %s is not applied to the schema; run chronicle migrate (Store.Migrate)", e.Missing, e.Migration)
	}
	return fmt.Sprintf("postgres: %s: the schema is not migrated to version %d; run chronicle migrate (Store.Migrate)", e.Missing, LatestSchemaVersion())
}

// Is reports whether target is [ErrNotMigrated].
func (e *NotMigratedError) Is(target error) bool { return target == ErrNotMigrated }

// Unwrap returns the server's error.
func (e *NotMigratedError) Unwrap() error { return e.Err }

// translate maps a driver error to the contract's errors: it is the one
// place where pgx errors become round errors. No rows is
// [provider.ErrNotFound], a unique violation [provider.ErrConflict], transaction
// collisions [ErrRetryable], a missing table, column or schema a
// [*NotMigratedError]; anything else is returned as it is, so
// errors.Is sees context errors and errors.As sees *pgconn.PgError.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w: %s (%s)", provider.ErrConflict, pgErr.Message, pgErr.ConstraintName)
		case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
			return fmt.Errorf("%w: %w", ErrRetryable, err)
		case codeUndefinedTable, codeUndefinedColumn, codeInvalidSchemaName:
			return &NotMigratedError{Missing: pgErr.Message, Migration: missingMigration(pgErr), Err: err}
		}
	}
	return err
}

// failf wraps a driver error with what was being done, after translating
// it; nil stays nil.
func failf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: "+format+": %w", append(args, translate(err))...)
}
