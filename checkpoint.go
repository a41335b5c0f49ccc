package chronicle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Signer signs checkpoints; see [history.Signer] and [NewEd25519Signer].
type Signer = history.Signer

// Keyring holds the public keys that verify checkpoints, by key id.
type Keyring = history.Keyring

// Checkpoint is a signed commitment to instance heads; see
// [history.Checkpoint] and docs/audit.md.
type Checkpoint = history.Checkpoint

// CheckpointProof is a checkpoint as an export carries it, with one
// instance's leaf and inclusion proof.
type CheckpointProof = history.CheckpointProof

// NewEd25519Signer returns a [Signer] of an Ed25519 private key.
var NewEd25519Signer = history.NewEd25519Signer

// CheckpointOptions turn on signed checkpoints ([Options.Checkpoints]).
type CheckpointOptions struct {
	// Signer signs the checkpoints. Required.
	Signer Signer
	// Interval is the longest a committed round's head waits for a
	// checkpoint while Run runs. Default 1m.
	Interval time.Duration
	// EndDelay is how soon after an execution ends a checkpoint is
	// written; executions that end meanwhile share it. Default 1s.
	EndDelay time.Duration
}

func (o *CheckpointOptions) validate() error {
	switch {
	case o.Signer == nil:
		return errors.New("Checkpoints.Signer is nil")
	case history.ValidateID("key id", o.Signer.KeyID()) != nil:
		return fmt.Errorf("Checkpoints.Signer has an invalid key id %q", o.Signer.KeyID())
	case o.Interval < 0 || o.EndDelay < 0:
		return errors.New("Checkpoints.Interval and EndDelay must not be negative")
	}
	return nil
}

func (o CheckpointOptions) withDefaults() CheckpointOptions {
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	if o.EndDelay == 0 {
		o.EndDelay = time.Second
	}
	return o
}

// ErrCheckpointsOff is returned by [Engine.Checkpoint] when the engine has
// no [Options.Checkpoints].
var ErrCheckpointsOff = errors.New("chronicle: checkpoints are not enabled")

// checkpointer collects the heads of committed rounds until a checkpoint
// covers them. It lives in one process: heads a process committed and did
// not checkpoint before it died are found again by the sweep at the start
// of Run (see docs/audit.md).
type checkpointer struct {
	opts CheckpointOptions
	// supported is set when the store is a provider.CheckpointStore.
	supported bool

	mu      sync.Mutex
	pending map[string]provider.Head
	// ended is set when an execution ended since the last checkpoint.
	ended bool
	wake  chan struct{}
	// write serializes this process's checkpoint writes.
	write sync.Mutex
}

func newCheckpointer(o *CheckpointOptions, store provider.Store) *checkpointer {
	if o == nil {
		return nil
	}
	_, supported := store.(provider.CheckpointStore)
	return &checkpointer{opts: o.withDefaults(), supported: supported, pending: map[string]provider.Head{}, wake: make(chan struct{}, 1)}
}

