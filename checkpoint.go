package chronicle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/tlog"
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
	// SweepInterval is how often Run sweeps the store for heads no
	// checkpoint covers yet (those of a process that died before its
	// checkpoint), besides the sweep when it starts. Default 1h.
	SweepInterval time.Duration
	// Keys holds the public keys of earlier signers (after a rotation),
	// so that a sweep checks their signatures too; the signer's own key
	// is always checked. A sweep checks the checkpoints of a key it does
	// not hold for their shape and chain only. Optional.
	Keys *Keyring
	// Publishers receive the signed note of the checkpoint log after
	// every checkpoint the engine stores (docs/audit.md, "Publishing
	// checkpoints"); a failure is logged and the next checkpoint
	// publishes again. Optional.
	Publishers []Publisher
	// Origin names the checkpoint log in its notes, e.g.
	// "chronicle.example/claims-prod". Default: [DefaultOrigin] of the
	// first checkpoint.
	Origin string
}

func (o *CheckpointOptions) validate() error {
	switch {
	case o.Signer == nil:
		return errors.New("Checkpoints.Signer is nil")
	case history.ValidateID("key id", o.Signer.KeyID()) != nil:
		return fmt.Errorf("Checkpoints.Signer has an invalid key id %q", o.Signer.KeyID())
	case o.Interval < 0 || o.EndDelay < 0 || o.SweepInterval < 0:
		return errors.New("Checkpoints.Interval, EndDelay and SweepInterval must not be negative")
	case o.Origin != "" && tlog.ValidateOrigin(o.Origin) != nil:
		return fmt.Errorf("Checkpoints.Origin: %w", tlog.ValidateOrigin(o.Origin))
	case slices.Contains(o.Publishers, nil):
		return errors.New("Checkpoints.Publishers holds a nil publisher")
	}
	if _, err := o.keyring(); err != nil {
		return fmt.Errorf("Checkpoints.Keys: %w", err)
	}
	return nil
}

// keyring returns Keys with the signer's public key added.
func (o *CheckpointOptions) keyring() (*Keyring, error) {
	k := &Keyring{}
	if o.Keys != nil {
		for _, id := range o.Keys.KeyIDs() {
			pub, _ := o.Keys.Key(id)
			if err := k.Add(id, pub); err != nil {
				return nil, err
			}
		}
	}
	if err := k.Add(o.Signer.KeyID(), o.Signer.Public()); err != nil {
		return nil, err
	}
	return k, nil
}

func (o CheckpointOptions) withDefaults() CheckpointOptions {
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	if o.EndDelay == 0 {
		o.EndDelay = time.Second
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = time.Hour
	}
	return o
}

// ErrCheckpointsOff is returned by [Engine.Checkpoint] when the engine has
// no [Options.Checkpoints].
var ErrCheckpointsOff = errors.New("chronicle: checkpoints are not enabled")

// checkpointer collects the heads of committed rounds until a checkpoint
// covers them. It lives in one process: heads a process committed and did
// not checkpoint before it died are found again by the sweep, which
// compares every instance's head with the latest leaf the checkpoints
// hold for it (see docs/audit.md).
type checkpointer struct {
	opts CheckpointOptions
	// supported is set when the store is a provider.CheckpointStore.
	supported bool

	mu      sync.Mutex
	pending map[string]history.CheckpointLeaf
	// ended is set when an execution ended since the last checkpoint.
	ended bool
	wake  chan struct{}
	// write serializes this process's checkpoint writes.
	write sync.Mutex

	// sweep is what the sweeps have read of the checkpoint chain.
	sweepMu sync.Mutex
	sweep   sweepState

	// log is the checkpoint log the publishers receive.
	log logState
}

// sweepState is the checkpoint chain as far as a sweep has read and
// checked it: the number and hash of the last checkpoint read and, by
// instance, the latest leaf.
type sweepState struct {
	number int64
	hash   []byte
	latest map[string]covered
}

