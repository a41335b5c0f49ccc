package tlog

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/history"
)

// algCosignatureV1 is the signed-note algorithm byte of Ed25519
// tlog-cosignature/v1 signatures.
const algCosignatureV1 = 0x04

// cosignedMessage is what an Ed25519 cosignature/v1 signs (C2SP
// tlog-cosignature): "cosignature/v1\n", "time T\n", then the note text.
func cosignedMessage(t uint64, text []byte) []byte {
	m := make([]byte, 0, 32+len(text))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, t, 10)
	m = append(m, '\n')
	return append(m, text...)
}

// Cosigner is a witness key: a note.Signer of C2SP tlog-cosignature/v1
// Ed25519 cosignatures, whose signature is the 8-byte big-endian POSIX
// time of signing followed by the Ed25519 signature of "cosignature/v1\n"
// ‖ "time T\n" ‖ the note text, and whose key id hashes the algorithm
// byte 0x04. A cosignature states that, at that time, this was the
// largest tree the witness saw for the origin, consistent with all it
// saw before.
type Cosigner struct {
	name string
	hash uint32
	s    history.Signer
	pub  ed25519.PublicKey
	now  func() time.Time
}

// NewCosigner returns the cosigner of a witness named name (a
// schema-less URL such as "witness.example/w1") signing with s (an
// Ed25519 key in memory, a KMS, an HSM; a key of its own, never the
// log's); now gives the time of signing (time.Now when nil).
func NewCosigner(name string, s history.Signer, now func() time.Time) (*Cosigner, error) {
	if err := ValidateOrigin(name); err != nil {
		return nil, fmt.Errorf("tlog: witness name: %w", err)
	}
	pub, ok := s.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("tlog: witness key %s is not an Ed25519 key", s.KeyID())
	}
	if now == nil {
		now = time.Now
	}
	return &Cosigner{name: name, hash: keyHash(name, algCosignatureV1, pub), s: s, pub: pub, now: now}, nil
}

// Name implements note.Signer.
func (c *Cosigner) Name() string { return c.name }

// KeyHash implements note.Signer.
func (c *Cosigner) KeyHash() uint32 { return c.hash }

// Sign implements note.Signer: msg is the note text.
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	t := c.now().Unix()
	if t < 0 {
		return nil, fmt.Errorf("tlog: cosigning time %d is before 1970", t)
	}
	sig, err := c.s.Sign(cosignedMessage(uint64(t), msg))
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(sig)), uint64(t)), sig...), nil
}

// Verifier returns the verifier of the cosigner's signatures.
func (c *Cosigner) Verifier() note.Verifier {
	return &cosignatureVerifier{name: c.name, hash: c.hash, pub: c.pub}
}

// Key returns the cosigner's verifier key ([CosignerKey]).
func (c *Cosigner) Key() string {
	k, _ := CosignerKey(c.name, c.pub)
	return k
}

// NewCosignatureVerifier returns the note.Verifier of the cosignatures of
// witness name with public key pub.
func NewCosignatureVerifier(name string, pub ed25519.PublicKey) (note.Verifier, error) {
	if err := ValidateOrigin(name); err != nil {
		return nil, fmt.Errorf("tlog: witness name: %w", err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("tlog: witness public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	return &cosignatureVerifier{name: name, hash: keyHash(name, algCosignatureV1, pub), pub: pub}, nil
}

// CosignerKey returns the verifier key ("vkey") of a witness:
// "NAME+KEYHASH+BASE64(0x04 ‖ pub)" (C2SP tlog-cosignature).
func CosignerKey(name string, pub ed25519.PublicKey) (string, error) {
	if _, err := NewCosignatureVerifier(name, pub); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s+%08x+%s", name, keyHash(name, algCosignatureV1, pub), base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, pub...))), nil
}

type cosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v *cosignatureVerifier) Name() string    { return v.name }
func (v *cosignatureVerifier) KeyHash() uint32 { return v.hash }
func (v *cosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > 1<<63-1 {
		return false
	}
	return ed25519.Verify(v.pub, cosignedMessage(t, msg), sig[8:])
}

// CosignatureTime returns the time a cosignature of v was made, read from
// the signature of a verified note; ok is false when n has none.
func CosignatureTime(n *note.Note, v note.Verifier) (t time.Time, ok bool) {
	for _, s := range n.Sigs {
		if s.Name != v.Name() || s.Hash != v.KeyHash() {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || len(b) < 4+8 {
			return time.Time{}, false
		}
		return time.Unix(int64(binary.BigEndian.Uint64(b[4:])), 0).UTC(), true
	}
	return time.Time{}, false
}
