package providertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Fault is an injected failure of one store call.
type Fault struct {
	// Err is returned to the caller; nil means ErrInjected.
	Err error
	// AfterEffect lets the call take effect first: the caller sees an
	// error although the call happened (for RunRound: the commit).
	AfterEffect bool
}

// ErrInjected is the default error of an injected fault.
var ErrInjected = errors.New("providertest: injected fault")

// FaultHook decides, for each call, whether it fails. op is the method
// name ("AppendHistory", "RunRound" for the commit of a round, ...); calls
// inside a round are asked for too. It may be called concurrently.
type FaultHook func(op string) *Fault

// Faulty wraps a store of either mode so that hook can make any call fail,
// before its effect (nothing happened) or after it (it happened, the
// caller cannot tell): lost connections and commits whose outcome is
// unknown, for any provider.
func Faulty(store provider.Store, hook FaultHook) provider.Store {
	f := &faults{hook: hook}
	if s, ok := store.(provider.TxStore); ok && store.Mode() == provider.ModeTransactional {
		return faultyTx{faultyStore{s, f}, s}
	}
	if s, ok := store.(provider.LeaseStore); ok && store.Mode() == provider.ModePeekLock {
		return faultyLease{faultyStore{s, f}, faultySteps{s, f}, s}
	}
	panic(fmt.Sprintf("providertest: store of mode %s implements neither TxStore nor LeaseStore", store.Mode()))
}

type faults struct{ hook FaultHook }

func (f *faults) do(ctx context.Context, op string, fn func() error) error {
	var fault *Fault
	if f.hook != nil {
		fault = f.hook(op)
	}
	if fault == nil {
		return fn()
	}
	err := fault.Err
	if err == nil {
		err = fmt.Errorf("%w: %s", ErrInjected, op)
	}
	if !fault.AfterEffect {
		return err
	}
	if ferr := fn(); ferr != nil {
		return ferr
	}
	return err
}

type faultyStore struct {
	s provider.Store
	f *faults
}

// Mode returns the wrapped store's mode.
func (w faultyStore) Mode() provider.Mode { return w.s.Mode() }

// WorkHint passes hints of the wrapped store through, if it has them.
func (w faultyStore) WorkHint(q provider.Queue) <-chan struct{} {
	if n, ok := w.s.(provider.Notifier); ok {
		return n.WorkHint(q)
	}
	return nil
}

// EnqueueMessages injects faults around the wrapped call.
func (w faultyStore) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return w.f.do(ctx, "EnqueueMessages", func() error { return w.s.EnqueueMessages(ctx, p) })
}

// LoadHistory injects faults around the wrapped call.
func (w faultyStore) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var v []history.Event
	err := w.f.do(ctx, "LoadHistory", func() (err error) { v, err = w.s.LoadHistory(ctx, p); return err })
	return v, err
}

// ListMessages injects faults around the wrapped call.
func (w faultyStore) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	var v []provider.Message
	err := w.f.do(ctx, "ListMessages", func() (err error) { v, err = w.s.ListMessages(ctx, p); return err })
	return v, err
}

// AbandonMessages injects faults around the wrapped call.
func (w faultyStore) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return w.f.do(ctx, "AbandonMessages", func() error { return w.s.AbandonMessages(ctx, p) })
}

// NextVisibleAt injects faults around the wrapped call.
func (w faultyStore) NextVisibleAt(ctx context.Context, p *provider.NextVisibleAtParams) (at time.Time, ok bool, err error) {
	err = w.f.do(ctx, "NextVisibleAt", func() (err error) { at, ok, err = w.s.NextVisibleAt(ctx, p); return err })
	return at, ok, err
}

// ListQueuedActivities injects faults around the wrapped call.
func (w faultyStore) ListQueuedActivities(ctx context.Context, p *provider.ListQueuedActivitiesParams) ([]provider.QueuedActivity, error) {
	var v []provider.QueuedActivity
	err := w.f.do(ctx, "ListQueuedActivities", func() (err error) { v, err = w.inspect().ListQueuedActivities(ctx, p); return err })
	return v, err
}

// ClaimActivity injects faults around the wrapped call.
func (w faultyStore) ClaimActivity(ctx context.Context, p *provider.ClaimActivityParams) (*provider.ActivityLease, error) {
	var v *provider.ActivityLease
	err := w.f.do(ctx, "ClaimActivity", func() (err error) { v, err = w.s.ClaimActivity(ctx, p); return err })
	return v, err
}

// HeartbeatActivity injects faults around the wrapped call.
func (w faultyStore) HeartbeatActivity(ctx context.Context, p *provider.HeartbeatActivityParams) error {
	return w.f.do(ctx, "HeartbeatActivity", func() error { return w.s.HeartbeatActivity(ctx, p) })
}

