package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// messageDoc is a queued message, by message id.
type messageDoc struct {
	ID        string `bson:"_id"`
	Instance  string `bson:"i"`
	Execution string `bson:"x"`
	Kind      string `bson:"k"`
	Corr      string `bson:"c"`
	Actor     string `bson:"ac"`
	Payload   []byte `bson:"p"`
	Visible   int64  `bson:"v"`
	Enqueued  int64  `bson:"e"`
	Attempts  int    `bson:"n"`
	LastError string `bson:"le"`
	// Order is the enqueue order key (see nextOrder).
	Order int64 `bson:"o"`
	// Priority is the message's priority and OrderAt the time the queue
	// orders it by: provider.OrderAt(VisibleAt, Priority) (schema 5).
	Priority int   `bson:"pr,omitempty"`
	OrderAt  int64 `bson:"po"`
	// Part is the instance's partition (provider.PartitionOf), the
	// first field of the shard key (docs/scaling.md); documents written
	// before partitions have none and are of partition 0.
	Part int `bson:"pt"`
}

// newMessageDoc builds the document of m, of partition part.
func newMessageDoc(m *provider.Message, now time.Time, part int) messageDoc {
	m.SetDefaults(now)
	return messageDoc{
		Part: part, ID: m.ID, Instance: m.InstanceID, Execution: m.ExecutionID, Kind: string(m.Kind), Corr: m.CorrelationID,
		Actor: m.Actor, Payload: m.Payload, Visible: provider.UnixNanos(m.VisibleAt), Enqueued: provider.UnixNanos(m.EnqueuedAt),
		Attempts: m.Attempts, LastError: m.LastError, Order: nextOrder(now),
		Priority: m.Priority, OrderAt: orderAt(provider.UnixNanos(m.VisibleAt), m.Priority),
	}
}

func (d *messageDoc) message() provider.Message {
	return provider.Message{
		ID: d.ID, InstanceID: d.Instance, ExecutionID: d.Execution, Kind: history.Kind(d.Kind), CorrelationID: d.Corr,
		Actor: d.Actor, Payload: d.Payload, VisibleAt: provider.FromUnixNanos(d.Visible), EnqueuedAt: provider.FromUnixNanos(d.Enqueued),
		Attempts: d.Attempts, LastError: d.LastError, Priority: d.Priority,
	}
}

// leaseDoc is one fencing epoch of an instance, by (instance, epoch): the
// newest one is the instance's lease state. Taking a lease inserts the
// next epoch's document, so of two rounds racing for an instance exactly
// one wins (a unique _id; no conditional update is trusted for
// exclusion). Only the holder updates its own document afterwards
// (renewal, release with a hold). A purge inserts an epoch with Purge set
// that is never released.
type leaseDoc struct {
	ID       string `bson:"_id"`
	Instance string `bson:"i"`
	Epoch    int64  `bson:"e"`
	Token    string `bson:"tok"`
	Owner    string `bson:"own"`
	Until    int64  `bson:"u"`
	Released bool   `bson:"rel"`
	// Hold is the end of a retry hold (see AbandonMessages).
	Hold  int64    `bson:"h"`
	Purge *tombDoc `bson:"pg,omitempty"`
	// Park marks the instance's park document (see ParkInstance), which
	// is no epoch: its Epoch is 0. Parked, on an epoch document read
	// with latestLeases, says that the instance has one.
	Park   bool `bson:"pk,omitempty"`
	Parked bool `bson:"-"`
}

func leaseID(instanceID string, epoch int64) string { return id(instanceID, pad(epoch)) }

// live reports whether the lease holds the instance at now.
func (l *leaseDoc) live(now int64) bool { return !l.Released && l.Purge == nil && l.Until > now }

// blocked reports whether no round may take the instance at now.
func (l *leaseDoc) blocked(now int64) bool {
	return l != nil && (l.Purge != nil || l.Parked || l.live(now) || l.Hold > now)
}

