package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// ErrInvalidOptions is wrapped by the error of bad [Options].
var ErrInvalidOptions = errors.New("mongo: invalid options")

// DefaultDatabase is the database a store uses when neither Options nor
// the URL name one.
const DefaultDatabase = "chronicle"

// Options configure a [Store].
type Options struct {
	// Client is the connected client the store uses; the caller closes
	// it. [Open] makes its own client from a URL instead.
	Client *mongo.Client
	// Database is the database holding the store's collections
	// (DefaultDatabase when empty). It must be a valid MongoDB database
	// name: letters, digits, '_' and '-', at most 63 bytes.
	Database string
	// Mode forces the mode: provider.ModePeekLock or
	// provider.ModeTransactional. Zero chooses from the server: a replica
	// set member or mongos that accepts a transaction runs transactional
	// rounds, anything else (a standalone server, a server that refuses
	// transactions) runs peek-lock rounds.
	Mode provider.Mode
	// MigrateOnStart creates or upgrades the collections and indexes
	// before the store is returned; without it New checks the schema
	// version and logs a warning when it is not [LatestSchemaVersion].
	MigrateOnStart bool
	// LockTimeout bounds how long a transactional round keeps an instance
	// locked when its process dies before the round ends (default 1
	// minute). Peek-lock rounds take their lease length from the engine.
	LockTimeout time.Duration
	// Logger receives the store's log records (slog.Default when nil).
	Logger *slog.Logger
	// BeforeWrite, when set, is called before some record writes of
	// steps that write several documents, named "purge: <what>" (before
	// each delete of a purge) and "dead letter: remove <message id>"
	// (before a dead-lettered message's removal); an error it returns
	// ends the step there, as a crash of the process would. It is for
	// tests that crash a step between two of its writes (as
	// memory.Options.Fault does); leave it nil.
	BeforeWrite func(what string) error
	// Partitions is the partition count of a store this Store creates
	// (see provider.PartitionOf), recorded in the database by the
	// migration that creates it; 0 means the recorded count, and 1 for a
	// new database. A store whose database recorded another count fails
	// with a *[PartitionsError]; a database created before partitions has
	// one. The count cannot change after creation (docs/scaling.md).
	Partitions int
}