func newCheckpointer(o *CheckpointOptions, store provider.Store) *checkpointer {
	if o == nil {
		return nil
	}
	_, supported := store.(provider.CheckpointStore)
	return &checkpointer{opts: o.withDefaults(), supported: supported, pending: map[string]history.CheckpointLeaf{}, wake: make(chan struct{}, 1)}
}

// note records an instance's head, keeping the later of two.
func (c *checkpointer) note(id string, h provider.Head, ended bool) {
	c.mu.Lock()
	if old, ok := c.pending[id]; !ok || h.Seq >= old.Seq {
		c.pending[id] = history.CheckpointLeaf{InstanceID: id, Seq: h.Seq, Hash: h.Hash}
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
	for _, l := range c.pending {
		leaves = append(leaves, l)
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
			c.pending[l.InstanceID] = l
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
// ends, and when it stops); Purge writes one with the tombstones of the
// instances it is about to delete. It returns ErrCheckpointsOff without
// Options.Checkpoints and an *UnsupportedError when the store is not a
// [provider.CheckpointStore].
func (e *Engine) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	c, err := e.writeCheckpoint(ctx, s)
	if c != nil {
		e.publishLogged(ctx)
	}
	return c, err
}

func (e *Engine) writeCheckpoint(ctx context.Context, s provider.CheckpointStore) (*Checkpoint, error) {
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

// runCheckpoints is Run's checkpoint writer: a sweep first and every
// SweepInterval, a checkpoint every Interval, EndDelay after an execution
// ended, and a last one when ctx ends.
func (e *Engine) runCheckpoints(ctx context.Context) {
	if _, err := e.checkpointStore(); err != nil {
		e.log.Warn("checkpoints are enabled but the store cannot keep them", slog.Any("error", err))
		return
	}
	o := e.cp.opts
	sweep := func() {
		err := e.sweepHeads(ctx)
		var refused *CheckpointRefusedError
		switch {
		case errors.As(err, &refused):
			e.log.Error("checkpoint sweep refused to sign: the stored history or checkpoints contradict what was signed; verify with the keyring", slog.Any("error", err))
		case err != nil && ctx.Err() == nil:
			e.log.Warn("checkpoint sweep failed; heads committed by a process that died stay uncovered until the next sweep", slog.Any("error", err))
		}
	}
	sweep()
	lastSweep := e.now()
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
		if ctx.Err() == nil && e.now().Sub(lastSweep) >= o.SweepInterval {
			sweep()
			lastSweep = e.now()
		}
		if ctx.Err() != nil {
			// Run writes the last checkpoint once its workers have
			// stopped, so that it covers their last rounds.
			return
		}
		if _, err := e.Checkpoint(ctx); err != nil {
			e.log.Warn("checkpoint failed; it will be retried", slog.Any("error", err))
		}
	}
}

// finalCheckpoint writes, when Run stops, the checkpoint of the heads its
// workers committed since the last one: after the workers have stopped,
// so that a round that committed just before the stop is covered, and by
// stopBy, so that Run keeps to its ShutdownTimeout.
func (e *Engine) finalCheckpoint(ctx context.Context, stopBy time.Time) {
	if e.cp == nil {
		return
	}
	if _, err := e.checkpointStore(); err != nil {
		return
	}
	if !time.Now().Before(stopBy) {
		e.log.Warn("no time left for the last checkpoint; the next sweep covers its heads")
		return
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), stopBy)
	defer cancel()
	if _, err := e.Checkpoint(wctx); err != nil {
		e.log.Warn("the last checkpoint failed; the next sweep covers its heads", slog.Any("error", err))
	}
}

// SweepCheckpoint writes a checkpoint as [Engine.Checkpoint] does, first
// adding the head of every instance whose history goes beyond the latest
// leaf the checkpoints hold for it: heads that a process committed and
// did not checkpoint before it died, however long ago. Run does it when it
// starts and every SweepInterval; an operator does it when checkpoints are
// first turned on. It needs a [provider.QueryStore] besides the
// CheckpointStore.
//
// A sweep signs only what extends what was signed before: it checks the
// chain of checkpoints it reads (numbers, previous hashes, every leaf
// present and giving the root, signatures of the keys it holds) and that
// each head it adds continues the instance's latest covered head. When the
// chain does not hold it signs nothing; an instance whose history no longer
// holds its covered head is left out. Either way it returns a
// *CheckpointRefusedError (after writing the checkpoint of the heads that
// passed).
func (e *Engine) SweepCheckpoint(ctx context.Context) (*Checkpoint, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	sweepErr := e.sweepHeads(ctx)
	var refused *CheckpointRefusedError
	if sweepErr != nil && !errors.As(sweepErr, &refused) {
		return nil, sweepErr
	}
	c, err := e.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return c, sweepErr
}

// ErrCheckpointRefused: a sweep found the stored checkpoints or a covered
// history contradicting what was signed, and did not sign over it.
var ErrCheckpointRefused = errors.New("chronicle: refused to sign over history that contradicts its checkpoints")

// CheckpointRefusedError is what a sweep found and would not sign over:
// a broken checkpoint chain (*CheckpointGapError) or instances whose
// history does not continue their latest covered head
// (*CheckpointMismatchError).
type CheckpointRefusedError struct {
	Problems []error
}

// Error implements error.
func (e *CheckpointRefusedError) Error() string {
	if len(e.Problems) == 0 {
		return ErrCheckpointRefused.Error()
	}
	more := ""
	if len(e.Problems) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(e.Problems)-1)
	}
	return fmt.Sprintf("%s: %s%s", ErrCheckpointRefused, strings.TrimPrefix(e.Problems[0].Error(), "chronicle: "), more)
}

