package history

import (
	"bufio"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Signer signs checkpoints. [Ed25519Signer] keeps its key in memory; a KMS
// or HSM implements Signer with its own client. Verification knows Ed25519
// public keys only ([Keyring]): a Signer must produce Ed25519 signatures.
type Signer interface {
	// KeyID names the key; checkpoints record it, and a [Keyring] finds
	// the public key by it. A valid id ([ValidateID]) without spaces.
	KeyID() string
	// Public returns the public key (an ed25519.PublicKey).
	Public() crypto.PublicKey
	// Sign signs msg as a whole (pure Ed25519, no pre-hash).
	Sign(msg []byte) ([]byte, error)
}

// Ed25519Signer is a [Signer] with an Ed25519 private key in memory.
type Ed25519Signer struct {
	id  string
	key ed25519.PrivateKey
}

// NewEd25519Signer returns a signer of key under keyID. It returns an
// error for an invalid key id or a key of the wrong size.
func NewEd25519Signer(keyID string, key ed25519.PrivateKey) (*Ed25519Signer, error) {
	if err := validKeyID(keyID); err != nil {
		return nil, err
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("history: Ed25519 private key of %s has %d bytes, want %d", keyID, len(key), ed25519.PrivateKeySize)
	}
	return &Ed25519Signer{id: keyID, key: key}, nil
}

// KeyID implements Signer.
func (s *Ed25519Signer) KeyID() string { return s.id }

// Public implements Signer.
func (s *Ed25519Signer) Public() crypto.PublicKey { return s.key.Public() }

// Sign implements Signer.
func (s *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

func validKeyID(id string) error {
	if err := ValidateID("key id", id); err != nil {
		return err
	}
	if strings.ContainsAny(id, " \t\r\n#") {
		return fmt.Errorf("history: key id %q holds a space or #", id)
	}
	return nil
}

// Keyring maps key ids to Ed25519 public keys, for verifying checkpoints
// signed with any of them: keep retired keys in it after a rotation, so
// that the checkpoints they signed still verify. Its text form
// ([ParseKeyring], [Keyring.WriteTo]) is one key a line, "KEYID
// BASE64-PUBLIC-KEY", with blank lines and lines starting with # ignored.
// The zero value is empty and ready to use.
type Keyring struct {
	keys map[string]ed25519.PublicKey
}

// Add puts a public key in the keyring. It returns an error for an invalid
// key id, a key that is not an Ed25519 public key, or an id already
// holding another key.
func (k *Keyring) Add(keyID string, pub crypto.PublicKey) error {
	if err := validKeyID(keyID); err != nil {
		return err
	}
	p, ok := pub.(ed25519.PublicKey)
	if !ok || len(p) != ed25519.PublicKeySize {
		return fmt.Errorf("history: key %s is not an Ed25519 public key", keyID)
	}
	if old, ok := k.keys[keyID]; ok && !old.Equal(p) {
		return fmt.Errorf("history: key id %s already holds another key", keyID)
	}
	if k.keys == nil {
		k.keys = map[string]ed25519.PublicKey{}
	}
	k.keys[keyID] = slices.Clone(p)
	return nil
}

// Len returns how many keys the keyring holds.
func (k *Keyring) Len() int { return len(k.keys) }

// Key returns the public key of a key id; ok is false when the keyring
// does not hold it.
func (k *Keyring) Key(keyID string) (pub ed25519.PublicKey, ok bool) {
	if k == nil {
		return nil, false
	}
	pub, ok = k.keys[keyID]
	return slices.Clone(pub), ok
}

// KeyIDs returns the key ids, sorted.
func (k *Keyring) KeyIDs() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// WriteTo writes the keyring in its text form, sorted by key id.
func (k *Keyring) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, id := range k.KeyIDs() {
		m, err := fmt.Fprintln(w, KeyringLine(id, k.keys[id]))
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// KeyringLine returns the line of a key in a keyring file.
func KeyringLine(keyID string, pub ed25519.PublicKey) string {
	return keyID + " " + base64.StdEncoding.EncodeToString(pub)
}

// Parse reads a keyring in its text form and adds its keys to k. Errors
// name the line.
func (k *Keyring) Parse(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return fmt.Errorf("history: keyring line %d: want \"KEYID BASE64-PUBLIC-KEY\"", line)
		}
		pub, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			return fmt.Errorf("history: keyring line %d: %v", line, err)
		}
		if err := k.Add(fields[0], ed25519.PublicKey(pub)); err != nil {
			return fmt.Errorf("keyring line %d: %w", line, err)
		}
	}
	return sc.Err()
}

// ParseKeyring returns the keyring of a keyring file's text.
func ParseKeyring(r io.Reader) (*Keyring, error) {
	k := &Keyring{}
	return k, k.Parse(r)
}

func (k *Keyring) verify(keyID string, msg, sig []byte, number int64) error {
	pub, ok := k.keys[keyID]
	if !ok {
		return fmt.Errorf("%w: checkpoint %d is signed with key %q", ErrUnknownKey, number, keyID)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: checkpoint %d, key %q", ErrBadSignature, number, keyID)
	}
	return nil
}

// check rejects a nil or empty keyring.
func (k *Keyring) check() error {
	if k == nil || len(k.keys) == 0 {
		return fmt.Errorf("%w: the keyring is empty", ErrUnknownKey)
	}
	return nil
}