// note records an instance's head, keeping the later of two.
func (c *checkpointer) note(id string, h provider.Head, ended bool) {
	c.mu.Lock()
	if old, ok := c.pending[id]; !ok || h.Seq >= old.Seq {
		c.pending[id] = h
	}
	c.ended = c.ended || ended
	c.mu.Unlock()
	if ended {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// take empties the pending heads and returns them as leaves.
func (c *checkpointer) take() []history.CheckpointLeaf {
	c.mu.Lock()
	defer c.mu.Unlock()
	leaves := make([]history.CheckpointLeaf, 0, len(c.pending))
	for id, h := range c.pending {
		leaves = append(leaves, history.CheckpointLeaf{InstanceID: id, Seq: h.Seq, Hash: h.Hash})
	}
	clear(c.pending)
	c.ended = false
	return leaves
}

// putBack returns heads a failed checkpoint did not store.
func (c *checkpointer) putBack(leaves []history.CheckpointLeaf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leaves {
		if old, ok := c.pending[l.InstanceID]; !ok || l.Seq > old.Seq {
			c.pending[l.InstanceID] = provider.Head{Seq: l.Seq, Hash: l.Hash}
		}
	}
}

func (e *Engine) checkpointStore() (provider.CheckpointStore, error) {
	return capability[provider.CheckpointStore](e.store, "provider.CheckpointStore")
}

// noteHead gives the checkpointer the head of a committed round. Heads
// are not kept when the store cannot keep checkpoints: nothing would ever
// take them.
func (e *Engine) noteHead(id string, h *provider.Head, status Status) {
	if e.cp == nil || !e.cp.supported || h == nil || h.Seq == 0 {
		return
	}
	e.cp.note(id, *h, status.Terminal())
}

// Checkpoint writes a checkpoint now, covering the heads of the rounds
// this engine committed since its last one, signed with
// Options.Checkpoints.Signer, and returns it; it returns nil, nil when no
// head waits. Run writes them on its own (periodically, when an execution
// ends, and when it stops); Purge writes one before it deletes. It
// returns ErrCheckpointsOff without Options.Checkpoints and an
// *UnsupportedError when the store is not a [provider.CheckpointStore].
func (e *Engine) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	e.cp.write.Lock()
	defer e.cp.write.Unlock()
	leaves := e.cp.take()
	if len(leaves) == 0 {
		return nil, nil
	}
	c, err := e.appendCheckpoint(ctx, s, leaves)
	if err != nil {
		e.cp.putBack(leaves)
		return nil, err
	}
	return c, nil
}

// appendCheckpoint seals and appends a checkpoint after the latest,
// reading the latest again when another process appended first.
func (e *Engine) appendCheckpoint(ctx context.Context, s provider.CheckpointStore, leaves []history.CheckpointLeaf) (*Checkpoint, error) {
	for attempt := 0; ; attempt++ {
		c := &Checkpoint{Number: 1, At: e.now(), Leaves: slices.Clone(leaves)}
		latest, err := s.LatestCheckpoint(ctx)
		switch {
		case err == nil:
			c.Number, c.PrevHash = latest.Number+1, latest.Hash
		case !errors.Is(err, provider.ErrNotFound):
			return nil, err
		}
		if err := c.Seal(e.cp.opts.Signer); err != nil {
			return nil, err
		}
		err = s.AppendCheckpoint(ctx, c)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, provider.ErrConflict) || attempt == 9 {
			return nil, err
		}
	}
}

// runCheckpoints is Run's checkpoint writer: a sweep first, then a
// checkpoint every Interval, EndDelay after an execution ended, and a last
// one when ctx ends.
func (e *Engine) runCheckpoints(ctx context.Context) {
	if _, err := e.checkpointStore(); err != nil {
		e.log.Warn("checkpoints are enabled but the store cannot keep them", slog.Any("error", err))
		return
	}
	if err := e.sweepHeads(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn("checkpoint sweep failed; heads committed by a process that died may stay uncovered until they change", slog.Any("error", err))
	}
	o := e.cp.opts
	for ctx.Err() == nil {
		e.sleep(ctx, e.cp.wake, o.Interval)
		if ctx.Err() == nil {
			e.cp.mu.Lock()
			ended := e.cp.ended
			e.cp.mu.Unlock()
			if ended {
				// Let executions that end together share one checkpoint.
				e.sleep(ctx, nil, o.EndDelay)
			}
		}
		wctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
		}
		if _, err := e.Checkpoint(wctx); err != nil {
			e.log.Warn("checkpoint failed; it will be retried", slog.Any("error", err))
		}
	}
}

// SweepCheckpoint writes a checkpoint as [Engine.Checkpoint] does, first
// adding the heads of every instance changed since shortly before the
// latest checkpoint (of every instance when there is none): heads that a
// process committed and did not checkpoint before it died. Run does it
// when it starts; an operator does it when checkpoints are first turned
// on. It needs a [provider.QueryStore] besides the CheckpointStore.
func (e *Engine) SweepCheckpoint(ctx context.Context) (*Checkpoint, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	if err := e.sweepHeads(ctx); err != nil {
		return nil, err
	}
	return e.Checkpoint(ctx)
}

// sweepHeads notes the heads of the instances changed since shortly
// before the latest checkpoint (every instance when there is none): the
// heads a process committed and did not checkpoint before it died. It
// needs a [provider.QueryStore].
func (e *Engine) sweepHeads(ctx context.Context) error {
	s, err := e.checkpointStore()
	if err != nil {
		return err
	}
	var since time.Time
	latest, err := s.LatestCheckpoint(ctx)
	switch {
	case err == nil:
		// A round of another process may commit up to a checkpoint
		// period before a checkpoint that does not cover it.
		since = latest.At.Add(-2*(e.cp.opts.Interval+e.cp.opts.EndDelay) - time.Minute)
	case !errors.Is(err, provider.ErrNotFound):
		return err
	}
	after := ""
	for {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{AfterID: after, Limit: 500})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.UpdatedAt.Before(since) || r.LastSeq == 0 {
				continue
			}
			tail, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: r.InstanceID, FromSeq: r.LastSeq})
			if err != nil {
				return err
			}
			if n := len(tail); n > 0 {
				e.cp.note(r.InstanceID, provider.Head{Seq: tail[n-1].Seq, Hash: tail[n-1].Hash}, false)
			}
		}
		if len(recs) < 500 {
			return nil
		}
		after = recs[len(recs)-1].InstanceID
	}
}