// Is matches [ErrCheckpointRefused].
func (e *CheckpointRefusedError) Is(target error) bool { return target == ErrCheckpointRefused }

// Unwrap returns the problems found.
func (e *CheckpointRefusedError) Unwrap() []error { return e.Problems }

// readChain reads the checkpoints after those the sweeps have read,
// checking each as it goes, and records the latest leaf of each instance.
// A checkpoint that does not follow its predecessor, lacks leaves, does not
// give its root or bears a bad signature of a key the engine holds stops
// the reading: the state stays at the last good checkpoint and the
// problem is returned.
func (e *Engine) readChain(ctx context.Context, s provider.CheckpointStore) error {
	keys, err := e.cp.opts.keyring()
	if err != nil {
		return err
	}
	st := &e.cp.sweep
	if st.latest == nil {
		st.latest = map[string]covered{}
	}
	for {
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: st.number, Limit: 100})
		if err != nil {
			return err
		}
		for i := range page {
			c := &page[i]
			if gaps := checkLink(c, st.number, st.hash, keys, true); len(gaps) > 0 {
				return &CheckpointRefusedError{Problems: []error{gaps[0]}}
			}
			for _, l := range c.Leaves {
				if old, ok := st.latest[l.InstanceID]; ok && old.purged && !l.Purged && old.seq == l.Seq && bytes.Equal(old.hash, l.Hash) {
					continue // the head that tombstone ended, signed again late
				}
				st.latest[l.InstanceID] = covered{number: c.Number, seq: l.Seq, hash: l.Hash, purged: l.Purged}
			}
			st.number, st.hash = c.Number, c.Hash
		}
		if len(page) < 100 {
			return nil
		}
	}
}

// checkLink checks a checkpoint against its predecessor (number prev,
// hash prevHash) and on its own, returning what is wrong: a broken link
// (Err nil) and the checkpoint's own failure (Err set, its leaves then
// prove nothing). With shapeForUnknown, a checkpoint of a key not in keys
// is checked for its shape only.
func checkLink(c *Checkpoint, prev int64, prevHash []byte, keys *Keyring, shapeForUnknown bool) []*CheckpointGapError {
	var gaps []*CheckpointGapError
	switch {
	case c.Number != prev+1:
		gaps = append(gaps, &CheckpointGapError{Number: prev + 1, Reason: fmt.Sprintf("missing: the chain goes from %d to %d", prev, c.Number)})
	case !bytes.Equal(c.PrevHash, prevHash):
		gaps = append(gaps, &CheckpointGapError{Number: c.Number, Reason: fmt.Sprintf("its previous hash is not the hash of checkpoint %d", prev)})
	}
	var err error
	if _, known := keys.Key(c.KeyID); known || !shapeForUnknown {
		err = c.Verify(keys)
	} else {
		err = c.VerifyShape()
	}
	if err != nil {
		gaps = append(gaps, &CheckpointGapError{Number: c.Number, Reason: err.Error(), Err: err})
	}
	return gaps
}