// readyAt is when the instance may next be leased, given its earliest
// message's visibility.
func (l *leaseDoc) readyAt(visible int64) int64 {
	at := visible
	if l == nil {
		return at
	}
	if l.Purge != nil || l.Parked {
		// A parked instance is due only when a wake ends its park.
		return never
	}
	if !l.Released && l.Until > at {
		at = l.Until
	}
	return max(at, l.Hold)
}

// latestLease returns the newest epoch document of an instance, or nil.
func (s *Store) latestLease(ctx context.Context, instanceID string) (*leaseDoc, error) {
	var l leaseDoc
	err := s.c.leases.FindOne(ctx, filter("i", instanceID, "e", filter("$gt", 0)), options.FindOne().SetSort(filter("e", -1))).Decode(&l)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", instanceID, translate(err))
	}
	return &l, nil
}

// latestLeases returns the newest epoch document of each instance,
// marked Parked when the instance has a park document (read by the same
// query).
func (s *Store) latestLeases(ctx context.Context, ids []string) (map[string]*leaseDoc, error) {
	out := map[string]*leaseDoc{}
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.c.leases.Find(ctx, filter("i", filter("$in", ids)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []leaseDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	var parked []string
	for i := range docs {
		d := &docs[i]
		if d.Park {
			parked = append(parked, d.Instance)
			continue
		}
		if old, ok := out[d.Instance]; !ok || d.Epoch > old.Epoch {
			out[d.Instance] = d
		}
	}
	for _, i := range parked {
		if out[i] == nil {
			// Parked with no epoch (its epochs were cleaned up): a
			// stand-in that only blocks.
			out[i] = &leaseDoc{Instance: i, Released: true}
		}
		out[i].Parked = true
	}
	return out, nil
}

// leased returns the lease document of l while l's token is the
// instance's current one, else ErrLeaseLost. It reads two documents by
// _id: the lease's own epoch and the next one, which a round that takes
// the instance over inserts.
func (s *Store) leased(ctx context.Context, l *provider.Lease) (*leaseDoc, error) {
	cur, err := s.c.leases.Find(ctx, filter("_id", filter("$in", []string{leaseID(l.InstanceID, l.Epoch), leaseID(l.InstanceID, l.Epoch+1)})))
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", l.InstanceID, translate(err))
	}
	var docs []leaseDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("lease of %s: %w", l.InstanceID, translate(err))
	}
	if len(docs) != 1 || docs[0].Epoch != l.Epoch || docs[0].Token != l.Token || docs[0].Released || docs[0].Purge != nil {
		return nil, fmt.Errorf("lease of %s: %w", l.InstanceID, provider.ErrLeaseLost)
	}
	return &docs[0], nil
}

// fence checks the lease a peek-lock step is fenced with, if any.
func (s *Store) fence(ctx context.Context, l *provider.Lease) error {
	if l == nil {
		return nil
	}
	_, err := s.leased(ctx, l)
	return err
}

// EnqueueMessages implements provider.Store and provider.Steps: one insert
// per message, in order, idempotent by message id.
func (s *Store) EnqueueMessages(ctx context.Context, p *provider.EnqueueMessagesParams) error {
	if err := s.fence(ctx, p.Lease); err != nil {
		return err
	}
	wrote, err := s.enqueueMessages(ctx, p.Messages, p.Now)
	if wrote {
		ids := make([]string, len(p.Messages))
		for i := range p.Messages {
			ids[i] = p.Messages[i].InstanceID
		}
		s.notifyOf(provider.QueueOrchestration, ids...)
	}
	return err
}

// enqueueMessages inserts messages in order, skipping ids already
// queued; it reports whether it inserted any.
func (s *Store) enqueueMessages(ctx context.Context, msgs []provider.Message, now time.Time) (bool, error) {
	wrote := false
	for i := range msgs {
		m := msgs[i]
		ok, err := insertIgnoringDuplicate(ctx, s.c.messages, m.ID, newMessageDoc(&m, now, s.part(m.InstanceID)))
		if err != nil {
			return wrote, fmt.Errorf("enqueue message %s: %w", m.ID, err)
		}
		wrote = wrote || ok
	}
	return wrote, nil
}

// LoadHistory is in history.go.

