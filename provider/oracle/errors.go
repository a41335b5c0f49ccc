package oracle

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
)

// ErrRetryable is wrapped by errors that Oracle raises when concurrent
// transactions collide (deadlock ORA-00060, serialization failure
// ORA-08177, a busy resource ORA-00054 or ORA-30006) or when the connection
// is lost: the operation changed nothing, or (see [ErrOutcomeUnknown]) may
// have committed, and can be retried as it is. A round that fails with it
// is put back by the runner like any failed round.
var ErrRetryable = errors.New("oracle: transient failure, retry")

// ErrOutcomeUnknown is wrapped, together with [ErrRetryable], by the error
// of a commit whose connection was lost: the commit may or may not have
// happened. Every write of the store is idempotent (appends by Seq and
// hash, enqueues by id, projections by Seq), so running it again is safe.
var ErrOutcomeUnknown = errors.New("oracle: connection lost during commit, outcome unknown")

// ErrInvalidArgument is wrapped by the error of a call whose params the
// store refuses before it runs a statement: a priority outside
// [provider.MinPriority, provider.MaxPriority], a concurrency key or limit
// that [provider.ValidateLimit] refuses, a rate limit that
// [provider.RateLimit.Validate] refuses, too many queues.
var ErrInvalidArgument = errors.New("oracle: invalid argument")

// ErrConnectionLost is wrapped, together with [ErrRetryable], by the error
// of a statement whose connection was lost before a commit: the server
// rolled the transaction back.
var ErrConnectionLost = errors.New("oracle: connection lost")

// Oracle error codes the provider translates.
const (
	codeUniqueViolation   = 1     // ORA-00001: unique constraint violated
	codeResourceBusy      = 54    // ORA-00054: resource busy and acquire with NOWAIT
	codeDeadlock          = 60    // ORA-00060: deadlock detected while waiting for resource
	codeNoSuchTable       = 942   // ORA-00942: table or view does not exist
	codeCannotSerialize   = 8177  // ORA-08177: can't serialize access for this transaction
	codeValueTooLarge     = 12899 // ORA-12899: value too large for column
	codeBusyWaitTimeout   = 30006 // ORA-30006: resource busy; acquire with WAIT timeout expired
	codeDequeueTimeout    = 25228 // ORA-25228: timeout or end-of-fetch during message dequeue
	codeNameInUse         = 955   // ORA-00955: name is already used by an existing object
	codeIndexExists       = 1408  // ORA-01408: such column list already indexed
	codeColumnExists      = 1430  // ORA-01430: column being added already exists in table
	codePrimaryKeyExists  = 2260  // ORA-02260: table can have only one primary key
	codeConstraintExists  = 2275  // ORA-02275: such a referential constraint already exists
	codeConstraintName    = 2264  // ORA-02264: name already used by an existing constraint
	codeQueueTableExists  = 24001 // ORA-24001: cannot create QUEUE_TABLE, already exists
	codeQueueExists       = 24006 // ORA-24006: cannot create QUEUE, already exists
	codeQueueTableMissing = 24002 // ORA-24002: QUEUE_TABLE does not exist
	codeQueueMissing      = 24010 // ORA-24010: QUEUE does not exist
	codeObjectMissing     = 4043  // ORA-04043: object does not exist
	codeSequenceMissing   = 2289  // ORA-02289: sequence does not exist
)

// lostConnectionCodes are the errors of a connection that is gone: the
// server ended the session or the network broke. A transaction open on it
// was rolled back; a commit in flight may have happened.
var lostConnectionCodes = map[int]bool{
	28:    true, // your session has been killed
	31:    true, // your session has been marked for kill
	45:    true, // your session has been terminated with no replay
	603:   true, // ORACLE server session terminated by fatal error
	1012:  true, // not logged on
	1033:  true, // ORACLE initialization or shutdown in progress
	1034:  true, // ORACLE not available
	1089:  true, // immediate shutdown or close in progress
	1092:  true, // ORACLE instance terminated. Disconnection forced
	2396:  true, // exceeded maximum idle time
	3106:  true, // fatal two-task communication protocol error
	3113:  true, // end-of-file on communication channel
	3114:  true, // not connected to ORACLE
	3135:  true, // connection lost contact
	12153: true, // TNS:not connected
	12170: true, // TNS:Connect timeout occurred
	12537: true, // TNS:connection closed
	12547: true, // TNS:lost contact
	12570: true, // TNS:packet reader failure
	12571: true, // TNS:packet writer failure
	12583: true, // TNS:no reader
	25408: true, // can not safely replay call
}

// oracleCode returns the ORA- code of err, or 0. The driver's errors
// (godror's *OraErr) have a Code method; matching on that interface keeps
// this file free of the driver, so it compiles, and is tested, without cgo.
func oracleCode(err error) int {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	return 0
}

// isLostConnection reports whether err says the connection is gone.
func isLostConnection(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || lostConnectionCodes[oracleCode(err)]
}

// translate maps a driver error to the contract's errors: it is the one
// place where driver errors become the store's. No rows is
// [provider.ErrNotFound], ORA-00001 [provider.ErrConflict], deadlocks,
// serialization failures and busy resources [ErrRetryable], a lost
// connection [ErrConnectionLost] (retryable); anything else is returned
// as it is, so errors.Is sees context errors and errors.As the driver's
// error.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	if isLostConnection(err) {
		return fmt.Errorf("%w: %w: %w", ErrConnectionLost, ErrRetryable, err)
	}
	switch oracleCode(err) {
	case codeUniqueViolation:
		return fmt.Errorf("%w: %w", provider.ErrConflict, err)
	case codeDeadlock, codeCannotSerialize, codeResourceBusy, codeBusyWaitTimeout:
		return fmt.Errorf("%w: %w", ErrRetryable, err)
	case codeNoSuchTable:
		return fmt.Errorf("%w (is the schema migrated? see Store.Migrate)", err)
	case codeValueTooLarge:
		return fmt.Errorf("%w (a value exceeds the column's size; see the limits in the package doc)", err)
	}
	return err
}

// translateCommit maps the error of a COMMIT: a lost connection makes the
// outcome unknown ([ErrOutcomeUnknown], retryable); other errors are
// translated as any.
func translateCommit(err error) error {
	if err == nil {
		return nil
	}
	if isLostConnection(err) {
		return fmt.Errorf("%w: %w: %w", ErrOutcomeUnknown, ErrRetryable, err)
	}
	return translate(err)
}

// failf wraps a driver error with what was being done, after translating
// it; nil stays nil.
func failf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("oracle: "+format+": %w", append(args, translate(err))...)
}

// isDuplicate reports whether err is a unique constraint violation.
func isDuplicate(err error) bool { return oracleCode(err) == codeUniqueViolation }

// alreadyExists reports whether err says that the object a DDL statement
// creates is there already: a migration step that ran before its record
// was written.
func alreadyExists(err error) bool {
	switch oracleCode(err) {
	case codeNameInUse, codeIndexExists, codeColumnExists, codePrimaryKeyExists,
		codeConstraintExists, codeConstraintName, codeQueueTableExists, codeQueueExists:
		return true
	}
	return false
}

// alreadyGone reports whether err says that the object a drop removes is
// not there.
func alreadyGone(err error) bool {
	switch oracleCode(err) {
	case codeNoSuchTable, codeSequenceMissing, codeQueueTableMissing, codeQueueMissing, codeObjectMissing:
		return true
	}
	return false
}