// ListCheckpoints returns stored checkpoints with their leaves, in
// number order, numbers above afterNumber, at most limit (zero means 100).
func (e *Engine) ListCheckpoints(ctx context.Context, afterNumber int64, limit int) ([]Checkpoint, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	return s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: afterNumber, Limit: limit})
}

// CheckpointProofs returns the proofs of every stored checkpoint that
// covers an instance, oldest first: what an export carries so that it
// verifies offline ([VerifyExport]).
func (e *Engine) CheckpointProofs(ctx context.Context, instanceID string) ([]CheckpointProof, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	var out []CheckpointProof
	var after int64
	for {
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: after, InstanceID: instanceID, Limit: 100})
		if err != nil {
			return nil, err
		}
		for i := range page {
			if p, ok := history.NewCheckpointProof(&page[i], instanceID); ok {
				out = append(out, p)
			}
		}
		if len(page) < 100 {
			return out, nil
		}
		after = page[len(page)-1].Number
	}
}

// Errors of checkpoint verification; the typed errors below match them
// with errors.Is.
var (
	// ErrCheckpointMismatch: a stored or exported history differs from
	// what a signed checkpoint covers, or was deleted without a purge.
	ErrCheckpointMismatch = errors.New("chronicle: history does not match its signed checkpoint")
	// ErrCheckpointGap: the chain of checkpoints misses one, or one does
	// not name its predecessor's hash, or does not verify.
	ErrCheckpointGap = errors.New("chronicle: checkpoint chain broken")
	// ErrNotCovered: an export carries no checkpoint.
	ErrNotCovered = errors.New("chronicle: no checkpoint covers the history")
)

// CheckpointMismatchError names an instance whose history is not the one
// a signed checkpoint covers.
type CheckpointMismatchError struct {
	InstanceID string
	// Seq is the covered seq whose stored event differs (or is missing);
	// the change lies at or before it, after GoodSeq.
	Seq int64
	// GoodSeq is the highest covered seq below Seq that still matches (0:
	// none).
	GoodSeq int64
	// Checkpoint is the number of the checkpoint that covers Seq.
	Checkpoint int64
	// Deleted is set when the history is gone and no tombstone of a purge
	// ends at the covered head.
	Deleted bool
}

// Error implements error.
func (e *CheckpointMismatchError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("chronicle: %s was deleted without a purge: checkpoint %d covers it up to seq %d", e.InstanceID, e.Checkpoint, e.Seq)
	}
	return fmt.Sprintf("chronicle: history of %s differs from checkpoint %d at seq %d (matches up to seq %d)", e.InstanceID, e.Checkpoint, e.Seq, e.GoodSeq)
}

// Is matches [ErrCheckpointMismatch].
func (e *CheckpointMismatchError) Is(target error) bool { return target == ErrCheckpointMismatch }

// CheckpointGapError reports a broken link of the checkpoint chain.
type CheckpointGapError struct {
	// Number is the checkpoint found wrong, or the first missing.
	Number int64
	Reason string
	// Err is the checkpoint's own verification error
	// (history.ErrBadSignature, ErrUnknownKey, ErrMalformedCheckpoint),
	// nil for a missing checkpoint or a previous-hash mismatch.
	Err error
}

// Error implements error.
func (e *CheckpointGapError) Error() string {
	return fmt.Sprintf("chronicle: checkpoint %d: %s", e.Number, e.Reason)
}

// Is matches [ErrCheckpointGap].
func (e *CheckpointGapError) Is(target error) bool { return target == ErrCheckpointGap }

// Unwrap returns the checkpoint's own verification error.
func (e *CheckpointGapError) Unwrap() error { return e.Err }

// CheckpointResult is the checkpoint verification of one instance.
type CheckpointResult struct {
	InstanceID string
	// Events counts the stored events.
	Events int
	// CoveredSeq is the highest seq a valid checkpoint covers (0: none;
	// events after it wait for the next checkpoint), Checkpoint its
	// number.
	CoveredSeq int64
	Checkpoint int64
	// Purged is set for an instance covered by a checkpoint and gone
	// with a tombstone that ends at the covered head.
	Purged bool
	// Err is nil, a *history.ChainError (the plain chain is broken) or a
	// *CheckpointMismatchError.
	Err error
}