// ListMessages implements provider.Store.
func (s *Store) ListMessages(ctx context.Context, p *provider.ListMessagesParams) ([]provider.Message, error) {
	return s.findMessages(ctx, filter("i", p.InstanceID), limitOf(p.Limit))
}

func (s *Store) findMessages(ctx context.Context, f bson.D, limit int) ([]provider.Message, error) {
	cur, err := s.c.messages.Find(ctx, f, options.Find().SetSort(filter("o", 1, "_id", 1)).SetLimit(int64(limit)))
	if err != nil {
		return nil, translate(err)
	}
	var docs []messageDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]provider.Message, len(docs))
	for i := range docs {
		out[i] = docs[i].message()
	}
	return out, nil
}

// visibleMessages returns an instance's messages visible at now.
func (s *Store) visibleMessages(ctx context.Context, instanceID string, now time.Time, limit int) ([]provider.Message, error) {
	return s.findMessages(ctx, filter("i", instanceID, "v", filter("$lte", provider.UnixNanos(now))), limitOf(limit))
}

// AbandonMessages implements provider.Store: each message's count first,
// the instance's hold last.
func (s *Store) AbandonMessages(ctx context.Context, p *provider.AbandonMessagesParams) error {
	if err := s.countAttempts(ctx, p.InstanceID, p.MessageIDs, p.Error); err != nil {
		return err
	}
	return s.hold(ctx, p.InstanceID, p.VisibleAt)
}

func (s *Store) countAttempts(ctx context.Context, instanceID string, ids []string, text string) error {
	for _, mid := range ids {
		_, err := s.c.messages.UpdateOne(ctx, filter("_id", mid, "i", instanceID),
			bson.D{{Key: "$inc", Value: filter("n", 1)}, {Key: "$set", Value: filter("le", text)}})
		if err != nil {
			return fmt.Errorf("count the delivery of %s: %w", mid, translate(err))
		}
	}
	return nil
}

// hold holds an instance until visibleAt, on its newest epoch document (a
// new released epoch when it has none).
func (s *Store) hold(ctx context.Context, instanceID string, visibleAt time.Time) error {
	for range 3 {
		cur, err := s.latestLease(ctx, instanceID)
		if err != nil {
			return err
		}
		if cur == nil {
			ok, err := insertIgnoringDuplicate(ctx, s.c.leases, leaseID(instanceID, 1), &leaseDoc{
				ID: leaseID(instanceID, 1), Instance: instanceID, Epoch: 1, Released: true, Hold: provider.UnixNanos(visibleAt),
			})
			if err != nil {
				return fmt.Errorf("hold %s: %w", instanceID, err)
			}
			if ok {
				return nil
			}
			continue
		}
		if _, err := s.c.leases.UpdateOne(ctx, filter("_id", cur.ID), bson.D{{Key: "$max", Value: filter("h", provider.UnixNanos(visibleAt))}}); err != nil {
			return fmt.Errorf("hold %s: %w", instanceID, translate(err))
		}
		// A round that took the next epoch meanwhile copied the hold
		// before it was written: write it there too.
		newest, err := s.latestLease(ctx, instanceID)
		if err != nil || newest == nil || newest.Epoch == cur.Epoch || newest.Hold >= provider.UnixNanos(visibleAt) {
			return err
		}
	}
	return fmt.Errorf("hold %s: %w: the instance's lease keeps changing", instanceID, provider.ErrConflict)
}

// NextVisibleAt implements provider.Store.
func (s *Store) NextVisibleAt(ctx context.Context, p *provider.NextVisibleAtParams) (time.Time, bool, error) {
	switch p.Queue {
	case provider.QueueOrchestration:
		return s.nextInstanceAt(ctx, p.Partitions)
	case provider.QueueActivity:
		var t taskDoc
		err := s.c.tasks.FindOne(ctx, s.partFilter(filter("q", filter("$in", queuesOf(p.Queues)), "d", false), p.Partitions),
			options.FindOne().SetSort(filter("ca", 1, "o", 1)).SetProjection(filter("ca", 1))).Decode(&t)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, translate(err)
		}
		return provider.FromUnixNanos(t.ClaimableAt), true, nil
	}
	return time.Time{}, false, fmt.Errorf("mongo: unknown queue %q", p.Queue)
}

