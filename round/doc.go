// Package round is the resume protocol of a workflow instance and the
// contract its stores implement.
//
// A round resumes one instance: it takes the instance's visible messages,
// loads its state, drops duplicates and stale messages, runs the workflow
// code to its next wait, appends the new events to history, folds them into
// the snapshot and projections, enqueues the work they cause and acks the
// messages. [Runner] drives rounds; [ActivityWorker] runs activity tasks
// outside them.
//
// # Two modes
//
// A [TxStore] runs a round in one database transaction
// ([TxStore.RunRound]): the instance is locked by its dequeue
// ([Tx.DequeueInstance]) and everything the round writes commits or rolls
// back together. A [LeaseStore] has no multi-record transactions: the
// instance is leased ([LeaseStore.LeaseInstance]: token, fencing epoch,
// expiry) and the round's [Steps] run one after another, each idempotent,
// in the order append → projections → enqueue → ack, so that a crash
// between two of them is repaired by the redelivery (the cold round derives
// the work every open schedule needs again), and a zombie whose lease was
// taken over can neither append (the expected seq moved) nor ack (the
// token changed). docs/providers.md gives the per-step safety argument.
//
// # The contract
//
// [Store] is what both modes share: client enqueues, history reads, the
// activity queue (claim, heartbeat, complete, retry, dead-letter), dead
// letters, projections and queries, purge and tombstones. Its methods talk
// in the engine's nouns, take a *Params struct, never call time.Now (times
// come in the params) and translate driver errors into [ErrConflict],
// [ErrLeaseLost], [ErrNotFound], [ErrInvalidMessage] and [ErrInvalidState].
// [Store] is the required core. The rest are optional capabilities the
// engine discovers by type assertion: [Notifier] (hints that work
// arrived), [QueryStore], [DeadLetterStore], [PurgeStore] and
// [InspectStore]; [FullStore] has them all. provider/providertest.Exercise
// is the conformance suite every store passes; it skips the cases of the
// capabilities a store lacks and says so.
//
// Defaults a store applies: a zero Limit of a dequeue, lease or list means
// 100; zero VisibleAt and EnqueuedAt of an enqueue mean Now.
//
// # State
//
// [Snapshot] is the runtime state of an instance folded from its history
// ([Fold], [Snapshot.Apply]): the current execution, what it waits on and
// the idempotency keys it has seen. Rounds classify messages against it
// ([Snapshot.Classify]) and derive work items from the events they append
// ([Work]), which is how a peek-lock round that crashed after its append
// finds its work again. The snapshot is stored with the other projections
// and can always be rebuilt from history.
//
// # Tests
//
// [Hooks] let tests stop a round at named [CrashPoint]s; [ManualClock]
// moves time only when told.
package round
