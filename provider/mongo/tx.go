package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// RunRound implements provider.TxStore: fn runs in one session
// transaction. The instance a round dequeues is locked by a lease taken
// outside the transaction (an epoch document, as in peek-lock mode, held
// for Options.LockTimeout at most) and released by the transaction's own
// commit, or right after an abort. A commit whose outcome is unknown
// (UnknownTransactionCommitResult) is committed again, which MongoDB
// makes safe; a transient error (TransientTransactionError, a write
// conflict) fails the round, which the runner retries.
func (s *Store) RunRound(ctx context.Context, fn func(ctx context.Context, tx provider.Tx) error) (err error) {
	if s.mode != provider.ModeTransactional {
		return fmt.Errorf("mongo: RunRound on a %s store", s.mode)
	}
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("mongo: start session: %w", translate(err))
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	if err := sess.StartTransaction(); err != nil {
		return fmt.Errorf("mongo: start transaction: %w", translate(err))
	}
	t := &roundTx{s: s, outer: ctx}
	sctx := mongo.NewSessionContext(ctx, sess)
	defer func() {
		if err != nil {
			_ = sess.AbortTransaction(context.WithoutCancel(ctx))
			for i := len(t.undo) - 1; i >= 0; i-- {
				if uerr := t.undo[i](context.WithoutCancel(ctx)); uerr != nil {
					s.log.Warn("chronicle mongo: undo a slot acquire of a failed round", "err", uerr)
				}
			}
			for _, l := range t.leases {
				_ = s.release(context.WithoutCancel(ctx), l, 0)
			}
		}
	}()
	if err := fn(sctx, t); err != nil {
		return err
	}
	for _, l := range t.leases {
		// A round that took the instance over after LockTimeout wrote
		// this document ("sup"), so this write conflicts and the commit
		// fails; without a takeover it releases the lock with the commit.
		res, err := s.c.leases.UpdateOne(sctx, filter("_id", leaseID(l.InstanceID, l.Epoch), "tok", l.Token, "sup", filter("$ne", true)), set("rel", true))
		if err != nil {
			return fmt.Errorf("mongo: release %s: %w", l.InstanceID, translate(err))
		}
		if res.MatchedCount == 0 {
			return fmt.Errorf("mongo: lock of %s: %w", l.InstanceID, provider.ErrLeaseLost)
		}
	}
	for attempt := 1; ; attempt++ {
		err = sess.CommitTransaction(ctx)
		if err == nil {
			break
		}
		// Committing again is safe: the server answers with the first
		// commit's outcome.
		if hasLabel(err, "UnknownTransactionCommitResult") && ctx.Err() == nil && attempt < commitAttempts {
			continue
		}
		return fmt.Errorf("mongo: commit: %w", translate(err))
	}
	if t.enqueued {
		s.notify(provider.QueueOrchestration)
		s.notify(provider.QueueActivity)
	}
	return nil
}

// commitAttempts bounds the commits of a transaction whose outcome stays
// unknown; the round then fails, and running it again is safe.
const commitAttempts = 5

// roundTx is the view of a transactional round.
type roundTx struct {
	s *Store
	// outer is the round's context without its session: leases are taken
	// outside the transaction.
	outer  context.Context
	leases []*provider.Lease
	// wrote is set by the writes since the last dequeue.
	wrote    bool
	enqueued bool
	// undo are the writes a failed round undoes after its rollback (see
	// AcquireSlot).
	undo []func(ctx context.Context) error
}

// DequeueInstance implements provider.Tx. MongoDB has no savepoints, so a
// round dequeues one instance (a second call returns nil: group commit
// is off on this store).
func (t *roundTx) DequeueInstance(ctx context.Context, p *provider.DequeueParams) (*provider.Batch, error) {
	if len(t.leases) > 0 {
		return nil, nil
	}
	l, err := t.s.takeInstance(t.outer, p.InstanceID, p.Now, p.Now.Add(t.s.lockTimeout), p.Owner, 1, p.Partitions)
	if err != nil || l == nil {
		return nil, err
	}
	t.leases = append(t.leases, l)
	msgs, err := t.s.visibleMessages(ctx, l.InstanceID, p.Now, p.Limit)
	if err != nil {
		return nil, err
	}
	t.wrote = false
	return &provider.Batch{InstanceID: l.InstanceID, Messages: msgs}, nil
}

func (t *roundTx) held(instanceID string) error {
	for _, l := range t.leases {
		if l.InstanceID == instanceID {
			return nil
		}
	}
	return fmt.Errorf("mongo: instance %s is not locked by this round: %w", instanceID, provider.ErrLeaseLost)
}

