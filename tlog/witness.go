package tlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/history"
)

// Errors of the witness protocol (C2SP tlog-witness), compared with
// errors.Is; the HTTP status each stands for is in brackets.
var (
	// ErrUnknownLog: the witness is not configured for the origin [404].
	ErrUnknownLog = errors.New("tlog: the witness does not know the log")
	// ErrBadRequest: the request is not of the protocol's form [400].
	ErrBadRequest = errors.New("tlog: bad witness request")
	// ErrWitnessConflict: the old size is not the witness's latest, or
	// the checkpoint has the witness's size and another root [409]; see
	// [ConflictError].
	ErrWitnessConflict = errors.New("tlog: the checkpoint does not extend the witness's latest")
)

// ConflictError is the witness's answer to a checkpoint that does not
// start from its latest cosigned size (Size): the client sends a
// consistency proof from Size instead. Fork is set when the checkpoint has
// the witness's size and another root: two histories. It matches
// ErrWitnessConflict.
type ConflictError struct {
	Size uint64
	Fork bool
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.Fork {
		return fmt.Sprintf("tlog: the witness cosigned another root at size %d", e.Size)
	}
	return fmt.Sprintf("tlog: the witness's latest cosigned size is %d", e.Size)
}

// Is matches ErrWitnessConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrWitnessConflict }

// maxProof is the most consistency proof lines a request may carry.
const maxProof = 63

// maxRequest bounds a request body.
const maxRequest = 64 << 10

// WitnessOptions configure a [Witness].
type WitnessOptions struct {
	// Cosigner is the witness key. Required.
	Cosigner *Cosigner
	// Logs are the logs the witness cosigns, by origin, with the public
	// keys that sign their checkpoints. Required.
	Logs map[string]*history.Keyring
	// Dir keeps the latest cosigned checkpoint of each log, one file a
	// log named after its escaped origin, replaced atomically. Required:
	// a witness that forgets its latest cosigns any fork.
	Dir string
}

// Witness is the witness side of C2SP tlog-witness: an http.Handler
// answering POST .../add-checkpoint. It keeps the latest checkpoint it
// cosigned for each log (in WitnessOptions.Dir) and cosigns a new one only
// when it is signed by the log's key and extends that latest one by a
// valid RFC 6962 consistency proof, so that a key holder cannot show two
// histories to those who trust the witness. GET .../checkpoint?origin=O
// returns the latest checkpoint it cosigned, with its cosignature.
type Witness struct {
	opts WitnessOptions
	mu   sync.Mutex
}

// NewWitness returns a witness. It returns an error for missing options,
// an invalid origin or an empty keyring.
func NewWitness(opts WitnessOptions) (*Witness, error) {
	if opts.Cosigner == nil || opts.Dir == "" || len(opts.Logs) == 0 {
		return nil, errors.New("tlog: a witness needs Cosigner, Dir and Logs")
	}
	for origin, keys := range opts.Logs {
		if err := ValidateOrigin(origin); err != nil {
			return nil, err
		}
		if keys == nil || keys.Len() == 0 {
			return nil, fmt.Errorf("tlog: log %s has no key", origin)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	return &Witness{opts: opts}, nil
}

func (w *Witness) path(origin string) string {
	return filepath.Join(w.opts.Dir, url.PathEscape(origin)+".checkpoint")
}

// Latest returns the latest checkpoint the witness cosigned for origin,
// with its cosignature, or nil when there is none.
func (w *Witness) Latest(origin string) ([]byte, error) {
	b, err := os.ReadFile(w.path(origin))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// AddCheckpoint is the add-checkpoint call without HTTP: msg is a
// checkpoint note, oldSize the size of the witness's latest for its
// origin, proof the consistency proof from oldSize to the checkpoint's
// size. It returns the witness's cosignature line(s), or an error
// wrapping ErrUnknownLog, ErrNoteSignature, ErrBadRequest,
// ErrWitnessConflict (a *ConflictError), ErrBadProof or ErrMalformedNote.
func (w *Witness) AddCheckpoint(oldSize uint64, proof [][]byte, msg []byte) ([]byte, error) {
	c, err := Parse(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	keys, ok := w.opts.Logs[c.Origin]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownLog, c.Origin)
	}
	c, n, err := Open(msg, c.Origin, keys)
	if err != nil {
		return nil, err
	}
	if oldSize > c.Size {
		return nil, fmt.Errorf("%w: old size %d above the checkpoint's %d", ErrBadRequest, oldSize, c.Size)
	}
	if oldSize == 0 && len(proof) > 0 {
		return nil, fmt.Errorf("%w: a proof from size 0", ErrBadRequest)
	}
	// Check against the latest and replace it in one step.
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, err := w.Latest(c.Origin)
	if err != nil {
		return nil, err
	}
	var latest *Checkpoint
	if prev != nil {
		if latest, _, err = Open(prev, c.Origin, keys); err != nil {
			return nil, fmt.Errorf("tlog: the witness's own latest of %s: %w", c.Origin, err)
		}
	}
	latestSize := uint64(0)
	if latest != nil {
		latestSize = latest.Size
	}
	if oldSize != latestSize {
		return nil, &ConflictError{Size: latestSize}
	}
	if latest != nil {
		if latest.Size == c.Size && !bytes.Equal(latest.Root, c.Root) {
			return nil, &ConflictError{Size: latestSize, Fork: true}
		}
		if err := VerifyConsistency(latest.Size, c.Size, proof, latest.Root, c.Root); err != nil {
			return nil, err
		}
	}
	text := []byte(n.Text)
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.opts.Cosigner)
	if err != nil {
		return nil, err
	}
	_, cosig, err := SplitSignatures(signed)
	if err != nil {
		return nil, err
	}
	// Keep the log's signatures and the cosignature: what a verifier of
	// the witness's latest needs.
	_, logSigs, err := SplitSignatures(msg)
	if err != nil {
		return nil, err
	}
	kept := append(append(append(append([]byte{}, text...), '\n'), logSigs...), cosig...)
	if err := writeAtomic(w.path(c.Origin), kept); err != nil {
		return nil, err
	}
	return cosig, nil
}

// writeAtomic replaces path with data: a temporary file, synced, then
// renamed over it.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// ServeHTTP implements http.Handler: POST .../add-checkpoint and GET
// .../checkpoint?origin=O.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/add-checkpoint"):
		w.serveAdd(rw, r)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/checkpoint"):
		b, err := w.Latest(r.URL.Query().Get("origin"))
		switch {
		case err != nil:
			http.Error(rw, err.Error(), http.StatusInternalServerError)
		case b == nil:
			http.Error(rw, "no checkpoint cosigned for that origin", http.StatusNotFound)
		default:
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = rw.Write(b)
		}
	default:
		http.Error(rw, "not found", http.StatusNotFound)
	}
}

