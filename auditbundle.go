package chronicle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
	"github.com/chronicleflow/chronicle/tlog"
)

// AuditBundleFormat is the first line of every audit bundle: the bundle's
// format and version.
const AuditBundleFormat = "chronicle-audit-bundle/v1"

// ErrAuditBundle is matched (errors.Is) by every *AuditBundleError.
var ErrAuditBundle = errors.New("chronicle: audit bundle does not verify")

// AuditBundleError says where an audit bundle fails to verify: the line
// (1-based) where the failing part starts, the instance it concerns (empty
// for the bundle's own lines) and why.
type AuditBundleError struct {
	Line       int
	InstanceID string
	Err        error
}

// Error implements error.
func (e *AuditBundleError) Error() string {
	if e.InstanceID != "" {
		return fmt.Sprintf("chronicle: audit bundle, line %d, instance %s: %v", e.Line, e.InstanceID, e.Err)
	}
	return fmt.Sprintf("chronicle: audit bundle, line %d: %v", e.Line, e.Err)
}

// Is matches ErrAuditBundle.
func (e *AuditBundleError) Is(target error) bool { return target == ErrAuditBundle }

// Unwrap returns the cause: a *history.ChainError, a
// *CheckpointMismatchError, an error wrapping history.ErrBadSignature,
// ErrNotCovered, history.ErrCorrupt, …; ErrInstanceNotFound for an unknown id
func (e *AuditBundleError) Unwrap() error { return e.Err }

// AuditBundleOptions select what [Engine.WriteAuditBundle] writes.
type AuditBundleOptions struct {
	// InstanceIDs are the instances to bundle, stored or purged; each
	// once, written in id order.
	InstanceIDs []string
	// Published, when set, is a checkpoint note published outside the
	// database (the newest file of a [DirPublisher], a witness's
	// cosigned note): the bundle carries it, with the proof that each of
	// its checkpoints up to the note's size is in the log the note signs.
	// A note the store's log contradicts is an error wrapping ErrForked.
	Published []byte
}

// AuditInstanceReport is what an audit bundle proves of one instance.
type AuditInstanceReport struct {
	InstanceID string
	// Events counts the bundled events; LastSeq is the last one's seq.
	Events  int
	LastSeq int64
	// CoveredSeq is the highest seq a signed checkpoint of the bundle
	// covers, Checkpoint that checkpoint's number; events after it are
	// in the bundle but no signature covers them yet.
	CoveredSeq int64
	Checkpoint int64
	// Checkpoints are the numbers of the checkpoints whose proofs the
	// bundle carries for the instance.
	Checkpoints []int64
	// Purged is set for an instance whose history is gone: the bundle
	// carries its signed tombstone (CoveredSeq and Checkpoint say which).
	Purged bool
	// Status and Workflow are re-derived from the bundled history.
	Status   Status
	Workflow string
	// Tasks counts the human tasks re-derived from the history.
	Tasks int
}

// AuditBundleReport is what [VerifyAuditBundle] proved.
type AuditBundleReport struct {
	Instances []AuditInstanceReport
	// Checkpoints are the numbers of every checkpoint the bundle carries,
	// in order; KeyIDs the keys that signed them.
	Checkpoints []int64
	KeyIDs      []string
	// Published describes the published note the bundle carries (nil
	// without one).
	Published *AuditPublished
}

// AuditPublished is what a bundle's published note proves: the log of
// Origin had Size checkpoints with Root, signed by a key of the keyring,
// and cosigned by Cosigners (witnesses whose keys the verifier was
// given); each of the bundle's checkpoints numbered up to Size is in that
// log (Included). Checkpoints above Size are newer than the note.
type AuditPublished struct {
	Origin    string
	Size      uint64
	Root      []byte
	Cosigners []string
	Included  []int64
}

// bundleHeader is the first line of a bundle.
type bundleHeader struct {
	Format string `json:"format"`
}

// bundleInstance opens the lines of one instance: Events event lines, then
// Proofs checkpoint lines, then (when Events > 0) one derived line.
type bundleInstance struct {
	Instance string `json:"instance"`
	Events   int    `json:"events"`
	Proofs   int    `json:"proofs"`
}

// bundleDerived is the derived line: the projections folded from the
// bundled history, for people reading the bundle. A verifier folds them
// again and requires the same bytes.
type bundleDerived struct {
	Derived derivedView `json:"derived"`
}

