package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
)

// Flow control (schema 5): priority, parked instances, the slot sets of
// instance concurrency keys, the slots of activity concurrency keys and
// the tokens of rate limits. As everywhere in this store, exclusion rests
// on inserts of unique _ids, never on a conditional update (which the
// test server does not apply atomically): a slot set, an activity slot
// and a rate token each change by the insert of a document whose _id the
// change is the only one to take.

// orderAt is provider.OrderAt on Unix nanoseconds: at moved back by
// priority steps, kept within int64 (never stays never).
func orderAt(at int64, priority int) int64 {
	if at == never {
		return never
	}
	shift := int64(priority) * int64(provider.PriorityStep)
	switch {
	case shift > 0 && at < math.MinInt64+shift:
		return math.MinInt64
	case shift < 0 && at > math.MaxInt64+shift:
		return never
	}
	return at - shift
}

// activityPriority is the priority of an encoded activity task (0 when
// it does not decode: the claim that reads it reports the error).
func activityPriority(data []byte) int {
	t, err := provider.UnmarshalActivityTask(data)
	if err != nil {
		return 0
	}
	return t.Priority
}

// parkID is the _id of an instance's park document in the leases
// collection: no epoch document has it (theirs end in a padded number),
// and latestLeases reads it with the epochs, so finding out whether an
// instance is parked costs no query of its own. It is a document of its
// own, not a field of an epoch document, so that a wake never races the
// write of the epoch by the round that holds it.
func parkID(instanceID string) string { return id(instanceID, "park") }

// ParkInstance implements provider.FlowSteps in peek-lock mode: the
// fence read, then the insert of the instance's park document (a park
// already there is success).
func (s *Store) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	if err := s.fence(ctx, p.Lease); err != nil {
		return err
	}
	return s.park(ctx, p.InstanceID)
}

func (s *Store) park(ctx context.Context, instanceID string) error {
	if _, err := insertIgnoringDuplicate(ctx, s.c.leases, parkID(instanceID), &leaseDoc{ID: parkID(instanceID), Instance: instanceID, Released: true, Park: true}); err != nil {
		return fmt.Errorf("park %s: %w", instanceID, err)
	}
	return nil
}

// WakeInstances implements provider.FlowSteps in peek-lock mode and
// provider.FlowStore: the fence read (in a round), then the delete of
// each named instance's park document; instances not parked are left as
// they are. It wakes the workers when it ended a park.
func (s *Store) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	if err := s.fence(ctx, p.Lease); err != nil {
		return err
	}
	woke, err := s.wake(ctx, p.InstanceIDs)
	if woke {
		s.notify(provider.QueueOrchestration)
	}
	return err
}

// wake ends the parks of ids; it reports whether it ended any.
func (s *Store) wake(ctx context.Context, ids []string) (bool, error) {
	woke := false
	for _, i := range ids {
		res, err := s.c.leases.DeleteOne(ctx, filter("_id", parkID(i)))
		if err != nil {
			return woke, fmt.Errorf("wake %s: %w", i, translate(err))
		}
		woke = woke || res.DeletedCount > 0
	}
	return woke, nil
}

// slotSetDoc is version V of the slot set of an instance concurrency
// key, by (key, version): the newest version is the set. A change reads
// the newest, computes the next and inserts it; of two changes of one
// version exactly one lands, and the other reads again. Versions before
// the newest are deleted after each change.
type slotSetDoc struct {
	ID      string       `bson:"_id"`
	Key     string       `bson:"k"`
	Version int64        `bson:"v"`
	Limit   int          `bson:"l"`
	Holders []slotMember `bson:"h"`
	Waiters []slotMember `bson:"w"`
}

// slotMember is a holder or waiter of a slot set: the instance and since
// when (Unix nanoseconds).
type slotMember struct {
	ID    string `bson:"i"`
	Since int64  `bson:"s"`
}

func slotSetID(key string, v int64) string { return id(key, pad(v)) }

