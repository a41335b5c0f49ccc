package chronicle

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
	"github.com/chronicleflow/chronicle/round"
)

// Options configure an [Engine]. The zero value of every field takes the
// default documented on it.
type Options struct {
	// NodeID names this process in history ("worker:<NodeID>") and in dead
	// letters. Default: host name and process id.
	NodeID string
	// Logger receives the engine's structured logs. Default: warnings and
	// errors, as text, to standard error (failed rounds, dead letters, a
	// store that cannot be reached, a projection whose fold fails), so
	// that a problem that stalls instances is never silent; pass
	// slog.New(slog.DiscardHandler) to discard them.
	Logger *slog.Logger
	// Clock tells the time. Default: the wall clock. Tests pass a
	// round.ManualClock.
	Clock Clock
	// Codec encodes user payloads. Default: MsgpackCodec.
	Codec Codec
	// OrchestrationWorkers is how many rounds run at once. Default 2.
	OrchestrationWorkers int
	// ActivityWorkers is how many activities run at once. Default 4.
	ActivityWorkers int
	// ActivityQueues are the activity queues this engine serves. Default: the
	// default queue "".
	ActivityQueues []string
	// ActivityLease is how long a claimed activity task stays claimed
	// without a heartbeat. Default 30s.
	ActivityLease time.Duration
	// ActivityHeartbeat is the least time between two heartbeats an
	// activity sends to the store; more frequent calls of Heartbeat return
	// at once. Default: a third of ActivityLease.
	ActivityHeartbeat time.Duration
	// RoundLease is how long a peek-lock round holds its instance. Default
	// 30s.
	RoundLease time.Duration
	// RoundGroup is how many instances an orchestration worker takes in
	// one transaction of a transactional store (group commit): their
	// rounds commit together, and a round that fails is rolled back alone
	// and retried. Default 8; 1 gives every round its own transaction.
	// Peek-lock stores ignore it.
	RoundGroup int
	// EagerActivities, on a store that can (memory, PostgreSQL), has the
	// worker that completes an activity run the round its result wakes in
	// the completion's transaction (one commit instead of two, when it
	// can lock the instance without waiting), and hands it the activity
	// that round scheduled, already claimed: the workflow's next activity
	// runs at once on that worker, without a claim of its own (a task of
	// a queue the worker serves, without a concurrency key or a rate
	// limit). It goes ahead of older work: queued activities of other
	// workflows, and rounds waiting for an orchestration worker (a
	// schedule's firing may then find the previous firing's instance
	// still running). Default off: that order changes what schedules
	// with OverlapSkip see, and on PostgreSQL with many workflows in
	// flight it commits about once more per W1 workflow than the default
	// path, whose claims, completions and rounds share transactions,
	// though it writes fewer rows (no claim update, and no row for a
	// result its round consumes; docs/benchmarks.md).
	EagerActivities bool
	// MaxDeliveries is how many failed deliveries a message may have before
	// it is dead-lettered. Default 10.
	MaxDeliveries int
	// DefaultRetry fills the zero fields of activities' retry policies.
	// Default: 10 attempts, 1s doubling to at most 100s.
	DefaultRetry RetryPolicy
	// QueuePriorities gives the activities of a queue a priority when
	// their ActivityOptions set none (see docs/operations.md, "Priority").
	QueuePriorities map[string]int
	// RateLimits bound how many activity tasks of a name or queue every
	// node together claims per interval (see [RateLimit]); each node of a
	// deployment should configure the same limits.
	RateLimits []RateLimit
	// CacheSize bounds the instances whose executors stay in memory between
	// rounds. Default 1000; negative disables the cache. When it is full,
	// instances that ended or wait for a concurrency slot leave first, then
	// the least recently used running ones.
	CacheSize int
	// SafetyPoll is how often idle workers look for work when no hint
	// arrives. Default 5s.
	SafetyPoll time.Duration
	// PartitionLease is how long the engine's leases on the partitions of
	// a partitioned store last unless renewed (every third of it): the
	// longest a dead node's partitions wait for another node to take
	// them, while every node still looks at every partition once per
	// SafetyPoll. Default 15s; stores of one partition take no leases.
	PartitionLease time.Duration
	// MaxPayloadSize bounds every encoded user payload that enters
	// history, raw or encoded by the codec: workflow inputs and outputs,
	// continue-as-new inputs, signal payloads, task payloads and results,
	// activity inputs and results, sub-workflow inputs, side effects and
	// custom status. The client API refuses a payload over it with
	// ErrPayloadTooLarge; a workflow command fails with it (an output over
	// it fails the execution); an activity result over it fails the
	// activity for good. The text of a workflow or activity error is cut
	// to it. Default 2 MiB.
	MaxPayloadSize int
	// SearchAttributes declares the search attributes instances can carry,
	// by name, with their type; a value of another type is refused. Names
	// are identifiers that are not built-in query fields
	// ([query.ValidName]). Attributes are stored in plaintext so that the
	// store can index them (docs/search.md).
	SearchAttributes map[string]query.Type
	// ShutdownTimeout bounds how long Run takes to return after its
	// context ends: it waits for rounds and activities in flight, cancels
	// those still running for the last quarter of it (at most the last
	// 5s) and then returns, abandoning activities that ignore their
	// context (see [Engine.Run]). Default 30s.
	ShutdownTimeout time.Duration
	// Observer receives metrics of rounds and activities. Default: none.
	Observer Observer
	// RetryJitter returns numbers in [0,1] that spread activity retry
	// delays: a retry waits d/2 + d/2×jitter, where d is the retry
	// policy's nominal delay, so 1 waits exactly d and 0 halves it.
	// Default: math/rand, in [0,1). Tests pass a constant; the
	// chronicletest environment passes 1.
	RetryJitter func() float64
	// NewID makes the ids the client API draws: instance ids left empty,
	// execution ids, message ids and default idempotency keys. Default:
	// UUIDv7. Tests and demos pass a deterministic generator.
	NewID func() string
	// Checkpoints, when set, turns on signed checkpoints of history (see
	// docs/audit.md); the store must be a provider.CheckpointStore.
	// Default: none.
	Checkpoints *CheckpointOptions
	// PurgeArchive receives the history of each instance a purge batch
	// ([BatchPurge]) deletes, before it is deleted, as PurgeOptions.Archive
	// does for [Engine.Purge]; when it fails, the instance is not purged
	// and the batch counts it as failed. Set it on every engine that runs
	// workers. Default: none, only the tombstone remains.
	PurgeArchive ArchiveFunc
	// Retention purges the ended instances of each named workflow once
	// they are older than their policy, unless held (see
	// [RetentionPolicy]); RetentionEvery is how often (default an hour).
	// Set the same policies on every engine that runs workers.
	Retention      map[string]RetentionPolicy
	RetentionEvery time.Duration
	// Keys, when set, keeps the data keys of data subjects
	// (StartOptions.Subject): the payloads of an instance with a subject
	// are sealed with its key, and [Engine.Erase] destroys it. It
	// declares the search attribute [SubjectAttribute]. Every engine and
	// client of a deployment needs the same provider. Default: none, and
	// a start with a subject is refused.
	Keys KeyProvider
}

