package provider

import (
	"context"
	"errors"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/query"
)

// Errors of the provider contract. Providers translate their driver's errors
// into these at their boundary; callers compare with errors.Is.
var (
	// ErrConflict: an append found another event at the expected Seq or an
	// event with the same idempotency key.
	ErrConflict = errors.New("provider: conflicting history append")
	// ErrLeaseLost: a lease or lock token no longer matches; the work item
	// was taken over, completed or removed.
	ErrLeaseLost = errors.New("provider: lease lost")
	// ErrNotFound: the requested record does not exist.
	ErrNotFound = errors.New("provider: not found")
	// ErrInvalidMessage: a message envelope is malformed.
	ErrInvalidMessage = errors.New("provider: invalid message")
	// ErrInvalidState: an operation is not allowed in the record's current
	// state (redriving a discarded dead letter, say).
	ErrInvalidState = errors.New("provider: invalid state")
	// ErrUnsupported: the store does not have the optional capability the
	// call needs (a wrapper of a store without it answers so).
	ErrUnsupported = errors.New("provider: not supported by the store")
)

// Mode says how a provider makes a round all-or-nothing.
type Mode int

const (
	// ModeTransactional runs a whole round in one database transaction.
	ModeTransactional Mode = iota + 1
	// ModePeekLock leases the instance and runs idempotent steps in a fixed
	// order.
	ModePeekLock
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case ModeTransactional:
		return "transactional"
	case ModePeekLock:
		return "peek-lock"
	}
	return "unknown"
}

// Store is the core every provider implements, in either mode: what the
// engine needs to run workflows and activities. All
// methods may be called concurrently from any number of goroutines and
// processes. None calls time.Now: times come in the params. When ctx ends a
// method returns its error; what it did is then either all or nothing, or
// in peek-lock mode, for a method that writes several records, the first
// of its record writes in the order its doc states (see [Steps]), as after
// a crash.
//
// A Store also implements [TxStore] (when Mode is ModeTransactional) or
// [LeaseStore] (when Mode is ModePeekLock).
type Store interface {
	// Mode reports how rounds run on this store.
	Mode() Mode

	// EnqueueMessages adds orchestration messages outside a round (client
	// requests). It is atomic (in peek-lock mode per message: one record
	// write each, in order) and idempotent by Message.ID: an id already
	// queued is left as it is. Zero VisibleAt and EnqueuedAt take Now.
	EnqueueMessages(ctx context.Context, p *EnqueueMessagesParams) error

	// LoadHistory returns committed events of an instance with Seq at or
	// above FromSeq, in order (empty when there are none).
	LoadHistory(ctx context.Context, p *LoadHistoryParams) ([]history.Event, error)

	// ListMessages returns the queued messages of an instance in enqueue
	// order, visible or not, at most Limit (zero means 100).
	ListMessages(ctx context.Context, p *ListMessagesParams) ([]Message, error)

	// AbandonMessages records a failed delivery outside a round (MessageIDs
	// are distinct): it
	// increments Attempts and sets LastError of each message that is still
	// queued (ids no longer queued are ignored), and holds the instance
	// until VisibleAt: none of its messages, not even ones enqueued later,
	// is dequeued before then, so a failure never reorders an instance's
	// messages. The hold is the instance's: each message keeps its
	// VisibleAt and EnqueuedAt, by which rounds order their batches. In
	// peek-lock mode each message's count is written first and the
	// instance's hold last.
	AbandonMessages(ctx context.Context, p *AbandonMessagesParams) error

	// NextVisibleAt returns the earliest time at which an instance can be
	// dequeued (a transactional store may count instances that rounds of
	// other processes hold locked, so the time may be past while nothing is
	// dequeueable) (Queue "orchestration": its earliest message's VisibleAt,
	// or later while it is held or leased) or an activity task of Queues
	// claimed (Queue "activity": VisibleAt, or the end of a live claim;
	// empty Queues means the default queue ""); ok is false when the queue
	// is empty.
	NextVisibleAt(ctx context.Context, p *NextVisibleAtParams) (at time.Time, ok bool, err error)

	// ClaimActivity leases the oldest visible activity task of the given
	// queues that is unclaimed or whose claim expired at or before Now, with
	// a new token, and returns it; it returns nil, nil when there is none.
	// Taking over an expired claim sets ActivityLease.Expired (the previous
	// owner and the end of its claim) and leaves Attempt as it was: the
	// claimer counts the lost attempt (RetryActivity, or a failed result).
	ClaimActivity(ctx context.Context, p *ClaimActivityParams) (*ActivityLease, error)

	// HeartbeatActivity extends a lease to LockedUntil. It returns
	// ErrLeaseLost unless Token is the task's current token.
	HeartbeatActivity(ctx context.Context, p *HeartbeatActivityParams) error

	// CompleteActivity atomically removes a leased task and enqueues its
	// result message. It returns ErrLeaseLost, and changes nothing, unless
	// Token is the task's current token. A removed task's id stays known:
	// enqueueing it again is a no-op until the instance is purged. In
	// peek-lock mode the result is written first and the task removed
	// last (conditional on Token): a crash between them leaves the task
	// claimed until its claim runs out, and its next attempt enqueues a
	// result of the same id ([ActivityResultID]); a claim taken over
	// between the token check and the result write may leave that result
	// queued with ErrLeaseLost returned.
	CompleteActivity(ctx context.Context, p *CompleteActivityParams) error

	// RetryActivity atomically (one record write) releases a leased task for another attempt:
	// Attempt+1, VisibleAt, LastError. ErrLeaseLost as CompleteActivity.
	RetryActivity(ctx context.Context, p *RetryActivityParams) error

	// DeadLetterActivity atomically moves a leased task to the dead-letter
	// store. ErrLeaseLost as CompleteActivity. In peek-lock mode the letter
	// (idempotent by its [DeadLetterID]) and the instance's incident are
	// written first and the task removed last.
	DeadLetterActivity(ctx context.Context, p *DeadLetterActivityParams) error

	// GetInstance returns the instance record or ErrNotFound.
	GetInstance(ctx context.Context, instanceID string) (*InstanceRecord, error)

	// GetSnapshot returns the stored runtime snapshot of an instance (its
	// encoding and the Seq it was folded to) or ErrNotFound.
	GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error)
}