// CheckpointReport is what [Engine.VerifyCheckpoints] found.
type CheckpointReport struct {
	// Checkpoints counts the stored checkpoints, Latest is the highest
	// number.
	Checkpoints int
	Latest      int64
	// Gaps are the broken links of the checkpoint chain.
	Gaps []*CheckpointGapError
	// Instances are the stored instances and those a checkpoint covers,
	// by id.
	Instances []CheckpointResult
}

// OK reports whether the chain of checkpoints holds and every instance
// matches them.
func (r *CheckpointReport) OK() bool {
	if len(r.Gaps) > 0 {
		return false
	}
	for i := range r.Instances {
		if r.Instances[i].Err != nil {
			return false
		}
	}
	return true
}

// covered is a leaf of a valid checkpoint.
type covered struct {
	number int64
	seq    int64
	hash   []byte
}

// VerifyCheckpoints checks the store's history against its signed
// checkpoints with keys: the checkpoint chain (numbers without gaps, each
// naming its predecessor's hash, each signed by a key of keys), then the
// hash chain of every instance and every head a valid checkpoint covers.
// A history rewritten with recomputed hashes, deleted without a purge, or
// a missing checkpoint is reported, not returned as an error; the error is
// the store's. It needs a [provider.CheckpointStore], a
// [provider.QueryStore] and a [provider.PurgeStore] (tombstones).
func (e *Engine) VerifyCheckpoints(ctx context.Context, keys *Keyring) (*CheckpointReport, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	if keys == nil || keys.Len() == 0 {
		return nil, invalid("VerifyCheckpoints needs a keyring with at least one key")
	}
	rep := &CheckpointReport{}
	leaves := map[string][]covered{}
	var (
		prev  []byte
		after int64
	)
	for {
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: after, Limit: 100})
		if err != nil {
			return nil, err
		}
		for i := range page {
			c := &page[i]
			rep.Checkpoints++
			want := rep.Latest + 1
			rep.Latest = c.Number
			switch {
			case c.Number != want:
				rep.Gaps = append(rep.Gaps, &CheckpointGapError{Number: want, Reason: fmt.Sprintf("missing: the chain goes from %d to %d", want-1, c.Number)})
			case !bytes.Equal(c.PrevHash, prev):
				rep.Gaps = append(rep.Gaps, &CheckpointGapError{Number: c.Number, Reason: fmt.Sprintf("its previous hash is not the hash of checkpoint %d", want-1)})
			}
			prev = c.Hash
			if err := c.Verify(keys); err != nil {
				rep.Gaps = append(rep.Gaps, &CheckpointGapError{Number: c.Number, Reason: err.Error(), Err: err})
				continue // its leaves prove nothing
			}
			for _, l := range c.Leaves {
				leaves[l.InstanceID] = append(leaves[l.InstanceID], covered{number: c.Number, seq: l.Seq, hash: l.Hash})
			}
		}
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].Number
	}
	ids := map[string]bool{}
	for id := range leaves {
		ids[id] = true
	}
	after2 := ""
	for {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{AfterID: after2, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids[r.InstanceID] = true
		}
		if len(recs) < 500 {
			break
		}
		after2 = recs[len(recs)-1].InstanceID
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		res, err := e.verifyCovered(ctx, id, leaves[id])
		if err != nil {
			return nil, err
		}
		rep.Instances = append(rep.Instances, res)
	}
	return rep, nil
}

