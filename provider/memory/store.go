package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Op names a store operation for fault injection.
type Op string

// Operations that faults can target.
const (
	OpEnqueueMessages     Op = "EnqueueMessages"
	OpLoadHistory         Op = "LoadHistory"
	OpListMessages        Op = "ListMessages"
	OpAbandonMessages     Op = "AbandonMessages"
	OpNextVisibleAt       Op = "NextVisibleAt"
	OpClaimActivity       Op = "ClaimActivity"
	OpHeartbeatActivity   Op = "HeartbeatActivity"
	OpCompleteActivity    Op = "CompleteActivity"
	OpRetryActivity       Op = "RetryActivity"
	OpDeadLetterActivity  Op = "DeadLetterActivity"
	OpListDeadLetters     Op = "ListDeadLetters"
	OpGetDeadLetter       Op = "GetDeadLetter"
	OpResolveDeadLetter   Op = "ResolveDeadLetter"
	OpGetInstance         Op = "GetInstance"
	OpGetSnapshot         Op = "GetSnapshot"
	OpAppendHistory       Op = "AppendHistory"
	OpSaveProjections     Op = "SaveProjections"
	OpEnqueueActivities   Op = "EnqueueActivities"
	OpCancelActivities    Op = "CancelActivities"
	OpDequeueInstance     Op = "DequeueInstance"
	OpDeadLetterMessages  Op = "DeadLetterMessages"
	OpAckMessages         Op = "AckMessages"
	OpCommit              Op = "Commit"
	OpLeaseInstance       Op = "LeaseInstance"
	OpRenewLease          Op = "RenewLease"
	OpDeadLetterLeased    Op = "DeadLetterLeased"
	OpAckLease            Op = "AckLease"
	OpAbandonLease        Op = "AbandonLease"
	OpPinMessages         Op = "PinMessages"
	OpListInstances       Op = "ListInstances"
	OpGetTask             Op = "GetTask"
	OpListTasks           Op = "ListTasks"
	OpListTaskEvents      Op = "ListTaskEvents"
	OpGetCustomProjection Op = "GetCustomProjection"
	OpResetProjections    Op = "ResetProjections"
	OpPurgeInstance       Op = "PurgeInstance"
	OpGetTombstone        Op = "GetTombstone"
	OpListTombstones      Op = "ListTombstones"

	// OpCountInstances and OpListCustomProjections are the searches of
	// provider.QueryStore.
	OpCountInstances        Op = "CountInstances"
	OpListCustomProjections Op = "ListCustomProjections"

	// OpListQueuedActivities lists an instance's activity tasks.
	OpListQueuedActivities Op = "ListQueuedActivities"
	OpAcquireSlot          Op = "AcquireSlot"
	OpReleaseSlot          Op = "ReleaseSlot"
	OpParkInstance         Op = "ParkInstance"
	OpWakeInstances        Op = "WakeInstances"
	OpEnqueueWaiting       Op = "EnqueueWaiting"
	OpGetSlots             Op = "GetSlots"
	OpListSlots            Op = "ListSlots"
	OpCountClaims          Op = "CountClaims"

	// Legal holds (provider.HoldStore).
	OpPlaceHold   Op = "PlaceHold"
	OpReleaseHold Op = "ReleaseHold"
	OpGetHold     Op = "GetHold"
	OpListHolds   Op = "ListHolds"
)

// Fault is an injected failure.
type Fault struct {
	// Err is returned to the caller.
	Err error
	// AfterEffect lets the operation take effect before Err is returned:
	// the caller cannot tell whether it happened. For OpCommit the round is
	// committed; inside a transaction it makes no difference, since the
	// failed call fails the round.
	AfterEffect bool
	// AfterWrites, when positive, ends a peek-lock step after its
	// AfterWrites-th record write and returns Err: the crash of a store
	// whose atomic unit is one record, between two writes of a step that
	// changes several (see "Peek-lock mode: one record at a time" in
	// docs/providers.md). A step with fewer writes takes its whole effect
	// first. In transactional mode, whose steps are atomic, it acts as
	// AfterEffect.
	AfterWrites int
}

// ErrInjected is the default error of an injected fault.
var ErrInjected = errors.New("memory: injected fault")

