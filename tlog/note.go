package tlog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/history"
)

// Errors of notes, compared with errors.Is.
var (
	// ErrMalformedNote: the bytes are not a C2SP tlog-checkpoint signed
	// note (bad text, body or signature lines), or its origin is not the
	// one expected.
	ErrMalformedNote = errors.New("tlog: malformed checkpoint note")
	// ErrNoteSignature: no signature of a trusted key verifies the note,
	// or a signature of a trusted key does not verify.
	ErrNoteSignature = errors.New("tlog: checkpoint note not signed by a trusted key")
)

// Checkpoint is the body of a C2SP tlog-checkpoint note: the log's
// origin, its size (the newest Chronicle checkpoint's Number) and the RFC
// 6962 root of the checkpoint hashes 1..Size.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   []byte
}

// ValidateOrigin checks an origin line: non-empty, valid UTF-8 without
// spaces, '+' or control characters (so that it is also the log's key
// name in signature lines), at most 256 bytes.
func ValidateOrigin(origin string) error {
	if origin == "" || len(origin) > 256 || !utf8.ValidString(origin) {
		return fmt.Errorf("tlog: invalid origin %q: want 1 to 256 bytes of UTF-8", origin)
	}
	for _, r := range origin {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '+' {
			return fmt.Errorf("tlog: invalid origin %q: no spaces, control characters or '+'", origin)
		}
	}
	return nil
}

// Sign returns the signed note of a checkpoint body: the three lines of
// C2SP tlog-checkpoint (no extension lines), a blank line, and a
// signature line of each signer.
func Sign(c Checkpoint, signers ...note.Signer) ([]byte, error) {
	if err := ValidateOrigin(c.Origin); err != nil {
		return nil, err
	}
	if len(c.Root) != HashSize {
		return nil, fmt.Errorf("tlog: root of %d bytes, want %d", len(c.Root), HashSize)
	}
	body := log.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root}
	return note.Sign(&note.Note{Text: string(body.Marshal())}, signers...)
}

// Parse reads a checkpoint note without verifying any signature: for
// display, and to learn its origin and size. Use [Open] to trust it.
func Parse(msg []byte) (*Checkpoint, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return nil, fmt.Errorf("%w: no signature block", ErrMalformedNote)
	}
	return parseBody(msg[:i+1])
}

func parseBody(text []byte) (*Checkpoint, error) {
	var body log.Checkpoint
	rest, err := body.Unmarshal(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedNote, err)
	}
	// The size has no leading zeroes nor sign, the root is one hash, and
	// extension lines are non-empty (C2SP tlog-checkpoint).
	lines := bytes.SplitN(text, []byte("\n"), 4)
	if string(lines[1]) != strconv.FormatUint(body.Size, 10) {
		return nil, fmt.Errorf("%w: size line %q", ErrMalformedNote, lines[1])
	}
	if len(body.Hash) != HashSize {
		return nil, fmt.Errorf("%w: root of %d bytes", ErrMalformedNote, len(body.Hash))
	}
	if err := ValidateOrigin(body.Origin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedNote, err)
	}
	if len(rest) > 0 {
		if !bytes.HasSuffix(rest, []byte("\n")) {
			return nil, fmt.Errorf("%w: text does not end with a newline", ErrMalformedNote)
		}
		for _, l := range bytes.Split(rest[:len(rest)-1], []byte("\n")) {
			if len(l) == 0 {
				return nil, fmt.Errorf("%w: empty extension line", ErrMalformedNote)
			}
		}
	}
	return &Checkpoint{Origin: body.Origin, Size: body.Size, Root: body.Hash}, nil
}