// CompleteActivity injects faults around the wrapped call.
func (w faultyStore) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	return w.f.do(ctx, "CompleteActivity", func() error { return w.s.CompleteActivity(ctx, p) })
}

// RetryActivity injects faults around the wrapped call.
func (w faultyStore) RetryActivity(ctx context.Context, p *provider.RetryActivityParams) error {
	return w.f.do(ctx, "RetryActivity", func() error { return w.s.RetryActivity(ctx, p) })
}

// DeadLetterActivity injects faults around the wrapped call.
func (w faultyStore) DeadLetterActivity(ctx context.Context, p *provider.DeadLetterActivityParams) error {
	return w.f.do(ctx, "DeadLetterActivity", func() error { return w.s.DeadLetterActivity(ctx, p) })
}

// ListDeadLetters injects faults around the wrapped call.
func (w faultyStore) ListDeadLetters(ctx context.Context, p *provider.ListDeadLettersParams) ([]provider.DeadLetter, error) {
	var v []provider.DeadLetter
	err := w.f.do(ctx, "ListDeadLetters", func() (err error) { v, err = w.deadLetters().ListDeadLetters(ctx, p); return err })
	return v, err
}

// GetDeadLetter injects faults around the wrapped call.
func (w faultyStore) GetDeadLetter(ctx context.Context, id string) (*provider.DeadLetter, error) {
	var v *provider.DeadLetter
	err := w.f.do(ctx, "GetDeadLetter", func() (err error) { v, err = w.deadLetters().GetDeadLetter(ctx, id); return err })
	return v, err
}

// ResolveDeadLetter injects faults around the wrapped call.
func (w faultyStore) ResolveDeadLetter(ctx context.Context, p *provider.ResolveDeadLetterParams) error {
	return w.f.do(ctx, "ResolveDeadLetter", func() error { return w.deadLetters().ResolveDeadLetter(ctx, p) })
}

// GetInstance injects faults around the wrapped call.
func (w faultyStore) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceRecord, error) {
	var v *provider.InstanceRecord
	err := w.f.do(ctx, "GetInstance", func() (err error) { v, err = w.s.GetInstance(ctx, instanceID); return err })
	return v, err
}

// GetSnapshot injects faults around the wrapped call.
func (w faultyStore) GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error) {
	err = w.f.do(ctx, "GetSnapshot", func() (err error) { data, seq, err = w.s.GetSnapshot(ctx, instanceID); return err })
	return data, seq, err
}

// ListInstances injects faults around the wrapped call.
func (w faultyStore) ListInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	var v []provider.InstanceRecord
	err := w.f.do(ctx, "ListInstances", func() (err error) { v, err = w.queries().ListInstances(ctx, p); return err })
	return v, err
}

// GetTask injects faults around the wrapped call.
func (w faultyStore) GetTask(ctx context.Context, taskID string) (*provider.TaskRecord, error) {
	var v *provider.TaskRecord
	err := w.f.do(ctx, "GetTask", func() (err error) { v, err = w.queries().GetTask(ctx, taskID); return err })
	return v, err
}

// ListTasks injects faults around the wrapped call.
func (w faultyStore) ListTasks(ctx context.Context, p *provider.ListTasksParams) ([]provider.TaskRecord, error) {
	var v []provider.TaskRecord
	err := w.f.do(ctx, "ListTasks", func() (err error) { v, err = w.queries().ListTasks(ctx, p); return err })
	return v, err
}

// ListTaskEvents injects faults around the wrapped call.
func (w faultyStore) ListTaskEvents(ctx context.Context, p *provider.ListTaskEventsParams) ([]provider.TaskEventRecord, error) {
	var v []provider.TaskEventRecord
	err := w.f.do(ctx, "ListTaskEvents", func() (err error) { v, err = w.queries().ListTaskEvents(ctx, p); return err })
	return v, err
}

// GetCustomProjection injects faults around the wrapped call.
func (w faultyStore) GetCustomProjection(ctx context.Context, name, instanceID string) (*provider.CustomRecord, error) {
	var v *provider.CustomRecord
	err := w.f.do(ctx, "GetCustomProjection", func() (err error) { v, err = w.queries().GetCustomProjection(ctx, name, instanceID); return err })
	return v, err
}

// CountInstances injects faults around the wrapped call.
func (w faultyStore) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	var v []provider.GroupCount
	err := w.f.do(ctx, "CountInstances", func() (err error) { v, err = w.queries().CountInstances(ctx, p); return err })
	return v, err
}

// ListCustomProjections injects faults around the wrapped call.
func (w faultyStore) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	var v []provider.CustomRecord
	err := w.f.do(ctx, "ListCustomProjections", func() (err error) { v, err = w.queries().ListCustomProjections(ctx, p); return err })
	return v, err
}

