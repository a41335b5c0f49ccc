// Package provider is the contract between Chronicle's engine and the
// database it runs on: what a store keeps, what each method guarantees, and
// how a round stays all-or-nothing with transactions or without them. It
// stands apart from its users as database/sql/driver does: a provider
// imports this package, [github.com/chronicleflow/chronicle/history] and
// [github.com/chronicleflow/chronicle/query], nothing else of Chronicle. The memory store (provider/memory) and the
// PostgreSQL store (provider/postgres) implement it; the conformance suite
// (provider/providertest) checks an implementation.
//
// # Rounds and the two modes
//
// The engine resumes one workflow instance at a time in a round: it takes
// the instance's visible messages, appends the events they cause to its
// history, writes the projections folded from that history, enqueues the
// work the events cause (messages, activity tasks) and removes the
// messages it processed. A provider makes a round all-or-nothing in one of
// two modes, reported by [Store.Mode]:
//
//   - [ModeTransactional]: the store implements [TxStore]. A round runs in
//     one database transaction ([TxStore.RunRound]); [Tx.DequeueInstance]
//     locks the instance (skipping locked ones, never waiting) and
//     everything the round writes commits or rolls back together. A round
//     may dequeue several instances one after the other (group commit),
//     each behind a savepoint that [Tx.AbandonMessages] rolls back to. The
//     fences of peek-lock mode (the Lease fields of params) are nil and
//     ignored; the lock is the fence.
//   - [ModePeekLock]: the store implements [LeaseStore]. It needs no
//     multi-record transactions: [LeaseStore.LeaseInstance] leases the
//     instance (token, fencing epoch, expiry) and the round calls the
//     [Steps] one after another in the order append, projections,
//     enqueues, cancels, ack (a cold round first queues what an execution
//     that had ended still owed, so that no later start hides it). Each
//     call is idempotent and each of its
//     record writes may be its own atomic unit (one document), in the
//     order the method's doc states; a crash between two writes is
//     repaired by the redelivery of the messages, and a zombie (a round
//     that lost its lease and goes on) is stopped by fences: the append's
//     expected Seq, the lease token (checked by the fenced enqueues,
//     cancels, pins, dead-lettering, ack and abandon), a task's claim
//     token, a projection's folded Seq. [Tx] and [DequeueParams] do not exist in this mode.
//
// docs/providers.md in the repository argues, write by write, why every
// peek-lock step is safe under a crash, a retry or a zombie between any two
// of its writes.
//
// # Records
//
// Whatever its shape (tables, documents), a store keeps these records:
//
//   - The instance, by instance id: its lock or lease (token, owner, expiry,
//     fencing epoch), a retry hold after a failed delivery, its incident
//     (the newest unresolved dead letter), the stored snapshot (opaque
//     bytes and the Seq it was folded to) and the [InstanceRecord].
//   - History events, unique by (instance, Seq) and by the event's
//     idempotency key (instance, execution, class, correlation): the
//     canonical bytes of [history.MarshalEvent], never changed. In peek-lock
//     mode the events of one [Steps.AppendHistory] call are one record.
//   - Messages ([Message]), by message id: the envelope, visibility and
//     enqueue time, attempts, last error, the execution pinned by a
//     peek-lock round ([LeaseStore.PinMessages]). Kept in enqueue order per
//     instance.
//   - Activity tasks ([ActivityTask]), by task id ([ActivityTaskID]): the
//     task, visibility, attempt and claim (owner, token, expiry). A task's
//     id stays known after it completes or is cancelled, so a retried
//     enqueue never runs it again (until the instance is purged).
//   - Dead letters ([DeadLetter]), by [DeadLetterID]: the message or task
//     (or raw bytes), reason, error, node, time, attempts and resolution.
//   - Human task records ([TaskRecord], ids unique per store), task events
//     ([TaskEventRecord], by instance, Seq and task), custom projection
//     records ([CustomRecord], by name and instance).
//   - Tombstones ([Tombstone]), one per purge of an instance id.
//
// # Guarantees
//
// Every method may be called concurrently from any number of goroutines and
// processes; a [Tx] is used by one goroutine. No method calls time.Now:
// every time comes in the params. When ctx ends a method returns its
// error, having done all or nothing of its work (in peek-lock mode: a
// prefix of its record writes, in the order its doc states, as after a
// crash).
//
//   - Idempotency: [Steps.AppendHistory] is conditional on the expected
//     next Seq and a no-op for an identical tail; enqueues are no-ops for a
//     known message or task id; projections move only forward (by Seq, and
//     by version for custom records), the snapshot last.
//   - Exclusion and order: a dequeue or lease skips an instance another
//     round holds and never waits for it; a held instance is not delivered
//     before its hold ends, so a failure never reorders an instance's
//     messages.
//   - Fencing: activity heartbeats, completions, retries and dead-lettering
//     need the claim's current token, peek-lock writes the lease's.
//   - Errors: driver errors are translated, in one place, into
//     [ErrConflict], [ErrLeaseLost], [ErrNotFound], [ErrInvalidMessage],
//     [ErrInvalidState] and [ErrUnsupported] (compared with errors.Is); a
//     stored event that does not decode is a *[history.ChainError] naming
//     its Seq; a human task id owned by another instance is a
//     [TaskIDTakenError].
//
// Defaults a store applies: a zero Limit of a dequeue, lease or list means
// 100; a zero VisibleAt or EnqueuedAt of an enqueue means Now; an empty
// activity queue list means the default queue "".
//
// # The core and optional capabilities
//
// [Store], with [TxStore] or [LeaseStore], is the required core: all the
// engine needs to run workflows, activities and their dead letters. The
// rest are optional capabilities the engine discovers by type assertion:
// [Notifier] (hints that work arrived; [PartitionNotifier] when they name
// partitions, see [Partitioned]), [QueryStore] (instances, human
// tasks, custom projections), [DeadLetterStore] (listing, redriving and
// discarding dead letters), [PurgeStore] (purge and tombstones),
// [InspectStore] (what tests see of the activity queue) and
// [CheckpointStore] (signed checkpoints, see docs/audit.md); [FullStore]
// has all but the last. The engine answers a call that needs a missing capability with
// a typed error, and providertest.Exercise runs the cases of the
// capabilities a store has and reports the others as skipped, so a new
// provider can ship its core first.
package provider
