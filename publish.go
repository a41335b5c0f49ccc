package chronicle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/tlog"
)

// Publisher keeps the engine's checkpoints outside the database, as
// signed notes of the checkpoint log (C2SP tlog-checkpoint; see
// docs/audit.md, "Publishing checkpoints"): somewhere its administrator
// cannot rewrite, so that a truncated or forked checkpoint chain
// contradicts what was published. [DirPublisher] and [WitnessPublisher]
// implement it.
type Publisher interface {
	// Publish keeps a signed checkpoint note. A publisher never replaces
	// what it published: a note of a size it holds with another root
	// is an error (a *ForkError).
	Publish(ctx context.Context, signedNote []byte) error
	// Latest returns the newest note the publisher holds, kept by the
	// publisher itself, or an error wrapping ErrNothingPublished.
	Latest(ctx context.Context) ([]byte, error)
}

// Errors of publishing and of verification against published
// checkpoints; the typed errors below match them with errors.Is.
var (
	// ErrNothingPublished: a publisher holds no checkpoint yet.
	ErrNothingPublished = errors.New("chronicle: no checkpoint published")
	// ErrTruncated: a published checkpoint log is larger than the
	// store's: checkpoints were deleted from the end of the chain.
	ErrTruncated = errors.New("chronicle: the store's checkpoints end before a published checkpoint")
	// ErrForked: a published checkpoint log has another root than the
	// store's at its size: the chain was replaced.
	ErrForked = errors.New("chronicle: the store's checkpoints differ from a published checkpoint")
)

// TruncatedError: a published note's size is above the store's checkpoint
// log size.
type TruncatedError struct {
	Published, Stored uint64
}

// Error implements error.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("chronicle: checkpoint %d was published but the store's checkpoints end at %d: the chain was truncated", e.Published, e.Stored)
}

// Is matches [ErrTruncated].
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// ForkError: at Size, the published root and the store's (or another
// published one) differ.
type ForkError struct {
	Size                    uint64
	PublishedRoot, HereRoot []byte
}

// Error implements error.
func (e *ForkError) Error() string {
	return fmt.Sprintf("chronicle: at checkpoint %d the published root %s is not %s: two histories", e.Size, short(e.PublishedRoot), short(e.HereRoot))
}

// Is matches [ErrForked].
func (e *ForkError) Is(target error) bool { return target == ErrForked }

func short(b []byte) string {
	s := hex.EncodeToString(b)
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// PublishedNoteError: a published note that does not open: malformed,
// not signed by a key of the keyring, or of another origin. Err wraps
// tlog.ErrMalformedNote or tlog.ErrNoteSignature.
type PublishedNoteError struct {
	// Index is the note's position among those verified.
	Index int
	Err   error
}

// Error implements error.
func (e *PublishedNoteError) Error() string {
	return fmt.Sprintf("chronicle: published note %d: %v", e.Index, e.Err)
}

// Unwrap returns the note's error.
func (e *PublishedNoteError) Unwrap() error { return e.Err }

// ConsistencyProver gives RFC 6962 consistency proofs of the checkpoint
// log between two sizes; [Engine] implements it for [WitnessPublisher].
type ConsistencyProver interface {
	ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error)
}

// DirPublisher publishes checkpoint notes to an append-only directory,
// one file a tree size, DIR/<size>.checkpoint, never overwritten: mount
// there what the database administrator cannot write (a WORM bucket, a
// host of the auditors). Several engines may share it.
type DirPublisher struct {
	dir string

	// mu guards the newest size known and the directory's modification
	// time when it was known, so that Latest lists the directory only
	// when it changed.
	mu     sync.Mutex
	newest uint64
	known  bool
	mtime  time.Time
}

// NewDirPublisher returns the publisher of dir, creating it.
func NewDirPublisher(dir string) (*DirPublisher, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &DirPublisher{dir: dir}, nil
}

// Dir returns the directory.
func (d *DirPublisher) Dir() string { return d.dir }