// PurgeInstance injects faults around the wrapped call.
func (w faultyStore) PurgeInstance(ctx context.Context, p *provider.PurgeInstanceParams) (*provider.Tombstone, error) {
	var v *provider.Tombstone
	err := w.f.do(ctx, "PurgeInstance", func() (err error) { v, err = w.purges().PurgeInstance(ctx, p); return err })
	return v, err
}

// GetTombstone injects faults around the wrapped call.
func (w faultyStore) GetTombstone(ctx context.Context, instanceID string) (*provider.Tombstone, error) {
	var v *provider.Tombstone
	err := w.f.do(ctx, "GetTombstone", func() (err error) { v, err = w.purges().GetTombstone(ctx, instanceID); return err })
	return v, err
}

// ListTombstones injects faults around the wrapped call.
func (w faultyStore) ListTombstones(ctx context.Context, instanceID string) ([]provider.Tombstone, error) {
	var v []provider.Tombstone
	err := w.f.do(ctx, "ListTombstones", func() (err error) { v, err = w.purges().ListTombstones(ctx, instanceID); return err })
	return v, err
}

type faultySteps struct {
	s provider.Steps
	f *faults
}

// LoadHistory injects faults around the wrapped call.
func (w faultySteps) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	var v []history.Event
	err := w.f.do(ctx, "LoadHistory", func() (err error) { v, err = w.s.LoadHistory(ctx, p); return err })
	return v, err
}

// GetSnapshot injects faults around the wrapped call.
func (w faultySteps) GetSnapshot(ctx context.Context, instanceID string) (data []byte, seq int64, err error) {
	err = w.f.do(ctx, "GetSnapshot", func() (err error) { data, seq, err = w.s.GetSnapshot(ctx, instanceID); return err })
	return data, seq, err
}

// AppendHistory injects faults around the wrapped call.
func (w faultySteps) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	return w.f.do(ctx, "AppendHistory", func() error { return w.s.AppendHistory(ctx, p) })
}

// SaveProjections injects faults around the wrapped call.
func (w faultySteps) SaveProjections(ctx context.Context, p *provider.Projections) error {
	return w.f.do(ctx, "SaveProjections", func() error { return w.s.SaveProjections(ctx, p) })
}

// EnqueueMessages injects faults around the wrapped call.
func (w faultySteps) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return w.f.do(ctx, "EnqueueMessages", func() error { return w.s.EnqueueMessages(ctx, p) })
}

// EnqueueActivities injects faults around the wrapped call.
func (w faultySteps) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	return w.f.do(ctx, "EnqueueActivities", func() error { return w.s.EnqueueActivities(ctx, p) })
}

// CancelActivities injects faults around the wrapped call.
func (w faultySteps) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	return w.f.do(ctx, "CancelActivities", func() error { return w.s.CancelActivities(ctx, p) })
}

// ResetProjections injects faults around the wrapped call.
func (w faultySteps) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	return w.f.do(ctx, "ResetProjections", func() error { return w.s.ResetProjections(ctx, p) })
}

type faultyTx struct {
	faultyStore
	tx provider.TxStore
}

// RunRound runs the round on a wrapped Tx whose calls may fail, and may
// fail the commit ("RunRound") before or after it happens.
func (w faultyTx) RunRound(ctx context.Context, fn func(ctx context.Context, tx provider.Tx) error) error {
	return w.f.do(ctx, "RunRound", func() error {
		return w.tx.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			return fn(ctx, faultyRoundTx{faultySteps{tx, w.f}, tx, w.f})
		})
	})
}

// CompletesInRound answers for the wrapped store.
func (w faultyTx) CompletesInRound() bool {
	a, ok := w.tx.(provider.ActivityTxStore)
	return ok && a.CompletesInRound()
}

type faultyRoundTx struct {
	faultySteps
	tx provider.Tx
	f  *faults
}

// DequeueInstance injects faults around the wrapped call.
func (w faultyRoundTx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	var v *provider.Batch
	err := w.f.do(ctx, "DequeueInstance", func() (err error) { v, err = w.tx.DequeueInstance(ctx, p); return err })
	return v, err
}

// CompleteActivity injects faults around the wrapped call; a wrapped Tx
// without it answers provider.ErrUnsupported.
func (w faultyRoundTx) CompleteActivity(ctx context.Context, p *provider.CompleteActivityParams) error {
	a, ok := w.tx.(provider.ActivityTx)
	if !ok {
		return fmt.Errorf("CompleteActivity in a round: %w", provider.ErrUnsupported)
	}
	return w.f.do(ctx, "CompleteActivity", func() error { return a.CompleteActivity(ctx, p) })
}

