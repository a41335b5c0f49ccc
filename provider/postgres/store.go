package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the PostgreSQL provider: a [provider.TxStore] and
// [provider.Notifier] on a pgx connection pool. Create it with [New] or
// [Open]; it is safe for concurrent use, and any number of stores in any
// number of processes may share one schema.
type Store struct {
	pool     *pgxpool.Pool
	rc       rcPool
	ownsPool bool
	schema   string
	log      *slog.Logger
	sql      *statements
	channels map[provider.Queue]string

	mu sync.Mutex
	// hints are the channels WorkHint hands out, closed on a wake-up.
	hints provider.Hints
	// locked counts the open rounds of this store holding each instance;
	// NextVisibleAt leaves those instances out, as it cannot see the
	// row locks of other sessions without taking locks itself.
	locked   map[string]int
	listener *listener
	closed   bool
	// announced are the queues whose new work the notifier has yet to
	// NOTIFY in any partition, announcedParts (for a store of several
	// partitions) those whose new work it has yet to NOTIFY in the
	// partitions named; kick wakes the notifier.
	announced      map[provider.Queue]bool
	announcedParts map[provider.Queue]map[int32]bool
	notifier       *listener
	kick           chan struct{}
	notifyInterval time.Duration
	// listenerPID is the backend of the work-hint listener's connection
	// (0 while it has none): the payload of this store's NOTIFYs, by
	// which the listener knows its own store's, whose workers announce
	// already woke.
	listenerPID atomic.Uint32
	// arrivals counts the wake-ups of the orchestration queue's workers
	// for work that arrived (this store's enqueues, other processes'
	// notifications, a listener's reconnection), not those of a round's
	// release: a round that saw none while it ended wakes no worker at
	// its release unless its instances have messages left (see
	// roundTx.checkReleased).
	arrivals atomic.Uint64
	// claims combine concurrent activity claims of one queue and owner;
	// completions concurrent activity completions.
	claims      map[claimKey]*combiner[*provider.ClaimActivityParams, *provider.ActivityLease]
	completions combiner[*provider.CompleteActivityParams, struct{}]

	// partitions is the store's partition count (recorded in
	// store_settings); createPartitions the count of Options.Partitions,
	// recorded when this store creates the schema.
	partitions, createPartitions int
	// partitionsMu orders the writes of partitions by readPartitions, which
	// concurrent calls of Migrate make.
	partitionsMu sync.Mutex

	// genericPlans caches whether the pool's sessions are on
	// plan_cache_mode = force_generic_plan (see Store.forcedGeneric).
	genericPlans atomic.Int32

	// citus is whether the store's tables are distributed by Citus (see
	// Store.Distribute); the statements are then their Citus forms.
	citus bool

	// implicit is whether the pool's sessions begin their transactions at
	// READ COMMITTED (default_transaction_isolation, read by New): rcPool
	// then sends its statements without BEGIN and COMMIT, as the implicit
	// transaction of one pipeline.
	implicit atomic.Bool

	// afterCommit, set by this package's tests, runs after a round's
	// successful commit; its error is returned as the round's, modelling a
	// commit whose outcome the caller cannot know.
	afterCommit func() error
}

var (
	_ provider.TxStore   = (*Store)(nil)
	_ provider.FullStore = (*Store)(nil)
	_ provider.Notifier  = (*Store)(nil)

	_ provider.PartitionNotifier = (*Store)(nil)

	_ provider.InstanceStarter = (*Store)(nil)

	_ provider.InstanceHoldReader = (*Store)(nil)
)