func (o Options) withDefaults() (Options, error) {
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	var bad []string
	if !validDatabase(o.Database) {
		bad = append(bad, fmt.Sprintf("Database %q: use letters, digits, '_' and '-', at most 63 bytes", o.Database))
	}
	if o.Mode != 0 && o.Mode != provider.ModePeekLock && o.Mode != provider.ModeTransactional {
		bad = append(bad, fmt.Sprintf("Mode %d: use provider.ModePeekLock, provider.ModeTransactional or zero", int(o.Mode)))
	}
	if o.LockTimeout < 0 {
		bad = append(bad, fmt.Sprintf("LockTimeout %s is negative", o.LockTimeout))
	}
	if o.Partitions < 0 || o.Partitions > provider.MaxPartitions {
		bad = append(bad, fmt.Sprintf("Partitions %d is out of range [0, %d]", o.Partitions, provider.MaxPartitions))
	}
	if len(bad) > 0 {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(bad, "; "))
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

func validDatabase(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Store is the MongoDB provider: a [provider.FullStore] and
// [provider.Notifier] on a mongo-driver client, in peek-lock mode
// ([provider.LeaseStore]) or, on a replica set, transactional mode
// ([provider.TxStore]). Create it with [New] or [Open]; it is safe for
// concurrent use, and any number of stores in any number of processes may
// share one database.
type Store struct {
	client      *mongo.Client
	ownsClient  bool
	db          *mongo.Database
	mode        provider.Mode
	log         *slog.Logger
	lockTimeout time.Duration
	c           collections

	mu    sync.Mutex
	hints provider.Hints
	// stop ends the change-stream watchers.
	stop   context.CancelFunc
	closed bool
	wg     sync.WaitGroup

	// afterFirstRead, set by this package's tests, runs in
	// CancelActivities after its first read, where a zombie round may
	// stall while its successor goes on.
	afterFirstRead func()
	// beforeClaimWrite and beforeSettleWrite, set by this package's
	// tests, run in ClaimActivity and in the settlements of an activity
	// claim after their reads and before their first write, where a slow
	// worker may stall while another goes on.
	beforeClaimWrite, beforeSettleWrite func(taskID string)
	// afterSettleStep, set by this package's tests, runs in the
	// settlements of an activity claim after their first write; an
	// error ends the call there, as a crash would.
	afterSettleStep func(taskID string) error
	// beforeWrite is Options.BeforeWrite.
	beforeWrite func(what string) error

	// ferretOnce asks the server once whether it is FerretDB (ferret).
	ferretOnce sync.Once
	ferret     bool

	// partitions is the store's partition count (recorded in the
	// settings document); createPartitions the count a migration that
	// creates the database records.
	partitions, createPartitions int
}

// collections are the store's collections; docs/providers.md lists their
// documents.
type collections struct {
	messages, leases, history, keys, tasks, claims, letters, incidents,
	snapshots, instances, humanTasks, taskEvents, custom, tombstones, meta,
	checkpoints, checkpointLeaves *mongo.Collection
	// Flow control (schema 5): the slot sets of instance concurrency
	// keys, the slots of activity concurrency keys and the tokens of
	// rate limits.
	slotSets, activitySlots, rateTokens *mongo.Collection
	// Legal holds, by instance id.
	holds *mongo.Collection
	// Partition leases and the nodes holding them (schema 6).
	partLeases, partNodes *mongo.Collection
}

var (
	_ provider.LeaseStore        = (*Store)(nil)
	_ provider.TxStore           = (*Store)(nil)
	_ provider.FullStore         = (*Store)(nil)
	_ provider.Notifier          = (*Store)(nil)
	_ provider.Partitioned       = (*Store)(nil)
	_ provider.PartitionNotifier = (*Store)(nil)
	_ provider.FlowSteps         = (*Store)(nil)
	_ provider.FlowStore         = (*Store)(nil)
	_ provider.FlowSteps         = (*roundTx)(nil)
)

// Open connects to the MongoDB server at url (mongodb:// or
// mongodb+srv://) and returns a store on it; Close disconnects. The
// database is Options.Database, else the URL's path, else
// DefaultDatabase.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	if opts.Database == "" {
		if u, err := url.Parse(uri); err == nil {
			opts.Database = strings.TrimPrefix(u.Path, "/")
		}
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return nil, fmt.Errorf("mongo: connect: %w", translate(err))
	}
	opts.Client = client
	s, err := New(ctx, opts)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	s.ownsClient = true
	return s, nil
}

// New returns a store on opts.Client. It asks the server what it is to
// choose the mode (unless Options.Mode forces one) and logs the mode.
func New(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: Client is nil (use Open with a URL)", ErrInvalidOptions)
	}
	db := opts.Client.Database(opts.Database)
	s := &Store{
		client: opts.Client, db: db, log: opts.Logger, lockTimeout: opts.LockTimeout, beforeWrite: opts.BeforeWrite,
		partitions: 1, createPartitions: max(opts.Partitions, 1),
		c: collections{
			messages: db.Collection("messages"), leases: db.Collection("leases"), history: db.Collection("history"),
			keys: db.Collection("history_keys"), tasks: db.Collection("activity_tasks"), claims: db.Collection("activity_claims"),
			letters: db.Collection("dead_letters"), incidents: db.Collection("incidents"), snapshots: db.Collection("snapshots"),
			instances: db.Collection("instances"), humanTasks: db.Collection("human_tasks"), taskEvents: db.Collection("human_task_events"),
			custom: db.Collection("custom_projections"), tombstones: db.Collection("tombstones"), meta: db.Collection("chronicle_meta"),
			checkpoints: db.Collection("checkpoints"), checkpointLeaves: db.Collection("checkpoint_leaves"),
			slotSets:      db.Collection("slot_sets"),
			activitySlots: db.Collection("activity_slots"), rateTokens: db.Collection("rate_tokens"),
			holds:      db.Collection("legal_holds"),
			partLeases: db.Collection("partition_leases"), partNodes: db.Collection("partition_nodes"),
		},
	}
	mode, why, err := s.detectMode(ctx, opts.Mode)
	if err != nil {
		return nil, err
	}
	s.mode = mode
	s.log.Info("chronicle mongo store", "database", opts.Database, "mode", mode.String(), "why", why)
	if opts.MigrateOnStart {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	if v != LatestSchemaVersion() {
		s.log.Warn("chronicle mongo schema is not current; run chronicle migrate", "database", opts.Database, "version", v, "latest", LatestSchemaVersion())
	}
	if err := s.readPartitions(ctx, v); err != nil {
		return nil, err
	}
	if opts.Partitions != 0 && v != 0 && opts.Partitions != s.partitions {
		return nil, &PartitionsError{Database: opts.Database, Recorded: s.partitions, Requested: opts.Partitions}
	}
	watchCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if s.mode == provider.ModeTransactional {
		s.startWatchers(watchCtx)
	}
	return s, nil
}

