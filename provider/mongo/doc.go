// Package mongo is Chronicle's MongoDB provider, on
// go.mongodb.org/mongo-driver/v2. One [Store] runs in either mode of the
// provider contract:
//
//   - peek-lock ([provider.LeaseStore]) on a standalone server or any server
//     without multi-document transactions: every step is a sequence of
//     single-document writes, each idempotent or fenced;
//   - transactional ([provider.TxStore]) on a replica set or sharded
//     cluster that accepts transactions: a round's writes commit together
//     in one session transaction.
//
// [New] asks the server (the hello command, then an empty transaction) and
// picks the mode, unless Options.Mode forces one; it logs the mode and
// why, and [Store.Mode] reports it.
//
//	store, err := mongo.Open(ctx, "mongodb://db1,db2,db3/chronicle?replicaSet=rs0",
//		mongo.Options{MigrateOnStart: true})
//
// # Documents
//
// The store's database (Options.Database, else the URL's path, else
// "chronicle") holds one collection per record kind: messages (by message
// id), leases (one document per fencing epoch of an instance), history
// (one document per append, by instance and first Seq), history_keys (one
// per idempotency key), activity_tasks (by task id, kept and marked done
// once finished, so the id stays known), activity_claims (one per step of
// a task's claims: claim, settlement, cancel, requeue), dead_letters, incidents, snapshots, instances, human_tasks,
// human_task_events, custom_projections, tombstones, checkpoints and
// checkpoint_leaves (signed checkpoints, [provider.CheckpointStore]),
// slot_sets, activity_slots and rate_tokens (flow control, below),
// partition_leases and partition_nodes ([provider.PartitionLeaser]), and
// chronicle_meta (schema version, migration lock and settings). Times are Unix nanoseconds from
// the engine's clock (BSON dates keep milliseconds only); no method reads
// the clock. Migrations ([Store.Migrate]) are versioned, idempotent and
// run under a lock document.
//
// A store has [Options].Partitions partitions, recorded when its database
// is created ([provider.Partitioned]): every document of an instance in
// instances, history, messages, activity_tasks, dead_letters, human_tasks,
// human_task_events and custom_projections carries its partition in the
// field pt, the first field of the shard key of a sharded cluster, and
// the dequeue, the claim and the next-visible query look in the
// partitions asked for (docs/scaling.md, "MongoDB").
//
// An instance document keeps the search attributes twice (values by name
// for ranges, prefixes and grouping; one key per value for equality and
// IN, which the index {ax, st, ca} serves), and queries translate the
// filter's AST into a filter document of BSON values, never text
// (docs/providers.md, "Search attributes and queries").
//
// # How the contract is met
//
// Exclusion never rests on a conditional update: the store must also be
// right on FerretDB 1.x, the test server, which does not apply one
// atomically. It rests on inserts of unique _ids, which every server
// applies atomically:
//
//   - Leases: LeaseInstance reads an instance's newest epoch document and,
//     unless it is live, held or a purge mark, inserts the next epoch with
//     a new token. Of two rounds racing, the one whose insert lands wins.
//     Fences (the token checks of enqueues, cancels, pins, dead-lettering,
//     ack, abandon and renewal) read the lease's epoch and the next one by
//     _id: a takeover inserts the next. Only the holder writes its own
//     epoch document afterwards (renewal; release, with the retry hold).
//   - Appends: one history document per append, keyed by (instance,
//     first Seq), after the instance's head is read: two appends at one
//     Seq collide on _id, so one lands; a retried append finds its own
//     events and returns nil; a gap is refused. Idempotency keys are
//     documents of their own, written before the events: a key whose
//     events never landed (a crash, a lost race) is recognised because
//     its Seq now holds an event with another key, and is taken over.
//   - Enqueues: messages and activity tasks are inserted by their
//     deterministic ids; a duplicate is success. Each is one write, in
//     order.
//   - Activity claims: every change of a task's claim is the insert of
//     the task's next step document, keyed by (task, step number): a
//     claim (a takeover when it follows an expired claim), the settlement
//     of a claim by its owner (completion, retry, dead letter), a cancel,
//     a redrive's requeue. A worker reads the newest step, decides, and
//     inserts the next, so of an expired claim's owner settling it and
//     another worker taking it over exactly one wins, and the other
//     writes nothing (provider.ErrLeaseLost, or no claim). A settlement
//     step carries what it still has to write (the result message, the
//     letter, the next attempt), so a settlement whose worker died after
//     its step is finished by the same call again or by the next claimer.
//     The task document's claim fields are only a hint for finding
//     claimable tasks, rewritten by a claimer that finds it stale; a
//     claim step's owner alone updates it afterwards (heartbeats). Steps
//     are read by _id: from the newest step the hint knows on, and a
//     claim's from the step number its token begins with.
//   - Projections move only forward: each is a write conditional on the
//     stored Seq (or version, for custom records), in the order task
//     records, task events, custom records, instance record, snapshot. A
//     human task's id is its document's _id, so another instance's task
//     with that id is seen with the write ([provider.TaskIDTakenError]).
//   - Purge: the purge inserts the instance's next epoch as its mark
//     (carrying the tombstone), so no round leases the instance again,
//     keeps the tombstone (by a deterministic _id), deletes the rest
//     collection by collection, and the epoch documents last; a purge
//     that finds the mark finishes with the same tombstone.
//   - Errors: duplicate keys are handled where they mean something (an
//     idempotent insert, a conflict); [translate] is the one place that
//     maps driver errors, to [provider.ErrNotFound] or an [*Error] that
//     says whether a retry may succeed (network errors, timeouts,
//     TransientTransactionError).
//
// # Priority and flow control
//
// Schema 5 adds them, each kept as the contract is, above:
//
//   - Priority: a message keeps its priority ("pr") and "po", its
//     provider.OrderAt(VisibleAt, priority) in Unix nanoseconds; a lease
//     walks the visible messages by (po, o), indexed {po, o}. An activity
//     task's hint keeps "po" = OrderAt(claimable time, priority), written
//     with "ca" by every writer of the hint (enqueue, claim, heartbeat,
//     retry, requeue; never once done), and claims read by (po, o, _id)
//     a page at a time, indexed {q, d, po, o}. NextVisibleAt still
//     answers by VisibleAt (messages) and claimable time (tasks).
//   - Parked instances (provider.FlowSteps.ParkInstance): a park
//     document of the instance in leases (epoch 0, _id instance + "park"),
//     which the reads of the instances' epochs find with them: a parked
//     instance is never leased, and NextVisibleAt leaves it out.
//     WakeInstances deletes it (an instance not parked has none). A
//     document of its own, not a field of the epoch document, so that a
//     wake is never lost to the epoch's release written at the same time.
//   - Slot sets of instance concurrency keys (AcquireSlot, ReleaseSlot):
//     versions by (key, version) in slot_sets; a change reads the newest,
//     computes the next (holders, FIFO waiters, the limit) and inserts
//     it, so of two changes of one version one lands and the other reads
//     again; older versions are then deleted, and a version inserted
//     after a newer one exists (a read long ago) is taken back. In
//     transactional mode too these inserts are made outside the round's
//     transaction (a MongoDB transaction never waits for another: two
//     rounds acquiring one key would fail each other), and a round that
//     fails undoes its acquires after its rollback; parks and wakes are
//     in the transaction.
//   - Activity concurrency keys: slot i of a key, for i below the task's
//     limit, is a sequence of versions in activity_slots; the newest
//     names the claim holding the slot. A claim of a task with a key
//     first counts the slots held (their claims are the tasks' newest
//     steps and live; or not written yet and their end not reached) and,
//     below the limit, inserts the next version of a free slot naming its
//     claim-to-be, then inserts its claim step; of two claimers of one
//     slot one lands its insert, so the live claims of a key never exceed
//     its limit. A claim that loses its task to another claimer names a
//     token no step has, which frees the slot; one whose claimer died
//     before its step holds the slot until the claim's end. A heartbeat
//     checks, after extending its claim, that its slot still names it
//     (else provider.ErrLeaseLost), and a claimer that took the slot of a
//     claim that ran out reads that claim again after its insert and
//     gives the slot back when a heartbeat extended it, so a heartbeat
//     never revives a claim past the limit. CountClaims counts the held
//     slots.
//   - Rate limits: token j of a key's window is a document by (key,
//     window start, j) in rate_tokens, j below the limit's tokens; a
//     claim inserts a missing one before its claim step and deletes it
//     again when it then does not claim (a lost race, a full key). A
//     claimer that dies between the two wastes that token: the limit is
//     never exceeded, and at worst a window grants one claim less per
//     crash. The first token of a window deletes the key's older windows.
//
// Claims are not made in a transaction in either mode, so both modes keep
// activity limits the same way.
//
// In transactional mode a round takes its instance's lease the same way,
// outside the transaction (held at most Options.LockTimeout if the
// process dies), and writes everything else in the transaction; the
// commit releases the lease. MongoDB has no savepoints, so a round takes
// one instance (group commit is off), and a round that fails after
// writing is rolled back whole and its failure recorded afterwards. A
// commit whose outcome is unknown is committed again.
//
// Wake-ups: work enqueued through a Store wakes that Store's workers at
// once; in transactional mode change streams on the message and activity
// task collections wake them for other processes' work too. Otherwise the
// engine's safety poll finds it.
//
// docs/providers.md in the repository has set-up, costs and limits.
package mongo