// verifyCovered checks one instance's stored history against the leaves
// that cover it, in checkpoint order.
func (e *Engine) verifyCovered(ctx context.Context, id string, cov []covered) (CheckpointResult, error) {
	res := CheckpointResult{InstanceID: id}
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	var broken *history.ChainError
	switch {
	case errors.As(err, &broken):
		res.Err = broken
		return res, nil
	case err != nil:
		return res, err
	}
	res.Events = len(events)
	if err := history.Verify(events); err != nil {
		res.Err = err
		return res, nil
	}
	var tombs []provider.Tombstone
	if len(cov) > 0 {
		if tombs, err = e.listTombstones(ctx, id); err != nil && !errors.Is(err, ErrUnsupported) {
			return res, err
		}
	}
	purged := func(c covered) bool {
		for _, t := range tombs {
			if t.LastSeq == c.seq && bytes.Equal(t.LastHash, c.hash) {
				return true
			}
		}
		return false
	}
	if len(events) == 0 && len(cov) > 0 {
		last := cov[len(cov)-1]
		if purged(last) {
			res.Purged, res.CoveredSeq, res.Checkpoint = true, last.seq, last.number
			return res, nil
		}
		res.Err = &CheckpointMismatchError{InstanceID: id, Seq: last.seq, Checkpoint: last.number, Deleted: true}
		return res, nil
	}
	var good int64
	for _, c := range cov {
		if c.seq >= 1 && c.seq <= int64(len(events)) && bytes.Equal(events[c.seq-1].Hash, c.hash) {
			good = max(good, c.seq)
			res.CoveredSeq, res.Checkpoint = c.seq, c.number
			continue
		}
		if purged(c) {
			continue // a history purged before the id was used again
		}
		if res.Err == nil {
			res.Err = &CheckpointMismatchError{InstanceID: id, Seq: c.seq, GoodSeq: good, Checkpoint: c.number}
		}
	}
	if m, ok := res.Err.(*CheckpointMismatchError); ok {
		// The highest matching covered seq below the mismatch.
		m.GoodSeq = 0
		for _, c := range cov {
			if c.seq < m.Seq && c.seq <= int64(len(events)) && bytes.Equal(events[c.seq-1].Hash, c.hash) {
				m.GoodSeq = max(m.GoodSeq, c.seq)
			}
		}
	}
	return res, nil
}

// VerifyExport checks an exported or archived history offline, with keys
// only: its hash chain from seq 1, the signature of every checkpoint it
// carries, each leaf's inclusion proof, and that each covered head is an
// event of the history. It returns nil, a *history.ChainError, a
// *CheckpointMismatchError naming the instance and seq, an error wrapping
// ErrNotCovered when the export carries no checkpoint, or one wrapping
// history.ErrUnknownKey, ErrBadSignature or ErrMalformedCheckpoint.
func VerifyExport(events []Event, proofs []CheckpointProof, keys *Keyring) error {
	if err := history.Verify(events); err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: the export holds no events", ErrNotCovered)
	}
	id := events[0].InstanceID
	if len(proofs) == 0 {
		return fmt.Errorf("%w: the export of %s carries no checkpoint", ErrNotCovered, id)
	}
	var good int64
	var first *CheckpointMismatchError
	for i := range proofs {
		p := &proofs[i]
		if err := p.Verify(keys); err != nil {
			return err
		}
		if p.Leaf.InstanceID != id {
			return fmt.Errorf("%w: checkpoint %d proves a leaf of %s, the export holds %s", history.ErrMalformedCheckpoint, p.Checkpoint.Number, p.Leaf.InstanceID, id)
		}
		seq := p.Leaf.Seq
		if seq >= 1 && seq <= int64(len(events)) && bytes.Equal(events[seq-1].Hash, p.Leaf.Hash) {
			good = max(good, seq)
			continue
		}
		if first == nil || seq < first.Seq {
			first = &CheckpointMismatchError{InstanceID: id, Seq: seq, Checkpoint: p.Checkpoint.Number}
		}
	}
	if first != nil {
		first.GoodSeq = 0
		for i := range proofs {
			if l := proofs[i].Leaf; l.Seq < first.Seq && l.Seq <= int64(len(events)) && bytes.Equal(events[l.Seq-1].Hash, l.Hash) {
				first.GoodSeq = max(first.GoodSeq, l.Seq)
			}
		}
		return first
	}
	return nil
}

// proofsKey keys the checkpoint proofs Purge hands its archive callback.
type proofsKey struct{}

// ArchiveProofs returns the checkpoint proofs of the instance that Purge
// hands an [ArchiveFunc] through its ctx (nil without checkpoints):
// [ArchiveJSONL] writes them after the events.
func ArchiveProofs(ctx context.Context) []CheckpointProof {
	p, _ := ctx.Value(proofsKey{}).([]CheckpointProof)
	return p
}

// checkpointBeforePurge writes a checkpoint covering the final heads of
// the ended instances among ids, so that their tombstones are covered.
func (e *Engine) checkpointBeforePurge(ctx context.Context, ids []string) error {
	if e.cp == nil {
		return nil
	}
	if _, err := e.checkpointStore(); err != nil {
		return err
	}
	for _, id := range ids {
		if e.validateID("instance id", id) != nil {
			continue
		}
		rec, err := e.store.GetInstance(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !rec.Status.Terminal() || rec.LastSeq == 0 {
			continue
		}
		tail, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: rec.LastSeq})
		if err != nil {
			return err
		}
		if n := len(tail); n > 0 {
			e.cp.note(id, provider.Head{Seq: tail[n-1].Seq, Hash: tail[n-1].Hash}, false)
		}
	}
	_, err := e.Checkpoint(ctx)
	return err
}