// Observer is told what the engine did, for metrics and traces. Its
// methods are called on the workers' goroutines and must not block.
type Observer interface {
	// Round is called after every round.
	Round(RoundStats)
	// Activity is called after every activity attempt.
	Activity(ActivityStats)
}

// RoundStats describe one round.
type RoundStats struct {
	InstanceID string
	// ExecutionID is the instance's current execution after the round
	// (the new one after a continue-as-new). For a round that failed or
	// dead-lettered its messages it is the execution they name, when they
	// name one and the same, and empty otherwise.
	ExecutionID string
	// Duration is how long the round took; rounds committed together in
	// one transaction (Options.RoundGroup) each report the group's, and a
	// round run in an activity completion's transaction reports the
	// attempt's and the round's together.
	Duration   time.Duration
	Appended   int
	Processed  int
	Duplicates int
	Stale      int
	// DeadLettered counts messages moved to the dead-letter store.
	DeadLettered int
	// Cold is true when the round read the instance's state from the
	// store (its stored snapshot and the current execution's events, or
	// its whole history) because the node's executor cache held none that
	// was current: a new instance's first round, or one whose executor was
	// evicted (Options.CacheSize) or is stale. A cold round of a running
	// instance replays its history.
	Cold bool
	// Status is the instance's status after the round.
	Status Status
	// Err is set when the round failed and will be retried.
	Err error
}

// ActivityStats describe one activity attempt.
type ActivityStats struct {
	Name string
	// InstanceID and ExecutionID are the instance and execution that
	// scheduled the activity.
	InstanceID  string
	ExecutionID string
	// TaskID identifies the activity task (see ActivityInfo.TaskID).
	TaskID  string
	Attempt int
	// Outcome is "completed", "retry" (RetryAt says when), "failed" (for
	// good), "dead-lettered" or "lease-lost".
	Outcome  string
	RetryAt  time.Time
	Duration time.Duration
	Err      error
}

