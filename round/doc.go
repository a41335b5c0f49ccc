// Package round is the resume protocol of a workflow instance: the runner
// of its rounds and the activity worker.
//
// A round resumes one instance: it takes the instance's visible messages
// and puts them in the order they took effect (when each arrived or, for a
// timer, came due; not the order they were queued in), loads its state,
// drops duplicates and stale messages, runs the workflow
// code to its next wait, appends the new events to history, folds them into
// the snapshot and projections, enqueues the work they cause and acks the
// messages. [Runner] drives rounds; [ActivityWorker] runs activity tasks
// outside them.
//
// # Stores
//
// A round runs on a store that implements the contract of package
// [github.com/chronicleflow/chronicle/provider]: in one transaction on a
// [provider.TxStore], or as a lease and idempotent steps on a
// [provider.LeaseStore]. The runner's steps are named in steps.go: load
// (warm from the cache, cold from the stored snapshot, the chain
// verified), classify, turn, derive work, write; the ops adapters hold the
// two modes' differences.
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