const publishedExt = ".checkpoint"

// Publish implements [Publisher]: the note goes to DIR/<size>.checkpoint,
// written whole (a temporary file linked to its name), never replacing a
// file. A file already there with the same root is kept (another engine
// published that size); one with another root is a *ForkError.
func (d *DirPublisher) Publish(_ context.Context, signedNote []byte) error {
	c, err := tlog.Parse(signedNote)
	if err != nil {
		return err
	}
	path := filepath.Join(d.dir, strconv.FormatUint(c.Size, 10)+publishedExt)
	f, err := os.CreateTemp(d.dir, ".publish-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	_, err = f.Write(signedNote)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	err = os.Link(tmp, path)
	if err != nil && !errors.Is(err, os.ErrExist) {
		// A file system without hard links: create the name exclusively.
		err = writeExclusive(path, signedNote)
	}
	if err == nil {
		_ = os.Remove(tmp) // before wrote: it changes the directory too
		d.wrote(c.Size)
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	held, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	hc, err := tlog.Parse(held)
	if err != nil {
		return fmt.Errorf("chronicle: published %s: %w", path, err)
	}
	if !bytes.Equal(hc.Root, c.Root) {
		return &ForkError{Size: c.Size, PublishedRoot: hc.Root, HereRoot: c.Root}
	}
	return nil
}

// writeExclusive creates path, which must not exist, with data.
func writeExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Sync(), f.Close())
}

// sizes returns the sizes of the published files, ascending.
func (d *DirPublisher) sizes() ([]uint64, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var sizes []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), publishedExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 64); err == nil && strconv.FormatUint(n, 10) == name {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	return sizes, nil
}

func (d *DirPublisher) read(size uint64) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.dir, strconv.FormatUint(size, 10)+publishedExt))
}

// wrote records a file this publisher wrote: the directory changed by it.
func (d *DirPublisher) wrote(size uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.known {
		return // the next Latest lists the directory
	}
	// Another engine's file added meanwhile is seen at the directory's
	// next change: Latest may lag it by one publish.
	if st, err := os.Stat(d.dir); err == nil {
		d.newest, d.mtime = max(d.newest, size), st.ModTime()
	} else {
		d.known = false
	}
}

// Latest implements [Publisher]: the note of the largest size in the
// directory. It lists the directory the first time and when the
// directory's modification time changed other than by this publisher.
func (d *DirPublisher) Latest(context.Context) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := os.Stat(d.dir)
	if err != nil {
		return nil, err
	}
	if !d.known || !st.ModTime().Equal(d.mtime) {
		sizes, err := d.sizes()
		if err != nil {
			return nil, err
		}
		if len(sizes) == 0 {
			return nil, fmt.Errorf("%w in %s", ErrNothingPublished, d.dir)
		}
		d.newest, d.known, d.mtime = sizes[len(sizes)-1], true, st.ModTime()
	}
	return d.read(d.newest)
}

// All returns every note of the directory, by size: what
// [Engine.VerifyPublished] checks.
func (d *DirPublisher) All() ([][]byte, error) {
	sizes, err := d.sizes()
	if err != nil {
		return nil, err
	}
	notes := make([][]byte, 0, len(sizes))
	for _, s := range sizes {
		b, err := d.read(s)
		if err != nil {
			return nil, err
		}
		notes = append(notes, b)
	}
	return notes, nil
}

// WitnessPublisher publishes checkpoint notes to a witness by the C2SP
// tlog-witness protocol: it posts each note with the consistency proof
// from the witness's latest size and keeps the note with the witness's
// cosignature. The witness ([tlog.Witness], or any tlog-witness server)
// cosigns only a checkpoint that extends the latest it cosigned, so a key
// holder cannot show it two histories.
type WitnessPublisher struct {
	client  tlog.WitnessClient
	prover  ConsistencyProver
	witness note.Verifier

	mu     sync.Mutex
	size   uint64
	latest []byte
}