type derivedView struct {
	Workflow    string         `json:"workflow"`
	Version     string         `json:"version,omitempty"`
	ExecutionID string         `json:"execution_id"`
	Status      string         `json:"status"`
	BusinessKey string         `json:"business_key,omitempty"`
	ParentID    string         `json:"parent_id,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	CompletedAt *time.Time     `json:"completed_at,omitempty"`
	LastSeq     int64          `json:"last_seq"`
	Output      []byte         `json:"output,omitempty"`
	Failure     string         `json:"failure,omitempty"`
	Tasks       []derivedTask  `json:"tasks,omitempty"`
	TaskEvents  []derivedEvent `json:"task_events,omitempty"`
}

type derivedTask struct {
	TaskID   string   `json:"task_id"`
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Assignee string   `json:"assignee,omitempty"`
	Roles    []string `json:"roles,omitempty"`
	Result   []byte   `json:"result,omitempty"`
	Seq      int64    `json:"seq"`
}

type derivedEvent struct {
	TaskID   string    `json:"task_id"`
	Seq      int64     `json:"seq"`
	Kind     string    `json:"kind"`
	Actor    string    `json:"actor,omitempty"`
	At       time.Time `json:"at"`
	Assignee string    `json:"assignee,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// derive folds a verified history into the derived line.
func derive(id string, events []Event) (*bundleDerived, *projector.View, error) {
	p, err := projector.New()
	if err != nil {
		return nil, nil, err
	}
	v, err := p.FoldAt(id, events, 0)
	if err != nil {
		return nil, nil, err
	}
	d := &bundleDerived{}
	if r := v.Instance; r != nil {
		d.Derived = derivedView{Workflow: r.Name, Version: r.Version, ExecutionID: r.ExecutionID, Status: string(r.Status),
			BusinessKey: r.BusinessKey, ParentID: r.ParentID, CreatedAt: r.CreatedAt.UTC(), LastSeq: r.LastSeq, Output: r.Output}
		if !r.CompletedAt.IsZero() {
			t := r.CompletedAt.UTC()
			d.Derived.CompletedAt = &t
		}
		if r.Failure != nil {
			d.Derived.Failure = r.Failure.Message
		}
	}
	for _, t := range v.Tasks {
		d.Derived.Tasks = append(d.Derived.Tasks, derivedTask{TaskID: t.TaskID, Name: t.Name, Status: string(t.Status),
			Assignee: t.Assignee, Roles: t.Roles, Result: t.Result, Seq: t.Seq})
	}
	for _, t := range v.TaskEvents {
		d.Derived.TaskEvents = append(d.Derived.TaskEvents, derivedEvent{TaskID: t.TaskID, Seq: t.Seq, Kind: t.Kind.String(),
			Actor: t.Actor, At: t.At.UTC(), Assignee: t.Assignee, Detail: t.Detail})
	}
	return d, v, nil
}

// writeBundleInstance writes the lines of one instance, exactly as a
// verifier writes them again; d is the derived line of its events (nil
// when there are none).
func writeBundleInstance(w io.Writer, id string, events []Event, proofs []CheckpointProof, d *bundleDerived) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(bundleInstance{Instance: id, Events: len(events), Proofs: len(proofs)}); err != nil {
		return err
	}
	if err := history.WriteJSONL(w, events); err != nil {
		return err
	}
	if err := history.WriteCheckpointsJSONL(w, proofs); err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	return enc.Encode(d)
}

