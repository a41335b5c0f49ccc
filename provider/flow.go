package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// Flow control and priority: what a store keeps so that every node of a
// deployment sees the same limits (docs/operations.md, "Flow control" and
// "Priority").
//
// Priority orders visible work. A message or activity task of priority p
// that became visible at v is ordered as if it had become visible at
// v - p × [PriorityStep]: higher priority goes first, equal priority keeps
// the order of VisibleAt (and so the in-flight-first order of results,
// which keep their instance's place), and a low priority ages: it goes
// ahead of higher-priority work that became visible more than the
// difference of steps after it. Visibility itself is not shifted: work
// is never dequeued before its VisibleAt.
//
// A concurrency limit bounds the holders of a key. For instances it is a
// slot set kept by the store (AcquireSlot, ReleaseSlot): holders, and
// waiters in the order they first waited; a waiting instance is parked
// (ParkInstance) until a release wakes it (WakeInstances). For activity
// tasks it is a bound on live claims: ClaimActivity never claims a task
// whose key already has Limit claims that have not run out. A rate limit
// bounds the claims of an activity name or queue per interval, counted
// by the store.

// PriorityStep is how far one level of priority moves work in the queue
// order (see the package's flow-control notes). It is part of the stored
// order and the same for every store and node.
const PriorityStep = time.Minute

// MinPriority and MaxPriority bound a priority.
const (
	MinPriority = -1000
	MaxPriority = 1000
)

// OrderAt is the time by which queues order visible work of priority p
// that became visible at visibleAt: visibleAt - p × [PriorityStep].
func OrderAt(visibleAt time.Time, priority int) time.Time {
	return visibleAt.Add(-time.Duration(priority) * PriorityStep)
}

// ValidatePriority refuses a priority outside [MinPriority, MaxPriority].
func ValidatePriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return fmt.Errorf("priority %d is outside [%d, %d]", p, MinPriority, MaxPriority)
	}
	return nil
}

// ParkedUntil is the hold of a parked instance (see [FlowSteps.ParkInstance]):
// a hold that no clock reaches, ended only by [FlowSteps.WakeInstances].
var ParkedUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// IsParked reports whether a hold is the park of [ParkedUntil].
func IsParked(holdUntil time.Time) bool { return !holdUntil.Before(ParkedUntil) }

// MaxFlowKeyLength bounds a concurrency or rate key.
const MaxFlowKeyLength = 200

// ValidateLimit checks a concurrency key and limit: a key of at most
// [MaxFlowKeyLength] bytes of valid UTF-8 without control characters,
// and a limit of at least 1 (an empty key means no limit and needs none).
func ValidateLimit(key string, limit int) error {
	if key == "" {
		if limit != 0 {
			return fmt.Errorf("a concurrency limit of %d has no key", limit)
		}
		return nil
	}
	if err := history.ValidateID("concurrency key", key); err != nil {
		return err
	}
	if len(key) > MaxFlowKeyLength {
		return fmt.Errorf("concurrency key is %d bytes, more than %d", len(key), MaxFlowKeyLength)
	}
	if limit < 1 {
		return fmt.Errorf("concurrency key %q has limit %d, want at least 1", key, limit)
	}
	return nil
}

// RateLimit bounds how many activity tasks are claimed per interval,
// counted by the store for every node: at most Tokens claims of tasks
// matching it in each window of Interval (windows start at multiples of
// Interval since the Unix epoch). A task matches when Activity is empty
// or its name, and Queue is empty or its queue; at least one is set.
type RateLimit struct {
	// Key names the counter; two limits with one key share it.
	Key      string
	Activity string
	Queue    string
	Tokens   int
	Interval time.Duration
}

// Matches reports whether the limit applies to a task.
func (r *RateLimit) Matches(t *ActivityTask) bool {
	return (r.Activity == "" || r.Activity == t.Name) && (r.Queue == "" || r.Queue == t.Queue)
}