// NewWitnessPublisher returns the publisher of the witness at url (its
// submission prefix). With witness set, a cosignature that witness does
// not verify is an error; hc is the HTTP client (http.DefaultClient when
// nil). The consistency proofs come from the engine whose
// [CheckpointOptions.Publishers] hold it, unless [WitnessPublisher.SetProver]
// names another source.
func NewWitnessPublisher(url string, witness note.Verifier, hc *http.Client) *WitnessPublisher {
	return &WitnessPublisher{client: tlog.WitnessClient{URL: url, HTTP: hc}, witness: witness}
}

// SetProver sets where the publisher takes its consistency proofs from,
// for a publisher used without an engine.
func (w *WitnessPublisher) SetProver(p ConsistencyProver) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prover = p
}

// defaultProver sets the prover when none is set.
func (w *WitnessPublisher) defaultProver(p ConsistencyProver) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prover == nil {
		w.prover = p
	}
}

// Publish implements [Publisher]. It starts from the size the witness
// last cosigned for this publisher (0 at first: the witness answers with
// its own size, and the proof from there is sent).
func (w *WitnessPublisher) Publish(ctx context.Context, signedNote []byte) error {
	c, err := tlog.Parse(signedNote)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prover == nil {
		return errors.New("chronicle: the witness publisher has no source of consistency proofs")
	}
	old := w.size
	for attempt := 0; ; attempt++ {
		var proof [][]byte
		if old > 0 && old <= c.Size {
			if proof, err = w.prover.ConsistencyProof(ctx, old, c.Size); err != nil {
				return err
			}
		}
		if old > c.Size {
			// The witness is ahead: another engine published a larger
			// size, or the store lost checkpoints. A store that holds
			// the witness's size has a proof up to it.
			if _, err := w.prover.ConsistencyProof(ctx, c.Size, old); err == nil {
				return nil
			}
			return &TruncatedError{Published: old, Stored: c.Size}
		}
		cosig, err := w.client.AddCheckpoint(ctx, old, proof, signedNote)
		var conflict *tlog.ConflictError
		if errors.As(err, &conflict) && !conflict.Fork && conflict.Size != old && attempt == 0 {
			old = conflict.Size
			continue
		}
		if err != nil {
			return err
		}
		cosigned := append(slices.Clone(signedNote), cosig...)
		if w.witness != nil {
			if _, err := note.Open(cosigned, note.VerifierList(w.witness)); err != nil {
				return fmt.Errorf("chronicle: witness %s: its cosignature does not verify: %w", w.client.URL, err)
			}
		}
		w.size, w.latest = c.Size, cosigned
		return nil
	}
}

// Latest implements [Publisher]: the last note the witness cosigned
// through this publisher, with the cosignature; ErrNothingPublished
// before the first.
func (w *WitnessPublisher) Latest(context.Context) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.latest == nil {
		return nil, fmt.Errorf("%w to %s yet", ErrNothingPublished, w.client.URL)
	}
	return slices.Clone(w.latest), nil
}

// logState is the engine's copy of the checkpoint log: the hashes of the
// stored checkpoints, read from the store once and then as they grow.
type logState struct {
	mu   sync.Mutex
	tree tlog.Tree
	// first and last are the hashes of checkpoints 1 and Size.
	first, last []byte
	// roots are the roots of the last sizes signed, so that checking a
	// publisher's newest note needs no walk over every leaf.
	roots map[uint64][]byte
	// publish serializes publishing.
	publish sync.Mutex
}