// sweepHeads notes the head of every instance whose history goes beyond
// the latest leaf the checkpoints hold for it, when that history
// continues the leaf (see SweepCheckpoint). It needs a
// [provider.QueryStore].
func (e *Engine) sweepHeads(ctx context.Context) error {
	s, err := e.checkpointStore()
	if err != nil {
		return err
	}
	e.cp.sweepMu.Lock()
	defer e.cp.sweepMu.Unlock()
	if err := e.readChain(ctx, s); err != nil {
		return err
	}
	var problems []error
	after := ""
	for {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{AfterID: after, Limit: 500})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.LastSeq == 0 {
				continue
			}
			head, err := e.sweepHead(ctx, s, r.InstanceID, r.LastSeq)
			switch {
			case err != nil:
				var m *CheckpointMismatchError
				if !errors.As(err, &m) {
					return err
				}
				problems = append(problems, m)
			case head != nil:
				e.cp.note(r.InstanceID, *head, false)
			}
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].InstanceID
	}
	if len(problems) > 0 {
		return &CheckpointRefusedError{Problems: problems}
	}
	return nil
}

// sweepHead returns the head of an instance whose record is at lastSeq
// when no leaf covers it yet, nil when the latest leaf does, or a
// *CheckpointMismatchError when its history does not continue that leaf.
func (e *Engine) sweepHead(ctx context.Context, s provider.CheckpointStore, id string, lastSeq int64) (*provider.Head, error) {
	for reread := false; ; reread = true {
		c, ok := e.cp.sweep.latest[id]
		if ok && !c.purged && c.seq >= lastSeq {
			return nil, nil
		}
		from := lastSeq
		if ok && !c.purged {
			from = c.seq
		}
		tail, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: from})
		if err != nil {
			var broken *history.ChainError
			if errors.As(err, &broken) {
				return nil, &CheckpointMismatchError{InstanceID: id, Seq: from, Checkpoint: c.number}
			}
			return nil, err
		}
		if !ok || c.purged {
			// Never covered, or a new incarnation after a signed
			// tombstone: nothing signed to continue.
			if n := len(tail); n > 0 {
				return &provider.Head{Seq: tail[n-1].Seq, Hash: tail[n-1].Hash}, nil
			}
			return nil, nil
		}
		if len(tail) > 0 && tail[0].Seq == c.seq && bytes.Equal(tail[0].Hash, c.hash) && history.VerifyFrom(c.seq, c.hash, tail[1:]) == nil {
			h := &provider.Head{Seq: tail[len(tail)-1].Seq, Hash: tail[len(tail)-1].Hash}
			if h.Seq == c.seq {
				return nil, nil
			}
			return h, nil
		}
		if reread {
			return nil, &CheckpointMismatchError{InstanceID: id, Seq: c.seq, Checkpoint: c.number}
		}
		// A purge may have signed its tombstone, and the id started
		// again, since the chain was read.
		if err := e.readChain(ctx, s); err != nil {
			return nil, err
		}
	}
}

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
	// Deleted is set when the history is gone and no signed tombstone
	// leaf (of a checkpoint at or after the one covering Seq) explains it.
	Deleted bool
}

// Error implements error.
func (e *CheckpointMismatchError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("chronicle: %s was deleted without a purge: checkpoint %d covers it up to seq %d", e.InstanceID, e.Checkpoint, e.Seq)
	}
	return fmt.Sprintf("chronicle: history of %s rewritten after checkpoint %d: it differs at covered seq %d (matches up to seq %d)", e.InstanceID, e.Checkpoint, e.Seq, e.GoodSeq)
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
	// Purged is set for an instance whose history is gone, each of its
	// covered heads explained by a signed tombstone leaf (a purge the
	// checkpoints cover); CoveredSeq is then the latest tombstone's seq.
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
	purged bool
}