// The optional capabilities of a store: the engine discovers them by type
// assertion, as it does [Notifier], and answers a call that needs one the
// store lacks with a typed error; the conformance suite runs the cases of
// the capabilities a store has and says which it skipped. A provider can
// ship the core [Store] first.

// QueryStore lists and reads projections: instances, human tasks and their
// events, custom projections. Human-task actions need it (they authorize
// against the task record).
type QueryStore interface {
	// ListInstances returns instance records matching the filter, ordered
	// by instance id, at most Limit (zero means 100) after AfterID.
	ListInstances(ctx context.Context, p *ListInstancesParams) ([]InstanceRecord, error)

	// GetTask returns a human task's record or ErrNotFound. Human task ids
	// are unique across instances.
	GetTask(ctx context.Context, taskID string) (*TaskRecord, error)

	// ListTasks returns human task records matching the filter, ordered by
	// task id, at most Limit (zero means 100) after AfterID.
	ListTasks(ctx context.Context, p *ListTasksParams) ([]TaskRecord, error)

	// ListTaskEvents returns the human task events of an instance (of one
	// task when TaskID is set) in Seq order.
	ListTaskEvents(ctx context.Context, p *ListTaskEventsParams) ([]TaskEventRecord, error)

	// GetCustomProjection returns the record of a user projection for an
	// instance or ErrNotFound.
	GetCustomProjection(ctx context.Context, name, instanceID string) (*CustomRecord, error)

	// CountInstances counts the instance records matching Where, grouped
	// by the value of By (one group with a zero Value when By is nil),
	// groups in ascending order of their value, the group of records
	// without a value first.
	CountInstances(ctx context.Context, p *CountInstancesParams) ([]GroupCount, error)

	// ListCustomProjections returns the records of the user projection
	// Name whose instance's record matches Where, ordered by instance id,
	// at most Limit (zero means 100) after AfterID.
	ListCustomProjections(ctx context.Context, p *ListCustomProjectionsParams) ([]CustomRecord, error)
}

// DeadLetterStore lets operators list, inspect, redrive and discard dead
// letters. Writing them is part of the core (rounds and activity workers
// dead-letter what they cannot process).
type DeadLetterStore interface {
	// ListDeadLetters returns dead letters in id order, filtered by the
	// params.
	ListDeadLetters(ctx context.Context, p *ListDeadLettersParams) ([]DeadLetter, error)

	// GetDeadLetter returns one dead letter or ErrNotFound.
	GetDeadLetter(ctx context.Context, id string) (*DeadLetter, error)

	// ResolveDeadLetter redrives or discards a dead letter, recording who and
	// when. Redrive requeues the item as new: a message with Attempts 0 and
	// VisibleAt and EnqueuedAt Now (so a second death gets a new
	// [DeadLetterID]), an activity task claimable at Now with its Attempt
	// kept. Discarding an activity task enqueues, in the same step, its
	// failed result ([DiscardedActivityResult]) so its workflow goes on;
	// discarding a child's start message enqueues, in the same step, the
	// SubWorkflowFailed its parent waits for, and discarding a signal a
	// workflow sent the SignalFailed its sender waits for
	// ([DiscardedSubWorkflowResult]).
	// It returns ErrNotFound for an unknown id and ErrInvalidState, changing
	// nothing, when the dead letter was already resolved or Status is
	// neither redriven nor discarded, and when a redrive finds the
	// letter's message still queued as it was lettered (wrapping
	// [ErrDeadLetteringUnfinished]: a peek-lock dead-lettering stopped
	// before it removed the message; requeueing it would be a no-op). In peek-lock mode what it queues is
	// written first, the instance's incident next and the letter's status
	// last: a crash before the status leaves the letter unresolved, and
	// resolving it again queues the same message ids or the same task.
	ResolveDeadLetter(ctx context.Context, p *ResolveDeadLetterParams) error
}

