// Package oracle is Chronicle's Oracle Database provider: a
// [provider.TxStore], [provider.FullStore] and [provider.Notifier] on
// database/sql with the github.com/godror/godror driver. Every round runs
// in one transaction; instances are locked with SELECT … FOR UPDATE SKIP
// LOCKED, idempotency rests on unique keys, and workers are woken through
// Oracle Advanced Queuing (AQ).
//
// This provider has not run against an Oracle server in this project: no
// Oracle server can run on its machines or in its CI. What runs there is
// listed under Tests below; everything else needs a server named by
// CHRONICLE_TEST_ORACLE_DSN.
//
// # Set-up
//
// godror is a cgo package that loads Oracle's client library at run time:
// build with CGO_ENABLED=1 and install Oracle Instant Client (Basic or
// Basic Light, 19c or later) where the dynamic loader finds it
// (LD_LIBRARY_PATH, or ldconfig). Without it, connecting fails with
// "DPI-1047: Cannot locate a 64-bit Oracle Client library". A program
// built without cgo still builds and links this package (so programs that
// use only other providers need neither cgo nor Instant Client), and
// [New] returns [ErrNeedsCgo].
//
// The server must be Oracle Database 19c or later (long identifiers,
// FETCH FIRST, identity columns). Open a store on a connect string (the
// store owns its pool) or on a pool of yours opened with
// sql.Open("godror", dsn):
//
//	store, err := oracle.New(ctx, oracle.Options{
//		DSN:            `user="chronicle" password="…" connectString="db.example.com:1521/APP"`,
//		Prefix:         "CHRONICLE",
//		MigrateOnStart: true,
//	})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
// connectString takes Easy Connect (host:port/service_name) or a TNS alias
// of tnsnames.ora (TNS_ADMIN); godror also reads
// oracle://user:password@host:1521/service. The store never reads a clock:
// visibility and leases are decided with the times the engine passes in,
// so every node must run with a sane clock. Sessions must compare and sort
// text in binary order (NLS_SORT and NLS_COMP BINARY, the defaults unless
// NLS_LANG names a language with a linguistic sort); [New] checks it.
//
// # What a DBA grants
//
// The store's objects live in one schema, [Options].Schema (default: the
// connecting user's), under a prefix, [Options].Prefix. The user that
// migrates needs, in that schema:
//
//	CREATE USER chronicle IDENTIFIED BY "…" DEFAULT TABLESPACE users QUOTA 20G ON users;
//	GRANT CREATE SESSION, CREATE TABLE, CREATE SEQUENCE TO chronicle;
//	GRANT EXECUTE ON SYS.DBMS_AQ TO chronicle;    -- enqueue and dequeue wake-ups
//	GRANT EXECUTE ON SYS.DBMS_AQADM TO chronicle; -- create the queue table and queue
//
// (AQ_ADMINISTRATOR_ROLE and AQ_USER_ROLE are broader roles that cover
// the two packages.) CREATE SEQUENCE covers the identity columns too. No
// DBMS_LOCK grant is needed: the migration lock is a row lock. A DBA who
// prefers to run the migration with an owner account and let the
// application connect as another user grants that user SELECT, INSERT,
// UPDATE and DELETE on the tables, SELECT on the sequence, EXECUTE on
// DBMS_AQ, ENQUEUE and DEQUEUE on the queue (DBMS_AQADM.GRANT_QUEUE_PRIVILEGE)
// and SELECT on the queue table's AQ$ view, and sets Schema to the owner.
// The test suites' user also wants SELECT on SYS.V_$SESSION (optional;
// see Tests).
//
// # Objects and migrations
//
// Objects are named <PREFIX>_<NAME>, upper case and quoted. Schema and
// Prefix must be unquoted identifiers (a letter, then letters, digits, _,
// $, #) that are not reserved words; the prefix has at most
// [MaxPrefixLength] bytes. The tables:
//
//   - INSTANCES: one row per instance. Its row lock is the instance lock
//     of a round; it holds the abandon hold, the incident, the runtime
//     snapshot (BLOB) and the instance record.
//   - HISTORY: the append-only log, primary key (instance_id, seq), and a
//     unique function-based index on (instance_id, execution_id, class,
//     correlation_id) of the events that have an idempotency key (CASE
//     WHEN class IS NOT NULL: an all-NULL key is not indexed, which makes
//     it PostgreSQL's partial index). event holds history.MarshalEvent.
//   - MESSAGES: the orchestration queue, an identity column (ORDER) giving
//     the enqueue order, indexes on (instance_id, seq) and (visible_at,
//     seq).
//   - ACTIVITY_TASKS and ACTIVITY_TASK_IDS: the activity queue, and every
//     task id ever enqueued, so a completed or cancelled task is never
//     queued again until its instance is purged. The sequence
//     LEASE_TOKENS gives claim tokens.
//   - DEAD_LETTERS, HUMAN_TASKS (task ids unique per store),
//     HUMAN_TASK_ROLES (the roles of each task, indexed for the inbox
//     filter), HUMAN_TASK_EVENTS, CUSTOM_PROJECTIONS.
//   - TOMBSTONES: one row per purge, primary key (instance_id, seq).
//   - ATTRIBUTES (migration 2): the search attributes of instance
//     records, one row per value or list element, indexed by (name, value,
//     instance_id) for each kind of value; INSTANCES gains the custom
//     status text. Queries compile to SQL whose values are all binds
//     (docs/providers.md, "Search attributes and queries").
//   - Flow control and priority (migration 3; see "Flow control and
//     priority" below). MESSAGES gains priority and order_at, a virtual
//     column visible_at - priority × [provider.PriorityStep] (in
//     nanoseconds), indexed by MESSAGES_ORDER (order_at, seq,
//     visible_at): the dequeue's ordered scan. ACTIVITY_TASKS gains name
//     (for rate limits), priority, conc_key and conc_limit (copies of the
//     envelope's) and order_at, ready_at - priority × step, indexed by
//     ACTIVITY_TASKS_ORDER (queue, order_at, seq, ready_at), the claim's
//     scan, and ACTIVITY_TASKS_CONC (conc_key, locked_until), which counts
//     a key's live claims. Virtual columns move with visible_at and
//     ready_at wherever those are written, and rows queued before the
//     migration have priority 0, so their order is their visible or ready
//     time, without an update. ACTIVITY_KEYS holds one row per activity
//     concurrency key ever claimed, whose row lock serializes the key's
//     claims. RATE_WINDOWS holds the tokens used per rate limit key and
//     window (primary key (rate_key, window_start)). FLOW_SLOTS holds one
//     row per instance concurrency key with the limit of its latest
//     acquire (its row lock serializes acquires and releases), and
//     FLOW_SLOT_MEMBERS its holders and waiters (waiting 0 or 1, since,
//     and an identity seq giving the order of first waiting), indexed by
//     (slot_key, waiting, seq).
//   - The AQ queue table WQT (RAW payload, single consumer) and its queue
//     WQ, started.
//   - SCHEMA_MIGRATIONS and MIGRATION_LOCK: the migrator's records and
//     lock.
//
// Times are NUMBER(19) nanoseconds since the Unix epoch, UTC: exact, and
// free of session time zones and of TIMESTAMP's conversions. Payloads,
// envelopes and snapshots are BLOBs, error texts CLOBs, ids VARCHAR2(512
// BYTE). Binds longer than 2,000 bytes (4,000 for text, counting
// conversion) go as temporary LOBs, so any size fits any statement.
//
// Migrations are embedded, numbered files (migrations/NNNN_name.sql),
// statements separated by lines holding "/". Oracle commits every DDL
// statement on its own, so a migration cannot be one transaction:
// [Store.Migrate] takes a row lock on MIGRATION_LOCK (SELECT … FOR UPDATE
// in a transaction of its own session, held to the end; a lock taken in
// the session that runs the DDL would end with its first commit), runs the
// statements on a second session and records each in SCHEMA_MIGRATIONS as
// it completes. Nodes that start together migrate once; a migration cut
// short resumes at the statement it was in, which may find its object
// made already. [Store.SchemaVersion] and [LatestSchemaVersion] tell where
// a schema stands; [DropObjects] removes everything (tests, uninstall).
//
// # How the contract is met in Oracle SQL
//
// Every transaction the store begins is READ COMMITTED, whatever the
// session's default (a logon trigger may set SERIALIZABLE); single
// statements outside transactions commit on success. A failed statement
// rolls back alone in Oracle and leaves its transaction usable, which the
// store relies on where a unique violation means "there already".
//
//   - RunRound: one transaction on one pooled connection. When fn
//     returns nil the round enqueues its wake-ups and commits; otherwise,
//     or when ctx ends, it rolls back (and a panic rolls back, then
//     propagates). A commit whose connection broke returns
//     [ErrOutcomeUnknown] (and [ErrRetryable]); running the round again is
//     safe, as every write below is idempotent.
//   - DequeueInstance: a plain query lists the instances of the first
//     visible messages in queue order (ORDER BY order_at, seq FETCH FIRST
//     32 ROWS ONLY, visible_at <= Now) whose hold has passed, leaving out the round's own and those found
//     locked; each is then locked by primary key with SELECT … FOR UPDATE
//     SKIP LOCKED (re-checking the hold), never waiting. Oracle refuses a
//     row limit in a FOR UPDATE query, and ROWNUM would cut before the
//     locked rows are skipped, hence the two steps. The visible messages
//     are read in a statement after the lock, which sees every commit
//     before it (the ack of the round that held the instance), and so is
//     the head of history (Batch.Head). An instance whose messages were
//     acked meanwhile is passed over. A passed hold is cleared, and
//     SAVEPOINT chronicle_dequeued follows.
//   - AbandonMessages in a round: ROLLBACK TO SAVEPOINT
//     chronicle_dequeued (a savepoint of a reused name replaces the older
//     one, so it is the last dequeue's; Oracle keeps the locks taken
//     before the savepoint, the instance row's among them), then the hold
//     and the count as outside a round. Only the instance dequeued last
//     may be abandoned.
//   - AbandonMessages outside a round: one transaction updates the
//     instance row (hold_until = GREATEST(NVL(hold_until, :until),
//     :until): Oracle's GREATEST is NULL when an argument is), waiting for
//     a round that holds it, then attempts and last_error of the messages
//     still queued.
//   - AckMessages, DeadLetterMessages: DELETE of the locked instance's
//     messages by id; dead letters are inserted (a unique violation is the
//     same letter, kept) and the incident set with MERGE.
//   - EnqueueMessages: the instance rows are created with INSERT … SELECT
//     … WHERE NOT EXISTS (never waiting for a round: a committed row makes
//     it a no-op), then each message is inserted; a unique violation on
//     its id makes that message a no-op (idempotent by id). Zero times
//     take Now. The wake-up is enqueued in the same transaction.
//   - AppendHistory: the stored last Seq is read; when the events continue
//     it, one INSERT ALL writes them all (one statement: all or nothing).
//     A unique violation (a concurrent append at the same Seq, or a used
//     idempotency key) writes nothing; the stored tail is then compared:
//     the same hashes are a retried append (nil), anything else
//     [provider.ErrConflict].
//   - SaveProjections: the record (UPDATE … WHERE record_seq IS NULL OR
//     record_seq < :seq), the tasks (MERGE … WHEN MATCHED THEN UPDATE …
//     WHERE t.seq < :seq AND t.instance_id = :inst, their roles replaced
//     when written), task events (a unique violation: present), custom
//     records (MERGE with the [provider.CustomRecord.Replaces] condition)
//     and the snapshot last (UPDATE … WHERE snapshot_seq < :seq), all in
//     the round's transaction. A task id of another instance, found by a
//     query after the upserts (or a unique violation of a concurrent
//     insert), is a [provider.TaskIDTakenError].
//   - ResetProjections: the snapshot and record are cleared first, then
//     task roles, tasks, task events and the named custom records
//     deleted.
//   - EnqueueActivities: each task id is inserted into ACTIVITY_TASK_IDS
//     first; a unique violation means the task was enqueued before (maybe
//     completed), and nothing is queued.
//   - ClaimActivity: a plain query lists the first claimable tasks of
//     the queues in queue order (ORDER BY order_at, seq), leaving out
//     tasks whose concurrency key has its limit of live claims and tasks
//     that a rate limit read as exhausted matches. Each candidate is then
//     tried in a transaction of its own: it locks the task with SELECT …
//     FOR UPDATE SKIP LOCKED (re-checking ready_at <= Now on the newest
//     row version), decodes it, locks its key's row in ACTIVITY_KEYS
//     (waiting) and counts the key's live claims, takes a token of each
//     matching rate limit's window, and UPDATEs its claim with token =
//     TO_CHAR(LEASE_TOKENS.NEXTVAL) … RETURNING token INTO :tok. A
//     candidate turned down (full key, no token) rolls its transaction
//     back, giving back the tokens and locks it took, and the claim goes
//     on to the next. A claim that ran out is taken over with
//     ActivityLease.Expired set and Attempt unchanged. Queue names are
//     stored as ":" + name, since Oracle would store the default queue ""
//     as NULL.
//   - HeartbeatActivity, RetryActivity, CompleteActivity: statements
//     conditional on id and token (0 rows: [provider.ErrLeaseLost]);
//     CompleteActivity deletes the task and enqueues the result in one
//     transaction, so it changes nothing when the token is stale.
//   - DeadLetterActivity: one transaction finds the task's instance, locks
//     the instance row (waiting for a round or purge), locks the task
//     while the token matches, stores the letter, deletes the task and
//     sets the incident.
//   - CancelActivities: one DELETE by instance and execution (or every
//     execution but OtherThan); ids stay remembered.
//   - NextVisibleAt: the least of the earliest unheld message and the
//     earliest hold that delays a message (NVL around each, as LEAST is
//     NULL when an argument is), leaving out the instances this store's
//     open rounds hold, and parked instances; for activities
//     MIN(ready_at) of the queues. Both read visible and ready times, not
//     the priority order.
//   - AcquireSlot, ReleaseSlot, ParkInstance, WakeInstances
//     ([provider.FlowSteps] on the round's Tx) and [provider.FlowStore]:
//     see "Flow control and priority".
//   - Queries: pages ordered by id continue with (:after IS NULL OR id >
//     :after) FETCH FIRST :lim ROWS ONLY; filters that match anything when
//     empty read (:x IS NULL OR col = :x), as Oracle binds "" as NULL. The
//     roles filter is an EXISTS on HUMAN_TASK_ROLES.
//   - ResolveDeadLetter: one transaction locks the letter (FOR UPDATE),
//     requeues its message or task (redrive) or queues the failure a
//     discard owes a waiting workflow or parent, records the decision and
//     recomputes the incident from the newest unresolved letter.
//   - PurgeInstance: one transaction locks the instance row with FOR
//     UPDATE SKIP LOCKED (a round holds it: [provider.ErrInvalidState];
//     no row and no history: [provider.ErrNotFound]; not terminal:
//     ErrInvalidState), reads the last Seq and hash, deletes history,
//     messages, tasks and their ids, dead letters, task records, roles
//     and events, custom records and the row, and inserts the tombstone;
//     tombstones of earlier purges of the id stay.
//   - Errors are translated in one place (errors.go) from the ORA- code
//     that godror's errors carry (matched through a Code() int method, so
//     that file needs no cgo): no rows is [provider.ErrNotFound],
//     ORA-00001 [provider.ErrConflict]; ORA-00060 (deadlock), ORA-08177
//     (serialization), ORA-00054 and ORA-30006 (busy) [ErrRetryable]; a
//     lost connection (ORA-03113, 03114, 03135, 12537, 12547, 00028, …, or
//     driver.ErrBadConn) [ErrConnectionLost] before a commit and
//     [ErrOutcomeUnknown] at a commit, both retryable. A stored event that
//     does not decode is a *history.ChainError naming its Seq; a message
//     whose envelope does not decode is dead-lettered by the round that
//     dequeues it (reason undecodable, the bytes in DeadLetter.Raw).
//
// # Flow control and priority
//
// Priority: a message or task of priority p that became visible (or
// claimable) at v is ordered at v - p × [provider.PriorityStep], the
// virtual order_at columns, and then by enqueue order (seq). Visibility
// is still visible_at <= Now (ready_at <= Now), and NextVisibleAt still
// reads visible_at and ready_at. Across several served queues the claim's
// query orders the tasks of all of them by order_at.
//
// Activity concurrency keys: a claim of a keyed task locks the key's row
// in ACTIVITY_KEYS (created by INSERT … WHERE NOT EXISTS, a unique
// violation ignored) with SELECT … FOR UPDATE, waiting for another claim
// of the key, then counts the key's claims with locked_until > Now. The
// lock is held to the claim's commit, so the next claim of the key counts
// it: claims never exceed the limit across processes. A claim that ran
// out (locked_until <= Now) does not count, and its task, taken over,
// counts once. The candidates' query leaves out tasks of full keys (a
// correlated COUNT on ACTIVITY_TASKS_CONC), so a full key does not hold
// up the claim of other tasks. CountClaims is the same count.
//
// Rate limits: the claim takes, in its transaction, one token of each
// rate limit key whose limits match the task (RateLimit.Matches on the
// decoded task), in key order: the window's row is created if missing
// (the claim that creates it deletes the key's older windows) and UPDATE
// … SET used = used + 1 WHERE … AND used < :tokens takes the token, 0
// rows meaning none is left. The UPDATE waits for a claim holding the
// row and Oracle then evaluates the condition on the row it finds, so
// concurrent claims never take more than the tokens. A claim turned down
// or failed rolls back, which gives its tokens back. The candidates'
// query leaves out tasks an exhausted limit matches (by name and queue
// columns; a task without a stored name passes and the claim checks its
// envelope), so an exhausted limit does not hold up other tasks.
//
// A claim's locks come in one order: the task (SKIP LOCKED, never
// waiting), its key's row, the windows' rows by key; each candidate's
// transaction ends before the next begins, so claims never wait for each
// other in a cycle.
//
// Instance slots ([provider.FlowSteps] on the round's transaction):
// AcquireSlot creates the key's FLOW_SLOTS row if missing and sets its
// limit (the UPDATE locks the row, waiting for another round that holds
// it, until the round ends), then reads the holder's membership and
// counts the holders and the waiters ahead of it; it inserts or promotes
// the member as [provider.FlowSteps] says. ReleaseSlot locks the row
// (SELECT … FOR UPDATE; none: nothing to release), deletes the member and
// returns the first (limit - holders) waiters by seq. A rolled-back round
// undoes its acquire. GetSlots and ListSlots read the rows and members
// (holders by since, waiters by seq), keys in binary order.
//
// Parking: ParkInstance sets the instance's hold_until to the greatest
// NUMBER(19), 9223372036854775807 ([provider.ParkedUntil] does not fit
// nanoseconds), which no Now passes: the dequeue never takes it, and
// AbandonMessages keeps it (GREATEST). WakeInstances clears the hold only
// where it is that value, one UPDATE per instance in id order (waiting
// for a round that holds the instance, such as the one parking it), and
// enqueues the wake-up of the orchestration queue when it woke one.
// NextVisibleAt leaves parked instances out.
//
// # Lock order
//
// The instance row is the instance's lock, and every transaction that
// writes an instance's rows under a lock takes it first: a round locks it
// when it dequeues; an abandon outside a round updates it before the
// messages; dead-lettering an activity locks it before the task, so it
// waits for a round cancelling the task or a purge deleting it and then
// finds the task gone. A round that releases a slot holds the slot set's
// row when it wakes the waiters, and a wake waits for a round that holds
// the waiter's instance; if that round is acquiring the same key, the two
// wait for each other and Oracle ends one with ORA-00060, which is
// [ErrRetryable]: the round runs again. Oracle has no shared row locks, so an enqueue does
// not lock the instance row at all (it never waits for a round). A purge
// may therefore delete an instance while a message to it is being
// enqueued; that message, committed after the purge, has no instance row.
// The dequeue treats such a message's instance as new (it creates the row
// and locks it), so the message reaches the id as if it had been
// enqueued after the purge, never an earlier execution.
//
// # Wake-up hints
//
// A round (or a write outside one) that queued work runs one PL/SQL block
// before its commit that calls DBMS_AQ.ENQUEUE with ON_COMMIT visibility:
// the wake message becomes visible exactly when the round commits and
// disappears with a rollback. AQ enqueues are row inserts, without
// PostgreSQL's database-wide lock on notifying commits, so they cost no
// commit slot; they are coalesced nonetheless, to spare the listeners: a
// queue kind (orchestration, activity) whose wake message is still ready
// in the queue table's AQ$ view gets none. A failed enqueue is logged and
// never fails the round. Each store runs one listener, started by the
// first [Store.WorkHint]: a pooled connection that calls DBMS_AQ.DEQUEUE
// with dequeue_options.wait = [Options].ListenWait in a loop (IMMEDIATE
// visibility), drains the ready messages in the same call and closes the
// hint channels they name; on a failure it closes them all and reconnects
// with backoff. The queue has a single consumer: a wake message wakes one
// process, and the others, like a process that died between commit and
// dequeue, find the work by their safety poll, which bounds a lost
// wake-up. Work enqueued through a store, and instances its rounds
// release, close that store's own hints at once.
//
// # Connections
//
// A round holds one connection for its whole duration, the listener one
// more, and Migrate two. Size the pool (godror's poolMaxSessions, and
// sql.DB.SetMaxOpenConns) for the workers that run rounds and activities
// at once plus client calls, plus two. Every transaction costs the
// driver's SET TRANSACTION and isolation statements besides its own.
//
// # Limits
//
//   - Only transactional mode is implemented; [provider.ModePeekLock] is
//     rejected by [New].
//   - Oracle stores "" as NULL and an empty BLOB bind as NULL: empty byte
//     strings (a task's payload, say) read back as nil, and empty roles are
//     not indexed.
//   - Times outside 1678–2262 (what NUMBER(19) nanoseconds hold) are
//     refused when a projection holds one; ids and names are bounded by
//     their columns (ids 512 bytes, names 1,000, business keys 2,000);
//     a longer value fails with ORA-12899, which the error names.
//   - NextVisibleAt cannot see row locks of other sessions: it leaves out
//     the instances this store's rounds hold, but counts those of other
//     stores, so a worker may find work due that it cannot take until
//     that round ends. A dequeue or claim gives up after skipping 512
//     locked (or, for a claim, turned down) candidates.
//   - A claim serving several queues sorts their claimable tasks (an
//     index scan per queue cannot give one order across queues); a claim
//     of one queue is an ordered index scan that stops early. This has
//     not been checked with execution plans on a server.
//   - Rows of ACTIVITY_KEYS (one per concurrency key ever claimed) and
//     FLOW_SLOTS (one per instance concurrency key) are never deleted;
//     RATE_WINDOWS keeps the current window per key. A purge does not
//     touch slot sets: a holder or waiter that is never released stays.
//   - AbandonMessages, DeadLetterActivity and ResolveDeadLetter update
//     the instance row and wait for a round that holds the instance; an
//     enqueue that creates an instance row waits for another open
//     transaction creating the same row.
//   - Messages of one instance enqueued by concurrent transactions are
//     delivered in identity order, which may differ from commit order.
//   - Statements bind by name and go one per row; with array DML many
//     could share a round trip (a possible optimization, not measured).
//
// # Tests
//
// Without a server, the package's tests (run in CI, with and without cgo)
// cover: identifier validation and options, error translation (table
// driven, at commit too), SQL assembly (every statement rendered with no
// marker left, Oracle syntax, no reserved bind names), migration parsing
// and order, and every store method and round step run on a fake
// database/sql driver that checks each statement's binds as Oracle would.
// On the project's PostgreSQL test server, the conformance groups of
// priority, activity limits and slots, and the queue and activity groups,
// run on a store whose statements and migrations a test driver translates
// to PostgreSQL (binds, FROM dual, NVL, the token sequence, virtual
// columns as stored ones, a failed statement rolled back alone): this
// checks the statements' columns, conditions and order, the code around
// them and the row locks that serialize keys, windows and slot sets, not
// Oracle's parser, plans or locking. The whole conformance suite
// ([github.com/chronicleflow/chronicle/provider/providertest.Exercise]),
// migration and commit-outcome tests, the end-to-end workflows of the
// repository root and the rapid workflows machine (package fuzz) need a server: they run
// against CHRONICLE_TEST_ORACLE_DSN (see package oracletest, which gives
// each test its own prefix and drops it) and are skipped with a loud
// message without it, under CI=true too. The rapid machine detects a call
// that waits for a paused round through V$SESSION when the test user may
// read it.
package oracle