// syncLog appends to tree the checkpoints the store holds after it,
// checking each link (number, previous hash, hash of its signed bytes).
// A broken link stops it with a *CheckpointGapError.
func syncLog(ctx context.Context, s provider.CheckpointStore, tree *tlog.Tree, first, last *[]byte) error {
	for {
		page, err := s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{AfterNumber: int64(tree.Size()), Limit: 100})
		if err != nil {
			return err
		}
		for i := range page {
			c := &page[i]
			n := int64(tree.Size())
			sum := sha256.Sum256(c.SignedBytes())
			switch {
			case c.Number != n+1:
				return &CheckpointGapError{Number: n + 1, Reason: fmt.Sprintf("missing: the chain goes from %d to %d", n, c.Number)}
			case !bytes.Equal(c.PrevHash, *last):
				return &CheckpointGapError{Number: c.Number, Reason: fmt.Sprintf("its previous hash is not the hash of checkpoint %d", n)}
			case !bytes.Equal(sum[:], c.Hash):
				return &CheckpointGapError{Number: c.Number, Reason: "its hash does not match its content"}
			}
			if err := tree.Append(c.Hash); err != nil {
				return err
			}
			if c.Number == 1 {
				*first = c.Hash
			}
			*last = c.Hash
		}
		if len(page) < 100 {
			return nil
		}
	}
}

// keepRoot remembers the root of a size, and only those of the last
// sizes.
func (l *logState) keepRoot(size uint64, root []byte) {
	if l.roots == nil {
		l.roots = map[uint64][]byte{}
	}
	l.roots[size] = root
	if len(l.roots) > 64 {
		delete(l.roots, slices.Min(slices.Collect(maps.Keys(l.roots))))
	}
}

// root returns the root of a size, from those remembered or computed.
func (l *logState) root(size uint64) ([]byte, error) {
	if r, ok := l.roots[size]; ok {
		return r, nil
	}
	return l.tree.Root(size)
}

// DefaultOrigin returns the origin of a checkpoint log whose first
// checkpoint has hash first, when [CheckpointOptions.Origin] is empty:
// "chronicle/" and the first 16 hex digits of the hash, unique to the
// chain and stable across key rotations.
func DefaultOrigin(first []byte) string {
	return "chronicle/" + short(first)
}

// origin returns the log's origin. The caller holds e.cp.log.mu.
func (e *Engine) origin() string {
	if e.cp.opts.Origin != "" {
		return e.cp.opts.Origin
	}
	return DefaultOrigin(e.cp.log.first)
}

// latestNote brings the engine's log up to the store's newest checkpoint
// and returns its signed note; nil when the store holds none. The caller
// holds e.cp.log.mu.
func (e *Engine) latestNote(ctx context.Context) ([]byte, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	l := &e.cp.log
	if err := syncLog(ctx, s, &l.tree, &l.first, &l.last); err != nil {
		return nil, err
	}
	if l.tree.Size() == 0 {
		return nil, nil
	}
	root, err := l.tree.Root(l.tree.Size())
	if err != nil {
		return nil, err
	}
	l.keepRoot(l.tree.Size(), root)
	ns, err := tlog.NoteSigner(e.origin(), e.cp.opts.Signer)
	if err != nil {
		return nil, err
	}
	return tlog.Sign(tlog.Checkpoint{Origin: e.origin(), Size: l.tree.Size(), Root: root}, ns)
}

// CheckpointNote returns the signed note (C2SP tlog-checkpoint) of the
// checkpoint log at the store's newest checkpoint: origin, size (the
// newest Number) and the RFC 6962 root of the hashes of checkpoints
// 1..size, signed with the engine's signer under the origin. It returns
// an error wrapping provider.ErrNotFound when the store holds no
// checkpoint, ErrCheckpointsOff without Options.Checkpoints.
func (e *Engine) CheckpointNote(ctx context.Context) ([]byte, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	e.cp.log.mu.Lock()
	defer e.cp.log.mu.Unlock()
	msg, err := e.latestNote(ctx)
	if err == nil && msg == nil {
		return nil, fmt.Errorf("chronicle: no checkpoint stored: %w", provider.ErrNotFound)
	}
	return msg, err
}

// ConsistencyProof implements [ConsistencyProver]: the RFC 6962
// consistency proof of the checkpoint log from size1 to size2, from the
// checkpoint hashes the engine holds (read from the store when it holds
// fewer than size2).
func (e *Engine) ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	e.cp.log.mu.Lock()
	defer e.cp.log.mu.Unlock()
	t, err := e.syncedLog(ctx, size2)
	if err != nil {
		return nil, err
	}
	return t.ConsistencyProof(size1, size2)
}