// Options configure a Store.
type Options struct {
	// Mode is provider.ModeTransactional (default) or provider.ModePeekLock.
	Mode provider.Mode
	// Fault, when set, is called at the start of every operation; a non-nil
	// Fault makes it fail. It may be called concurrently.
	Fault func(op Op) *Fault
	// BetweenWrites, when set, is called in peek-lock mode before each
	// record write of a step, with how many of its writes are done (0:
	// after its reads and fence checks), and without the store's lock: a
	// test can run other work there, as another process would run between
	// two document writes.
	BetweenWrites func(op Op, done int)
}

// Store is the memory provider. Create it with [New].
type Store struct {
	mode    provider.Mode
	fault   func(Op) *Fault
	between func(op Op, done int)

	mu        sync.Mutex
	nextSeq   int64
	nextToken int64
	instances map[string]*instance
	ready     instanceHeap
	// order is kept once a message with a priority was queued (ordered).
	order    orderHeap
	ordered  bool
	messages map[string]*message
	tasks    map[string]*task
	taskIDs  map[string]bool
	// taskInstance maps every known activity task id to its instance, so
	// a purge forgets them.
	taskInstance map[string]string
	// openTasks counts the queued and claimed tasks of each instance.
	openTasks map[string]int
	taskHeaps map[string]*taskHeap
	letters   map[string]*provider.DeadLetter
	// taskOwner maps human task ids to their instance.
	taskOwner map[string]string
	// tombstones keeps every purge's tombstone of an id, oldest first.
	tombstones map[string][]provider.Tombstone
	// checkpoints are kept in number order; a zero Number marks one
	// deleted by DeleteCheckpoint.
	checkpoints []history.Checkpoint
	hints       provider.Hints
	// keyed holds the tasks of each concurrency key; rates the windows of
	// rate limits; slots the slot sets of instance concurrency keys.
	keyed map[string]map[*task]bool
	// prioritized counts the queued tasks with a priority: while there
	// are none, a task heap's first task is also its earliest claimable.
	prioritized int
	rates       map[string]*rateWindow
	slots       map[string]*slotSet
	slotsFree   *sync.Cond
}

var (
	_ provider.TxStore         = (*Store)(nil)
	_ provider.ActivityTxStore = (*Store)(nil)
	_ provider.ActivityTx      = (*tx)(nil)
	_ provider.LeaseStore      = (*Store)(nil)
	_ provider.FullStore       = (*Store)(nil)
	_ provider.Notifier        = (*Store)(nil)
)

// New returns an empty store.
func New(opts Options) *Store {
	if opts.Mode == 0 {
		opts.Mode = provider.ModeTransactional
	}
	s := &Store{
		mode: opts.Mode, fault: opts.Fault, between: opts.BetweenWrites,
		instances: map[string]*instance{}, messages: map[string]*message{},
		tasks: map[string]*task{}, taskIDs: map[string]bool{}, taskInstance: map[string]string{}, taskHeaps: map[string]*taskHeap{},
		openTasks: map[string]int{},
		letters:   map[string]*provider.DeadLetter{}, taskOwner: map[string]string{}, tombstones: map[string][]provider.Tombstone{},
		keyed: map[string]map[*task]bool{}, rates: map[string]*rateWindow{}, slots: map[string]*slotSet{},
	}
	s.slotsFree = sync.NewCond(&s.mu)
	return s
}

// Mode implements provider.Store.
func (s *Store) Mode() provider.Mode { return s.mode }

type instance struct {
	id        string
	events    []history.Event
	keys      map[history.Key]bool
	msgs      []*message // queued, in enqueue order
	heapIndex int        // index in Store.ready, -1 when absent
	readyKey  time.Time  // readyAt when reindex last placed it in Store.ready
	// orderIndex and orderKey are its index and key in Store.order.
	orderIndex int
	orderKey   time.Time
	lockedBy   *tx
	lease      *leaseState
	holdUntil  time.Time
	epoch      int64
	// purging is the tombstone of a purge that has begun; the instance
	// is then never leased.
	purging *provider.Tombstone
	// purgingExec is the ended execution the purge deletes: a queued
	// start of another execution is kept (see provider.StartsNextRun).
	purgingExec string
	// legalHold is the instance's legal hold, if any.
	legalHold *provider.Hold

	snapshot    []byte
	snapshotSeq int64
	record      *provider.InstanceRecord
	incident    string
	taskRecs    map[string]*provider.TaskRecord
	taskEvents  map[taskEventKey]provider.TaskEventRecord
	custom      map[string]provider.CustomRecord
}