// PurgeStore deletes ended instances and keeps their tombstones.
type PurgeStore interface {
	// PurgeInstance deletes an ended instance — history, projections, task
	// records and events, queued messages and activity tasks, dead letters —
	// and keeps a tombstone with the last Seq and hash of its history, in
	// one atomic step. It returns ErrNotFound for an unknown instance and
	// ErrInvalidState, deleting nothing, when its record is not terminal or
	// a round may still have work to do for it: a round holds it (a
	// transaction lock, or a live peek-lock lease), a peek-lock round
	// ran out without an ack or abandon and left messages that a
	// redelivery will finish (the final round of a child enqueues its
	// parent's notice after writing its terminal record), or history goes
	// beyond the record's seq (a peek-lock round appended, a new run of
	// the instance say, and has not written its projections), or a queued
	// message starts the id's next run ([StartsNextRun]: a client's
	// restart, or a parent starting a child under an ended child's id),
	// which the purge would delete, or a queued message records a legal
	// hold (HoldPlaced or HoldReleased, see [history.Kind.IsRecord]),
	// which the purge would delete before a round records it. Such a
	// refusal is transient: purge again once the round is done. A store
	// that is a [HoldStore] refuses a held instance with ErrHeld, deleting
	// nothing, atomically with the placement of the hold.
	//
	// In peek-lock mode the purge first marks the instance's record with
	// its tombstone (a marked instance is never leased), then keeps the
	// tombstone (once, however often the purge resumes), deletes dead
	// letters, activity tasks with their remembered ids, messages,
	// projections and history, and the instance's record last. A purge
	// that finds the mark skips the checks and finishes the work with the
	// same tombstone, also when the record is gone (a purge stopped after
	// deleting it): ErrNotFound means that no purge of the id is
	// unfinished. A message enqueued meanwhile goes with the instance
	// when the purge's message deletes find it, and starts the id afresh
	// otherwise: either way as if the purge ran after it or before it;
	// but a start of the id's next run is never deleted, so it starts the
	// id afresh.
	PurgeInstance(ctx context.Context, p *PurgeInstanceParams) (*Tombstone, error)

	// GetTombstone returns the tombstone of the latest purge of an instance
	// id or ErrNotFound.
	GetTombstone(ctx context.Context, instanceID string) (*Tombstone, error)

	// ListTombstones returns every tombstone of an instance id, oldest
	// purge first (empty when it was never purged). An id reused after a
	// purge and purged again keeps the tombstone of each purge, so every
	// archived history can be checked against its own.
	ListTombstones(ctx context.Context, instanceID string) ([]Tombstone, error)
}

// InspectStore shows what tests need to see of the activity queue.
type InspectStore interface {
	// ListQueuedActivities returns the queued and claimed activity tasks of an
	// instance in enqueue order, with their claims.
	ListQueuedActivities(ctx context.Context, p *ListQueuedActivitiesParams) ([]QueuedActivity, error)
}

// InstanceStarter starts a new instance in one write, without the
// look-up a start of a named id otherwise needs: the engine's Start uses
// it first and, when it reports that the instance exists, looks the
// instance up to apply the start's reuse policy.
type InstanceStarter interface {
	// EnqueueStart atomically enqueues Messages (all of InstanceID) only
	// when the store knows nothing of InstanceID: no record, no snapshot,
	// no queued message, nothing but what a purge leaves. It returns true
	// when it enqueued them, and false, writing nothing, when the instance
	// exists in any form. Of concurrent calls for one id at most one
	// returns true. Zero VisibleAt and EnqueuedAt take Now; new work is
	// announced as EnqueueMessages announces it.
	EnqueueStart(ctx context.Context, p *EnqueueStartParams) (bool, error)
}

// FullStore is a store with every capability, as the memory and PostgreSQL
// providers are.
type FullStore interface {
	Store
	QueryStore
	DeadLetterStore
	PurgeStore
	InspectStore
}