// New returns a store on the pool or URL of opts. With MigrateOnStart it
// migrates the schema first; otherwise it reads the schema version and
// logs a warning when it is not [LatestSchemaVersion]. The error of bad
// options wraps [ErrInvalidOptions] and names every bad field.
func New(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{
		pool: opts.Pool, schema: opts.Schema, log: opts.Logger,
		sql:              newStatements(opts.Schema, false),
		createPartitions: max(opts.Partitions, 1), partitions: 1,
		locked:    map[string]int{},
		claims:    map[claimKey]*combiner[*provider.ClaimActivityParams, *provider.ActivityLease]{},
		announced: map[provider.Queue]bool{}, announcedParts: map[provider.Queue]map[int32]bool{}, kick: make(chan struct{}, 1), notifyInterval: opts.NotifyInterval,
		channels: map[provider.Queue]string{
			provider.QueueOrchestration: channelName(opts.Schema, provider.QueueOrchestration),
			provider.QueueActivity:      channelName(opts.Schema, provider.QueueActivity),
		},
	}
	if s.pool == nil {
		cfg, err := pgxpool.ParseConfig(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: URL: %w", ErrInvalidOptions, err)
		}
		if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, fmt.Errorf("postgres: open pool: %w", err)
		}
		s.ownsPool = true
	}
	s.rc = rcPool{pool: s.pool, generic: func() bool { return s.sql.generic }, implicit: s.implicit.Load}
	if err := s.readIsolation(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.start(ctx, opts.MigrateOnStart, opts.Partitions); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.startCitus(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Open is [New] with opts.URL set to url.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts.URL = url
	return New(ctx, opts)
}

func (s *Store) start(ctx context.Context, migrate bool, requested int) error {
	var v int
	var err error
	if migrate {
		v, err = s.Migrate(ctx)
	} else {
		v, err = s.SchemaVersion(ctx)
	}
	if err != nil {
		return err
	}
	if !migrate && v != LatestSchemaVersion() {
		s.log.WarnContext(ctx, "chronicle schema is not at the version this package expects; run Migrate",
			slog.String("schema", s.schema), slog.Int("version", v), slog.Int("expected", LatestSchemaVersion()))
	}
	if v >= partitionsMigration {
		if err := s.readPartitions(ctx); err != nil {
			return err
		}
	}
	if requested != 0 && v != 0 && requested != s.partitions {
		return &PartitionsError{Schema: s.schema, Recorded: s.partitions, Requested: requested}
	}
	return nil
}

// readPartitions reads the store's recorded partition count.
func (s *Store) readPartitions(ctx context.Context) error {
	var p int32
	err := s.pool.QueryRow(ctx, `SELECT partitions FROM `+pgx.Identifier{s.schema, "store_settings"}.Sanitize()).Scan(&p)
	if err != nil {
		return failf(err, "read the partition count of %s", s.schema)
	}
	// Nodes migrate one store at once (TestMigrate): the count, the same
	// for each, is written once, under the lock, so that the rounds that
	// read it unlocked see no write once the store is migrated.
	s.partitionsMu.Lock()
	if s.partitions != int(p) {
		s.partitions = int(p)
	}
	s.partitionsMu.Unlock()
	return nil
}

// Partitions implements provider.Partitioned: the store's partition
// count, recorded when it was created.
func (s *Store) Partitions() int { return s.partitions }

// part returns the partition of an instance.
func (s *Store) part(instanceID string) int32 {
	return int32(provider.PartitionOf(instanceID, s.partitions))
}

// Close stops the work-hint listener and, when the store opened the pool
// from a URL, closes the pool. It is safe to call more than once. Rounds
// still running fail.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	l, n := s.listener, s.notifier
	s.listener, s.notifier = nil, nil
	s.mu.Unlock()
	if l != nil {
		l.stop()
	}
	if n != nil {
		n.stop() // it sends what is still announced first
	}
	if s.ownsPool {
		s.pool.Close()
	}
}

// Schema returns the name of the schema holding the store's tables.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Mode implements provider.Store: rounds run in one transaction.
func (s *Store) Mode() provider.Mode { return provider.ModeTransactional }

// channelName derives a NOTIFY channel of a schema's queue. Channel names
// are identifiers of at most 63 bytes; long schema names are hashed.
func channelName(schema string, q provider.Queue) string {
	name := schema + "_" + string(q)
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return "chronicle_" + hex.EncodeToString(sum[:12]) + "_" + string(q)
}