// syncedLog returns the engine's checkpoint log, read from the store up
// to at least size; the caller holds e.cp.log.mu.
func (e *Engine) syncedLog(ctx context.Context, size uint64) (*tlog.Tree, error) {
	l := &e.cp.log
	if l.tree.Size() < size {
		s, err := e.checkpointStore()
		if err != nil {
			return nil, err
		}
		if err := syncLog(ctx, s, &l.tree, &l.first, &l.last); err != nil {
			return nil, err
		}
	}
	return &l.tree, nil
}

// logRoot returns the root of the checkpoint log at size.
func (e *Engine) logRoot(ctx context.Context, size uint64) ([]byte, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	e.cp.log.mu.Lock()
	defer e.cp.log.mu.Unlock()
	t, err := e.syncedLog(ctx, size)
	if err != nil {
		return nil, err
	}
	return t.Root(size)
}

// inclusionProof returns the proof that checkpoint index+1 is in the
// checkpoint log of size.
func (e *Engine) inclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	if e.cp == nil {
		return nil, ErrCheckpointsOff
	}
	e.cp.log.mu.Lock()
	defer e.cp.log.mu.Unlock()
	t, err := e.syncedLog(ctx, size)
	if err != nil {
		return nil, err
	}
	return t.InclusionProof(index, size)
}

// Publish publishes the note of the store's newest checkpoint
// ([Engine.CheckpointNote]) to every [CheckpointOptions.Publishers],
// bringing each up to date, and returns what failed, joined. Before
// publishing to one, it reads the newest note the publisher holds: when
// that note is not a prefix of the store's checkpoint log (another root at
// its size, a *ForkError, or a larger size, a *TruncatedError) it
// publishes nothing there. The engine publishes after every checkpoint it
// writes; Publish is for the command line and for tests.
func (e *Engine) Publish(ctx context.Context) error {
	if e.cp == nil {
		return ErrCheckpointsOff
	}
	if len(e.cp.opts.Publishers) == 0 {
		return nil
	}
	l := &e.cp.log
	l.publish.Lock()
	defer l.publish.Unlock()
	l.mu.Lock()
	msg, err := e.latestNote(ctx)
	origin := e.origin()
	l.mu.Unlock()
	if err != nil || msg == nil {
		return err
	}
	keys, err := e.cp.opts.keyring()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range e.cp.opts.Publishers {
		if w, ok := p.(*WitnessPublisher); ok {
			w.defaultProver(e)
		}
		if err := e.publishTo(ctx, p, msg, origin, keys); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// publishTo publishes msg to p when the note p holds is a prefix of the
// engine's log.
func (e *Engine) publishTo(ctx context.Context, p Publisher, msg []byte, origin string, keys *Keyring) error {
	prev, err := p.Latest(ctx)
	if err != nil && !errors.Is(err, ErrNothingPublished) {
		return err
	}
	if prev != nil {
		pc, _, err := tlog.Open(prev, origin, keys)
		if err != nil {
			return fmt.Errorf("chronicle: the newest published checkpoint: %w", err)
		}
		e.cp.log.mu.Lock()
		size := e.cp.log.tree.Size()
		if pc.Size > size {
			// Another engine may have appended and published since:
			// read the store again before calling it a truncation.
			var s provider.CheckpointStore
			if s, err = e.checkpointStore(); err == nil {
				l := &e.cp.log
				err = syncLog(ctx, s, &l.tree, &l.first, &l.last)
				size = l.tree.Size()
			}
		}
		var root []byte
		if err == nil && pc.Size <= size {
			root, err = e.cp.log.root(pc.Size)
		}
		e.cp.log.mu.Unlock()
		switch {
		case err != nil:
			return err
		case pc.Size > size:
			return &TruncatedError{Published: pc.Size, Stored: size}
		case !bytes.Equal(root, pc.Root):
			return &ForkError{Size: pc.Size, PublishedRoot: pc.Root, HereRoot: root}
		}
		if c, err := tlog.Parse(msg); err == nil && c.Size <= pc.Size {
			return nil // published already
		}
	}
	return p.Publish(ctx, msg)
}

// publishLogged publishes after a checkpoint was stored; a failure is
// logged, and the next checkpoint publishes again.
func (e *Engine) publishLogged(ctx context.Context) {
	if len(e.cp.opts.Publishers) == 0 {
		return
	}
	if err := e.Publish(ctx); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, ErrForked) || errors.Is(err, ErrTruncated) {
			level = slog.LevelError
		}
		e.log.Log(ctx, level, "publishing the checkpoint failed; the next checkpoint publishes again", slog.Any("error", err))
	}
}