// detectMode chooses the mode from the server's hello reply: a replica
// set member (setName) or a mongos (msg "isdbgrid") whose session accepts
// a transaction runs transactional rounds.
func (s *Store) detectMode(ctx context.Context, forced provider.Mode) (provider.Mode, string, error) {
	if forced != 0 {
		return forced, "forced by Options.Mode", nil
	}
	var hello bson.M
	if err := s.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return 0, "", fmt.Errorf("mongo: hello: %w", translate(err))
	}
	_, replica := hello["setName"]
	mongos := hello["msg"] == "isdbgrid"
	if !replica && !mongos {
		return provider.ModePeekLock, "the server is standalone: no multi-document transactions", nil
	}
	if err := s.probeTransaction(ctx); err != nil {
		return provider.ModePeekLock, "the server refuses transactions: " + err.Error(), nil
	}
	return provider.ModeTransactional, "the server is a replica set or mongos and accepts transactions", nil
}

// probeTransaction runs an empty read in a transaction.
func (s *Store) probeTransaction(ctx context.Context) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return nil, s.c.meta.FindOne(ctx, bson.D{{Key: "_id", Value: "probe"}}).Err()
	})
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	return err
}

// settingsID is the _id of the settings document in chronicle_meta.
const settingsID = "settings"

// settingsDoc records what a store's database was created with.
type settingsDoc struct {
	Partitions int `bson:"partitions"`
}

// readPartitions reads the partition count recorded in a database at
// schema version v: 1 before the migration that records it.
func (s *Store) readPartitions(ctx context.Context, v int) error {
	if v < partitionsMigration {
		s.partitions = 1
		return nil
	}
	var d settingsDoc
	if err := s.c.meta.FindOne(ctx, filter("_id", settingsID)).Decode(&d); err != nil {
		return fmt.Errorf("mongo: partition count of %s: %w", s.db.Name(), translate(err))
	}
	if d.Partitions < 1 || d.Partitions > provider.MaxPartitions {
		return fmt.Errorf("mongo: partition count of %s: %w: %d recorded", s.db.Name(), provider.ErrInvalidState, d.Partitions)
	}
	s.partitions = d.Partitions
	return nil
}

// Partitions implements provider.Partitioned: the store's partition
// count, recorded when its database was created.
func (s *Store) Partitions() int { return s.partitions }

// part returns the partition of an instance, which every per-instance
// document carries in its field "pt".
func (s *Store) part(instanceID string) int { return provider.PartitionOf(instanceID, s.partitions) }

// partFilter appends to f the condition that a queue query looks in the
// partitions parts only: none on a store of one partition (whose
// documents written before partitions have no "pt") or for every
// partition.
func (s *Store) partFilter(f bson.D, parts []int) bson.D {
	if s.partitions <= 1 || len(parts) == 0 {
		return f
	}
	if len(parts) == 1 {
		return append(f, bson.E{Key: "pt", Value: parts[0]})
	}
	return append(f, bson.E{Key: "pt", Value: filter("$in", parts)})
}

// PartitionsError reports a store opened with a partition count
// ([Options].Partitions) other than the one its database recorded when
// it was created.
type PartitionsError struct {
	Database            string
	Recorded, Requested int
}

// Error implements error.
func (e *PartitionsError) Error() string {
	return fmt.Sprintf("mongo: database %s was created with %d partitions, opened with %d; the count cannot change (leave Options.Partitions 0 to use the recorded one)",
		e.Database, e.Recorded, e.Requested)
}

// Mode implements provider.Store.
func (s *Store) Mode() provider.Mode { return s.mode }

// Database returns the name of the store's database.
func (s *Store) Database() string { return s.db.Name() }

// Close stops the store's watchers and, when [Open] made the client,
// disconnects it.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	if s.ownsClient {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.client.Disconnect(ctx)
	}
}

// WorkHint implements provider.Notifier: work enqueued through this store
// closes the channel; on a replica set change streams bring other
// processes' work too.
func (s *Store) WorkHint(q provider.Queue) <-chan struct{} { return s.hints.Channel(q) }