// VerifyCheckpoints checks the store's history against its signed
// checkpoints with keys: the checkpoint chain (numbers without gaps, each
// naming its predecessor's hash, each carrying all its leaves and signed
// by a key of keys), then the hash chain of every instance and every head
// a valid checkpoint covers. A history rewritten with recomputed hashes,
// deleted without a purge the checkpoints cover, or a missing checkpoint
// is reported, not returned as an error; the error is the store's. It
// trusts only what a signature covers: tombstone rows of the store
// explain nothing, signed tombstone leaves do. It needs a
// [provider.CheckpointStore] and a [provider.QueryStore].
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
			gaps := checkLink(c, rep.Latest, prev, keys, false)
			rep.Latest, prev = c.Number, c.Hash
			rep.Gaps = append(rep.Gaps, gaps...)
			if n := len(gaps); n > 0 && gaps[n-1].Err != nil {
				continue // its leaves prove nothing
			}
			for _, l := range c.Leaves {
				leaves[l.InstanceID] = append(leaves[l.InstanceID], covered{number: c.Number, seq: l.Seq, hash: l.Hash, purged: l.Purged})
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

// VerifyInstanceCheckpoints checks one instance as [Engine.VerifyCheckpoints]
// does, with the chain of checkpoints it rests on: it reads every
// checkpoint (a checkpoint missing leaves may have lost the instance's),
// keeping the leaves of this instance only, and returns the instance's
// result and the broken links of the chain. The console's chain badge
// uses it. It needs a [provider.CheckpointStore].
func (e *Engine) VerifyInstanceCheckpoints(ctx context.Context, keys *Keyring, instanceID string) (*CheckpointResult, []*CheckpointGapError, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, nil, err
	}
	if keys == nil || keys.Len() == 0 {
		return nil, nil, invalid("VerifyInstanceCheckpoints needs a keyring with at least one key")
	}
	var (
		gaps  []*CheckpointGapError
		cov   []covered
		prev  []byte
		after int64
	)
	for {
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: after, Limit: 100})
		if err != nil {
			return nil, nil, err
		}
		for i := range page {
			c := &page[i]
			g := checkLink(c, after, prev, keys, false)
			after, prev = c.Number, c.Hash
			gaps = append(gaps, g...)
			if n := len(g); n > 0 && g[n-1].Err != nil {
				continue
			}
			if l, _, ok := c.Leaf(instanceID); ok {
				cov = append(cov, covered{number: c.Number, seq: l.Seq, hash: l.Hash, purged: l.Purged})
			}
		}
		if len(page) < 100 {
			break
		}
	}
	res, err := e.verifyCovered(ctx, instanceID, cov)
	if err != nil {
		return nil, nil, err
	}
	return &res, gaps, nil
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
	if m := checkCoverage(id, events, cov, &res); m != nil {
		res.Err = m
	}
	return res, nil
}

// checkCoverage checks a history (whole, chain verified) against the
// leaves that cover its instance id, in checkpoint order, and sets
// CoveredSeq, Checkpoint and Purged of res. A leaf holds when the history
// has its seq with its hash. A leaf that does not is explained only by a
// signed tombstone leaf: the leaf itself when it is one (a purged
// incarnation), one with the same seq and hash (the head a purge ended),
// or one of a later checkpoint with a higher seq: the leaf was then a
// head of an incarnation that tombstone ended. Anything else is a
// rewrite, or a deletion when the history is gone.
func checkCoverage(id string, events []Event, cov []covered, res *CheckpointResult) *CheckpointMismatchError {
	holds := func(c covered) bool {
		return c.seq >= 1 && c.seq <= int64(len(events)) && bytes.Equal(events[c.seq-1].Hash, c.hash)
	}
	explained := func(i int) bool {
		if cov[i].purged {
			return true
		}
		for j, t := range cov {
			switch {
			case !t.purged:
			case t.seq == cov[i].seq && bytes.Equal(t.hash, cov[i].hash):
				// The very head the tombstone ended, signed again
				// before or after it (a node's pending head of an
				// instance another node purged).
				return true
			case j > i && t.seq > cov[i].seq:
				return true
			}
		}
		return false
	}
	var first *CheckpointMismatchError
	for i, c := range cov {
		switch {
		case holds(c):
			res.CoveredSeq, res.Checkpoint = c.seq, c.number
		case explained(i):
		case first == nil:
			first = &CheckpointMismatchError{InstanceID: id, Seq: c.seq, Checkpoint: c.number, Deleted: len(events) == 0}
		}
	}
	if first == nil {
		if len(events) == 0 {
			for _, c := range slices.Backward(cov) {
				if c.purged {
					res.Purged, res.CoveredSeq, res.Checkpoint = true, c.seq, c.number
					break
				}
			}
		}
		return nil
	}
	// The highest covered seq below the mismatch that still holds.
	for _, c := range cov {
		if c.seq < first.Seq && holds(c) {
			first.GoodSeq = max(first.GoodSeq, c.seq)
		}
	}
	return first
}