// DeadLetterMessages implements provider.Tx.
func (t *roundTx) DeadLetterMessages(ctx context.Context, p *provider.DeadLetterMessagesParams) error {
	if err := t.held(p.InstanceID); err != nil {
		return err
	}
	t.wrote = true
	return t.s.deadLetterWrites(ctx, p.InstanceID, p.Letters)
}

// AckMessages implements provider.Tx.
func (t *roundTx) AckMessages(ctx context.Context, p *provider.AckMessagesParams) error {
	if err := t.held(p.InstanceID); err != nil {
		return err
	}
	t.wrote = true
	return t.s.removeMessages(ctx, p.InstanceID, p.MessageIDs)
}

// errNoSavepoint is returned by AbandonMessages when the round wrote since
// its dequeue: MongoDB cannot undo part of a transaction.
var errNoSavepoint = errors.New("mongo: a transaction cannot undo part of its writes; roll the round back")

// AbandonMessages implements provider.Tx: it records the failed delivery
// when the round has not written since its dequeue, and otherwise fails
// so that the runner rolls the round back and records it afterwards.
func (t *roundTx) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	if err := t.held(p.InstanceID); err != nil {
		return err
	}
	if t.wrote {
		return errNoSavepoint
	}
	if err := t.s.countAttempts(ctx, p.InstanceID, p.MessageIDs, p.Error); err != nil {
		return err
	}
	l := t.leases[len(t.leases)-1]
	_, err := t.s.c.leases.UpdateOne(ctx, filter("_id", leaseID(l.InstanceID, l.Epoch), "tok", l.Token),
		bson.D{{Key: "$max", Value: filter("h", provider.UnixNanos(p.VisibleAt))}})
	return translate(err)
}

// LoadHistory implements provider.Steps.
func (t *roundTx) LoadHistory(ctx context.Context, p *provider.LoadHistoryParams) ([]history.Event, error) {
	return t.s.LoadHistory(ctx, p)
}

// GetSnapshot implements provider.Steps.
func (t *roundTx) GetSnapshot(ctx context.Context, instanceID string) ([]byte, int64, error) {
	return t.s.GetSnapshot(ctx, instanceID)
}

// AppendHistory implements provider.Steps.
func (t *roundTx) AppendHistory(ctx context.Context, p *provider.AppendHistoryParams) error {
	t.wrote = true
	return t.s.AppendHistory(ctx, p)
}

// SaveProjections implements provider.Steps.
func (t *roundTx) SaveProjections(ctx context.Context, p *provider.Projections) error {
	t.wrote = true
	return t.s.SaveProjections(ctx, p)
}

// EnqueueMessages implements provider.Steps.
func (t *roundTx) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	t.wrote, t.enqueued = true, true
	_, err := t.s.enqueueMessages(ctx, p.Messages, p.Now)
	return err
}

// EnqueueActivities implements provider.Steps.
func (t *roundTx) EnqueueActivities(ctx context.Context, p *provider.EnqueueActivitiesParams) error {
	t.wrote, t.enqueued = true, true
	q := *p
	q.Lease = nil
	return t.s.EnqueueActivities(ctx, &q)
}

// CancelActivities implements provider.Steps.
func (t *roundTx) CancelActivities(ctx context.Context, p *provider.CancelActivitiesParams) error {
	t.wrote = true
	q := *p
	q.Lease = nil
	return t.s.CancelActivities(ctx, &q)
}

// ResetProjections implements provider.Steps.
func (t *roundTx) ResetProjections(ctx context.Context, p *provider.ResetProjectionsParams) error {
	t.wrote = true
	return t.s.ResetProjections(ctx, p)
}

// startWatchers follows inserts into the message and activity task
// collections with change streams and turns them into work hints.
func (s *Store) startWatchers(ctx context.Context) {
	for _, w := range []struct {
		c *mongo.Collection
		q provider.Queue
	}{{s.c.messages, provider.QueueOrchestration}, {s.c.tasks, provider.QueueActivity}} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watch(ctx, w.c, w.q)
		}()
	}
}

func (s *Store) watch(ctx context.Context, c *mongo.Collection, q provider.Queue) {
	pipeline := mongo.Pipeline{{{Key: "$match", Value: filter("operationType", filter("$in", []string{"insert", "update", "replace"}))}}}
	for ctx.Err() == nil {
		cs, err := c.Watch(ctx, pipeline, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			s.log.Warn("chronicle mongo: change stream", "collection", c.Name(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for cs.Next(ctx) {
			s.notify(q)
		}
		_ = cs.Close(context.WithoutCancel(ctx))
	}
}
