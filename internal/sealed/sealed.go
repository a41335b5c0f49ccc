// Package sealed reads and writes the envelope in which Chronicle stores
// the user payloads of an instance that has a data subject: a payload
// encrypted with AES-256-GCM under the subject's data key.
//
// The layout, all of it before the nonce authenticated as additional data:
//
//	0xc1 'C' 'S' version(1)
//	uvarint len, subject
//	uvarint len, instance id (of the instance that sealed it)
//	uvarint len, key id (the data key's)
//	nonce (12 bytes)
//	ciphertext and tag (16 bytes)
//
// 0xc1 is a byte MessagePack never uses and no JSON text starts with, so an
// envelope is never taken for a payload of the built-in codecs.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the envelope version this package writes.
const Version = 1

// magic opens every envelope.
var magic = [3]byte{0xc1, 'C', 'S'}

// KeySize is the size of a data key: AES-256.
const KeySize = 32

// Overhead is the size of an envelope beyond its plaintext, subject,
// instance id and key id, at most.
const Overhead = 4 + 3*binary.MaxVarintLen32 + 12 + 16

// maxField bounds the subject, instance id and key id of an envelope.
const maxField = 4096

// ErrMalformed is wrapped by every error of an envelope that does not
// parse.
var ErrMalformed = errors.New("malformed sealed payload")

// Header is the plaintext part of an envelope.
type Header struct {
	Version    int
	Subject    string
	InstanceID string
	KeyID      string
}

// View is the plaintext part of an envelope as slices of it: reading it
// copies nothing.
type View struct {
	Subject, InstanceID, KeyID []byte
	// aadLen is how many bytes of the envelope are authenticated.
	aadLen int
}

// Is reports whether b starts like an envelope.
func Is(b []byte) bool {
	return len(b) >= 4 && b[0] == magic[0] && b[1] == magic[1] && b[2] == magic[2]
}

// Parse reads the header of envelope b.
func Parse(b []byte) (Header, error) {
	v, err := ParseView(b)
	if err != nil {
		return Header{}, err
	}
	return Header{Version: int(b[3]), Subject: string(v.Subject), InstanceID: string(v.InstanceID), KeyID: string(v.KeyID)}, nil
}

// ParseView reads the header of envelope b without copying it.
func ParseView(b []byte) (View, error) {
	if !Is(b) {
		return View{}, fmt.Errorf("%w: no envelope", ErrMalformed)
	}
	if b[3] != Version {
		return View{}, fmt.Errorf("%w: version %d", ErrMalformed, b[3])
	}
	off := 4
	field := func(what string) ([]byte, error) {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n > maxField || uint64(len(b)-off-k) < n {
			return nil, fmt.Errorf("%w: bad %s", ErrMalformed, what)
		}
		off += k
		f := b[off : off+int(n) : off+int(n)]
		off += int(n)
		return f, nil
	}
	var v View
	var err error
	if v.Subject, err = field("subject"); err != nil {
		return View{}, err
	}
	if v.InstanceID, err = field("instance id"); err != nil {
		return View{}, err
	}
	if v.KeyID, err = field("key id"); err != nil {
		return View{}, err
	}
	if len(b)-off < 12+16 {
		return View{}, fmt.Errorf("%w: %d bytes of ciphertext", ErrMalformed, len(b)-off)
	}
	v.aadLen = off
	return v, nil
}

// Seal encrypts plaintext with aead (of [NewAEAD]) and returns the
// envelope naming subject, instanceID and keyID.
func Seal(aead cipher.AEAD, subject, instanceID, keyID string, plaintext []byte) ([]byte, error) {
	for _, f := range []string{subject, instanceID, keyID} {
		if len(f) > maxField {
			return nil, fmt.Errorf("%w: field of %d bytes", ErrMalformed, len(f))
		}
	}
	b := make([]byte, 0, Overhead+len(subject)+len(instanceID)+len(keyID)+len(plaintext))
	b = append(b, magic[0], magic[1], magic[2], Version)
	for _, f := range []string{subject, instanceID, keyID} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	aad := len(b)
	b = b[:aad+12]
	if _, err := rand.Read(b[aad:]); err != nil {
		return nil, err
	}
	return aead.Seal(b, b[aad:aad+12], plaintext, b[:aad]), nil
}

// Open decrypts envelope b with aead. An error means a malformed
// envelope, a wrong key or a changed byte: the last two cannot be told
// apart.
func Open(aead cipher.AEAD, b []byte) ([]byte, error) {
	v, err := ParseView(b)
	if err != nil {
		return nil, err
	}
	rest := b[v.aadLen:]
	pt, err := aead.Open(nil, rest[:12], rest[12:], b[:v.aadLen])
	if err != nil {
		return nil, errors.New("authentication failed: wrong key or changed ciphertext")
	}
	return pt, nil
}

// NewAEAD returns AES-256-GCM with key (KeySize bytes).
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("data key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
