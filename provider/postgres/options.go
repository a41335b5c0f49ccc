package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema the store's tables live in when
// [Options].Schema is empty.
const DefaultSchema = "chronicle"

// schemaPattern is what a schema name must match: a lower-case SQL
// identifier that needs no quoting and fits PostgreSQL's 63-byte limit.
var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Options configure a [Store]. The zero value of every field but the
// connection (Pool or URL) is a usable default.
type Options struct {
	// Pool is the connection pool to use. The store does not close it.
	// Exactly one of Pool and URL must be set.
	Pool *pgxpool.Pool
	// URL is a PostgreSQL connection string (URL or key=value form) from
	// which the store opens and owns a pool; Close closes it.
	URL string
	// Schema names the schema holding the store's tables. It must match
	// ^[a-z_][a-z0-9_]{0,62}$; default [DefaultSchema].
	Schema string
	// MigrateOnStart runs [Store.Migrate] in New. Without it, New only
	// checks the schema version and logs a warning when it is not the
	// version this package expects.
	MigrateOnStart bool
	// Mode must be provider.ModeTransactional, the only mode this provider
	// runs in (zero means it).
	Mode provider.Mode
	// Logger receives the store's warnings (listener failures, a schema
	// not at [LatestSchemaVersion]). Default: slog.Default(), as the
	// MongoDB and Oracle stores; pass slog.New(slog.DiscardHandler) to
	// silence it.
	Logger *slog.Logger
	// NotifyInterval is the least time between two NOTIFYs of one queue's
	// channel: new work is announced to other processes after the commit
	// that queued it, outside any writing transaction, and announcements
	// within the interval are coalesced into one. Default 5ms; workers
	// of this process are woken at once regardless.
	NotifyInterval time.Duration
	// Partitions is the partition count of a store this Store creates
	// (see provider.PartitionOf): it is recorded in the store when its
	// schema is created, and only then. Zero creates a store of one
	// partition and opens a store of whatever count it recorded; any
	// other value must equal the recorded count, or New fails with a
	// *[PartitionsError]. The count cannot change after creation (see
	// docs/scaling.md).
	Partitions int
	// Citus distributes the store's tables on the Citus cluster whose
	// coordinator the connection names (see [Store.Distribute] and
	// docs/scaling.md): with MigrateOnStart, New distributes them after
	// migrating, unless they are already. A store opened without Citus
	// on a distributed schema finds out by itself and uses the same
	// statements; Citus without MigrateOnStart only requires that the
	// schema be distributed.
	Citus bool
}

// withDefaults returns the options with defaults filled in, or an error
// listing every problem.
func (o Options) withDefaults() (Options, error) {
	var problems []string
	switch {
	case o.Pool == nil && o.URL == "":
		problems = append(problems, "one of Pool and URL is required")
	case o.Pool != nil && o.URL != "":
		problems = append(problems, "Pool and URL are mutually exclusive")
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := ValidateSchema(o.Schema); err != nil {
		problems = append(problems, err.Error())
	}
	switch o.Mode {
	case 0:
		o.Mode = provider.ModeTransactional
	case provider.ModeTransactional:
	default:
		problems = append(problems, fmt.Sprintf("Mode %s is not supported: the postgres provider runs transactional rounds only", o.Mode))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.NotifyInterval == 0:
		o.NotifyInterval = DefaultNotifyInterval
	case o.NotifyInterval < 0:
		problems = append(problems, fmt.Sprintf("NotifyInterval %v is negative", o.NotifyInterval))
	}
	if o.Partitions < 0 || o.Partitions > MaxPartitions {
		problems = append(problems, fmt.Sprintf("Partitions %d is out of range [0, %d]", o.Partitions, MaxPartitions))
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return o, nil
}

// MaxPartitions is the largest partition count a store can have
// ([provider.MaxPartitions]).
const MaxPartitions = provider.MaxPartitions

// DefaultNotifyInterval is the default of [Options].NotifyInterval.
const DefaultNotifyInterval = 5 * time.Millisecond

// ErrInvalidOptions is wrapped by the error New returns for bad [Options].
var ErrInvalidOptions = errors.New("postgres: invalid options")

// ValidateSchema checks that name can be used as [Options].Schema.
func ValidateSchema(name string) error {
	if !schemaPattern.MatchString(name) {
		return fmt.Errorf("invalid Schema %q: want a lower-case identifier matching %s", name, schemaPattern)
	}
	return nil
}