type taskEventKey struct {
	seq    int64
	taskID string
}

type leaseState struct {
	token string
	owner string
	until time.Time
}

type message struct {
	m    provider.Message
	seq  int64
	inst *instance
}

type task struct {
	t         provider.ActivityTask
	seq       int64
	token     string
	owner     string
	until     time.Time
	heapIndex int
}

// orderAt is the task's place in the claim order.
func (t *task) orderAt() time.Time {
	if t.t.Priority == 0 {
		return t.claimableAt()
	}
	return provider.OrderAt(t.claimableAt(), t.t.Priority)
}

// claimableAt is when the task may be claimed.
func (t *task) claimableAt() time.Time {
	if t.token != "" {
		return t.until
	}
	return t.t.VisibleAt
}

// faultFor runs the fault hook.
func (s *Store) faultFor(op Op) *Fault {
	if s.fault == nil {
		return nil
	}
	f := s.fault(op)
	if f != nil && f.Err == nil {
		f.Err = fmt.Errorf("%w: %s", ErrInjected, op)
	}
	return f
}

// do runs an operation with fault injection: a fault before the effect
// returns its error without running fn; one after the effect runs fn and
// then returns the fault's error.
func (s *Store) do(ctx context.Context, op Op, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f := s.faultFor(op)
	if f != nil && !f.AfterEffect {
		return f.Err
	}
	if err := fn(); err != nil {
		return err
	}
	if f != nil {
		return f.Err
	}
	return nil
}

func (s *Store) instance(id string) *instance {
	in, ok := s.instances[id]
	if !ok {
		in = &instance{id: id, heapIndex: -1, orderIndex: -1, keys: map[history.Key]bool{}}
		s.instances[id] = in
	}
	return in
}

func (s *Store) token() string {
	s.nextToken++
	return "t" + strconv.FormatInt(s.nextToken, 10)
}

// notify wakes the workers waiting on q.
func (s *Store) notify(q provider.Queue) { s.hints.Wake(q) }

// WorkHint implements provider.Notifier.
func (s *Store) WorkHint(q provider.Queue) <-chan struct{} { return s.hints.Channel(q) }

// enqueueMessages adds messages idempotently; callers hold s.mu.
func (s *Store) enqueueMessages(msgs []provider.Message, now time.Time) {
	touched := map[*instance]bool{}
	for _, m := range msgs {
		if _, ok := s.messages[m.ID]; ok {
			continue
		}
		m.SetDefaults(now)
		if m.Priority != 0 {
			s.orderByPriority()
		}
		in := s.instance(m.InstanceID)
		s.nextSeq++
		msg := &message{m: m, seq: s.nextSeq, inst: in}
		s.messages[m.ID] = msg
		in.msgs = append(in.msgs, msg)
		touched[in] = true
	}
	for in := range touched {
		s.reindex(in)
	}
	if len(touched) > 0 {
		s.notify(provider.QueueOrchestration)
	}
}

// removeMessages drops queued messages of an instance by id; callers hold
// s.mu.
func (s *Store) removeMessages(in *instance, ids []string) {
	drop := map[string]bool{}
	for _, id := range ids {
		if m, ok := s.messages[id]; ok && m.inst == in {
			drop[id] = true
			delete(s.messages, id)
		}
	}
	if len(drop) == 0 {
		return
	}
	kept := in.msgs[:0]
	for _, m := range in.msgs {
		if !drop[m.m.ID] {
			kept = append(kept, m)
		}
	}
	clear(in.msgs[len(kept):])
	in.msgs = kept
	s.reindex(in)
}