func (w *Witness) serveAdd(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil || len(body) > maxRequest {
		http.Error(rw, "request too large or unreadable", http.StatusBadRequest)
		return
	}
	oldSize, proof, msg, err := ParseAddCheckpoint(body)
	var cosig []byte
	if err == nil {
		cosig, err = w.AddCheckpoint(oldSize, proof, msg)
	}
	var conflict *ConflictError
	switch {
	case err == nil:
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rw.Write(cosig)
	case errors.As(err, &conflict):
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		_, _ = fmt.Fprintf(rw, "%d\n", conflict.Size)
	default:
		http.Error(rw, err.Error(), statusOf(err))
	}
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrNoteSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrBadProof):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrMalformedNote):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// FormatAddCheckpoint returns the body of an add-checkpoint request: "old
// N", the proof's hashes in base64 a line each, a blank line, the note.
func FormatAddCheckpoint(oldSize uint64, proof [][]byte, msg []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", oldSize)
	for _, h := range proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(msg)
	return b.Bytes()
}

// ParseAddCheckpoint reads the body of an add-checkpoint request. Errors
// wrap ErrBadRequest.
func ParseAddCheckpoint(body []byte) (oldSize uint64, proof [][]byte, msg []byte, err error) {
	bad := func(why string) (uint64, [][]byte, []byte, error) {
		return 0, nil, nil, fmt.Errorf("%w: %s", ErrBadRequest, why)
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte("old ")) {
		return bad("no old size line")
	}
	digits := string(line[4:])
	oldSize, perr := strconv.ParseUint(digits, 10, 64)
	if perr != nil || strconv.FormatUint(oldSize, 10) != digits {
		return bad("old size is not a decimal without leading zeroes")
	}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return bad("no blank line before the checkpoint")
		}
		if len(line) == 0 {
			break
		}
		if len(proof) == maxProof {
			return bad("more than 63 proof lines")
		}
		h, derr := base64.StdEncoding.Strict().DecodeString(string(line))
		if derr != nil || len(h) != HashSize {
			return bad("a proof line is not a base64 hash")
		}
		proof = append(proof, h)
	}
	return oldSize, proof, rest, nil
}

// WitnessClient calls a witness's add-checkpoint (C2SP tlog-witness).
type WitnessClient struct {
	// URL is the witness's submission prefix: the request goes to
	// URL + "/add-checkpoint".
	URL string
	// HTTP is the client to use; http.DefaultClient when nil.
	HTTP *http.Client
}

// AddCheckpoint submits a checkpoint note with the consistency proof from
// oldSize and returns the witness's cosignature line(s). Errors: a
// *ConflictError for 409 (the witness's latest size is in it), errors
// wrapping ErrUnknownLog (404), ErrNoteSignature (403), ErrBadProof (422),
// ErrBadRequest (400), or the transport's.
func (c *WitnessClient) AddCheckpoint(ctx context.Context, oldSize uint64, proof [][]byte, msg []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", bytes.NewReader(FormatAddCheckpoint(oldSize, proof, msg)))
	if err != nil {
		return nil, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRequest))
	if err != nil {
		return nil, err
	}
	msgOf := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		if !bytes.HasPrefix(body, []byte("— ")) || !bytes.HasSuffix(body, []byte("\n")) {
			return nil, fmt.Errorf("tlog: witness %s answered without signature lines", c.URL)
		}
		return body, nil
	case http.StatusConflict:
		size, err := strconv.ParseUint(strings.TrimSpace(string(body)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: witness %s answered 409 without a size", ErrWitnessConflict, c.URL)
		}
		return nil, &ConflictError{Size: size}
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s: %s", ErrUnknownLog, c.URL, msgOf)
	case http.StatusForbidden:
		return nil, fmt.Errorf("%w: witness %s: %s", ErrNoteSignature, c.URL, msgOf)
	case http.StatusUnprocessableEntity:
		return nil, fmt.Errorf("%w: witness %s: %s", ErrBadProof, c.URL, msgOf)
	case http.StatusBadRequest:
		return nil, fmt.Errorf("%w: witness %s: %s", ErrBadRequest, c.URL, msgOf)
	}
	return nil, fmt.Errorf("tlog: witness %s answered %s: %s", c.URL, resp.Status, msgOf)
}
