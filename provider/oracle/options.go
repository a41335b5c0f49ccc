package oracle

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// DefaultPrefix is the prefix of the store's object names when
// [Options].Prefix is empty: its tables are CHRONICLE_INSTANCES,
// CHRONICLE_HISTORY and so on.
const DefaultPrefix = "CHRONICLE"

// MaxPrefixLength bounds [Options].Prefix, in bytes. The longest name the
// store derives from it (the prefix, "_", ACTIVITY_TASK_IDS) stays far below
// Oracle's 128-byte identifier limit, and the AQ queue table PREFIX_WQT
// stays within the 24 bytes that older releases allow for queue tables.
const MaxPrefixLength = 20

// maxIdentifierLength is Oracle's identifier limit (12.2 and later).
const maxIdentifierLength = 128

// DefaultListenWait is the default of [Options].ListenWait.
const DefaultListenWait = 5 * time.Second

// Options configure a [Store]. The zero value of every field but the
// connection (DB or DSN) is a usable default.
type Options struct {
	// DB is a connection pool opened with the driver "godror"
	// (sql.Open("godror", dsn)). The store does not close it. Exactly one
	// of DB and DSN must be set.
	DB *sql.DB
	// DSN is a godror connect string (user="chronicle"
	// password="…" connectString="db:1521/APP", or
	// oracle://user:pass@host:1521/service) from which the store opens and
	// owns a pool; Close closes it.
	DSN string
	// Schema names the schema (user) owning the store's objects. Empty
	// means the session's current schema (the connecting user, unless a
	// logon trigger changes CURRENT_SCHEMA). It must be an unquoted Oracle
	// identifier that is not a reserved word; it is used upper-case.
	Schema string
	// Prefix starts the name of every object the store creates: tables
	// <PREFIX>_INSTANCES, <PREFIX>_HISTORY, …, the sequence
	// <PREFIX>_LEASE_TOKENS and the AQ queue <PREFIX>_WQ in queue table
	// <PREFIX>_WQT. It must be an unquoted identifier of at most
	// [MaxPrefixLength] bytes; it is used upper-case. Default
	// [DefaultPrefix]. Several deployments can share a schema under
	// different prefixes.
	Prefix string
	// MigrateOnStart runs [Store.Migrate] in New. Without it, New only
	// checks the schema version and logs a warning when it is not the
	// version this package expects.
	MigrateOnStart bool
	// Mode must be provider.ModeTransactional, the only mode this provider
	// runs in (zero means it).
	Mode provider.Mode
	// Logger receives the store's warnings (listener failures, lost
	// wake-ups, schema version). Default: slog.Default(), as the
	// PostgreSQL and MongoDB stores; pass slog.New(slog.DiscardHandler)
	// to silence it.
	Logger *slog.Logger
	// ListenWait is how long one DBMS_AQ.DEQUEUE call of the work-hint
	// listener waits for a wake message (whole seconds, at least one):
	// it bounds how long Close waits for the listener when the driver
	// cannot interrupt the call. Default [DefaultListenWait].
	ListenWait time.Duration
}

// ErrInvalidOptions is wrapped by the error New returns for bad [Options].
var ErrInvalidOptions = errors.New("oracle: invalid options")