// Window returns the start of the window of now: the latest multiple of
// Interval since the Unix epoch at or before now, in UTC.
func (r *RateLimit) Window(now time.Time) time.Time {
	n, d := now.UnixNano(), int64(r.Interval)
	m := n % d
	if m < 0 {
		m += d
	}
	return time.Unix(0, n-m).UTC()
}

// Validate checks the limit.
func (r *RateLimit) Validate() error {
	switch {
	case r.Key == "" || len(r.Key) > MaxFlowKeyLength:
		return fmt.Errorf("rate limit key %q: want 1 to %d bytes", r.Key, MaxFlowKeyLength)
	case r.Activity == "" && r.Queue == "":
		return fmt.Errorf("rate limit %q names neither an activity nor a queue", r.Key)
	case r.Tokens < 1:
		return fmt.Errorf("rate limit %q has %d tokens, want at least 1", r.Key, r.Tokens)
	case r.Interval < time.Millisecond:
		return fmt.Errorf("rate limit %q has interval %s, want at least 1ms", r.Key, r.Interval)
	}
	return nil
}

// SlotHolder is a holder or a waiter of a slot set.
type SlotHolder struct {
	// ID is the instance id.
	ID string
	// Since is when it took its slot, or first waited.
	Since time.Time
}

// SlotRecord is the slot set of a concurrency key.
type SlotRecord struct {
	Key string
	// Limit is the limit of the latest acquire.
	Limit   int
	Holders []SlotHolder
	// Waiters in the order they first waited.
	Waiters []SlotHolder
}

// AcquireSlotParams are the params of AcquireSlot.
type AcquireSlotParams struct {
	Key    string
	Limit  int
	Holder string
	Now    time.Time
	// Lease fences the write in peek-lock rounds, as in
	// EnqueueMessagesParams.
	Lease *Lease
}

// ReleaseSlotParams are the params of ReleaseSlot.
type ReleaseSlotParams struct {
	Key    string
	Holder string
	// Lease fences the write in peek-lock rounds.
	Lease *Lease
}

// ParkInstanceParams are the params of ParkInstance.
type ParkInstanceParams struct {
	InstanceID string
	// Lease fences the write in peek-lock rounds.
	Lease *Lease
}

// WakeInstancesParams are the params of WakeInstances.
type WakeInstancesParams struct {
	InstanceIDs []string
	// Lease fences the write in peek-lock rounds.
	Lease *Lease
}

// FlowSteps are the writes of a round that take, wait for and give back
// concurrency slots of instances. A transactional store's [Tx] implements
// them inside the round's transaction; a peek-lock store's [LeaseStore]
// implements them as idempotent record writes fenced by the lease. The
// engine refuses a start with a concurrency limit on a store without
// them ([ErrUnsupported]).
type FlowSteps interface {
	// AcquireSlot takes a slot of Key for Holder, or queues Holder as a
	// waiter. It returns true when Holder holds a slot: it held one
	// already, or fewer than Limit instances hold one and Holder is one of
	// the first (Limit - holders) waiters or, when fewer waiters than
	// that wait, a newcomer (it then stops waiting). Otherwise Holder
	// waits (added at the end of the waiters, Since Now, unless it waits
	// already) and it returns false. The key's Limit becomes p.Limit.
	// Calls for one key are serialized (a row lock in a transactional
	// store, a conditional write of the key's record in peek-lock mode):
	// the holders never exceed the limit of the acquire that added the
	// last of them.
	AcquireSlot(ctx context.Context, p *AcquireSlotParams) (bool, error)
	// ReleaseSlot removes Holder from the holders and the waiters of Key
	// (nothing when it is neither) and returns the waiters that may take
	// the freed slots: the first (Limit - holders) waiters, whatever the
	// call removed, so that a release repeated after a crash wakes them
	// again. The caller wakes them (WakeInstances) in the same round.
	ReleaseSlot(ctx context.Context, p *ReleaseSlotParams) ([]string, error)
	// ParkInstance holds the instance until WakeInstances names it: none
	// of its messages, not even ones enqueued later, is dequeued or leased
	// meanwhile (its hold is [ParkedUntil]). It counts no delivery.
	ParkInstance(ctx context.Context, p *ParkInstanceParams) error
	// WakeInstances ends the park of each instance named that is parked
	// (others are left as they are) and announces the work.
	WakeInstances(ctx context.Context, p *WakeInstancesParams) error
}