// visible returns the instance's messages visible at now, at most limit.
func visible(in *instance, now time.Time, limit int) []provider.Message {
	if limit <= 0 {
		limit = 100
	}
	var out []provider.Message
	for _, m := range in.msgs {
		if !m.m.VisibleAt.After(now) {
			out = append(out, m.m)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// EnqueueMessages implements provider.Store.
func (s *Store) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return s.step(ctx, OpEnqueueMessages, func(w *writes) error {
		if err := w.read(func() error { return s.fence(p.Lease) }); err != nil {
			return err
		}
		// One write per message, each idempotent by its id.
		for _, m := range p.Messages {
			if err := w.write(func() error {
				s.enqueueMessages([]provider.Message{m}, p.Now)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadHistory implements provider.Store.
func (s *Store) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var out []history.Event
	err := s.do(ctx, OpLoadHistory, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		out = s.loadHistory(p.InstanceID, p.FromSeq)
		return nil
	})
	return out, err
}

func (s *Store) loadHistory(id string, from int64) []history.Event {
	in, ok := s.instances[id]
	if !ok {
		return nil
	}
	from = max(from, 1)
	if from > int64(len(in.events)) {
		return nil
	}
	return cloneEvents(in.events[from-1:])
}

func cloneEvents(events []history.Event) []history.Event {
	return append([]history.Event(nil), events...)
}

// ListMessages implements provider.Store.
func (s *Store) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	var out []provider.Message
	err := s.do(ctx, OpListMessages, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in, ok := s.instances[p.InstanceID]
		if !ok {
			return nil
		}
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		for _, m := range in.msgs {
			if len(out) == limit {
				break
			}
			out = append(out, m.m)
		}
		return nil
	})
	return out, err
}

// AbandonMessages implements provider.Store.
func (s *Store) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return s.step(ctx, OpAbandonMessages, func(w *writes) error {
		var in *instance
		_ = w.read(func() error {
			in = s.instances[p.InstanceID]
			return nil
		})
		if in == nil {
			return nil
		}
		return s.abandonWrites(w, in, p.MessageIDs, p.VisibleAt, p.Error, nil)
	})
}

// NextVisibleAt implements provider.Store.
func (s *Store) NextVisibleAt(ctx context.Context, p *provider.NextVisibleAtParams) (time.Time, bool, error) {
	var (
		at time.Time
		ok bool
	)
	err := s.do(ctx, OpNextVisibleAt, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch p.Queue {
		case provider.QueueOrchestration:
			if len(s.ready) > 0 {
				at, ok = s.ready[0].readyKey, true
			}
		case provider.QueueActivity:
			for _, q := range queuesOf(p.Queues) {
				h := s.taskHeaps[q]
				if h == nil || len(*h) == 0 {
					continue
				}
				earliest := (*h)[:1]
				if s.prioritized > 0 {
					earliest = *h // the order is not the claimable time's
				}
				for _, tk := range earliest {
					if t := tk.claimableAt(); !ok || t.Before(at) {
						at, ok = t, true
					}
				}
			}
		default:
			return fmt.Errorf("memory: unknown queue %q", p.Queue)
		}
		return nil
	})
	return at, ok, err
}

func queuesOf(qs []string) []string {
	if len(qs) == 0 {
		return []string{""}
	}
	return qs
}

// GetInstance implements provider.Store.
func (s *Store) GetInstance(ctx context.Context, id string) (*provider.InstanceRecord, error) {
	var rec *provider.InstanceRecord
	err := s.do(ctx, OpGetInstance, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in, ok := s.instances[id]
		if !ok || in.record == nil {
			return fmt.Errorf("instance %s: %w", id, provider.ErrNotFound)
		}
		c := cloneRecord(in)
		rec = &c
		return nil
	})
	return rec, err
}

// GetSnapshot implements provider.Store.
func (s *Store) GetSnapshot(ctx context.Context, id string) ([]byte, int64, error) {
	var (
		data []byte
		seq  int64
	)
	err := s.do(ctx, OpGetSnapshot, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		in, ok := s.instances[id]
		if !ok || in.snapshot == nil {
			return fmt.Errorf("snapshot of %s: %w", id, provider.ErrNotFound)
		}
		data, seq = append([]byte(nil), in.snapshot...), in.snapshotSeq
		return nil
	})
	return data, seq, err
}