// dbtx is what the provider's queries run on: the pool (one implicit
// transaction per statement or batch) or a round's transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// statements are the provider's SQL with the schema filled in. pgx
// prepares and caches each distinct text per connection.
type statements struct {
	enqueueMessages, completeActivity, enqueueStart            string
	dequeueLock, dequeueLockByID, dequeueFetch, clearHold      string
	dequeuePick, dequeuePickByID, lockInstancePick             string
	fetchDequeued                                              string
	ackMessages, abandonMessages, holdInstance, listMessages   string
	nextOrchestration, nextActivity                            string
	loadHistory, appendHistory, historyTail, historyHead       string
	appendChecked                                              string
	saveInstance, saveTask, saveTaskEvent, saveCustom          string
	getInstance, getInstanceHold, getSnapshot                  string
	getTask, listTasks, listTaskEvents, getCustom              string
	resetInstance, resetTasks, resetTaskEvents, resetCustom    string
	enqueueActivities, claimActivity, heartbeatActivity        string
	enqueueClaimed, openActivities, anyMessages                string
	deleteTask, lockInstanceByID                               string
	claimOrder, claimCandidate, claimTask, lockFlowKey         string
	countClaims, takeToken                                     string
	parkInstance, wakeInstances                                string
	lockSlotKey, upsertSlotKey, acquireSlot, releaseSlot       string
	getSlotKeys, listSlotKeys, listSlots                       string
	ensureSlotKeys, lockSlotKeys, waitSlots                    string
	taskEnvelope, retryActivity, deadLetterActivity            string
	lockTaskInstance, lockInstances                            string
	cancelActivities, listQueuedActivities                     string
	redriveTaskDelete, redriveTaskIDs, redriveTaskInsert       string
	insertDeadLetter, setIncident, lockDeadLetter              string
	resolveDeadLetter, refreshIncident                         string
	selectDeadLetter, listDeadLetters                          string
	purgeLock, purgeProbe, purgeTail, purgeMessages, tombstone string
	getTombstone                                               string
	takenTask, listTombstones                                  string
	latestCheckpoint, checkpointHash, insertCheckpoint         string
	insertLeaves, listCheckpoints, checkpointLeaves            string
	purge                                                      []string
	holdLock, insertHold, getHold, releaseHold, listHolds      string
	taskPart                                                   string

	// begin opens the store's transactions; generic tells whether they
	// run on generic plans (genericPlansSQL: not on Citus).
	begin   pgx.TxOptions
	generic bool

	// The statements only a store distributed by Citus runs (citus.go).
	citusLock, citusStart, citusAnyMessages  string
	citusInstances, citusTaskIDs, citusTasks map[int]string
	citusAppendCheck, citusDeadLetterPart    string
	citusMessages, citusHistory              map[int]string
}

// partCheck matches the partition test of a statement that finds its
// rows by a key ({{check part = $3}}: by a task's or a message's id, by
// an instance's id). On PostgreSQL the test is written so that no index
// serves it, ((part = $3) IS TRUE), and the planner finds the rows by
// the key's index: on tables it knows nothing about (new, or never
// analyzed) it costs the key's index and a part-led queue index alike,
// and the part-led one, a walk of the whole partition, won
// (TestStatementPlans). On Citus it is the equality itself, which routes
// the statement to the partition's shard.
var partCheck = regexp.MustCompile(`\{\{check ([^{}]+)\}\}`)