// WriteAuditBundle writes an audit bundle of the instances o names to w:
// one JSON Lines file that an auditor checks offline with the public keys
// alone ([VerifyAuditBundle], `chronicle audit verify`). For each instance
// it carries the history (as `history export` writes it), the proof of its
// leaf in every signed checkpoint that covers it (for a purged instance:
// its signed tombstones) and the projections folded from the history. The
// store must keep signed checkpoints (Options.Checkpoints); an instance no
// checkpoint covers yet makes the bundle fail verification, so sign first
// ([Engine.SweepCheckpoint]). An id with neither history nor checkpoint
// is an error wrapping ErrInstanceNotFound.
func (e *Engine) WriteAuditBundle(ctx context.Context, w io.Writer, o AuditBundleOptions) error {
	if len(o.InstanceIDs) == 0 {
		return fmt.Errorf("%w: an audit bundle needs at least one instance", ErrInvalidArgument)
	}
	if _, err := e.checkpointStore(); err != nil {
		return err
	}
	ids := slices.Clone(o.InstanceIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var numbers []int64
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(bundleHeader{Format: AuditBundleFormat}); err != nil {
		return err
	}
	for _, id := range ids {
		events, err := e.History(ctx, id)
		if err != nil && !errors.Is(err, ErrInstanceNotFound) {
			return err
		}
		proofs, err := e.CheckpointProofs(ctx, id)
		if err != nil {
			return err
		}
		if len(events) == 0 && len(proofs) == 0 {
			return fmt.Errorf("%w: %s", ErrInstanceNotFound, id)
		}
		var d *bundleDerived
		if len(events) > 0 {
			if d, _, err = derive(id, events); err != nil {
				return fmt.Errorf("chronicle: audit bundle of %s: %w", id, err)
			}
		}
		if err := writeBundleInstance(bw, id, events, proofs, d); err != nil {
			return fmt.Errorf("chronicle: audit bundle of %s: %w", id, err)
		}
		for _, p := range proofs {
			numbers = append(numbers, p.Checkpoint.Number)
		}
	}
	if o.Published != nil {
		line, err := e.publishedLine(ctx, o.Published, numbers)
		if err != nil {
			return err
		}
		if err := json.NewEncoder(bw).Encode(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// bundlePublished is the published line: a signed checkpoint note and
// the inclusion proof of each bundled checkpoint up to its size.
type bundlePublished struct {
	Published publishedLine `json:"published"`
}

type publishedLine struct {
	Note      string           `json:"note"`
	Inclusion []bundleIncluded `json:"inclusion"`
}

type bundleIncluded struct {
	Checkpoint int64    `json:"checkpoint"`
	Proof      [][]byte `json:"proof"`
}

// publishedLine proves the checkpoints numbered in numbers, up to the
// note's size, included in the log the note signs.
func (e *Engine) publishedLine(ctx context.Context, msg []byte, numbers []int64) (*bundlePublished, error) {
	c, err := tlog.Parse(msg)
	if err != nil {
		return nil, err
	}
	root, err := e.logRoot(ctx, c.Size)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(root, c.Root) {
		return nil, &ForkError{Size: c.Size, PublishedRoot: c.Root, HereRoot: root}
	}
	slices.Sort(numbers)
	numbers = slices.Compact(numbers)
	line := &bundlePublished{Published: publishedLine{Note: string(msg), Inclusion: []bundleIncluded{}}}
	for _, n := range numbers {
		if uint64(n) > c.Size {
			break
		}
		p, err := e.inclusionProof(ctx, uint64(n-1), c.Size)
		if err != nil {
			return nil, err
		}
		line.Published.Inclusion = append(line.Published.Inclusion, bundleIncluded{Checkpoint: n, Proof: p})
	}
	return line, nil
}

// bundleLine is one line of a bundle being read.
type bundleLine struct {
	n    int
	text []byte
}

// VerifyAuditBundle checks an audit bundle offline with keys alone and
// reports what it proves. Every byte must be accounted for: each history's
// hash chain must hold, each checkpoint must be signed by a key of keys
// and prove its leaf, each covered head must be an event of the history
// or be explained by a signed tombstone the bundle carries, each purged
// instance must carry its signed tombstone, the derived projections must
// be those the history folds into, and the bundle must be written exactly
// as [Engine.WriteAuditBundle] writes it; an edited byte anywhere fails. It
// returns an *AuditBundleError (errors.Is ErrAuditBundle) naming the line
// and instance of the first failure.
//
// A bundle that carries a published note must have it signed by a key of
// keys under its origin, and every other signature line must verify with
// one of witnesses (cosignatures, [tlog.NewCosignatureVerifier]): a
// signature the verifier cannot check is a byte it cannot account for.
func VerifyAuditBundle(r io.Reader, keys *Keyring, witnesses ...note.Verifier) (*AuditBundleReport, error) {
	lr := &lastByteReader{r: r}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), history.MaxEncodedSize)
	var lines []bundleLine
	for n := 1; sc.Scan(); n++ {
		lines = append(lines, bundleLine{n: n, text: slices.Clone(sc.Bytes())})
	}
	if err := sc.Err(); err != nil {
		return nil, &AuditBundleError{Line: len(lines) + 1, Err: fmt.Errorf("%w: %v", history.ErrCorrupt, err)}
	}
	fail := func(line int, id string, err error) (*AuditBundleReport, error) {
		return nil, &AuditBundleError{Line: line, InstanceID: id, Err: err}
	}
	if len(lines) == 0 {
		return fail(1, "", fmt.Errorf("%w: empty bundle", history.ErrCorrupt))
	}
	if lr.last != '\n' {
		return fail(len(lines), "", fmt.Errorf("%w: the bundle does not end with a whole line", history.ErrCorrupt))
	}
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(bundleHeader{Format: AuditBundleFormat}); err != nil {
		return nil, err
	}
	if !bytes.Equal(want.Bytes(), append(lines[0].text, '\n')) {
		return fail(1, "", fmt.Errorf("%w: not a %s bundle", history.ErrCorrupt, AuditBundleFormat))
	}
	rep := &AuditBundleReport{}
	seen := map[int64][]byte{}
	keyIDs := map[string]bool{}
	prev := ""
	for i := 1; i < len(lines); {
		start := lines[i].n
		if bytes.HasPrefix(lines[i].text, []byte(`{"published":`)) {
			if i != len(lines)-1 {
				return fail(start, "", fmt.Errorf("%w: the published note must be the last line", history.ErrCorrupt))
			}
			pub, err := verifyPublishedLine(lines[i].text, keys, seen, witnesses)
			if err != nil {
				return fail(start, "", err)
			}
			rep.Published = pub
			break
		}
		var head bundleInstance
		dec := json.NewDecoder(bytes.NewReader(lines[i].text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&head); err != nil || head.Instance == "" || head.Events < 0 || head.Proofs < 0 {
			return fail(start, "", fmt.Errorf("%w: expected an instance line", history.ErrCorrupt))
		}
		id := head.Instance
		if id <= prev {
			return fail(start, id, fmt.Errorf("%w: instances not in id order, or one twice", history.ErrCorrupt))
		}
		prev = id
		n := 1 + head.Events + head.Proofs
		if head.Events > 0 {
			n++
		}
		if head.Events+head.Proofs == 0 || i+n > len(lines) {
			return fail(start, id, fmt.Errorf("%w: the instance line announces %d events and %d proofs the bundle does not hold", history.ErrCorrupt, head.Events, head.Proofs))
		}
		var raw bytes.Buffer
		for _, l := range lines[i : i+n] {
			raw.Write(l.text)
			raw.WriteByte('\n')
		}
		body := lines[i+1 : i+1+head.Events+head.Proofs]
		var text bytes.Buffer
		for _, l := range body {
			text.Write(l.text)
			text.WriteByte('\n')
		}
		events, proofs, err := history.ReadExport(&text)
		if err != nil {
			return fail(start, id, err)
		}
		if len(events) != head.Events || len(proofs) != head.Proofs {
			return fail(start, id, fmt.Errorf("%w: the instance line announces %d events and %d proofs, the lines hold %d and %d", history.ErrCorrupt, head.Events, head.Proofs, len(events), len(proofs)))
		}
		ir, d, err := verifyBundleInstance(id, events, proofs, keys)
		if err != nil {
			return fail(start, id, err)
		}
		for _, p := range proofs {
			c := p.Checkpoint
			if h, ok := seen[c.Number]; ok && !bytes.Equal(h, c.Hash) {
				return fail(start, id, fmt.Errorf("%w: two checkpoints numbered %d", ErrCheckpointGap, c.Number))
			}
			seen[c.Number] = c.Hash
			keyIDs[c.KeyID] = true
		}
		var again bytes.Buffer
		if err := writeBundleInstance(&again, id, events, proofs, d); err != nil {
			return fail(start, id, err)
		}
		if !bytes.Equal(again.Bytes(), raw.Bytes()) {
			return fail(start+firstDiffLine(again.Bytes(), raw.Bytes()), id,
				fmt.Errorf("%w: the lines are not what the verified history, proofs and derived projections give", history.ErrCorrupt))
		}
		rep.Instances = append(rep.Instances, *ir)
		i += n
	}
	if len(rep.Instances) == 0 {
		return fail(2, "", fmt.Errorf("%w: the bundle holds no instance", history.ErrCorrupt))
	}
	for n := range seen {
		rep.Checkpoints = append(rep.Checkpoints, n)
	}
	sort.Slice(rep.Checkpoints, func(i, j int) bool { return rep.Checkpoints[i] < rep.Checkpoints[j] })
	for k := range keyIDs {
		rep.KeyIDs = append(rep.KeyIDs, k)
	}
	slices.Sort(rep.KeyIDs)
	return rep, nil
}

// lastByteReader remembers the last byte read through it.
type lastByteReader struct {
	r    io.Reader
	last byte
}

func (l *lastByteReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

// verifyPublishedLine checks the published line of a bundle against the
// checkpoints the bundle carries (seen: number to hash).
func verifyPublishedLine(text []byte, keys *Keyring, seen map[int64][]byte, witnesses []note.Verifier) (*AuditPublished, error) {
	var line bundlePublished
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&line); err != nil {
		return nil, fmt.Errorf("%w: published line: %v", history.ErrCorrupt, err)
	}
	c, n, err := tlog.Open([]byte(line.Published.Note), "", keys, witnesses...)
	if err != nil {
		return nil, err
	}
	if len(n.UnverifiedSigs) > 0 {
		return nil, fmt.Errorf("%w: the published note bears a signature of %s that no key given verifies", tlog.ErrNoteSignature, n.UnverifiedSigs[0].Name)
	}
	pub := &AuditPublished{Origin: c.Origin, Size: c.Size, Root: c.Root}
	for _, s := range n.Sigs {
		if s.Name != c.Origin {
			pub.Cosigners = append(pub.Cosigners, s.Name)
		}
	}
	want := 0
	for num := range seen {
		if uint64(num) <= c.Size {
			want++
		}
	}
	if len(line.Published.Inclusion) != want {
		return nil, fmt.Errorf("%w: the published note proves %d of the bundle's %d checkpoints up to its size", history.ErrCorrupt, len(line.Published.Inclusion), want)
	}
	prev := int64(0)
	for _, in := range line.Published.Inclusion {
		h, ok := seen[in.Checkpoint]
		if !ok || in.Checkpoint <= prev || uint64(in.Checkpoint) > c.Size {
			return nil, fmt.Errorf("%w: the published note proves checkpoint %d, not one of the bundle's in order", history.ErrCorrupt, in.Checkpoint)
		}
		prev = in.Checkpoint
		if err := tlog.VerifyInclusion(h, uint64(in.Checkpoint-1), c.Size, in.Proof, c.Root); err != nil {
			return nil, fmt.Errorf("%w: checkpoint %d is not in the published log: %v", ErrForked, in.Checkpoint, err)
		}
		pub.Included = append(pub.Included, in.Checkpoint)
	}
	var again bytes.Buffer
	if err := json.NewEncoder(&again).Encode(&line); err != nil {
		return nil, err
	}
	if !bytes.Equal(again.Bytes(), append(slices.Clone(text), '\n')) {
		return nil, fmt.Errorf("%w: the published line is not what its note and proofs give", history.ErrCorrupt)
	}
	return pub, nil
}

// firstDiffLine returns the 0-based line where a and b first differ.
func firstDiffLine(a, b []byte) int {
	n := 0
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '\n' {
			n++
		}
	}
	return n
}

// verifyBundleInstance checks one instance of a bundle: its chain, its
// proofs and their coverage, as [VerifyExport] does; an instance without
// events must be explained by signed tombstones alone. It returns the
// derived line its events fold into (nil without events).
func verifyBundleInstance(id string, events []Event, proofs []CheckpointProof, keys *Keyring) (*AuditInstanceReport, *bundleDerived, error) {
	ir := &AuditInstanceReport{InstanceID: id, Events: len(events)}
	for i := range events {
		if events[i].InstanceID != id {
			return nil, nil, fmt.Errorf("%w: event %d is of instance %s", history.ErrCorrupt, events[i].Seq, events[i].InstanceID)
		}
	}
	if len(proofs) == 0 {
		return nil, nil, fmt.Errorf("%w: the bundle carries no checkpoint of %s", ErrNotCovered, id)
	}
	if err := history.Verify(events); err != nil {
		return nil, nil, err
	}
	for i := range proofs {
		if i > 0 && proofs[i].Checkpoint.Number <= proofs[i-1].Checkpoint.Number {
			return nil, nil, fmt.Errorf("%w: checkpoints of %s not in order, or one twice", history.ErrMalformedCheckpoint, id)
		}
		ir.Checkpoints = append(ir.Checkpoints, proofs[i].Checkpoint.Number)
	}
	res, cov, err := proofCoverage(id, events, proofs, keys)
	if err != nil {
		return nil, nil, err
	}
	ir.CoveredSeq, ir.Checkpoint, ir.Purged = res.CoveredSeq, res.Checkpoint, res.Purged
	if len(events) == 0 {
		if !res.Purged {
			return nil, nil, &CheckpointMismatchError{InstanceID: id, Seq: cov[0].seq, Checkpoint: cov[0].number, Deleted: true}
		}
		return ir, nil, nil
	}
	if res.CoveredSeq == 0 {
		return nil, nil, &CheckpointMismatchError{InstanceID: id, Seq: cov[0].seq, Checkpoint: cov[0].number}
	}
	ir.LastSeq = events[len(events)-1].Seq
	d, v, err := derive(id, events)
	if err != nil {
		return nil, nil, err
	}
	if v.Instance != nil {
		ir.Status, ir.Workflow = v.Instance.Status, v.Instance.Name
	}
	ir.Tasks = len(v.Tasks)
	return ir, d, nil
}