// scanWindow is how many of the earliest messages one scan of the
// orchestration queue reads.
const scanWindow = 256

// nextInstanceAt reads the earliest messages and the lease state of their
// instances: an instance is ready at its earliest message's visibility, or
// the end of its live lease or hold when later. Instances beyond the
// window have no message earlier than the window's last. With parts, only
// the messages of those partitions are read.
func (s *Store) nextInstanceAt(ctx context.Context, parts []int) (time.Time, bool, error) {
	cur, err := s.c.messages.Find(ctx, s.partFilter(bson.D{}, parts), options.Find().SetSort(filter("v", 1, "o", 1)).
		SetLimit(scanWindow).SetProjection(filter("i", 1, "v", 1)))
	if err != nil {
		return time.Time{}, false, translate(err)
	}
	var docs []messageDoc
	if err := cur.All(ctx, &docs); err != nil {
		return time.Time{}, false, translate(err)
	}
	if len(docs) == 0 {
		return time.Time{}, false, nil
	}
	earliest := map[string]int64{}
	var ids []string
	for _, d := range docs {
		if _, ok := earliest[d.Instance]; !ok {
			earliest[d.Instance] = d.Visible
			ids = append(ids, d.Instance)
		}
	}
	leases, err := s.latestLeases(ctx, ids)
	if err != nil {
		return time.Time{}, false, err
	}
	best := never
	for _, i := range ids {
		best = min(best, leases[i].readyAt(earliest[i]))
	}
	if len(docs) == scanWindow {
		best = min(best, docs[len(docs)-1].Visible)
	}
	if best == never {
		// Every instance in view is being purged.
		return time.Time{}, false, nil
	}
	return provider.FromUnixNanos(best), true, nil
}

// LeaseInstance implements provider.LeaseStore. It walks the visible
// messages in queue order (OrderAt, the visibility moved by the
// priority, then enqueue order) and leases the first instance that is
// neither leased, held, parked nor being purged, by inserting its next
// epoch document.
func (s *Store) LeaseInstance(ctx context.Context, p *provider.LeaseParams) (*provider.Lease, error) {
	if s.mode != provider.ModePeekLock {
		return nil, fmt.Errorf("mongo: LeaseInstance on a %s store", s.mode)
	}
	return s.takeInstance(ctx, p.InstanceID, p.Now, p.LockedUntil, p.Owner, p.Limit, p.Partitions)
}