// withDefaults returns the options with defaults filled in, or an error
// naming every bad field.
func (o Options) withDefaults() (Options, error) {
	var problems []string
	switch {
	case o.DB == nil && o.DSN == "":
		problems = append(problems, "one of DB and DSN is required")
	case o.DB != nil && o.DSN != "":
		problems = append(problems, "DB and DSN are mutually exclusive")
	}
	if o.Schema != "" {
		if err := ValidateSchema(o.Schema); err != nil {
			problems = append(problems, err.Error())
		} else {
			o.Schema = strings.ToUpper(o.Schema)
		}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := ValidatePrefix(o.Prefix); err != nil {
		problems = append(problems, err.Error())
	} else {
		o.Prefix = strings.ToUpper(o.Prefix)
	}
	switch o.Mode {
	case 0:
		o.Mode = provider.ModeTransactional
	case provider.ModeTransactional:
	default:
		problems = append(problems, fmt.Sprintf("Mode %s is not supported: the oracle provider runs transactional rounds only", o.Mode))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.ListenWait == 0:
		o.ListenWait = DefaultListenWait
	case o.ListenWait < time.Second:
		problems = append(problems, fmt.Sprintf("ListenWait %v is shorter than a second (DBMS_AQ waits whole seconds)", o.ListenWait))
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return o, nil
}

// ValidateSchema checks that name can be used as [Options].Schema: an
// unquoted Oracle identifier (a letter, then letters, digits, _, $ or #; at
// most 128 bytes) that is not a reserved word.
func ValidateSchema(name string) error {
	if err := validateIdentifier(name, maxIdentifierLength); err != nil {
		return fmt.Errorf("invalid Schema %q: %w", name, err)
	}
	return nil
}

// ValidatePrefix checks that prefix can be used as [Options].Prefix: an
// unquoted Oracle identifier of at most [MaxPrefixLength] bytes that is not
// a reserved word.
func ValidatePrefix(prefix string) error {
	if err := validateIdentifier(prefix, MaxPrefixLength); err != nil {
		return fmt.Errorf("invalid Prefix %q: %w", prefix, err)
	}
	return nil
}

// validateIdentifier checks an unquoted identifier of at most maxLen bytes.
// Only ASCII letters are accepted: the store renders names upper-case and
// quoted, and the upper-case form of other letters depends on the
// database character set.
func validateIdentifier(name string, maxLen int) error {
	switch {
	case name == "":
		return errors.New("empty identifier")
	case len(name) > maxLen:
		return fmt.Errorf("%d bytes, at most %d allowed", len(name), maxLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		switch {
		case i == 0 && !letter:
			return errors.New("an unquoted identifier starts with a letter")
		case letter, '0' <= c && c <= '9', c == '_', c == '$', c == '#':
		default:
			return fmt.Errorf("character %q at byte %d: want letters, digits, _, $ or #", c, i)
		}
	}
	if IsReserved(name) {
		return errors.New("a reserved word of Oracle SQL or PL/SQL")
	}
	return nil
}

// IsReserved reports whether word (in any case) is a reserved word of
// Oracle SQL or PL/SQL, which cannot be an unquoted identifier or a bind
// variable's name.
func IsReserved(word string) bool {
	_, ok := slices.BinarySearch(reservedWords, strings.ToUpper(word))
	return ok
}

// reservedWords are the reserved words of Oracle SQL (V$RESERVED_WORDS with
// RESERVED = 'Y', the SQL Language Reference's list) and of PL/SQL, sorted.
var reservedWords = func() []string {
	words := strings.Fields(`
ACCESS ADD ALL ALTER AND ANY ARRAY AS ASC AT AUDIT BEGIN BETWEEN BY CASE CHAR
CHECK CLOSE CLUSTER CLUSTERS COLAUTH COLUMN COLUMNS COMMENT COMPRESS CONNECT
CRASH CREATE CURRENT CURSOR DATE DECIMAL DECLARE DEFAULT DELETE DESC DISTINCT
DROP ELSE END EXCEPTION EXCLUSIVE EXISTS FETCH FILE FLOAT FOR FROM FUNCTION
GOTO GRANT GROUP HAVING IDENTIFIED IF IMMEDIATE IN INCREMENT INDEX INDEXES
INITIAL INSERT INTEGER INTERSECT INTO IS LEVEL LIKE LOCK LONG MAXEXTENTS MINUS
MLSLABEL MODE MODIFY NOAUDIT NOCOMPRESS NOT NOWAIT NULL NUMBER OF OFFLINE ON
ONLINE OPTION OR ORDER OVERLAPS PCTFREE PRIOR PRIVILEGES PROCEDURE PUBLIC RAW
RENAME RESOURCE REVOKE ROW ROWID ROWNUM ROWS SELECT SESSION SET SHARE SIZE
SMALLINT SQL START SUBTYPE SUCCESSFUL SYNONYM SYSDATE TABAUTH TABLE THEN TO
TRIGGER TYPE UID UNION UNIQUE UPDATE USER VALIDATE VALUES VARCHAR VARCHAR2
VIEW VIEWS WHEN WHENEVER WHERE WITH`)
	slices.Sort(words)
	return slices.Compact(words)
}()

// quote renders a validated identifier as a quoted upper-case name.
func quote(ident string) string { return `"` + strings.ToUpper(ident) + `"` }