func (d *slotSetDoc) record() provider.SlotRecord {
	r := provider.SlotRecord{Key: d.Key, Limit: d.Limit}
	for _, m := range d.Holders {
		r.Holders = append(r.Holders, provider.SlotHolder{ID: m.ID, Since: provider.FromUnixNanos(m.Since)})
	}
	for _, m := range d.Waiters {
		r.Waiters = append(r.Waiters, provider.SlotHolder{ID: m.ID, Since: provider.FromUnixNanos(m.Since)})
	}
	return r
}

// slotSet returns the newest version of key's slot set, nil when there
// is none.
func (s *Store) slotSet(ctx context.Context, key string) (*slotSetDoc, error) {
	var d slotSetDoc
	err := s.c.slotSets.FindOne(ctx, filter("k", key), options.FindOne().SetSort(filter("k", 1, "v", -1))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slot set %s: %w", key, translate(err))
	}
	return &d, nil
}

// slotSetChanges bounds how often a change of a slot set reads it again
// after another change took its version.
const slotSetChanges = 64

// changeSlotSet applies change to key's slot set and inserts the result
// as the next version when change reports a change (never in a
// transaction: see roundTx.AcquireSlot).
func (s *Store) changeSlotSet(ctx context.Context, key string, change func(d *slotSetDoc) bool) error {
	for range slotSetChanges {
		cur, err := s.slotSet(ctx, key)
		if err != nil {
			return err
		}
		next := &slotSetDoc{Key: key}
		if cur != nil {
			next.Version, next.Limit = cur.Version, cur.Limit
			next.Holders = slices.Clone(cur.Holders)
			next.Waiters = slices.Clone(cur.Waiters)
		}
		if !change(next) {
			return nil
		}
		next.Version++
		next.ID = slotSetID(key, next.Version)
		ok, err := insertIgnoringDuplicate(ctx, s.c.slotSets, next.ID, next)
		if err != nil {
			return fmt.Errorf("slot set %s: %w", key, err)
		}
		if !ok {
			continue
		}
		// A version read long ago may have been deleted and taken again:
		// it counts only while no newer version exists. (A version that
		// landed and was already superseded is taken for one too: the
		// change is then made again on the newer version, which finds
		// it made.)
		err = s.c.slotSets.FindOne(ctx, filter("k", key, "v", filter("$gt", next.Version)), options.FindOne().SetProjection(filter("_id", 1))).Err()
		if err == nil {
			if _, err := s.c.slotSets.DeleteOne(ctx, filter("_id", next.ID)); err != nil {
				return fmt.Errorf("slot set %s: %w", key, translate(err))
			}
			continue
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("slot set %s: %w", key, translate(err))
		}
		if _, err := s.c.slotSets.DeleteMany(ctx, filter("k", key, "v", filter("$lt", next.Version))); err != nil {
			return fmt.Errorf("slot set %s: old versions: %w", key, translate(err))
		}
		return nil
	}
	return &Error{Err: fmt.Errorf("slot set %s changed by other rounds throughout: %w", key, provider.ErrConflict), Retryable: true}
}

func indexOf(ms []slotMember, holder string) int {
	return slices.IndexFunc(ms, func(m slotMember) bool { return m.ID == holder })
}

// acquireSlot is AcquireSlot without the fence; added reports whether
// the call added Holder to the set (as a holder or a waiter).
func (s *Store) acquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (held, added bool, err error) {
	if p.Key == "" {
		return false, false, &Error{Err: errors.New("acquire slot: no key")}
	}
	if err := provider.ValidateLimit(p.Key, p.Limit); err != nil {
		return false, false, &Error{Err: fmt.Errorf("acquire slot: %w", err)}
	}
	err = s.changeSlotSet(ctx, p.Key, func(d *slotSetDoc) bool {
		changed := d.Limit != p.Limit
		d.Limit = p.Limit
		// added stays set by an earlier attempt whose version landed
		// and was then superseded (see changeSlotSet).
		held = false
		if indexOf(d.Holders, p.Holder) >= 0 {
			held = true
			return changed
		}
		free := d.Limit - len(d.Holders)
		now := provider.UnixNanos(p.Now)
		if w := indexOf(d.Waiters, p.Holder); w >= 0 {
			if w < free {
				d.Waiters = slices.Delete(d.Waiters, w, w+1)
				d.Holders = append(d.Holders, slotMember{ID: p.Holder, Since: now})
				held = true
				return true
			}
			return changed
		}
		if len(d.Waiters) < free {
			d.Holders = append(d.Holders, slotMember{ID: p.Holder, Since: now})
			held = true
		} else {
			d.Waiters = append(d.Waiters, slotMember{ID: p.Holder, Since: now})
		}
		added = true
		return true
	})
	return held, added, err
}