// appendHistory checks and appends sealed events; callers hold s.mu.
// staged are events appended earlier in the same transaction.
func appendCheck(in *instance, staged, events []history.Event) (skip bool, err error) {
	if len(events) == 0 {
		return true, nil
	}
	last := int64(len(in.events) + len(staged))
	first := events[0].Seq
	at := func(seq int64) *history.Event {
		if seq <= int64(len(in.events)) {
			return &in.events[seq-1]
		}
		return &staged[seq-int64(len(in.events))-1]
	}
	if first <= last && first >= 1 {
		// A retried append of events already stored is a success.
		for i := range events {
			seq := first + int64(i)
			if seq > last || string(at(seq).Hash) != string(events[i].Hash) {
				return false, fmt.Errorf("append to %s at seq %d: %w: seq already taken", in.id, seq, provider.ErrConflict)
			}
		}
		return true, nil
	}
	if first != last+1 {
		return false, fmt.Errorf("append to %s: %w: first seq %d, expected %d", in.id, provider.ErrConflict, first, last+1)
	}
	if last > 0 && !bytes.Equal(events[0].PrevHash, at(last).Hash) {
		// Built on another history of the id (one purged since, say).
		return false, fmt.Errorf("append to %s at seq %d: %w: the events follow another history than the stored one", in.id, first, provider.ErrConflict)
	}
	seen := map[history.Key]bool{}
	for _, e := range staged {
		if k, ok := e.Key(); ok {
			seen[k] = true
		}
	}
	for i := range events {
		e := &events[i]
		if e.Seq != first+int64(i) || e.InstanceID != in.id {
			return false, fmt.Errorf("append to %s: %w: event %d has seq %d of instance %q", in.id, provider.ErrConflict, i, e.Seq, e.InstanceID)
		}
		if k, ok := e.Key(); ok {
			if in.keys[k] || seen[k] {
				return false, fmt.Errorf("append to %s at seq %d: %w: idempotency key %s already used", in.id, e.Seq, provider.ErrConflict, k)
			}
			seen[k] = true
		}
	}
	return false, nil
}

func (in *instance) append(events []history.Event) {
	for _, e := range events {
		in.events = append(in.events, e)
		if k, ok := e.Key(); ok {
			in.keys[k] = true
		}
	}
}

// takenTaskID returns a *provider.TaskIDTakenError when a task record of p
// names a task id that another instance's task has; callers hold s.mu.
func (s *Store) takenTaskID(p *provider.Projections) error {
	for _, t := range p.Tasks {
		if owner, ok := s.taskOwner[t.TaskID]; ok && owner != p.InstanceID {
			return &provider.TaskIDTakenError{TaskID: t.TaskID, InstanceID: p.InstanceID, Owner: owner}
		}
	}
	return nil
}

// saveProjections writes projections unless stored ones are as new;
// callers hold s.mu.
func (s *Store) saveProjections(p *provider.Projections) {
	in := s.instance(p.InstanceID)
	if p.Snapshot != nil && p.Seq > in.snapshotSeq {
		in.snapshot, in.snapshotSeq = append([]byte(nil), p.Snapshot...), p.Seq
	}
	if p.Instance != nil && (in.record == nil || p.Seq > in.record.LastSeq) {
		rec := copyRecord(p.Instance)
		rec.LastSeq = p.Seq
		rec.Incident = ""
		in.record = &rec
	}
	for _, t := range p.Tasks {
		if in.taskRecs == nil {
			in.taskRecs = map[string]*provider.TaskRecord{}
		}
		if old, ok := in.taskRecs[t.TaskID]; !ok || t.Seq > old.Seq {
			tc := cloneTask(&t)
			in.taskRecs[t.TaskID] = &tc
			s.taskOwner[t.TaskID] = in.id
		}
	}
	for _, e := range p.TaskEvents {
		if in.taskEvents == nil {
			in.taskEvents = map[taskEventKey]provider.TaskEventRecord{}
		}
		k := taskEventKey{e.Seq, e.TaskID}
		if _, ok := in.taskEvents[k]; !ok {
			in.taskEvents[k] = e
		}
	}
	for _, c := range p.Custom {
		if in.custom == nil {
			in.custom = map[string]provider.CustomRecord{}
		}
		if old, ok := in.custom[c.Name]; !ok || c.Replaces(&old) {
			in.custom[c.Name] = c
		}
	}
}