// EnqueueClaimedActivity injects faults around the wrapped call (as an
// enqueue of activities); a wrapped Tx without it answers
// provider.ErrUnsupported.
func (w faultyRoundTx) EnqueueClaimedActivity(ctx context.Context, p *provider.EnqueueClaimedActivityParams) error {
	c, ok := w.tx.(provider.ClaimingTx)
	if !ok {
		return fmt.Errorf("EnqueueClaimedActivity: %w", provider.ErrUnsupported)
	}
	return w.f.do(ctx, "EnqueueActivities", func() error { return c.EnqueueClaimedActivity(ctx, p) })
}

// DeadLetterMessages injects faults around the wrapped call.
func (w faultyRoundTx) DeadLetterMessages(ctx context.Context, p *provider.DeadLetterMessagesParams) error {
	return w.f.do(ctx, "DeadLetterMessages", func() error { return w.tx.DeadLetterMessages(ctx, p) })
}

// AckMessages injects faults around the wrapped call.
func (w faultyRoundTx) AckMessages(ctx context.Context, p *provider.AckMessagesParams) error {
	return w.f.do(ctx, "AckMessages", func() error { return w.tx.AckMessages(ctx, p) })
}

// AbandonMessages injects faults around the wrapped call.
func (w faultyRoundTx) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	return w.f.do(ctx, "AbandonMessages", func() error { return w.tx.AbandonMessages(ctx, p) })
}

type faultyLease struct {
	faultyStore
	faultySteps
	ls provider.LeaseStore
}

// LoadHistory resolves the ambiguity of the embedded Store and Steps.
func (w faultyLease) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	return w.faultyStore.LoadHistory(ctx, p)
}

// GetSnapshot resolves the ambiguity of the embedded Store and Steps.
func (w faultyLease) GetSnapshot(ctx context.Context, instanceID string) ([]byte, int64, error) {
	return w.faultyStore.GetSnapshot(ctx, instanceID)
}

// EnqueueMessages resolves the ambiguity of the embedded Store and Steps.
func (w faultyLease) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	return w.faultyStore.EnqueueMessages(ctx, p)
}

// LeaseInstance injects faults around the wrapped call.
func (w faultyLease) LeaseInstance(ctx context.Context, p *provider.LeaseParams) (*provider.Lease, error) {
	var v *provider.Lease
	err := w.faultyStore.f.do(ctx, "LeaseInstance", func() (err error) { v, err = w.ls.LeaseInstance(ctx, p); return err })
	return v, err
}

// RenewLease injects faults around the wrapped call.
func (w faultyLease) RenewLease(ctx context.Context, p *provider.RenewLeaseParams) error {
	return w.faultyStore.f.do(ctx, "RenewLease", func() error { return w.ls.RenewLease(ctx, p) })
}

// DeadLetterLeased injects faults around the wrapped call.
func (w faultyLease) DeadLetterLeased(ctx context.Context, p *provider.DeadLetterLeasedParams) error {
	return w.faultyStore.f.do(ctx, "DeadLetterLeased", func() error { return w.ls.DeadLetterLeased(ctx, p) })
}

// AckLease injects faults around the wrapped call.
func (w faultyLease) AckLease(ctx context.Context, p *provider.AckLeaseParams) error {
	return w.faultyStore.f.do(ctx, "AckLease", func() error { return w.ls.AckLease(ctx, p) })
}

// AbandonLease injects faults around the wrapped call.
func (w faultyLease) AbandonLease(ctx context.Context, p *provider.AbandonLeaseParams) error {
	return w.faultyStore.f.do(ctx, "AbandonLease", func() error { return w.ls.AbandonLease(ctx, p) })
}

// PinMessages injects faults around the wrapped call.
func (w faultyLease) PinMessages(ctx context.Context, p *provider.PinMessagesParams) error {
	return w.faultyStore.f.do(ctx, "PinMessages", func() error { return w.ls.PinMessages(ctx, p) })
}

var (
	_ provider.TxStore         = faultyTx{}
	_ provider.ActivityTxStore = faultyTx{}
	_ provider.ActivityTx      = faultyRoundTx{}
	_ provider.ClaimingTx      = faultyRoundTx{}
	_ provider.LeaseStore      = faultyLease{}
)

// The wrapped store's optional capabilities: a missing one answers every
// call with provider.ErrUnsupported.
func (w faultyStore) queries() provider.QueryStore { return orUnsupported[provider.QueryStore](w.s) }
func (w faultyStore) deadLetters() provider.DeadLetterStore {
	return orUnsupported[provider.DeadLetterStore](w.s)
}
func (w faultyStore) purges() provider.PurgeStore { return orUnsupported[provider.PurgeStore](w.s) }
func (w faultyStore) inspect() provider.InspectStore {
	return orUnsupported[provider.InspectStore](w.s)
}

// orUnsupported returns store as C, or a C that answers every call with
// provider.ErrUnsupported.
func orUnsupported[C any](store provider.Store) C {
	if s, ok := store.(C); ok {
		return s
	}
	return any(unsupported{}).(C)
}