// releaseSlot is ReleaseSlot without the fence.
func (s *Store) releaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	var wake []string
	err := s.changeSlotSet(ctx, p.Key, func(d *slotSetDoc) bool {
		changed := false
		if i := indexOf(d.Holders, p.Holder); i >= 0 {
			d.Holders = slices.Delete(d.Holders, i, i+1)
			changed = true
		}
		if i := indexOf(d.Waiters, p.Holder); i >= 0 {
			d.Waiters = slices.Delete(d.Waiters, i, i+1)
			changed = true
		}
		wake = nil
		for i := 0; i < d.Limit-len(d.Holders) && i < len(d.Waiters); i++ {
			wake = append(wake, d.Waiters[i].ID)
		}
		return changed
	})
	return wake, err
}

// AcquireSlot implements provider.FlowSteps in peek-lock mode: the
// fence read, then one insert of the key's next slot set version.
func (s *Store) AcquireSlot(ctx context.Context, p *provider.AcquireSlotParams) (bool, error) {
	if err := s.fence(ctx, p.Lease); err != nil {
		return false, err
	}
	held, _, err := s.acquireSlot(ctx, p)
	return held, err
}

// ReleaseSlot implements provider.FlowSteps in peek-lock mode: the
// fence read, then one insert of the key's next slot set version (none
// when the holder is neither holding nor waiting).
func (s *Store) ReleaseSlot(ctx context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	if err := s.fence(ctx, p.Lease); err != nil {
		return nil, err
	}
	return s.releaseSlot(ctx, p)
}

// GetSlots implements provider.FlowStore.
func (s *Store) GetSlots(ctx context.Context, key string) (*provider.SlotRecord, error) {
	d, err := s.slotSet(ctx, key)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("slot set %s: %w", key, provider.ErrNotFound)
	}
	r := d.record()
	return &r, nil
}

