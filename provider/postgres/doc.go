// Package postgres is Chronicle's PostgreSQL provider: a [provider.TxStore]
// and [provider.Notifier] on a github.com/jackc/pgx/v5 connection pool. Every
// round runs in one transaction; instances are locked with FOR NO KEY
// UPDATE SKIP LOCKED, idempotency rests on unique keys, and workers are
// woken with LISTEN/NOTIFY.
//
// # Set-up
//
// Open a store on a URL (the store owns its pool) or on a pool of yours:
//
//	store, err := postgres.New(ctx, postgres.Options{
//		URL:            "postgres://chronicle@db:5432/app?pool_max_conns=16",
//		Schema:         "chronicle",
//		MigrateOnStart: true,
//	})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
// The store never reads a clock: visibility and leases are decided with the
// times the engine passes in, so every node must run with a sane clock.
// It needs PostgreSQL 12 or later (it is tested on 15).
//
// # Schema and migrations
//
// All tables live in one schema, [Options].Schema ("chronicle" by default;
// a lower-case identifier, so several independent deployments can share a
// database). The schema is created by embedded, numbered migrations
// (migrations/NNNN_name.sql) that [Store.Migrate] applies in one
// transaction under pg_advisory_xact_lock, recording each in
// schema_migrations (version, name, applied_at): nodes that start together
// migrate once, and migrating an up-to-date schema does nothing. Run it as a
// deployment step or set MigrateOnStart.
// [Store.SchemaVersion] and [LatestSchemaVersion] tell where a schema
// stands.
//
// The tables:
//
//   - instances: one row per instance. Its row lock is the instance lock of
//     a round; it holds the abandon hold, the incident, the runtime snapshot
//     and the instance record, with its search attributes (attrs, a jsonb
//     object of type-tagged values, under a GIN jsonb_path_ops index) and
//     the custom status text. Search filters are compiled to SQL with bind
//     parameters only (where.go).
//   - history: the append-only log, primary key (instance_id, seq), with a
//     unique index on (instance_id, execution_id, class, correlation_id) for
//     events that have an idempotency key. The event column holds
//     history.MarshalEvent, the bytes the hash chain covers; the other
//     columns are copies for indexes.
//   - messages: the orchestration queue, with an identity column giving the
//     enqueue order, the order key order_at (provider.OrderAt of VisibleAt
//     and the message's priority) and indexes on (instance_id, seq),
//     (visible_at, seq), (order_at, seq) and, partial, (order_at, seq) of
//     the messages of negative priority (order_at > visible_at).
//   - activity_tasks and activity_task_ids: the activity queue, and every
//     task id ever enqueued, so that a completed or cancelled task is never
//     queued again until its instance is purged. activity_task_ids is keyed
//     by (instance_id, id): task ids are hashes, and a key led by them would
//     write to a random page of a large index at every enqueue.
//     A task row has its priority, its order key order_at (moved with
//     ready_at by claims, heartbeats and retries), its name and its
//     concurrency key and limit, with indexes on (queue, order_at, seq),
//     partial (queue, order_at, seq) of negative priorities, and partial
//     (concurrency_key, locked_until) of tasks with a key.
//   - flow_rates: one row per rate-limit key (window start, tokens used).
//   - flow_keys and flow_slots: the slot sets of instance concurrency
//     keys: one row per key (the limit of its latest acquire; its row
//     lock serializes the key), one row per holder or waiter (waiting,
//     since, and an identity giving the waiters' order).
//   - dead_letters, human_tasks (task ids are unique per store),
//     human_task_events, custom_projections.
//   - tombstones: one row per purge, primary key (instance_id, seq), so an
//     id reused and purged again keeps the tombstone of every purge.
//
// No statement of a round, a claim or a completion reads a table that
// grows with the store by a sequential scan, whatever the plan cache
// makes of it (plan_cache_mode force_generic_plan included) and whether
// or not the tables were ever analyzed: the statements are shaped so that
// the planner has no cheaper plan than the index's (see
// docs/benchmarks.md, "Flat as the store fills").
//
// Messages and tasks are stored as their envelopes (provider.MarshalMessage,
// provider.MarshalActivityTask), so they round-trip exactly; times used in
// queries are timestamptz columns. Projections are columns, so times in
// instance and task records are kept to the microsecond, PostgreSQL's
// precision (the engine's clock is truncated to microseconds).
//
// # Rounds
//
// [Store.RunRound] runs a round in one READ COMMITTED transaction on one
// pooled connection. DequeueInstance locks the instance row of the first
// visible message in queue order (see "Priority and flow control") with
// FOR NO KEY UPDATE SKIP LOCKED, then reads the instance's visible
// messages in a statement of its own, whose snapshot
// follows the lock; an instance whose messages were acked meanwhile is
// passed over, so a worker never gets an empty result while another
// instance has work.
// AppendHistory inserts all events in one statement under a savepoint: a
// conflict is [provider.ErrConflict] and leaves the transaction usable, and an
// append of events already stored with the same hashes is a no-op, which
// makes a commit of unknown outcome safe to retry. A round may dequeue
// several instances (group commit). Driver errors are translated in one
// place: no rows is [provider.ErrNotFound], a unique violation
// [provider.ErrConflict], serialization failures and deadlocks
// [ErrRetryable].
//
// # Priority and flow control
//
// Queues are ordered by order_at = VisibleAt - priority × PriorityStep
// (provider.OrderAt), then by enqueue order; visibility is still
// VisibleAt (ready_at for tasks), and NextVisibleAt still reports it. A
// visible item of priority >= 0 has order_at <= now, so the dequeue and
// the claim walk the order index from its start up to now and stop at
// the first item they lock; visible items of negative priority may be
// ordered after now, and come from the small partial index of negative
// priorities, read only when the first part found nothing (all its items
// come first). Each part is an ordered index scan under its own LIMIT,
// whatever the plan (generic or not, with or without statistics; see
// TestQueuePlans). Migration 0007 gives queued rows the order of
// priority 0.
//
// A claim costs one statement, as without limits, unless it meets a
// task with a concurrency key or one that a rate limit of the claim
// matches. The combined claim statement claims the tasks before the
// first such task and reports it; the claim then goes on in a READ
// COMMITTED transaction that, per candidate in queue order (locked FOR
// UPDATE SKIP LOCKED after a savepoint), takes the key's transaction-level
// advisory lock and counts the key's live claims (locked_until > now) in
// a statement whose snapshot follows that lock, takes one token of each
// matching rate limit (an upsert of the key's flow_rates row, in the
// window of now, that changes the row only while a token is left), and
// claims the task. A candidate whose key is full, or whose limit has no
// token left, is rolled back to the savepoint, which gives back its
// locks and the tokens it took, and every task of that key or limit is
// left out of the next candidates: a full key or an exhausted limit
// never blocks other tasks, a claim that fails spends no token, and a
// transaction holds at most one key's lock while it waits for another.
// Concurrent claimers of a key therefore count in turn and never exceed
// its limit. A task queued before migration 0007 has no name column: a
// claim with rate limits checks it in this transaction, from its
// envelope.
//
// Slots of instances ([provider.FlowSteps] on the round's transaction):
// AcquireSlot upserts the key's flow_keys row (locking it until the
// round ends) with the acquire's limit, then, in a statement whose
// snapshot follows the lock, counts the holders and the waiters ahead of
// the instance and inserts or promotes its flow_slots row; ReleaseSlot
// locks the key's row, deletes the instance's and returns the first
// (limit - holders) waiters, in one round trip each. A rolled-back round
// undoes its acquire. ParkInstance sets the instance's hold to
// provider.ParkedUntil, which the dequeue never reaches and
// NextVisibleAt leaves out, and moves the instance's queued messages out
// of the queue's order (far ahead, by one interval for every column of
// the order); WakeInstances clears only such a hold, moves the messages
// back, and its work is announced after the commit.
//
// Waits at enqueue ([provider.StartWaiter]): EnqueueWaiting inserts the
// keys' missing flow_keys rows in a transaction of its own, then enqueues
// the messages, locks the keys' rows with SKIP LOCKED (a key a round
// holds is left to the round) and, in a statement whose snapshot follows
// those locks, inserts the waiters and returns those past the free
// slots, which it parks one by one (by the instance's key) in one more
// round trip, all in one transaction.
//
// # Undecodable rows
//
// A row of the messages table whose envelope does not decode (written by
// hand, or damaged) is dead-lettered by the round that dequeues its
// instance, in that round's transaction: the dead letter has reason
// [provider.ReasonUndecodable], an error naming the message id and the
// decoding error, and the stored bytes in [provider.DeadLetter].Raw; the row
// is deleted, the instance's incident set, and the round goes on with the
// instance's other messages, or the next instance. Such a letter cannot
// be redriven ([provider.ErrInvalidState]), only discarded.
//
// # Lock order
//
// The instance row is the instance's lock, and every transaction that
// writes an instance's rows takes it first: a round locks it when it
// dequeues, then deletes or updates messages and activity tasks; an
// abandon outside a round updates the instance row (its hold) before the
// messages; dead-lettering an activity locks its task's instance row
// before it moves the task, so it waits for a round cancelling the task
// or a purge deleting it, and then finds the task gone.
//
// Rounds lock their instance row FOR NO KEY UPDATE. An enqueue (and an
// activity's completion) first takes FOR KEY SHARE on the rows of the
// instances it enqueues to, which never waits for a round. A purge locks
// the row FOR UPDATE SKIP LOCKED: it refuses ([provider.ErrInvalidState])
// while a round holds the instance or an enqueue to it has not
// committed, whose message it could not see, and enqueues that come
// later wait for the purge to end and then create the instance row
// afresh. No message outlives its instance row and reaches an instance
// that reuses the id. Two writers taking the same rows in
// opposite orders would deadlock, and PostgreSQL would abort one of them
// (40P01).
//
// A round that fails records its failed delivery before it ends
// ([provider.Tx].AbandonMessages): it rolls back to a savepoint set right
// after its dequeue, which keeps the instance row locked, sets the hold
// and counts the delivery, and commits that alone. No other worker can
// take the messages between the rollback and the hold.
//
// # Isolation level
//
// Every transaction the store begins is READ COMMITTED, whatever the
// server's or the pool's default_transaction_isolation: rounds and
// helpers begin theirs at that level, and a write outside a round
// (enqueue, claim, complete, abandon) is one pipeline, which PostgreSQL
// runs as one implicit transaction at the session's default level: where
// that is READ COMMITTED the pipeline is the statements alone, elsewhere
// BEGIN ISOLATION LEVEL READ COMMITTED and COMMIT enclose them, at no
// extra round trip. Single reads run as implicit transactions, where the
// level makes no difference. Under REPEATABLE READ a round would read
// history from a snapshot older than its lock, and concurrent claims
// would fail with serialization errors.
//
// # Wake-up hints
//
// New work is announced after the commit that queued it (or whose outcome
// is unknown): the store closes its own hint channel at once, and a
// notifier goroutine sends pg_notify on the channels
// <schema>_orchestration and <schema>_activity for other processes, on a
// pooled connection outside any writing transaction, at most once per
// channel every [Options].NotifyInterval (announcements in between are
// coalesced). No writing transaction notifies: PostgreSQL takes a
// database-wide lock in a notifying transaction's pre-commit and holds it
// through its WAL flush, so notifying writes would commit one at a time.
// A lost notification costs other processes up to their safety poll.
// Each store keeps one connection listening on the channels (opened by
// the first [Store.WorkHint], closed by [Store.Close]); on a notification
// it closes the current hint channel, and on a failure it closes them all
// and reconnects with backoff. Instances released by a round close the
// hint of this store at once.
//
// # Connections
//
// A round holds one connection for its whole duration, and the listener
// one more, outside the pool. Size the pool (pool_max_conns) for the
// workers that run rounds and activities at once plus client calls; at
// least 4, since a round and the calls made while it runs (the conformance
// suite holds one round open while starting others) each need a
// connection. A pooler in transaction mode (PgBouncer) works for rounds
// but not for LISTEN: point the store at the server or a session-mode pool.
//
// # Limits
//
//   - Only transactional mode is implemented; [provider.ModePeekLock] is
//     rejected by [New].
//   - NextVisibleAt cannot see row locks held by other sessions without
//     taking locks itself: it leaves out the instances this store's open
//     rounds hold, but counts those of other stores, so a worker of another
//     node may find work due that it cannot take until that round ends.
//   - AbandonMessages, DeadLetterActivity and ResolveDeadLetter update the
//     instance row and wait for a round that holds the instance to end.
//     Enqueueing to a locked instance does not wait.
//   - Notifications to other processes leave after the commit, so a
//     process that dies between its commit and its NOTIFY leaves the work
//     to the other processes' safety poll.
//   - Messages of one instance enqueued by concurrent transactions are
//     delivered in identity order, which may differ from commit order.
//   - Human task ids are unique across instances.
//
// # Citus
//
// With [Options].Citus (or [Store.Distribute]) the per-instance tables
// are distributed by partition on a Citus cluster, and the store sends
// the statement forms Citus runs as single-shard router queries (see
// citus.go and docs/scaling.md). Ids of messages, activity tasks, dead
// letters and human tasks are then unique within a partition (Citus
// requires the distribution column in every unique key).
//
// # Tests
//
// The package's tests run [github.com/chronicleflow/chronicle/provider/providertest.Exercise] and provider-specific
// fault tests against the server named by CHRONICLE_TEST_PG_URL (default
// postgres://127.0.0.1:5432/test), each case in a schema of its own that is
// dropped afterwards; see package pgtest, which other packages' tests can
// use too. Without a reachable server they skip, or fail under CI=true.
// The Citus tests run on the coordinator named by CHRONICLE_TEST_CITUS_URL
// and skip without it.
package postgres