// takeInstance leases an instance with visible messages (instanceID, or
// any of the partitions parts when empty), or returns nil.
func (s *Store) takeInstance(ctx context.Context, instanceID string, now, until time.Time, owner string, limit int, parts []int) (*provider.Lease, error) {
	if instanceID != "" {
		return s.tryLease(ctx, instanceID, nil, false, now, until, owner, limit)
	}
	// Visible messages in the order of their priority (OrderAt), then
	// of their enqueue; with parts, those of the partitions named, in
	// that order across them.
	cur, err := s.c.messages.Find(ctx, s.partFilter(filter("v", filter("$lte", provider.UnixNanos(now))), parts),
		options.Find().SetSort(filter("po", 1, "o", 1)).SetProjection(filter("i", 1)).SetBatchSize(scanWindow))
	if err != nil {
		return nil, translate(err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	seen := map[string]bool{}
	var batch []string
	flush := func() (*provider.Lease, error) {
		leases, err := s.latestLeases(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, i := range batch {
			l, err := s.tryLease(ctx, i, leases[i], true, now, until, owner, limit)
			if l != nil || err != nil {
				return l, err
			}
		}
		batch = batch[:0]
		return nil, nil
	}
	for cur.Next(ctx) {
		var d messageDoc
		if err := cur.Decode(&d); err != nil {
			return nil, translate(err)
		}
		if seen[d.Instance] {
			continue
		}
		seen[d.Instance] = true
		batch = append(batch, d.Instance)
		if len(batch) == 32 {
			if l, err := flush(); l != nil || err != nil {
				return l, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return nil, translate(err)
	}
	return flush()
}

// tryLease leases one instance unless it is blocked (latest is its newest
// epoch document when known is set) or another round wins the race; it
// returns nil then, or when the instance has no visible message.
func (s *Store) tryLease(ctx context.Context, instanceID string, latest *leaseDoc, known bool, now, until time.Time, owner string, limit int) (*provider.Lease, error) {
	if !known {
		leases, err := s.latestLeases(ctx, []string{instanceID})
		if err != nil {
			return nil, err
		}
		latest = leases[instanceID]
	}
	if latest.blocked(provider.UnixNanos(now)) {
		return nil, nil
	}
	if !known {
		// Only an instance with work is leased.
		msgs, err := s.visibleMessages(ctx, instanceID, now, 1)
		if err != nil || len(msgs) == 0 {
			return nil, err
		}
	}
	epoch := int64(1)
	if latest != nil {
		epoch = latest.Epoch + 1
	}
	doc := &leaseDoc{
		ID: leaseID(instanceID, epoch), Instance: instanceID, Epoch: epoch, Token: newToken(), Owner: owner, Until: provider.UnixNanos(until),
	}
	if latest != nil {
		doc.Hold = latest.Hold
	}
	ok, err := insertIgnoringDuplicate(ctx, s.c.leases, doc.ID, doc)
	if err != nil || !ok {
		// Another round took this epoch first.
		return nil, err
	}
	l := &provider.Lease{InstanceID: instanceID, Token: doc.Token, Epoch: epoch, Owner: owner, LockedUntil: until}
	// An epoch read long ago may have been forgotten and taken again
	// since (see keptEpochs): the lease holds only while its epoch is the
	// newest.
	newest, err := s.latestLease(ctx, instanceID)
	if err != nil {
		return nil, errors.Join(err, s.release(context.WithoutCancel(ctx), l, 0))
	}
	if newest.Epoch != epoch {
		if _, err := s.c.leases.DeleteOne(ctx, filter("_id", doc.ID, "tok", doc.Token)); err != nil {
			return nil, fmt.Errorf("lease of %s: %w", instanceID, translate(err))
		}
		return nil, nil
	}
	if latest != nil && s.mode == provider.ModeTransactional {
		// A transaction of the round that held the previous epoch (and
		// ran out of time) writes that epoch's document when it commits;
		// this write makes the commit fail with a write conflict.
		if _, err := s.c.leases.UpdateOne(ctx, filter("_id", latest.ID), set("sup", true)); err != nil {
			return nil, errors.Join(fmt.Errorf("lease of %s: %w", instanceID, translate(err)), s.release(context.WithoutCancel(ctx), l, 0))
		}
	}
	s.forgetEpochs(ctx, instanceID, epoch)
	msgs, err := s.visibleMessages(ctx, instanceID, now, limit)
	if err != nil {
		// Let it go rather than hold the instance for a whole lease.
		return nil, errors.Join(err, s.release(context.WithoutCancel(ctx), l, 0))
	}
	l.Messages = msgs
	if len(msgs) == 0 {
		// Its messages were acked meanwhile: let it go.
		return nil, s.release(ctx, l, 0)
	}
	return l, nil
}

// keptEpochs is how many epochs before the newest stay stored. An epoch
// document is never inserted twice while it is kept (the insert that
// takes it is the exclusion), so only a round that read an instance's
// lease state keptEpochs epochs ago could take one again; rounds read it
// just before they insert.
const keptEpochs = 64

// A forgotten epoch taken again is caught by tryLease, which gives the
// lease up unless its epoch is the newest after its insert.

// forgetEpochs deletes epoch documents older than keptEpochs before
// epoch, every keptEpochs epochs.
func (s *Store) forgetEpochs(ctx context.Context, instanceID string, epoch int64) {
	if epoch%keptEpochs != 0 {
		return
	}
	if _, err := s.c.leases.DeleteMany(ctx, filter("i", instanceID, "e", filter("$gt", 0, "$lt", epoch-keptEpochs))); err != nil {
		s.log.Warn("chronicle mongo: clean up old lease epochs", "instance", instanceID, "err", err)
	}
}

// release marks a lease released, with a hold until holdUntil (zero for
// none); ErrLeaseLost unless the lease is the instance's current one.
// One conditional write: only the holder writes its epoch's document.
func (s *Store) release(ctx context.Context, l *provider.Lease, holdUntil int64) error {
	upd := bson.D{{Key: "$set", Value: filter("rel", true)}}
	if holdUntil > 0 {
		upd = append(upd, bson.E{Key: "$max", Value: filter("h", holdUntil)})
	}
	if err := updateHeld(ctx, s.c.leases, filter("_id", leaseID(l.InstanceID, l.Epoch), "tok", l.Token, "rel", false, "pg", nil), upd,
		"lease of "+l.InstanceID); err != nil {
		return err
	}
	s.notifyOf(provider.QueueOrchestration, l.InstanceID)
	return nil
}

// RenewLease implements provider.LeaseStore.
func (s *Store) RenewLease(ctx context.Context, p *provider.RenewLeaseParams) error {
	if _, err := s.leased(ctx, p.Lease); err != nil {
		return err
	}
	return updateHeld(ctx, s.c.leases, filter("_id", leaseID(p.Lease.InstanceID, p.Lease.Epoch), "tok", p.Lease.Token, "rel", false),
		set("u", provider.UnixNanos(p.LockedUntil)), "lease of "+p.Lease.InstanceID)
}

// PinMessages implements provider.LeaseStore: one write per message, each
// setting the execution only while it is unset.
func (s *Store) PinMessages(ctx context.Context, p *provider.PinMessagesParams) error {
	if _, err := s.leased(ctx, p.Lease); err != nil {
		return err
	}
	ids := make([]string, 0, len(p.Pins))
	for mid := range p.Pins {
		ids = append(ids, mid)
	}
	slices.Sort(ids)
	for _, mid := range ids {
		if _, err := s.c.messages.UpdateOne(ctx, filter("_id", mid, "i", p.Lease.InstanceID, "x", ""), set("x", p.Pins[mid])); err != nil {
			return fmt.Errorf("pin message %s: %w", mid, translate(err))
		}
	}
	return nil
}

// DeadLetterLeased implements provider.LeaseStore.
func (s *Store) DeadLetterLeased(ctx context.Context, p *provider.DeadLetterLeasedParams) error {
	if _, err := s.leased(ctx, p.Lease); err != nil {
		return err
	}
	return s.deadLetterWrites(ctx, p.Lease.InstanceID, p.Letters)
}

// AckLease implements provider.LeaseStore: the messages go first, one by
// one, and the lease last.
func (s *Store) AckLease(ctx context.Context, p *provider.AckLeaseParams) error {
	if _, err := s.leased(ctx, p.Lease); err != nil {
		return err
	}
	if err := s.removeMessages(ctx, p.Lease.InstanceID, p.MessageIDs); err != nil {
		return err
	}
	return s.release(ctx, p.Lease, 0)
}

func (s *Store) removeMessages(ctx context.Context, instanceID string, ids []string) error {
	for _, mid := range ids {
		if _, err := s.c.messages.DeleteOne(ctx, filter("_id", mid, "i", instanceID)); err != nil {
			return fmt.Errorf("remove message %s: %w", mid, translate(err))
		}
	}
	return nil
}

// AbandonLease implements provider.LeaseStore: each message's count
// first, then the release with the hold, in one write of the lease's
// document.
func (s *Store) AbandonLease(ctx context.Context, p *provider.AbandonLeaseParams) error {
	if _, err := s.leased(ctx, p.Lease); err != nil {
		return err
	}
	ids := make([]string, len(p.Lease.Messages))
	for i, m := range p.Lease.Messages {
		ids[i] = m.ID
	}
	if err := s.countAttempts(ctx, p.Lease.InstanceID, ids, p.Error); err != nil {
		return err
	}
	return s.release(ctx, p.Lease, provider.UnixNanos(p.VisibleAt))
}

func queuesOf(qs []string) []string {
	if len(qs) == 0 {
		return []string{""}
	}
	return qs
}