// ListSlots implements provider.FlowStore: the newest version of each
// key, in key order.
func (s *Store) ListSlots(ctx context.Context, p *provider.ListSlotsParams) ([]provider.SlotRecord, error) {
	limit := limitOf(p.Limit)
	cur, err := s.c.slotSets.Find(ctx, filter("k", filter("$gt", p.AfterKey)), options.Find().SetSort(filter("k", 1, "v", -1)))
	if err != nil {
		return nil, translate(err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var out []provider.SlotRecord
	last := ""
	for cur.Next(ctx) {
		var d slotSetDoc
		if err := cur.Decode(&d); err != nil {
			return nil, translate(err)
		}
		if d.Key == last {
			// An older version of the key just read.
			continue
		}
		last = d.Key
		if p.OnlyWaiting && len(d.Waiters) == 0 {
			continue
		}
		out = append(out, d.record())
		if len(out) == limit {
			break
		}
	}
	if err := cur.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// Activity concurrency keys: slot i of a key, for i in [0, limit), is a
// sequence of versions, by (key, i, version); the newest names the claim
// that holds the slot (task and claim token) or nobody. A claimer of a
// task with a key reads the newest version of each slot, counts the
// slots held (below), and when fewer than the limit are, inserts the next
// version of a free slot naming its claim-to-be; of two claimers of one
// slot exactly one lands its insert. Then it inserts the claim step. A
// slot is held while the claim it names is the task's newest step and
// has not run out, or, while that claim step is not written yet (its
// claimer is between the two inserts), until the claim's end: a claimer
// that died between them keeps the slot that long; one that lost the task
// to another claimer (the claim step holds another token) holds nothing.

// activitySlotDoc is a version of a slot of an activity concurrency key.
type activitySlotDoc struct {
	ID      string `bson:"_id"`
	Key     string `bson:"k"`
	Slot    int    `bson:"s"`
	Version int64  `bson:"n"`
	// Task and Token name the claim holding the slot (empty: nobody),
	// Until the end it was claimed with.
	Task  string `bson:"t"`
	Token string `bson:"tok"`
	Until int64  `bson:"u"`
}

func activitySlotID(key string, slot int, v int64) string {
	return id(key, pad(int64(slot)), pad(v))
}

// activitySlots returns the newest version of each slot of key.
func (s *Store) activitySlots(ctx context.Context, key string) (map[int]*activitySlotDoc, error) {
	cur, err := s.c.activitySlots.Find(ctx, filter("k", key), options.Find().SetSort(filter("k", 1, "s", 1, "n", -1)))
	if err != nil {
		return nil, fmt.Errorf("slots of %s: %w", key, translate(err))
	}
	var docs []activitySlotDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("slots of %s: %w", key, translate(err))
	}
	out := map[int]*activitySlotDoc{}
	for i := range docs {
		d := &docs[i]
		if old, ok := out[d.Slot]; !ok || d.Version > old.Version {
			out[d.Slot] = d
		}
	}
	return out, nil
}

// slotState is what the claim a slot names is at now.
type slotState int

const (
	slotFree slotState = iota
	// slotHeld: its claim is live, or not written yet and its end is
	// after now.
	slotHeld
	// slotRanOut: its claim is the task's newest step and ran out at or
	// before now; a heartbeat of its owner may still extend it.
	slotRanOut
)

// slotStates reads the claims the slots name (one query of their claim
// steps and the steps after them) and returns the state of each slot.
func (s *Store) slotStates(ctx context.Context, slots map[int]*activitySlotDoc, now int64) (map[int]slotState, error) {
	var ids []string
	for _, d := range slots {
		if k, ok := tokenStep(d.Token); ok && d.Task != "" {
			ids = append(ids, stepID(d.Task, k), stepID(d.Task, k+1))
		}
	}
	steps := map[string]*stepDoc{}
	if len(ids) > 0 {
		cur, err := s.c.claims.Find(ctx, filter("_id", filter("$in", ids)))
		if err != nil {
			return nil, fmt.Errorf("claims of slots: %w", translate(err))
		}
		var docs []stepDoc
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("claims of slots: %w", translate(err))
		}
		for i := range docs {
			steps[docs[i].ID] = &docs[i]
		}
	}
	out := map[int]slotState{}
	for i, d := range slots {
		k, ok := tokenStep(d.Token)
		if !ok || d.Task == "" {
			out[i] = slotFree
			continue
		}
		c := steps[stepID(d.Task, k)]
		switch {
		case c == nil:
			if d.Until > now {
				out[i] = slotHeld
			}
		case c.Token != d.Token || steps[stepID(d.Task, k+1)] != nil:
			out[i] = slotFree
		case c.Until > now:
			out[i] = slotHeld
		default:
			out[i] = slotRanOut
		}
	}
	return out, nil
}

// activitySlotTakes bounds how often a claimer reads a key's slots again
// after another claimer took the slot it chose.
const activitySlotTakes = 8

// takeActivitySlot takes a free slot of task's key for the claim next
// (its task, token and end set), and returns its number; ok is false when
// the key has its limit of held slots (or other claimers kept taking the
// slots it chose).
func (s *Store) takeActivitySlot(ctx context.Context, t *provider.ActivityTask, next *stepDoc, now time.Time) (slot int, ok bool, err error) {
	key, limit := t.ConcurrencyKey, max(t.ConcurrencyLimit, 1)
	nowN := provider.UnixNanos(now)
	for range activitySlotTakes {
		slots, err := s.activitySlots(ctx, key)
		if err != nil {
			return 0, false, err
		}
		states, err := s.slotStates(ctx, slots, nowN)
		if err != nil {
			return 0, false, err
		}
		held := 0
		for _, st := range states {
			if st == slotHeld {
				held++
			}
		}
		if held >= limit {
			return 0, false, nil
		}
		var free []int
		for i := range limit {
			if states[i] != slotHeld {
				free = append(free, i)
			}
		}
		if len(free) == 0 {
			// Held slots past this task's limit (a task of the key with
			// a higher limit holds them): none below it is free.
			return 0, false, nil
		}
		i := free[rand.IntN(len(free))]
		prev := slots[i]
		doc := &activitySlotDoc{Key: key, Slot: i, Version: 1, Task: next.Task, Token: next.Token, Until: next.Until}
		if prev != nil {
			doc.Version = prev.Version + 1
		}
		doc.ID = activitySlotID(key, i, doc.Version)
		won, err := insertIgnoringDuplicate(ctx, s.c.activitySlots, doc.ID, doc)
		if err != nil {
			return 0, false, fmt.Errorf("slot %d of %s: %w", i, key, err)
		}
		if !won {
			continue
		}
		// A version deleted as old and taken again by a claimer that
		// read long ago does not count: a newer one exists.
		err = s.c.activitySlots.FindOne(ctx, filter("k", key, "s", i, "n", filter("$gt", doc.Version)), options.FindOne().SetProjection(filter("_id", 1))).Err()
		if err == nil {
			if _, err := s.c.activitySlots.DeleteOne(ctx, filter("_id", doc.ID)); err != nil {
				return 0, false, fmt.Errorf("slot %d of %s: %w", i, key, translate(err))
			}
			continue
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return 0, false, fmt.Errorf("slot %d of %s: %w", i, key, translate(err))
		}
		if states[i] == slotRanOut {
			// The claim that ran out may have been extended by its
			// owner's heartbeat since it was read; the heartbeat checks
			// the slot after it writes, so reading the claim after the
			// slot's insert sees the extension or the heartbeat sees the
			// insert. An extended claim gets its slot back.
			again, err := s.slotStates(ctx, map[int]*activitySlotDoc{i: prev}, nowN)
			if err != nil {
				return 0, false, err
			}
			if again[i] == slotHeld {
				back := *prev
				back.Version = doc.Version + 1
				back.ID = activitySlotID(key, i, back.Version)
				if _, err := insertIgnoringDuplicate(ctx, s.c.activitySlots, back.ID, &back); err != nil {
					return 0, false, fmt.Errorf("slot %d of %s: %w", i, key, err)
				}
				continue
			}
		}
		if _, err := s.c.activitySlots.DeleteMany(ctx, filter("k", key, "s", i, "n", filter("$lt", doc.Version))); err != nil {
			s.log.Warn("chronicle mongo: clean up old slot versions", "key", key, "slot", i, "err", err)
		}
		return i, true, nil
	}
	return 0, false, nil
}

// holdsSlot reports whether slot of key names the claim token.
func (s *Store) holdsSlot(ctx context.Context, key string, slot int, token string) (bool, error) {
	var d activitySlotDoc
	err := s.c.activitySlots.FindOne(ctx, filter("k", key, "s", slot), options.FindOne().SetSort(filter("k", 1, "s", 1, "n", -1))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("slot %d of %s: %w", slot, key, translate(err))
	}
	return d.Token == token, nil
}

// CountClaims implements provider.FlowStore: the slots of key held by a
// live claim at now.
func (s *Store) CountClaims(ctx context.Context, key string, now time.Time) (int, error) {
	slots, err := s.activitySlots(ctx, key)
	if err != nil {
		return 0, err
	}
	states, err := s.slotStates(ctx, slots, provider.UnixNanos(now))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range states {
		if st == slotHeld {
			n++
		}
	}
	return n, nil
}

// Rate limits: token j of a limit's key in a window is a document by
// (key, window start, j), for j in [0, tokens). A claim takes a token by
// inserting one that is not there yet, and gives it back (deletes it)
// when it then does not claim the task; a claimer that dies between
// taking a token and its claim wastes that token. The first token of a
// window deletes the key's earlier windows.

// rateTokenDoc is a token taken from a rate limit's window.
type rateTokenDoc struct {
	ID     string `bson:"_id"`
	Key    string `bson:"k"`
	Window int64  `bson:"w"`
	N      int    `bson:"j"`
}

// takeToken takes a token of r in the window of now and returns its
// document id, or "" when the window has none left.
func (s *Store) takeToken(ctx context.Context, r *provider.RateLimit, now time.Time) (string, error) {
	w := provider.UnixNanos(r.Window(now))
	f := filter("k", r.Key, "w", w)
	n, err := s.c.rateTokens.CountDocuments(ctx, f)
	if err != nil {
		return "", fmt.Errorf("rate limit %s: %w", r.Key, translate(err))
	}
	try := func(j int) (string, bool, error) {
		tid := id(r.Key, pad(w), pad(int64(j)))
		ok, err := insertIgnoringDuplicate(ctx, s.c.rateTokens, tid, &rateTokenDoc{ID: tid, Key: r.Key, Window: w, N: j})
		if err != nil {
			return "", false, fmt.Errorf("rate limit %s: %w", r.Key, err)
		}
		if ok && j == 0 {
			if _, err := s.c.rateTokens.DeleteMany(ctx, filter("k", r.Key, "w", filter("$lt", w))); err != nil {
				s.log.Warn("chronicle mongo: clean up old rate windows", "key", r.Key, "err", err)
			}
		}
		return tid, ok, nil
	}
	for j := int(n); j < r.Tokens; j++ {
		tid, ok, err := try(j)
		if ok || err != nil {
			return tid, err
		}
	}
	// Tokens given back leave gaps below the count.
	cur, err := s.c.rateTokens.Find(ctx, f, options.Find().SetProjection(filter("j", 1)))
	if err != nil {
		return "", fmt.Errorf("rate limit %s: %w", r.Key, translate(err))
	}
	var docs []rateTokenDoc
	if err := cur.All(ctx, &docs); err != nil {
		return "", fmt.Errorf("rate limit %s: %w", r.Key, translate(err))
	}
	taken := map[int]bool{}
	for _, d := range docs {
		taken[d.N] = true
	}
	for j := range r.Tokens {
		if taken[j] {
			continue
		}
		tid, ok, err := try(j)
		if ok || err != nil {
			return tid, err
		}
	}
	return "", nil
}

// giveBack deletes tokens taken for a claim that was not made.
func (s *Store) giveBack(ctx context.Context, tokens []string) {
	if len(tokens) == 0 {
		return
	}
	if _, err := s.c.rateTokens.DeleteMany(context.WithoutCancel(ctx), filter("_id", filter("$in", tokens))); err != nil {
		s.log.Warn("chronicle mongo: give back rate tokens", "err", err)
	}
}

// claimCall is the state of one ClaimActivity call: the keys and limits
// it found full, whose tasks it passes over.
type claimCall struct {
	p         *provider.ClaimActivityParams
	full      map[string]bool
	exhausted map[string]bool
}

// exclusions narrows the claim query to tasks of keys not found full and
// of limits not found exhausted.
func (c *claimCall) exclusions(f bson.D) bson.D {
	if len(c.full) > 0 {
		keys := make([]string, 0, len(c.full))
		for k := range c.full {
			keys = append(keys, k)
		}
		f = append(f, bson.E{Key: "ck", Value: filter("$nin", keys)})
	}
	var nor bson.A
	for i := range c.p.Rates {
		r := &c.p.Rates[i]
		if !c.exhausted[r.Key] {
			continue
		}
		m := bson.D{}
		if r.Activity != "" {
			m = append(m, bson.E{Key: "an", Value: r.Activity})
		}
		if r.Queue != "" {
			m = append(m, bson.E{Key: "q", Value: r.Queue})
		}
		nor = append(nor, m)
	}
	if len(nor) > 0 {
		f = append(f, bson.E{Key: "$nor", Value: nor})
	}
	return f
}

// gate takes what the claim of task t needs besides its step: a token of
// each rate limit that matches it and a slot of its concurrency key. It
// returns the tokens taken and ok; when ok is false it took nothing (it
// gave back what it took) and marked the key or limit that stopped it.
func (s *Store) gate(ctx context.Context, c *claimCall, t *provider.ActivityTask, next *stepDoc) (tokens []string, ok bool, err error) {
	var limits []*provider.RateLimit
	for i := range c.p.Rates {
		r := &c.p.Rates[i]
		if r.Matches(t) {
			if c.exhausted[r.Key] {
				return nil, false, nil
			}
			limits = append(limits, r)
		}
	}
	if t.ConcurrencyKey != "" && c.full[t.ConcurrencyKey] {
		return nil, false, nil
	}
	for _, r := range limits {
		tid, err := s.takeToken(ctx, r, c.p.Now)
		if err != nil || tid == "" {
			s.giveBack(ctx, tokens)
			if err == nil {
				c.exhausted[r.Key] = true
			}
			return nil, false, err
		}
		tokens = append(tokens, tid)
	}
	if t.ConcurrencyKey != "" {
		slot, won, err := s.takeActivitySlot(ctx, t, next, c.p.Now)
		if err != nil || !won {
			s.giveBack(ctx, tokens)
			if err == nil {
				c.full[t.ConcurrencyKey] = true
			}
			return nil, false, err
		}
		next.Key, next.Slot = t.ConcurrencyKey, slot
	}
	return tokens, true, nil
}

// validateRates checks the rate limits of a claim.
func validateRates(rates []provider.RateLimit) error {
	for i := range rates {
		if err := rates[i].Validate(); err != nil {
			return &Error{Err: fmt.Errorf("claim activity: %w", err)}
		}
	}
	return nil
}

// FlowSteps of a transactional round. A MongoDB transaction never waits
// for another: of two that write one document, the second fails at once
// (a write conflict), and a transaction reads a snapshot from its start.
// So the slot sets, which concurrent rounds of different instances
// change, are changed outside the round's transaction, by the inserts of
// peek-lock mode (which serialize without failing), and a round that
// fails undoes its acquires once it is rolled back: it releases the
// slots and places it added (waking the waiters the release names). A
// process that dies between an acquire and its round's end leaves the
// acquire, which the round's retry makes again and finds held (an
// acquire of a holder holds); a release is not undone, and its retry
// releases again and names the same waiters. Parks and wakes, written
// by the instance's own round or naming it, are in the transaction.

// AcquireSlot implements provider.FlowSteps.
func (t *roundTx) AcquireSlot(_ context.Context, p *provider.AcquireSlotParams) (bool, error) {
	// A write the round cannot take back in part (see AbandonMessages).
	t.wrote = true
	held, added, err := t.s.acquireSlot(t.outer, p)
	if added {
		key, holder := p.Key, p.Holder
		t.undo = append(t.undo, func(ctx context.Context) error {
			wake, err := t.s.releaseSlot(ctx, &provider.ReleaseSlotParams{Key: key, Holder: holder})
			if err != nil {
				return err
			}
			woke, err := t.s.wake(ctx, wake)
			if woke {
				t.s.notify(provider.QueueOrchestration)
			}
			return err
		})
	}
	return held, err
}

// ReleaseSlot implements provider.FlowSteps.
func (t *roundTx) ReleaseSlot(_ context.Context, p *provider.ReleaseSlotParams) ([]string, error) {
	t.wrote = true
	return t.s.releaseSlot(t.outer, p)
}

// ParkInstance implements provider.FlowSteps.
func (t *roundTx) ParkInstance(ctx context.Context, p *provider.ParkInstanceParams) error {
	t.wrote = true
	return t.s.park(ctx, p.InstanceID)
}

// WakeInstances implements provider.FlowSteps: the workers are woken
// after the commit.
func (t *roundTx) WakeInstances(ctx context.Context, p *provider.WakeInstancesParams) error {
	t.wrote = true
	woke, err := t.s.wake(ctx, p.InstanceIDs)
	t.enqueued = t.enqueued || woke
	return err
}