// PartitionHint implements provider.PartitionNotifier: the channel is
// closed as WorkHint's is, but only for work of partition p (or of no
// known partition: change streams name none).
func (s *Store) PartitionHint(q provider.Queue, p int) <-chan struct{} {
	return s.hints.PartitionChannel(q, p)
}

// notify wakes the workers waiting on q, for work in any partition.
func (s *Store) notify(q provider.Queue) { s.hints.Wake(q) }

// notifyOf wakes the workers waiting on q for work of the instances ids.
func (s *Store) notifyOf(q provider.Queue, ids ...string) {
	if s.partitions <= 1 {
		s.hints.Wake(q)
		return
	}
	parts := make([]int, len(ids))
	for i, id := range ids {
		parts[i] = s.part(id)
	}
	s.hints.WakePartitions(q, parts...)
}

// never sorts after every real time. Times are stored as
// provider.UnixNanos writes them (BSON dates keep milliseconds only).
const never = int64(math.MaxInt64)

// lastOrder is the last order key handed out in this process.
var lastOrder atomic.Int64

// nextOrder returns an order key for a record enqueued at now: now's Unix
// nanoseconds, or one more than the last key of this process, whichever
// is larger. Keys grow within a process; across processes they follow
// their clocks (see docs/providers.md).
func nextOrder(now time.Time) int64 {
	n := now.UnixNano()
	for {
		last := lastOrder.Load()
		next := max(n, last+1)
		if lastOrder.CompareAndSwap(last, next) {
			return next
		}
	}
}

// newToken returns a random lease or claim token.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitOf applies the contract's default limit.
func limitOf(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

// pad renders n so that string order is numeric order.
func pad(n int64) string { return fmt.Sprintf("%020d", n) }

// id joins the parts of a compound document id.
func id(parts ...string) string { return strings.Join(parts, "\x00") }

// filter builds a bson.D from key-value pairs.
func filter(kv ...any) bson.D {
	d := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}

// set builds a {$set: ...} update.
func set(kv ...any) bson.D { return bson.D{{Key: "$set", Value: filter(kv...)}} }

// insertIgnoringDuplicate inserts doc; a document with its _id already
// stored is success (an idempotent insert). It reports whether it wrote.
// Inside a transaction, where a duplicate key would abort the
// transaction, it looks the id up first.
func insertIgnoringDuplicate(ctx context.Context, c *mongo.Collection, docID string, doc any) (bool, error) {
	if mongo.SessionFromContext(ctx) != nil {
		err := c.FindOne(ctx, filter("_id", docID), options.FindOne().SetProjection(filter("_id", 1))).Err()
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return false, translate(err)
		}
	}
	_, err := c.InsertOne(ctx, doc)
	if mongo.IsDuplicateKeyError(err) {
		if mongo.SessionFromContext(ctx) != nil {
			// A concurrent insert since the look-up: the duplicate has
			// aborted the transaction, so the round must run again.
			return false, &Error{Err: err, Retryable: true}
		}
		return false, nil
	}
	if err != nil {
		return false, translate(err)
	}
	return true, nil
}

// updateHeld applies upd to the document f matches, a lease or claim the
// caller holds (its token is in f): none matching means ErrLeaseLost.
func updateHeld(ctx context.Context, c *mongo.Collection, f, upd bson.D, what string) error {
	res, err := c.UpdateOne(ctx, f, upd)
	if err != nil {
		return fmt.Errorf("%s: %w", what, translate(err))
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%s: %w", what, provider.ErrLeaseLost)
	}
	return nil
}

// translate turns driver errors into the contract's where one applies;
// it is the one place that does. Duplicate keys are handled by the
// callers, which know what a duplicate means.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	return &Error{Err: err, Retryable: mongo.IsNetworkError(err) || mongo.IsTimeout(err) || hasLabel(err, "TransientTransactionError")}
}

func hasLabel(err error, label string) bool {
	var le mongo.LabeledError
	return errors.As(err, &le) && le.HasErrorLabel(label)
}

// Error is a driver error the store passes on: a broken connection, a
// timeout, a server error. Retryable says that the same call may succeed
// later (a network error or timeout); every step is safe to repeat.
type Error struct {
	Err       error
	Retryable bool
}

// Error implements error.
func (e *Error) Error() string {
	if e.Retryable {
		return "mongo (retryable): " + e.Err.Error()
	}
	return "mongo: " + e.Err.Error()
}

// Unwrap returns the driver's error.
func (e *Error) Unwrap() error { return e.Err }