// PublishedResult is the verification of one published note.
type PublishedResult struct {
	// Size and Origin are the note's (zero when it does not open).
	Size   uint64
	Origin string
	// Err is nil, a *TruncatedError, a *ForkError, a *PublishedNoteError
	// or, when a broken link of the stored chain comes before Size, that
	// *CheckpointGapError.
	Err error
}

// PublishedReport is what [Engine.VerifyPublished] found.
type PublishedReport struct {
	// Stored is the size of the store's checkpoint log: its newest
	// checkpoint's number, or the last before a broken link.
	Stored uint64
	// Gap is the first broken link of the stored chain, if any.
	Gap *CheckpointGapError
	// Notes are the results, in the order of the notes given.
	Notes []PublishedResult
}

// OK reports whether every note verified and matched the store.
func (r *PublishedReport) OK() bool {
	for _, n := range r.Notes {
		if n.Err != nil {
			return false
		}
	}
	return true
}

// VerifyPublished checks the store's checkpoints against published
// checkpoint notes (those of a [DirPublisher], a witness's): each note
// must open with a key of keys under origin (empty: the note's own
// origin), and the store's checkpoint log must hold its size with its
// root. A note larger than the store's log is a *TruncatedError (newest
// checkpoints were deleted), one whose root differs a *ForkError (the
// chain was replaced or re-signed), one that does not open a
// *PublishedNoteError. The findings are in the report; the error is the
// store's. It reads every stored checkpoint; pair it with
// [Engine.VerifyCheckpoints], which checks what the checkpoints cover.
func (e *Engine) VerifyPublished(ctx context.Context, keys *Keyring, origin string, notes ...[]byte) (*PublishedReport, error) {
	s, err := e.checkpointStore()
	if err != nil {
		return nil, err
	}
	if keys == nil || keys.Len() == 0 {
		return nil, invalid("VerifyPublished needs a keyring with at least one key")
	}
	var (
		tree        tlog.Tree
		first, last []byte
	)
	rep := &PublishedReport{}
	if err := syncLog(ctx, s, &tree, &first, &last); err != nil {
		if !errors.As(err, &rep.Gap) {
			return nil, err
		}
	}
	rep.Stored = tree.Size()
	for i, msg := range notes {
		c, _, err := tlog.Open(msg, origin, keys)
		if err != nil {
			rep.Notes = append(rep.Notes, PublishedResult{Err: &PublishedNoteError{Index: i, Err: err}})
			continue
		}
		res := PublishedResult{Size: c.Size, Origin: c.Origin}
		switch {
		case c.Size > tree.Size() && rep.Gap != nil:
			res.Err = rep.Gap
		case c.Size > tree.Size():
			res.Err = &TruncatedError{Published: c.Size, Stored: tree.Size()}
		default:
			root, err := tree.Root(c.Size)
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(root, c.Root) {
				res.Err = &ForkError{Size: c.Size, PublishedRoot: c.Root, HereRoot: root}
			}
		}
		rep.Notes = append(rep.Notes, res)
	}
	return rep, nil
}