// SlotWait queues the new instance of a start behind the waiters of its
// concurrency key as the start is enqueued (see [StartWaiter]), so that a
// start that would wait is parked at once and costs no round until a
// release wakes it.
type SlotWait struct {
	// InstanceID is the instance the start is of. The store knows nothing
	// else of it: its start is among the messages of the same enqueue,
	// and its id is new (the caller generated it).
	InstanceID string
	// Key and Limit are the start's concurrency.
	Key   string
	Limit int
}

// EnqueueWaitingParams are the params of EnqueueWaiting.
type EnqueueWaitingParams struct {
	Messages []Message
	Now      time.Time
	// Waits, at most one per instance. The engine sends those of the
	// starts in Messages whose instance ids it generated.
	Waits []SlotWait
}

// StartWaiter is implemented by a store whose rounds have [FlowSteps]
// and that can apply [SlotWait]s in the transaction of an enqueue. Without
// it (or with a wait it leaves), the instance's first round takes the
// slot or, when the key is full, parks the instance: a round that appends
// nothing.
type StartWaiter interface {
	// EnqueueWaiting enqueues Messages as [Store.EnqueueMessages] does
	// and, atomically with them, applies each wait w of Waits: unless
	// w.InstanceID holds or waits for a slot of w.Key already, it joins
	// the end of the key's waiters (Since Now), and it is parked (see
	// [FlowSteps.ParkInstance]) unless it is one of the first (w.Limit -
	// holders) waiters. So a waiter that is not parked takes its slot in
	// its first round ([FlowSteps.AcquireSlot]), and one that is parked is
	// woken by the release that frees a slot for it, as if its first round
	// had parked it. A key whose slot set does not exist yet gets w.Limit
	// as its limit; an existing key's limit is left as it is (only an
	// acquire sets it).
	//
	// A store may leave a wait to the instance's first round, applying
	// nothing for it: when its writes are not atomic (peek-lock mode: a
	// round could dequeue the start between the enqueue and the park),
	// or when another round's transaction holds the key's slot set (the
	// enqueue never waits for a round). The outcome is then that of an
	// EnqueueMessages.
	EnqueueWaiting(ctx context.Context, p *EnqueueWaitingParams) error
}

// FlowStore reads the slot sets of a store whose rounds have [FlowSteps],
// and wakes parked instances outside a round (a client terminating an
// instance that waits for a slot).
type FlowStore interface {
	// GetSlots returns the slot set of key, or ErrNotFound when no
	// instance ever acquired it.
	GetSlots(ctx context.Context, key string) (*SlotRecord, error)
	// ListSlots returns slot sets ordered by key, after AfterKey, at most
	// Limit (zero means 100); OnlyWaiting leaves out sets without waiters.
	ListSlots(ctx context.Context, p *ListSlotsParams) ([]SlotRecord, error)
	// WakeInstances is [FlowSteps.WakeInstances] outside a round.
	WakeInstances(ctx context.Context, p *WakeInstancesParams) error
	// CountClaims returns the live claims of activity tasks with
	// concurrency key key (claims that have not run out at now).
	CountClaims(ctx context.Context, key string, now time.Time) (int, error)
}

// ListSlotsParams are the params of ListSlots.
type ListSlotsParams struct {
	AfterKey    string
	Limit       int
	OnlyWaiting bool
}