func newStatements(schema string, citus bool) *statements {
	r := strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize())
	q := func(sql string) string { return partCheck.ReplaceAllString(r.Replace(sql), "(${1}) IS TRUE") }
	if citus {
		q = func(sql string) string { return citusForm(partCheck.ReplaceAllString(r.Replace(sql), "${1}")) }
	}
	st := &statements{
		enqueueMessages: q(fmt.Sprintf(enqueueMessagesSQL, "", "", "")),
		completeActivity: q(fmt.Sprintf(enqueueMessagesSQL,
			"done AS (DELETE FROM {{schema}}.activity_tasks WHERE id = $9 AND token = $10 AND {{check part = $11}} RETURNING 1),",
			"WHERE EXISTS (SELECT 1 FROM done)",
			"(SELECT count(*) FROM done),")),
		enqueueStart: q(fmt.Sprintf(enqueueMessagesSQL,
			"created AS (INSERT INTO {{schema}}.instances (part, instance_id) VALUES ($10, $9) ON CONFLICT DO NOTHING RETURNING 1),",
			"WHERE EXISTS (SELECT 1 FROM created)",
			"(SELECT count(*) FROM created),")),
		anyMessages: q(anyMessagesSQL), deleteTask: q(deleteTaskSQL), lockInstanceByID: q(lockInstanceByIDSQL),
		dequeueLock: q(dequeueLockSQL), dequeueLockByID: q(dequeueLockByIDSQL),
		dequeueFetch: q(dequeueFetchSQL), clearHold: q(clearHoldSQL),
		dequeuePick: q(pickSQL(dequeueLockSQL)), dequeuePickByID: q(pickSQL(dequeueLockByIDSQL)),
		lockInstancePick: q(pickSQL(lockInstanceByIDSQL)),
		fetchDequeued:    q(fetchDequeuedSQL),
		ackMessages:      q(ackMessagesSQL), abandonMessages: q(abandonMessagesSQL),
		holdInstance: q(holdInstanceSQL), listMessages: q(listMessagesSQL),
		nextOrchestration: q(nextOrchestrationSQL), nextActivity: q(nextActivitySQL),
		loadHistory: q(loadHistorySQL), appendHistory: q(appendHistorySQL), appendChecked: q(appendCheckedSQL), historyTail: q(historyTailSQL), historyHead: q(historyHeadSQL),
		saveInstance: q(saveInstanceSQL), saveTask: q(saveTaskSQL),
		saveTaskEvent: q(saveTaskEventSQL), saveCustom: q(saveCustomSQL),
		getInstance: q(getInstanceSQL), getInstanceHold: q(getInstanceHoldSQL), getSnapshot: q(getSnapshotSQL),
		getTask: q(getTaskSQL), listTasks: q(listTasksSQL), listTaskEvents: q(listTaskEventsSQL), getCustom: q(getCustomSQL),
		resetInstance: q(resetInstanceSQL), resetTasks: q(resetTasksSQL),
		resetTaskEvents: q(resetTaskEventsSQL), resetCustom: q(resetCustomSQL),
		enqueueActivities: q(enqueueActivitiesSQL), enqueueClaimed: q(enqueueClaimedSQL), openActivities: q(openActivitiesSQL), claimActivity: q(claimActivitySQL), claimOrder: q(claimOrderSQL),
		claimCandidate: q(claimCandidateSQL), claimTask: q(claimTaskSQL), lockFlowKey: lockFlowKeySQL,
		countClaims: q(countClaimsSQL), takeToken: q(takeTokenSQL),
		parkInstance: q(parkInstanceSQL), wakeInstances: q(wakeInstancesSQL),
		lockSlotKey: q(lockSlotKeySQL), upsertSlotKey: q(upsertSlotKeySQL), acquireSlot: q(acquireSlotSQL), releaseSlot: q(releaseSlotSQL),
		getSlotKeys: q(getSlotKeysSQL), listSlotKeys: q(listSlotKeysSQL), listSlots: q(listSlotsSQL),
		ensureSlotKeys: q(ensureSlotKeysSQL), lockSlotKeys: q(lockSlotKeysSQL), waitSlots: q(waitSlotsSQL),
		heartbeatActivity: q(heartbeatActivitySQL), taskEnvelope: q(taskEnvelopeSQL),
		retryActivity: q(retryActivitySQL), deadLetterActivity: q(deadLetterActivitySQL),
		lockTaskInstance: q(lockTaskInstanceSQL), lockInstances: q(lockInstancesSQL),
		cancelActivities: q(cancelActivitiesSQL), listQueuedActivities: q(listQueuedActivitiesSQL),
		redriveTaskDelete: q(redriveTaskDeleteSQL), redriveTaskIDs: q(redriveTaskIDsSQL),
		redriveTaskInsert: q(redriveTaskInsertSQL),
		insertDeadLetter:  q(insertDeadLetterSQL), setIncident: q(setIncidentSQL), lockDeadLetter: q(lockDeadLetterSQL),
		resolveDeadLetter: q(resolveDeadLetterSQL), refreshIncident: q(refreshIncidentSQL),
		selectDeadLetter: q(selectDeadLetterSQL), listDeadLetters: q(listDeadLettersSQL),
		holdLock: q(holdLockSQL), insertHold: q(insertHoldSQL), getHold: q(getHoldSQL), releaseHold: q(releaseHoldSQL), listHolds: q(listHoldsSQL),
		purgeLock: q(purgeLockSQL), purgeProbe: q(purgeProbeSQL), purgeTail: q(purgeTailSQL), purgeMessages: q(purgeMessagesSQL),
		tombstone: q(tombstoneSQL), getTombstone: q(getTombstoneSQL),
		latestCheckpoint: q(latestCheckpointSQL), checkpointHash: q(checkpointHashSQL), insertCheckpoint: q(insertCheckpointSQL),
		insertLeaves: q(insertLeavesSQL), listCheckpoints: q(listCheckpointsSQL), checkpointLeaves: q(checkpointLeavesSQL),
		takenTask: q(takenTaskSQL), listTombstones: q(listTombstonesSQL),
		taskPart: q(taskPartSQL),
		begin:    readCommittedGeneric, generic: true,
	}
	for _, sql := range purgeSQL {
		st.purge = append(st.purge, q(sql))
	}
	if citus {
		// Citus cannot distribute some statements' generic plans.
		st.begin, st.generic = readCommitted, false
		// Citus refuses volatile functions in an UPDATE of a distributed
		// table: the claims' tokens come from the store (newToken).
		nextToken := q(`nextval('{{schema}}.lease_tokens')::text`)
		st.claimActivity = strings.Replace(st.claimActivity, nextToken, `$9::text || '/' || t.id`, 1)
		st.claimTask = strings.Replace(st.claimTask, nextToken, `$5::text || '/' || id`, 1)
		// The probe of a held instance's messages names the partition:
		// Citus joins distributed tables only on the distribution column.
		st.nextOrchestration = strings.Replace(st.nextOrchestration,
			"WHERE m.instance_id = i.instance_id AND (m.visible_at < i.hold_until) IS TRUE",
			"WHERE m.part = $3 AND m.instance_id = i.instance_id AND m.visible_at < i.hold_until", 1)
		st.citusLock, st.citusStart = q(citusLockSQL), q(citusStartSQL)
		st.citusInstances, st.citusTaskIDs, st.citusTasks = map[int]string{}, map[int]string{}, map[int]string{}
		st.citusAnyMessages = q(citusAnyMessagesSQL)
		st.citusAppendCheck, st.citusDeadLetterPart = q(citusAppendCheckSQL), q(citusDeadLetterPartSQL)
		st.lockDeadLetter = strings.Replace(st.lockDeadLetter, "WHERE id = $1", "WHERE part = $2 AND id = $1", 1)
		st.citusMessages, st.citusHistory = map[int]string{}, map[int]string{}
		for _, n := range citusChunks {
			st.citusMessages[n] = q(citusMessagesSQL(n))
			st.citusHistory[n] = q(citusHistorySQL(n))
			st.citusInstances[n] = q(citusInstancesSQL(n))
			st.citusTaskIDs[n] = q(citusTaskIDsSQL(n))
			st.citusTasks[n] = q(citusTasksSQL(n))
		}
	}
	return st
}

// inTx runs fn in a transaction of its own and commits when fn returns
// nil; what names the operation in the commit's error.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, s.sql.begin)
	if err != nil {
		return failf(err, "%s: begin", what)
	}
	// After Commit, Rollback is a no-op returning pgx.ErrTxClosed; after a
	// failure, fn's error is the one to report and the pool destroys a
	// connection whose rollback failed.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return failf(tx.Commit(ctx), "%s: commit", what)
}