// Steps are the writes of a round, shared by both modes. In transactional
// mode they run inside the round's transaction; in peek-lock mode each call
// is idempotent, so a crash between two calls is repaired by redelivery.
//
// A peek-lock provider need only make each record write atomic (one
// document of a store without multi-document transactions): a call that
// changes several records writes them one at a time, in the order its
// method states, and a crash, a retry or a zombie round between two of them
// is repaired by redelivery, a retry or the next cold round. Records are
// the instance (its lease, epoch, hold, incident and record), the history
// appended by one call, each message, each activity task (with its
// remembered id), each dead letter, each human task record, each task
// event, each custom record, the snapshot and each tombstone. The argument
// for each step is in docs/providers.md, "Peek-lock mode: one record at a
// time".
type Steps interface {
	// LoadHistory is [Store.LoadHistory], seeing the round's own writes.
	LoadHistory(ctx context.Context, p *LoadHistoryParams) ([]history.Event, error)

	// GetSnapshot is [Store.GetSnapshot] seen from the round: a cold round
	// starts from the stored snapshot instead of folding every event.
	GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error)

	// AppendHistory appends sealed events whose first Seq is the stored last
	// Seq + 1. If events with those Seqs are already stored with the same
	// hashes it returns nil and writes nothing (a retried append). Any other
	// event at those Seqs, or an event whose idempotency key is already
	// used, makes it return ErrConflict and write nothing. The events of
	// one call are one record in peek-lock mode too (one document keyed by
	// the instance and the first Seq, say): they land together or not at
	// all, and two appends at the same first Seq conflict; the first
	// event's PrevHash must then be the stored last event's hash
	// (ErrConflict otherwise: the events follow another history of the
	// id; a transactional round, which loads history under its lock,
	// always meets this). With p.Lease set (a peek-lock round) the append
	// lands only while the lease's token is current: ErrLeaseLost
	// otherwise, nothing kept. A [TxFlusher] may defer it: its error is
	// then returned by the call that sends it.
	AppendHistory(ctx context.Context, p *AppendHistoryParams) error

	// SaveProjections writes each record of p unless the stored record was
	// folded at or beyond p.Seq; task events are added unless present. A
	// custom record is written when it replaces the stored one by
	// [CustomRecord.Replaces]: never at a lower Seq, never over a newer
	// version. The snapshot is written last (or with the rest,
	// atomically): a stored snapshot at seq S promises that every other
	// projection reached S, since a cold round re-projects only when the
	// snapshot is behind history. In peek-lock mode the order is task
	// records, task events, custom records, the instance record, the
	// snapshot; each is a conditional write, so a record may be ahead of
	// the snapshot, never behind it. A task record's id is checked with
	// its own write (a unique index): another instance's task with that
	// id makes the call return a [TaskIDTakenError]. With p.Lease set (a
	// peek-lock round) the lease is checked first: ErrLeaseLost, writing
	// nothing, unless its token is current.
	SaveProjections(ctx context.Context, p *Projections) error

	// EnqueueMessages adds messages, idempotent by Message.ID.
	EnqueueMessages(ctx context.Context, p *EnqueueMessagesParams) error

	// EnqueueActivities adds activity tasks, idempotent by task id, also for
	// tasks that were completed or cancelled since. In peek-lock mode each
	// task is one record write, its remembered id included (the task's
	// record stays, marked done, when it is completed or cancelled): a
	// remembered id without its task would lose the task to a retry.
	EnqueueActivities(ctx context.Context, p *EnqueueActivitiesParams) error

	// CancelActivities removes the activity tasks of an execution that are still
	// queued or claimed; their leases are lost. In peek-lock mode the tasks
	// are chosen when the fence (p.Lease) is checked and removed by id one
	// at a time, never by a filter applied at removal time: a round that
	// loses its lease between the check and a removal must not remove a
	// task its successor enqueued (a task of a new execution, say).
	CancelActivities(ctx context.Context, p *CancelActivitiesParams) error

	// ResetProjections deletes the built-in projections of an instance
	// (snapshot, instance record but its incident, task records and
	// events) and the custom records p.Custom names, so that a rebuild can
	// write them afresh: reset, then save, in that order. Custom records
	// of other names are kept: a process rebuilds only what it can fold.
	// The snapshot goes first: once it is gone a cold round projects
	// afresh, whatever else a crash left.
	ResetProjections(ctx context.Context, p *ResetProjectionsParams) error
}