// Open verifies a checkpoint note and returns its body and the note
// (whose Sigs are the verified signatures). origin is the log's origin;
// empty takes the note's own. The note must bear a valid signature of one
// of keys under the origin as key name ([NoteVerifier]); signatures of
// other names or keys (witness cosignatures) are ignored unless others
// verify them. Errors wrap ErrMalformedNote or ErrNoteSignature.
func Open(msg []byte, origin string, keys *history.Keyring, others ...note.Verifier) (*Checkpoint, *note.Note, error) {
	if origin == "" {
		c, err := Parse(msg)
		if err != nil {
			return nil, nil, err
		}
		origin = c.Origin
	}
	if err := ValidateOrigin(origin); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrMalformedNote, err)
	}
	var vs []note.Verifier
	logKeys := map[uint32]bool{}
	if keys != nil {
		for _, id := range keys.KeyIDs() {
			pub, _ := keys.Key(id)
			v, err := NoteVerifier(origin, pub)
			if err != nil {
				return nil, nil, err
			}
			if !logKeys[v.KeyHash()] {
				vs = append(vs, v)
				logKeys[v.KeyHash()] = true
			}
		}
	}
	if len(vs) == 0 {
		return nil, nil, fmt.Errorf("%w: no log key to verify with", ErrNoteSignature)
	}
	n, err := note.Open(msg, note.VerifierList(append(vs, others...)...))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, nil, fmt.Errorf("%w: no signature of a key of origin %s", ErrNoteSignature, origin)
	case errors.As(err, &invalid):
		return nil, nil, fmt.Errorf("%w: %v", ErrNoteSignature, err)
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %v", ErrMalformedNote, err)
	}
	// Base64 decoding ignores the unused low bits of a signature's last
	// character, so a note whose signature line is written otherwise
	// verifies as well; a note has one encoding, so it is refused.
	for _, sig := range append(n.Sigs, n.UnverifiedSigs...) {
		b, err := base64.StdEncoding.Strict().DecodeString(sig.Base64)
		if err != nil || base64.StdEncoding.EncodeToString(b) != sig.Base64 {
			return nil, nil, fmt.Errorf("%w: signature of %s not in canonical base64", ErrMalformedNote, sig.Name)
		}
	}
	signed := false
	for _, s := range n.Sigs {
		signed = signed || (s.Name == origin && logKeys[s.Hash])
	}
	if !signed {
		return nil, nil, fmt.Errorf("%w: no signature of a key of origin %s", ErrNoteSignature, origin)
	}
	c, err := parseBody([]byte(n.Text))
	if err != nil {
		return nil, nil, err
	}
	if c.Origin != origin {
		return nil, nil, fmt.Errorf("%w: origin %q, want %q", ErrMalformedNote, c.Origin, origin)
	}
	return c, n, nil
}

// algEd25519 is the signed-note algorithm byte of Ed25519 signatures.
const algEd25519 = 0x01

// keyHash is the signed-note key id: the first 4 bytes of SHA-256(name ‖
// "\n" ‖ algorithm ‖ public key), big-endian.
func keyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte("\n"))
	h.Write([]byte{alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// NoteSigner returns a note.Signer that signs checkpoint notes of origin
// with a Chronicle signer (an Ed25519 key in memory, a KMS or an HSM):
// the key name is the origin, the signature a plain Ed25519 signature of
// the note text (algorithm 0x01 of C2SP signed-note). Chronicle's own
// checkpoints are signed over bytes starting "chronicle checkpoint
// v1\x00", which no note text can hold, so the two never stand for one
// another.
func NoteSigner(origin string, s history.Signer) (note.Signer, error) {
	if err := ValidateOrigin(origin); err != nil {
		return nil, err
	}
	pub, ok := s.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("tlog: signer %s has no Ed25519 public key", s.KeyID())
	}
	return &noteSigner{name: origin, hash: keyHash(origin, algEd25519, pub), s: s}, nil
}

type noteSigner struct {
	name string
	hash uint32
	s    history.Signer
}

func (n *noteSigner) Name() string                    { return n.name }
func (n *noteSigner) KeyHash() uint32                 { return n.hash }
func (n *noteSigner) Sign(msg []byte) ([]byte, error) { return n.s.Sign(msg) }

// NoteVerifier returns the note.Verifier of checkpoint notes of origin
// signed with pub ([NoteSigner]).
func NoteVerifier(origin string, pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := VerifierKey(origin, pub)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// VerifierKey returns the signed-note verifier key ("vkey") of checkpoint
// notes of origin signed with pub: "ORIGIN+KEYHASH+BASE64(0x01 ‖ pub)", as
// standard tooling (golang.org/x/mod/sumdb/note.NewVerifier) reads it.
func VerifierKey(origin string, pub ed25519.PublicKey) (string, error) {
	if err := ValidateOrigin(origin); err != nil {
		return "", err
	}
	return note.NewEd25519VerifierKey(origin, pub)
}

// SplitSignatures returns the signature lines of a note ("— NAME
// BASE64\n" each), for appending cosignatures to it.
func SplitSignatures(msg []byte) (text, sigs []byte, err error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || !strings.HasPrefix(string(msg[i+2:]), "— ") {
		return nil, nil, fmt.Errorf("%w: no signature block", ErrMalformedNote)
	}
	return msg[:i+1], msg[i+2:], nil
}