// VerifyExport checks an exported or archived history offline, with keys
// only: its hash chain from seq 1, the signature of every checkpoint it
// carries, each leaf's inclusion proof, and that each covered head is an
// event of the history, or a head of an earlier incarnation of the id
// that a signed tombstone leaf it carries explains (as
// [Engine.VerifyCheckpoints] judges them); at least one must be an event
// of the history. It returns nil, a
// *history.ChainError, a *CheckpointMismatchError naming the instance and
// seq, an error wrapping ErrNotCovered when the export carries no
// checkpoint, or one wrapping history.ErrUnknownKey, ErrBadSignature or
// ErrMalformedCheckpoint.
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
	res, cov, err := proofCoverage(id, events, proofs, keys)
	if err != nil {
		return err
	}
	if res.CoveredSeq == 0 {
		// Every leaf is explained as an earlier incarnation's: nothing
		// covers the exported history itself.
		return &CheckpointMismatchError{InstanceID: id, Seq: cov[0].seq, Checkpoint: cov[0].number}
	}
	return nil
}

// proofCoverage checks proofs of instance id offline (each signature and
// inclusion, each leaf of id) and the history (chain verified) against
// their leaves in checkpoint order, as [checkCoverage] does. It returns
// the result and the leaves, in checkpoint order.
func proofCoverage(id string, events []Event, proofs []CheckpointProof, keys *Keyring) (CheckpointResult, []covered, error) {
	res := CheckpointResult{InstanceID: id, Events: len(events)}
	cov := make([]covered, 0, len(proofs))
	for i := range proofs {
		p := &proofs[i]
		if err := p.Verify(keys); err != nil {
			return res, nil, err
		}
		if p.Leaf.InstanceID != id {
			return res, nil, fmt.Errorf("%w: checkpoint %d proves a leaf of %s, the history is of %s", history.ErrMalformedCheckpoint, p.Checkpoint.Number, p.Leaf.InstanceID, id)
		}
		cov = append(cov, covered{number: p.Checkpoint.Number, seq: p.Leaf.Seq, hash: p.Leaf.Hash, purged: p.Leaf.Purged})
	}
	sort.SliceStable(cov, func(i, j int) bool { return cov[i].number < cov[j].number })
	if m := checkCoverage(id, events, cov, &res); m != nil {
		return res, nil, m
	}
	return res, cov, nil
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

// ErrPurgeUnsigned is returned by [Engine.Purge] when the store keeps
// signed checkpoints and the engine has no Options.Checkpoints: the purge
// could not sign its tombstones, and verification would report the
// purged histories as deleted without a purge.
var ErrPurgeUnsigned = errors.New("chronicle: the store keeps signed checkpoints; a purge needs Options.Checkpoints to sign its tombstones")

// signTombstones writes, before a purge deletes anything, a checkpoint
// whose leaves are the signed tombstones of the ended instances among ids
// (the final head of each, flagged Purged), and returns them by instance
// id. A signed tombstone is what lets verification tell a purge from a
// deletion; it is signed first so that no crash can leave a purge that no
// signature covers.
func (e *Engine) signTombstones(ctx context.Context, ids []string) (map[string]history.CheckpointLeaf, error) {
	if e.cp == nil {
		if s, ok := e.store.(provider.CheckpointStore); ok {
			_, err := s.LatestCheckpoint(ctx)
			switch {
			case err == nil:
				return nil, ErrPurgeUnsigned
			case !errors.Is(err, provider.ErrNotFound):
				return nil, err
			}
		}
		return nil, nil
	}
	if _, err := e.checkpointStore(); err != nil {
		return nil, err
	}
	tombs := map[string]history.CheckpointLeaf{}
	for _, id := range ids {
		if e.validateID("instance id", id) != nil {
			continue
		}
		rec, err := e.store.GetInstance(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !rec.Status.Terminal() || rec.LastSeq == 0 {
			continue
		}
		head, err := e.headOf(ctx, id, rec.LastSeq)
		if err != nil {
			return nil, err
		}
		if head != nil {
			tombs[id] = history.CheckpointLeaf{InstanceID: id, Seq: head.Seq, Hash: head.Hash, Purged: true}
		}
	}
	leaves := make([]history.CheckpointLeaf, 0, len(tombs))
	for _, t := range tombs {
		leaves = append(leaves, t)
	}
	return tombs, e.writeTombstones(ctx, leaves)
}

// headOf returns the last event of an instance's history from seq from
// on, nil when there is none.
func (e *Engine) headOf(ctx context.Context, id string, from int64) (*provider.Head, error) {
	tail, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: from})
	if err != nil {
		return nil, err
	}
	if n := len(tail); n > 0 {
		return &provider.Head{Seq: tail[n-1].Seq, Hash: tail[n-1].Hash}, nil
	}
	return nil, nil
}