// TxStore is a Store whose rounds run in one transaction.
type TxStore interface {
	Store
	// RunRound runs fn in one transaction and commits when it returns nil;
	// on error, or when ctx ends, nothing fn did is kept and fn's error is
	// returned (wrapped at most, so errors.Is and errors.As see it). The
	// error of a failed commit is returned; when its outcome is unknown the
	// round must be safe to run again, which the runner guarantees. Steps
	// may be called without a dequeue. fn may dequeue several instances,
	// one after the other (group commit: the runner's GroupSize); each
	// dequeued instance stays locked until the transaction ends.
	RunRound(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// Tx is the view of a store inside a transactional round. Its methods are
// called one at a time, never concurrently.
type Tx interface {
	Steps
	// DequeueInstance locks one instance that has visible messages and is
	// neither held (see AbandonMessages) nor locked by another round
	// (skipping locked ones, never waiting for them), and returns its
	// visible messages in enqueue order, the first Limit of them, each
	// with the VisibleAt and EnqueuedAt it was queued with (the runner
	// applies them in the order they took effect). It returns nil, nil
	// when no instance has work. The messages stay queued until acked;
	// the lock lasts until the transaction ends.
	DequeueInstance(ctx context.Context, p *DequeueParams) (*Batch, error)
	// DeadLetterMessages moves messages of the locked instance to the
	// dead-letter store and sets the instance's incident.
	DeadLetterMessages(ctx context.Context, p *DeadLetterMessagesParams) error
	// AckMessages removes processed messages of the locked instance.
	AckMessages(ctx context.Context, p *AckMessagesParams) error
	// AbandonMessages records a failed delivery of messages of the locked
	// instance inside the round: it undoes every write the round made
	// since it dequeued that instance, which must be the instance it
	// dequeued last (writes made before, for instances dequeued earlier in
	// a group, stay), then counts the delivery and holds the instance as
	// [Store.AbandonMessages] does (no MessageIDs and VisibleAt Now only
	// undo the writes). The instance stays locked until the round ends, so
	// no other round takes its messages before the hold is set, which an
	// abandon after a rollback cannot promise. The round may go on with
	// other instances. It returns an error, and the round must be rolled
	// back, when the instance is not the one dequeued last or the store
	// cannot undo its writes (a broken connection).
	AbandonMessages(ctx context.Context, p *AbandonMessagesParams) error
}

// TxFlusher is a [Tx] that may defer the writes of a round to send
// several in one round trip: the writes of the round's own instance,
// [Steps.AppendHistory], [Steps.SaveProjections] (without human tasks),
// [Steps.EnqueueActivities], [Steps.CancelActivities] and
// [Tx.AckMessages], may then return before their statements run (a
// deferred append's ErrConflict among their errors). They run, in the
// order called, at the next Flush, read, dequeue, enqueue of messages or
// dead letter of the transaction, or before its commit, whichever comes
// first, and that call returns their error (the transaction is then to be
// rolled back, or the instance abandoned);
// [Tx.AbandonMessages] discards those of the instance it abandons. The
// runner calls Flush at the end of each instance's round, so that a
// deferred write's failure is that round's. Deferring changes what is
// written in no case: the transaction commits all of it or nothing.
type TxFlusher interface {
	Tx
	// Flush runs the deferred writes and returns their first error.
	Flush(ctx context.Context) error
}

// FlushDequeuer is a [TxFlusher] that can send a round's deferred writes
// in the round trip of the next dequeue of its transaction (a group
// commit's next instance), saving a round trip per instance.
type FlushDequeuer interface {
	TxFlusher
	// FlushAndDequeue is Flush, then DequeueInstance with p, sent
	// together. When the writes fail it returns an error wrapping
	// [ErrFlush] (and theirs), and no batch: the instance dequeued last
	// is still the writes' own, which the caller may abandon as after a
	// failed Flush. Any other error is the dequeue's.
	FlushAndDequeue(ctx context.Context, p *DequeueParams) (*Batch, error)
}

// ErrFlush marks the error of a [FlushDequeuer]'s deferred writes, as
// against that of the dequeue sent with them.
var ErrFlush = errors.New("deferred writes failed")

// ActivityTx is a [Tx] that can complete an activity task: an activity
// worker completes a task and runs the next round of its instance in one
// transaction (round.Runner.CompleteActivity).
type ActivityTx interface {
	Tx
	// CompleteActivity is [Store.CompleteActivity] inside the
	// transaction: the task is removed, while Token is its current token
	// (ErrLeaseLost otherwise, changing nothing), and its result enqueued,
	// both kept only when the transaction commits. A later DequeueInstance
	// of the transaction sees the result as a queued message: the round
	// it dequeues consumes it and acks it with the others, and a round
	// abandoned inside the transaction leaves it queued, counted and held
	// with them. While the task's instance has other activity tasks
	// queued or claimed, a DequeueInstance of it by id returns nil,
	// locking nothing: the round waits for the last of them, and takes
	// all their results at once. Call it before the transaction dequeues
	// an instance: an abandon undoes what was written after the dequeue.
	CompleteActivity(ctx context.Context, p *CompleteActivityParams) error
}

// ClaimingTx is an [ActivityTx] that can enqueue an activity task
// already claimed: the worker whose completion ran a round takes a task
// that round scheduled without a claim of its own (eager dispatch).
type ClaimingTx interface {
	ActivityTx
	// EnqueueClaimedActivity is [Steps.EnqueueActivities] of one task
	// that is inserted claimed: Token, Owner and LockedUntil are set as
	// [Store.ClaimActivity] would set them (the claim counts as a live
	// claim from then on), and the task keeps its Attempt. It is a no-op,
	// as an enqueue is, when the task's id is known; the claim is then
	// not the task's, and its settlement returns ErrLeaseLost. The claim
	// takes no rate-limit token and is not checked against a concurrency
	// limit: callers pass only tasks without a ConcurrencyKey that no
	// rate limit of theirs matches.
	EnqueueClaimedActivity(ctx context.Context, p *EnqueueClaimedActivityParams) error
}

// EnqueueClaimedActivityParams are the params of EnqueueClaimedActivity.
type EnqueueClaimedActivityParams struct {
	Task        ActivityTask
	Now         time.Time
	Token       string
	Owner       string
	LockedUntil time.Time
}

// ActivityTxStore is a [TxStore] whose transactions implement
// [ActivityTx].
type ActivityTxStore interface {
	TxStore
	// CompletesInRound reports whether the Tx of RunRound implements
	// ActivityTx; a wrapper answers for the store it wraps.
	CompletesInRound() bool
}

// LeaseStore is a Store whose rounds run in peek-lock mode.
type LeaseStore interface {
	Store
	Steps
	// LeaseInstance leases one instance that has visible messages, is not
	// held (see AbandonMessages), is not being purged and has no live lease (none, or one that
	// expired at or before Now): it sets a new token, increments the
	// instance's fencing epoch and returns the visible messages as
	// DequeueInstance does (enqueue order, the first Limit, with their
	// times). It returns nil, nil when no instance has work.
	LeaseInstance(ctx context.Context, p *LeaseParams) (*Lease, error)
	// RenewLease extends a live lease; ErrLeaseLost unless the token still
	// matches.
	RenewLease(ctx context.Context, p *RenewLeaseParams) error
	// DeadLetterLeased moves leased messages to the dead-letter store and
	// sets the instance's incident; ErrLeaseLost unless the token matches.
	// The letters (idempotent by [DeadLetterID]) and the incident are
	// written first, the messages removed last: a crash before their
	// removal leaves them queued, to be dead-lettered again under the same
	// letter ids, never lost. A letter id taken by a letter an operator
	// resolved does not count as written: the letter goes under
	// [ResolvedDeadLetterID]. A message is removed only while it is the
	// one its letter holds (same EnqueuedAt), never a copy a redrive
	// queued since.
	DeadLetterLeased(ctx context.Context, p *DeadLetterLeasedParams) error
	// PinMessages sets the ExecutionID of leased messages that have none,
	// so that a redelivery judges them against the execution their first
	// delivery targeted (a round may start a new execution before its ack).
	// ErrLeaseLost unless the token matches.
	PinMessages(ctx context.Context, p *PinMessagesParams) error
	// AckLease removes the acked messages and releases the lease, only while
	// the token still matches (ErrLeaseLost otherwise, removing nothing).
	// The messages go first, one by one, and the lease last: a crash
	// between them leaves the instance leased until the lease runs out,
	// never an acked message visible to another round.
	AckLease(ctx context.Context, p *AckLeaseParams) error
	// AbandonLease releases the lease and records a failed delivery of its
	// messages as AbandonMessages does (Attempts, LastError, the instance
	// held until VisibleAt); ErrLeaseLost unless the token matches. Each
	// message's count is written first, and the hold with the release last,
	// in one write of the instance's record.
	AbandonLease(ctx context.Context, p *AbandonLeaseParams) error
}

// Notifier is implemented by stores that can hint that work arrived.
type Notifier interface {
	// WorkHint returns a channel that is closed when work may have been
	// enqueued on queue after the call, or an instance released. Work
	// enqueued through the same store value always closes it; hints of
	// other processes may be lost or spurious, so workers also poll slowly.
	WorkHint(queue Queue) <-chan struct{}
}

// PartitionNotifier is implemented by partitioned stores (see
// [Partitioned]) whose hints name the partitions of the work, so that an
// engine wakes its workers only for work in the partitions it holds.
type PartitionNotifier interface {
	Notifier
	// PartitionHint returns a channel that is closed when work may have
	// been enqueued on queue in partition after the call, or an instance
	// of it released. Whatever closes it also closes the channel of
	// WorkHint; a hint that names no partition (a lost connection, a
	// store of an older version) closes the channels of every partition.
	PartitionHint(queue Queue, partition int) <-chan struct{}
}

// Queue names one of the two queues.
type Queue string

// Queues.
const (
	QueueOrchestration Queue = "orchestration"
	QueueActivity      Queue = "activity"
)

// Batch is the work of one instance in a transactional round.
type Batch struct {
	InstanceID string
	Messages   []Message
	// Head, when the store sets it, is the instance's last stored event
	// as of the dequeue (Seq 0 when it has none); the instance is locked,
	// so it stays so for the round, and the runner checks its cached state
	// against it instead of reading history. Nil: the runner reads.
	Head *Head
}

// Head names the last event of a stored history.
type Head struct {
	Seq  int64
	Hash []byte
}

// Lease is a peek-lock lease on one instance and its visible messages.
type Lease struct {
	InstanceID  string
	Messages    []Message
	Token       string
	Epoch       int64
	Owner       string
	LockedUntil time.Time
}

// EnqueueMessagesParams are the params of EnqueueMessages.
type EnqueueMessagesParams struct {
	Messages []Message
	Now      time.Time
	// Lease, in peek-lock rounds, fences the enqueue: it happens only while
	// the lease's token is current (ErrLeaseLost otherwise), so a zombie
	// round cannot queue work for an execution its successor has ended.
	Lease *Lease
}

// EnqueueStartParams are the params of EnqueueStart.
type EnqueueStartParams struct {
	InstanceID string
	Messages   []Message
	Now        time.Time
}

// ListQueuedActivitiesParams are the params of ListQueuedActivities.
type ListQueuedActivitiesParams struct {
	InstanceID string
}

// QueuedActivity is an activity task as a store holds it.
type QueuedActivity struct {
	Task ActivityTask
	// Owner and LockedUntil are set while the task is claimed.
	Owner       string
	LockedUntil time.Time
}

// ListInstancesParams filter ListInstances. Empty fields match anything.
type ListInstancesParams struct {
	Status      Status
	Name        string
	BusinessKey string
	// CreatedFrom and CreatedTo bound CreatedAt (from inclusive, to
	// exclusive); UpdatedBefore bounds UpdatedAt (exclusive).
	CreatedFrom   time.Time
	CreatedTo     time.Time
	UpdatedBefore time.Time
	// Terminal, when set, matches only ended instances.
	Terminal bool
	// Where, when set, is a parsed filter the record must match as well
	// (see [query.Match] for its meaning); a store evaluates it natively.
	Where   query.Expr
	AfterID string
	Limit   int
}

// CountInstancesParams are the params of CountInstances.
type CountInstancesParams struct {
	Where query.Expr
	// By groups the count by a field; nil counts every match as one group.
	// A KeywordList field cannot group.
	By *query.Field
}

// GroupCount is one group of CountInstances: the value of the field the
// count is grouped by (the zero Value for records without one) and how
// many records have it.
type GroupCount struct {
	Value query.Value
	Count int64
}

// ListCustomProjectionsParams are the params of ListCustomProjections.
type ListCustomProjectionsParams struct {
	Name    string
	Where   query.Expr
	AfterID string
	Limit   int
}

// ListTasksParams filter ListTasks. Empty fields match anything; Roles
// matches tasks having any of them.
type ListTasksParams struct {
	InstanceID string
	Status     TaskStatus
	Assignee   string
	Roles      []string
	// Unassigned matches only tasks without an assignee.
	Unassigned bool
	AfterID    string
	Limit      int
}

// ListTaskEventsParams filter ListTaskEvents.
type ListTaskEventsParams struct {
	InstanceID string
	TaskID     string
}

// ResetProjectionsParams are the params of ResetProjections.
type ResetProjectionsParams struct {
	InstanceID string
	// Custom names the custom projections to delete.
	Custom []string
}

// PurgeInstanceParams are the params of PurgeInstance.
type PurgeInstanceParams struct {
	InstanceID string
	By         string
	Now        time.Time
	// OnlyUnfinished finishes a purge of the id that stopped half-way
	// (peek-lock: its mark is found) and purges nothing else: without one
	// it returns ErrNotFound and changes nothing. A client starting an
	// id calls it first, so that a purge mark left by a crash does not
	// keep the new run off for ever. A store whose purges are atomic
	// always returns ErrNotFound.
	OnlyUnfinished bool
}

// Tombstone is what remains of a purged instance: enough to prove that an
// archived history is the one that was purged.
type Tombstone struct {
	InstanceID string
	LastSeq    int64
	LastHash   []byte
	PurgedAt   time.Time
	PurgedBy   string
}

// ListMessagesParams are the params of ListMessages.
type ListMessagesParams struct {
	InstanceID string
	Limit      int
}

// LoadHistoryParams are the params of LoadHistory.
type LoadHistoryParams struct {
	InstanceID string
	FromSeq    int64
}

// AppendHistoryParams are the params of AppendHistory.
type AppendHistoryParams struct {
	InstanceID string
	// Events are sealed (Seq, hashes set) and contiguous.
	Events []history.Event
	// Lease, in peek-lock rounds, fences the append: it lands only while
	// the lease's token is current (ErrLeaseLost otherwise), so that a
	// zombie round, whose lease ran out while the instance ended, was
	// purged and was started again, cannot append to the new run's
	// history (at seq 1, where no expected seq or previous hash tells the
	// runs apart).
	Lease *Lease
}

// EnqueueActivitiesParams are the params of EnqueueActivities.
type EnqueueActivitiesParams struct {
	Tasks []ActivityTask
	Now   time.Time
	// Lease fences the enqueue as in EnqueueMessagesParams.
	Lease *Lease
}

// CancelActivitiesParams are the params of CancelActivities.
type CancelActivitiesParams struct {
	InstanceID  string
	ExecutionID string
	// OtherThan, when set, cancels the tasks of every execution of the
	// instance but this one instead (ExecutionID is then ignored).
	OtherThan string
	// Lease fences the cancel as in EnqueueMessagesParams: a zombie round
	// must not cancel the work of an execution its successor started.
	Lease *Lease
}

// DequeueParams are the params of DequeueInstance.
type DequeueParams struct {
	Now   time.Time
	Owner string
	// Limit bounds the messages returned; zero means 100.
	Limit int
	// InstanceID, when set, dequeues only that instance.
	InstanceID string
	// Partitions are the partitions to look in, in the order given (see
	// PartitionOf and Partitioned); empty means every partition. A
	// store of one partition ignores it.
	Partitions []int
}

// DeadLetterMessagesParams are the params of DeadLetterMessages.
type DeadLetterMessagesParams struct {
	InstanceID string
	// Letters hold the messages to move, with reason, node and time.
	Letters []DeadLetter
}

// AckMessagesParams are the params of AckMessages.
type AckMessagesParams struct {
	InstanceID string
	MessageIDs []string
}

// AbandonMessagesParams are the params of AbandonMessages.
type AbandonMessagesParams struct {
	InstanceID string
	MessageIDs []string
	VisibleAt  time.Time
	Error      string
}

// NextVisibleAtParams are the params of NextVisibleAt.
type NextVisibleAtParams struct {
	Queue Queue
	// Queues restricts the activity queue to these activity queues.
	Queues []string
	// Partitions restricts the answer to these partitions; empty means
	// every partition.
	Partitions []int
}

// LeaseParams are the params of LeaseInstance.
type LeaseParams struct {
	Now         time.Time
	LockedUntil time.Time
	Owner       string
	// Limit bounds the messages returned; zero means 100.
	Limit int
	// InstanceID, when set, leases only that instance.
	InstanceID string
	// Partitions are the partitions to look in, as in DequeueParams;
	// empty means every partition.
	Partitions []int
}

// RenewLeaseParams are the params of RenewLease.
type RenewLeaseParams struct {
	Lease       *Lease
	LockedUntil time.Time
}

// DeadLetterLeasedParams are the params of DeadLetterLeased.
type DeadLetterLeasedParams struct {
	Lease   *Lease
	Letters []DeadLetter
}

// PinMessagesParams are the params of PinMessages.
type PinMessagesParams struct {
	Lease *Lease
	// Pins maps message ids to the execution id to record.
	Pins map[string]string
}

// AckLeaseParams are the params of AckLease.
type AckLeaseParams struct {
	Lease      *Lease
	MessageIDs []string
}

// AbandonLeaseParams are the params of AbandonLease.
type AbandonLeaseParams struct {
	Lease     *Lease
	VisibleAt time.Time
	Error     string
}

// ClaimActivityParams are the params of ClaimActivity.
type ClaimActivityParams struct {
	// Queues lists the activity queues served; empty means the default queue "".
	Queues      []string
	Owner       string
	Now         time.Time
	LockedUntil time.Time
	// Rates are the rate limits the claim obeys: a task that a limit
	// matches is claimed only when the limit's window of Now has a token
	// left, which the claim takes (counted by the store, so shared by
	// every node); otherwise the claim passes over it.
	Rates []RateLimit
	// Partitions are the partitions to claim from, in the order given;
	// empty means every partition.
	Partitions []int
}

// HeartbeatActivityParams are the params of HeartbeatActivity.
type HeartbeatActivityParams struct {
	TaskID      string
	Token       string
	LockedUntil time.Time
	// InstanceID is the task's instance, by which a partitioned store
	// finds the task's partition; when empty it looks the task up.
	InstanceID string
}

// CompleteActivityParams are the params of CompleteActivity.
type CompleteActivityParams struct {
	TaskID string
	Token  string
	Result Message
	Now    time.Time
}

// RetryActivityParams are the params of RetryActivity.
type RetryActivityParams struct {
	TaskID    string
	Token     string
	VisibleAt time.Time
	Error     string
	// InstanceID is the task's instance, as in HeartbeatActivityParams.
	InstanceID string
}

// DeadLetterActivityParams are the params of DeadLetterActivity.
type DeadLetterActivityParams struct {
	TaskID string
	Token  string
	Letter DeadLetter
}

// ListDeadLettersParams filter ListDeadLetters.
type ListDeadLettersParams struct {
	InstanceID string
	// Status filters by status; empty means any.
	Status DeadLetterStatus
	// AfterID pages: only ids greater than it.
	AfterID string
	// Limit bounds the result; zero means 100.
	Limit int
}

// ResolveDeadLetterParams are the params of ResolveDeadLetter.
type ResolveDeadLetterParams struct {
	ID string
	// Status is DeadLetterRedriven or DeadLetterDiscarded.
	Status DeadLetterStatus
	By     string
	Now    time.Time
}
