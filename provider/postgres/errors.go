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
)

// translate maps a driver error to the contract's errors: it is the one
// place where pgx errors become round errors. No rows is
// [provider.ErrNotFound], a unique violation [provider.ErrConflict], transaction
// collisions [ErrRetryable]; anything else is returned as it is, so
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