// saveProjectionWrites writes projections one record at a time: task
// records, task events, custom records, the instance record and the
// snapshot last, each only when it is newer than the stored one, so that
// a stored snapshot at seq S promises that every other record reached S.
func (s *Store) saveProjectionWrites(w *writes, p *provider.Projections) error {
	one := func(fn func()) error {
		return w.write(func() error {
			fn()
			return nil
		})
	}
	for _, t := range p.Tasks {
		if err := w.write(func() error {
			// The task id is checked again with the write, as a unique
			// index on it would.
			if owner, ok := s.taskOwner[t.TaskID]; ok && owner != p.InstanceID {
				return &provider.TaskIDTakenError{TaskID: t.TaskID, InstanceID: p.InstanceID, Owner: owner}
			}
			s.saveProjections(&provider.Projections{InstanceID: p.InstanceID, Seq: p.Seq, Tasks: []provider.TaskRecord{t}})
			return nil
		}); err != nil {
			return err
		}
	}
	for _, e := range p.TaskEvents {
		if err := one(func() {
			s.saveProjections(&provider.Projections{InstanceID: p.InstanceID, Seq: p.Seq, TaskEvents: []provider.TaskEventRecord{e}})
		}); err != nil {
			return err
		}
	}
	for _, c := range p.Custom {
		if err := one(func() {
			s.saveProjections(&provider.Projections{InstanceID: p.InstanceID, Seq: p.Seq, Custom: []provider.CustomRecord{c}})
		}); err != nil {
			return err
		}
	}
	if p.Instance != nil {
		if err := one(func() {
			s.saveProjections(&provider.Projections{InstanceID: p.InstanceID, Seq: p.Seq, Instance: p.Instance})
		}); err != nil {
			return err
		}
	}
	if p.Snapshot != nil {
		return one(func() {
			s.saveProjections(&provider.Projections{InstanceID: p.InstanceID, Seq: p.Seq, Snapshot: p.Snapshot})
		})
	}
	return nil
}

// enqueueActivities adds tasks idempotently by id, forever; callers hold
// s.mu.
func (s *Store) enqueueActivities(tasks []provider.ActivityTask, now time.Time) {
	added := false
	for _, t := range tasks {
		if s.taskIDs[t.ID] {
			continue
		}
		t.SetDefaults(now)
		s.taskIDs[t.ID] = true
		s.taskInstance[t.ID] = t.InstanceID
		s.insertTask(t)
		added = true
	}
	if added {
		s.notify(provider.QueueActivity)
	}
}

func (s *Store) insertTask(t provider.ActivityTask) {
	s.nextSeq++
	tk := &task{t: t, seq: s.nextSeq, heapIndex: -1}
	s.tasks[t.ID] = tk
	s.openTasks[t.InstanceID]++
	s.taskHeap(t.Queue).push(tk)
	if t.Priority != 0 {
		s.prioritized++
	}
	if k := t.ConcurrencyKey; k != "" {
		if s.keyed[k] == nil {
			s.keyed[k] = map[*task]bool{}
		}
		s.keyed[k][tk] = true
	}
}

func (s *Store) taskHeap(q string) *taskHeap {
	h, ok := s.taskHeaps[q]
	if !ok {
		h = &taskHeap{}
		s.taskHeaps[q] = h
	}
	return h
}

func (s *Store) removeTask(t *task) {
	s.taskHeap(t.t.Queue).remove(t)
	delete(s.tasks, t.t.ID)
	if s.openTasks[t.t.InstanceID]--; s.openTasks[t.t.InstanceID] <= 0 {
		delete(s.openTasks, t.t.InstanceID)
	}
	if t.t.Priority != 0 {
		s.prioritized--
	}
	if k := t.t.ConcurrencyKey; k != "" {
		delete(s.keyed[k], t)
		if len(s.keyed[k]) == 0 {
			delete(s.keyed, k)
		}
	}
}

// cancelActivities removes an execution's tasks; callers hold s.mu.
func (s *Store) cancelActivities(p *provider.CancelActivitiesParams) {
	for _, id := range s.cancelled(p) {
		s.removeTask(s.tasks[id])
	}
}