// writeTombstones writes a checkpoint of tombstone leaves now, with the
// pending heads of other instances. A pending head of a tombstoned
// instance is dropped when the tombstone covers it, and kept for the next
// checkpoint when it goes beyond (a checkpoint has one leaf an instance).
func (e *Engine) writeTombstones(ctx context.Context, tombs []history.CheckpointLeaf) error {
	if len(tombs) == 0 {
		return nil
	}
	s, err := e.checkpointStore()
	if err != nil {
		return err
	}
	if err := e.writeTombstonesLocked(ctx, s, tombs); err != nil {
		return err
	}
	e.publishLogged(ctx)
	return nil
}

func (e *Engine) writeTombstonesLocked(ctx context.Context, s provider.CheckpointStore, tombs []history.CheckpointLeaf) error {
	e.cp.write.Lock()
	defer e.cp.write.Unlock()
	pending := e.cp.take()
	byID := make(map[string]history.CheckpointLeaf, len(tombs))
	for _, t := range tombs {
		byID[t.InstanceID] = t
	}
	leaves := slices.Clone(tombs)
	var later []history.CheckpointLeaf
	for _, p := range pending {
		t, ok := byID[p.InstanceID]
		switch {
		case !ok:
			leaves = append(leaves, p)
		case p.Seq > t.Seq:
			later = append(later, p)
		}
	}
	if _, err := e.appendCheckpoint(ctx, s, leaves); err != nil {
		e.cp.putBack(pending)
		return err
	}
	e.cp.putBack(later)
	return nil
}

// finishPurge signs the tombstones the store kept that differ from those
// signed before the purge (a round appended in between): the engine saw
// the store delete that history.
func (e *Engine) finishPurge(ctx context.Context, signed map[string]history.CheckpointLeaf, purged []Tombstone) error {
	if e.cp == nil {
		return nil
	}
	var resign []history.CheckpointLeaf
	for _, ts := range purged {
		if t, ok := signed[ts.InstanceID]; !ok || t.Seq != ts.LastSeq || !bytes.Equal(t.Hash, ts.LastHash) {
			resign = append(resign, history.CheckpointLeaf{InstanceID: ts.InstanceID, Seq: ts.LastSeq, Hash: ts.LastHash, Purged: true})
		}
	}
	return e.writeTombstones(ctx, resign)
}