// Validate reports every problem of the options at once.
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	if o.NodeID != "" {
		check(history.ValidateID("NodeID", o.NodeID) == nil, "NodeID %q is not a valid id", o.NodeID)
	}
	check(o.OrchestrationWorkers >= 0, "OrchestrationWorkers is %d, must not be negative", o.OrchestrationWorkers)
	check(o.RoundGroup >= 0, "RoundGroup is %d, must not be negative", o.RoundGroup)
	check(o.ActivityWorkers >= 0, "ActivityWorkers is %d, must not be negative", o.ActivityWorkers)
	check(o.ActivityLease >= 0, "ActivityLease is %s, must not be negative", o.ActivityLease)
	check(o.ActivityHeartbeat >= 0, "ActivityHeartbeat is %s, must not be negative", o.ActivityHeartbeat)
	if o.ActivityLease > 0 && o.ActivityHeartbeat > 0 {
		check(o.ActivityHeartbeat < o.ActivityLease, "ActivityHeartbeat %s must be shorter than ActivityLease %s", o.ActivityHeartbeat, o.ActivityLease)
	}
	check(o.RoundLease >= 0, "RoundLease is %s, must not be negative", o.RoundLease)
	check(o.MaxDeliveries >= 0, "MaxDeliveries is %d, must not be negative", o.MaxDeliveries)
	check(o.SafetyPoll >= 0, "SafetyPoll is %s, must not be negative", o.SafetyPoll)
	check(o.PartitionLease >= 0, "PartitionLease is %s, must not be negative", o.PartitionLease)
	check(o.MaxPayloadSize >= 0, "MaxPayloadSize is %d, must not be negative", o.MaxPayloadSize)
	check(o.MaxPayloadSize <= history.MaxEncodedSize/4, "MaxPayloadSize is %d, at most %d allowed", o.MaxPayloadSize, history.MaxEncodedSize/4)
	check(o.ShutdownTimeout >= 0, "ShutdownTimeout is %s, must not be negative", o.ShutdownTimeout)
	for q, p := range o.QueuePriorities {
		if err := provider.ValidatePriority(p); err != nil {
			errs = append(errs, fmt.Errorf("QueuePriorities[%q]: %w", q, err))
		}
	}
	keys := map[string]bool{}
	for i := range o.RateLimits {
		rl := &o.RateLimits[i]
		if err := rl.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("RateLimits[%d]: %w", i, err))
		}
		check(!keys[rl.Key], "RateLimits[%d]: key %q is used twice", i, rl.Key)
		keys[rl.Key] = true
	}
	r := o.DefaultRetry
	check(r.MaxAttempts >= 0, "DefaultRetry.MaxAttempts is %d, must not be negative", r.MaxAttempts)
	check(r.InitialInterval >= 0 && r.MaxInterval >= 0, "DefaultRetry intervals must not be negative")
	check(r.Multiplier == 0 || r.Multiplier >= 1, "DefaultRetry.Multiplier is %g, must be at least 1", r.Multiplier)
	if o.Checkpoints != nil {
		if err := o.Checkpoints.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := validateDeclarations(o.SearchAttributes); err != nil {
		errs = append(errs, err)
	}
	if err := validateRetention(o.Retention, o.RetentionEvery); err != nil {
		errs = append(errs, err)
	}
	for _, q := range o.ActivityQueues {
		check(q == "" || history.ValidateID("queue", q) == nil, "ActivityQueues holds invalid queue name %q", q)
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: invalid options: %s", ErrInvalidArgument, strings.Join(msgs, "; "))
}

// WithDefaults returns the options with every zero field set to its
// default.
func (o Options) WithDefaults() Options {
	if o.NodeID == "" {
		host, err := os.Hostname()
		if err != nil || history.ValidateID("NodeID", host) != nil {
			host = "node"
		}
		o.NodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Clock == nil {
		o.Clock = round.SystemClock{}
	}
	if o.Codec == nil {
		o.Codec = MsgpackCodec{}
	}
	if o.OrchestrationWorkers == 0 {
		o.OrchestrationWorkers = 2
	}
	if o.RoundGroup == 0 {
		o.RoundGroup = 8
	}
	if o.ActivityWorkers == 0 {
		o.ActivityWorkers = 4
	}
	if len(o.ActivityQueues) == 0 {
		o.ActivityQueues = []string{""}
	}
	if o.ActivityLease == 0 {
		o.ActivityLease = 30 * time.Second
	}
	if o.ActivityHeartbeat == 0 {
		o.ActivityHeartbeat = o.ActivityLease / 3
	}
	if o.RoundLease == 0 {
		o.RoundLease = 30 * time.Second
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = 10
	}
	o.DefaultRetry = round.WithRetryDefaults(o.DefaultRetry, round.DefaultRetryPolicy)
	if o.CacheSize == 0 {
		o.CacheSize = 1000
	}
	if o.PartitionLease == 0 {
		o.PartitionLease = 15 * time.Second
	}
	if o.SafetyPoll == 0 {
		o.SafetyPoll = 5 * time.Second
	}
	if o.MaxPayloadSize == 0 {
		o.MaxPayloadSize = 2 << 20
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.NewID == nil {
		o.NewID = history.NewID
	}
	return o
}

var errNoStore = errors.New("chronicle: nil store")