// cancelled returns the ids of the tasks a cancel removes, in order;
// callers hold s.mu.
func (s *Store) cancelled(p *provider.CancelActivitiesParams) []string {
	var ids []string
	for id, t := range s.tasks {
		if t.t.InstanceID != p.InstanceID {
			continue
		}
		if (p.OtherThan != "" && t.t.ExecutionID != p.OtherThan) || (p.OtherThan == "" && t.t.ExecutionID == p.ExecutionID) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// abandon records a failed delivery and holds the instance until
// visibleAt; callers hold s.mu.
func (s *Store) abandon(in *instance, ids []string, visibleAt time.Time, text string) {
	for _, id := range ids {
		s.countAttempt(in, id, text)
	}
	s.hold(in, visibleAt)
}

// countAttempt counts a failed delivery of a queued message; callers hold
// s.mu.
func (s *Store) countAttempt(in *instance, id, text string) {
	if m, ok := s.messages[id]; ok && m.inst == in {
		m.m.Attempts++
		m.m.LastError = text
	}
}

// hold holds the instance until visibleAt; callers hold s.mu.
func (s *Store) hold(in *instance, visibleAt time.Time) {
	if visibleAt.After(in.holdUntil) {
		in.holdUntil = visibleAt
	}
	s.reindex(in)
}

// abandonWrites records a failed delivery one record at a time: each
// message's count, then the instance's hold, and with it the release of
// lease when it is set (its token still current). The hold comes last, so
// that the instance is not redelivered before every count is written.
func (s *Store) abandonWrites(w *writes, in *instance, ids []string, visibleAt time.Time, text string, lease *provider.Lease) error {
	for _, id := range ids {
		if err := w.write(func() error {
			s.countAttempt(in, id, text)
			return nil
		}); err != nil {
			return err
		}
	}
	return w.write(func() error {
		if lease != nil {
			if _, err := s.leased(lease); err != nil {
				return err
			}
			in.lease = nil
			defer s.notify(provider.QueueOrchestration)
		}
		s.hold(in, visibleAt)
		return nil
	})
}

// deadLetter stores letters and removes their messages; callers hold s.mu.
func (s *Store) deadLetter(in *instance, letters []provider.DeadLetter) {
	for _, l := range letters {
		s.insertLetter(l)
		if l.Message != nil {
			s.removeLettered(in, &l)
		}
		in.incident = string(l.Reason) + ": " + l.Error
	}
}

// insertLetter stores a dead letter unless its id is taken by an
// unresolved letter (the same dead-lettering, resumed); a letter of that
// id that an operator resolved does not hold the item, which is stored
// under provider.ResolvedDeadLetterID instead. Callers hold s.mu.
func (s *Store) insertLetter(l provider.DeadLetter) {
	for {
		old, ok := s.letters[l.ID]
		if !ok {
			break
		}
		if old.Status == provider.DeadLetterDead {
			return
		}
		l.ID = provider.ResolvedDeadLetterID(l.ID, old.ResolvedAt)
	}
	lc := l
	if lc.Status == "" {
		lc.Status = provider.DeadLetterDead
	}
	s.letters[l.ID] = &lc
}

// removeLettered removes the queued message a letter holds, only while it
// is the one the letter holds (enqueued at the same time): a message of
// that id requeued since (a redrive) stays. Callers hold s.mu.
func (s *Store) removeLettered(in *instance, l *provider.DeadLetter) {
	if q, ok := s.messages[l.Message.ID]; ok && q.inst == in && q.m.EnqueuedAt.Equal(l.Message.EnqueuedAt) {
		s.removeMessages(in, []string{l.Message.ID})
	}
}

// deadLetterWrites moves letters to the dead-letter store one record at a
// time: each letter (idempotent by its deterministic id), then the
// instance's incident, then the removal of each letter's message (or
// activity task, by remove). Removals come last: a crash before them
// leaves the item queued, so it is delivered again and dead-lettered
// again under the same letter id, never lost.
func (s *Store) deadLetterWrites(w *writes, in *instance, letters []provider.DeadLetter, remove func() error) error {
	if len(letters) == 0 {
		return nil
	}
	for _, l := range letters {
		if err := w.write(func() error {
			s.insertLetter(l)
			return nil
		}); err != nil {
			return err
		}
	}
	last := letters[len(letters)-1]
	if err := w.write(func() error {
		in.incident = string(last.Reason) + ": " + last.Error
		return nil
	}); err != nil {
		return err
	}
	for _, l := range letters {
		if l.Message == nil {
			continue
		}
		if err := w.write(func() error {
			s.removeLettered(in, &l)
			return nil
		}); err != nil {
			return err
		}
	}
	if remove != nil {
		return w.write(remove)
	}
	return nil
}
