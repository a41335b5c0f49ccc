package chronicle

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/sealed"
)

// FileKeyProvider is a [KeyProvider] that keeps data keys in a directory:
// one file (mode 0600) per subject, named by the SHA-256 of the subject
// (the directory does not list subjects), holding the data key wrapped
// with AES-256-GCM under a key-encryption key (KEK). KEKs are read from
// KEK files, as [GenerateKEK] and `chronicle keys kek` write them: one
// line "KEKID BASE64-KEY" (32 bytes), mode 0600.
//
// Destroying a key writes an "erased" marker for the subject and removes
// its key file. Removing a file does not scrub the disk: a copy of the
// wrapped key may survive in free blocks or backups, and opens with the
// KEK. Rotate the KEK after erasures ([FileKeyProvider.Rotate]) and then
// destroy the old KEK file and its backups; from then on no surviving
// copy opens. Processes that share the directory (engines, the tool) may
// run at once.
type FileKeyProvider struct {
	dir  string
	keks []kek // keks[0] wraps new keys
	mu   sync.Mutex
}

type kek struct {
	id   string
	aead interface {
		Seal(dst, nonce, plaintext, additionalData []byte) []byte
		Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
		NonceSize() int
	}
}

// NewFileKeyProvider returns the provider of the data keys in dir, which
// it creates (mode 0700) when missing. The first KEK file's key wraps new
// keys and Rotate re-wraps every key under it; the others only unwrap
// keys they wrapped (older KEKs, until a rotation retires them).
func NewFileKeyProvider(dir string, kekFiles ...string) (*FileKeyProvider, error) {
	if len(kekFiles) == 0 {
		return nil, fmt.Errorf("%w: no KEK file", ErrInvalidArgument)
	}
	p := &FileKeyProvider{dir: dir}
	for _, f := range kekFiles {
		id, key, err := ReadKEK(f)
		if err != nil {
			return nil, err
		}
		aead, err := sealed.NewAEAD(key)
		if err != nil {
			return nil, err
		}
		p.keks = append(p.keks, kek{id: id, aead: aead})
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return p, nil
}

// GenerateKEK writes a new KEK file at path (mode 0600) with key id id.
// It never overwrites a file.
func GenerateKEK(path, id string) error {
	if err := history.ValidateID("KEK id", id); err != nil || strings.ContainsAny(id, " \t") {
		return fmt.Errorf("%w: KEK id %q", ErrInvalidArgument, id)
	}
	key := make([]byte, sealed.KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", id, base64.StdEncoding.EncodeToString(key))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadKEK reads a KEK file: one line "KEKID BASE64-KEY" of a 32-byte key;
// blank lines and # comments are ignored. A malformed file is a
// *[KeyFileError].
func ReadKEK(path string) (id string, key []byte, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if id != "" {
			return "", nil, &KeyFileError{Path: path, Line: i + 1, Reason: "more than one key"}
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return "", nil, &KeyFileError{Path: path, Line: i + 1, Reason: `want "KEKID BASE64-KEY"`}
		}
		key, err = base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(key) != sealed.KeySize {
			return "", nil, &KeyFileError{Path: path, Line: i + 1, Reason: fmt.Sprintf("the key is not %d bytes of base64", sealed.KeySize), Err: err}
		}
		id = f[0]
	}
	if id == "" {
		return "", nil, &KeyFileError{Path: path, Reason: "no key"}
	}
	return id, key, nil
}

// keyFileHeader opens every wrapped data key file.
const keyFileHeader = "chronicle-data-key-v1"

// subjectFileName is the name of subject's files: the hex SHA-256 of the subject.
func subjectFileName(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:])
}

func (p *FileKeyProvider) path(subject, ext string) string {
	return filepath.Join(p.dir, subjectFileName(subject)+ext)
}

// wrapAAD binds a wrapped key to its subject (by the name of its file)
// and its id.
func wrapAAD(name, keyID string) []byte {
	return []byte("chronicle data key\x00" + name + "\x00" + keyID)
}

// DataKey implements KeyProvider.
func (p *FileKeyProvider) DataKey(ctx context.Context, subject string, create bool) (DataKey, error) {
	if err := history.ValidateID("subject", subject); err != nil {
		return DataKey{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if _, err := os.Stat(p.path(subject, ".erased")); err == nil {
		return DataKey{}, &ErasedError{Subject: subject}
	}
	dk, err := p.read(subject)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return dk, err
	}
	if !create {
		return DataKey{}, fmt.Errorf("%w %q", ErrNoDataKey, subject)
	}
	id := make([]byte, 8)
	dk.Key = make([]byte, sealed.KeySize)
	if _, err := rand.Read(id); err != nil {
		return DataKey{}, err
	}
	if _, err := rand.Read(dk.Key); err != nil {
		return DataKey{}, err
	}
	dk.ID = hex.EncodeToString(id)
	// Written aside and linked into place: of two processes creating a
	// key at once, the second finds the first's and uses it.
	wrapped, err := p.wrap(subjectFileName(subject), dk, p.keks[0])
	if err != nil {
		return DataKey{}, err
	}
	tmp, err := p.writeTemp(wrapped)
	if err != nil {
		return DataKey{}, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p.path(subject, ".key")); err != nil {
		if errors.Is(err, os.ErrExist) {
			return p.read(subject)
		}
		return DataKey{}, err
	}
	// A destruction that ran between the check above and the link wins.
	if _, err := os.Stat(p.path(subject, ".erased")); err == nil {
		os.Remove(p.path(subject, ".key"))
		return DataKey{}, &ErasedError{Subject: subject}
	}
	return dk, syncDir(p.dir)
}

func (p *FileKeyProvider) wrap(name string, dk DataKey, k kek) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ct := k.aead.Seal(nonce, nonce, dk.Key, wrapAAD(name, dk.ID))
	return fmt.Appendf(nil, "%s %s %s %s\n", keyFileHeader, k.id, dk.ID, base64.StdEncoding.EncodeToString(ct)), nil
}

// read reads and unwraps subject's key file; the error wraps
// os.ErrNotExist when there is none.
func (p *FileKeyProvider) read(subject string) (DataKey, error) {
	path := p.path(subject, ".key")
	data, err := os.ReadFile(path)
	if err != nil {
		return DataKey{}, err
	}
	kekID, dk, ct, err := parseKeyFile(path, data)
	if err != nil {
		return DataKey{}, err
	}
	for _, k := range p.keks {
		if k.id != kekID {
			continue
		}
		n := k.aead.NonceSize()
		if len(ct) < n {
			break
		}
		if dk.Key, err = k.aead.Open(nil, ct[:n], ct[n:], wrapAAD(subjectFileName(subject), dk.ID)); err != nil {
			return DataKey{}, &KeyFileError{Path: path, Line: 1, Reason: "the wrapped key does not open with KEK " + kekID}
		}
		return dk, nil
	}
	return DataKey{}, &KeyFileError{Path: path, Line: 1, Reason: "wrapped by KEK " + kekID + ", which the provider does not hold"}
}

func parseKeyFile(path string, data []byte) (kekID string, dk DataKey, ct []byte, err error) {
	f := strings.Fields(string(bytes.TrimSpace(data)))
	if len(f) != 4 || f[0] != keyFileHeader {
		return "", DataKey{}, nil, &KeyFileError{Path: path, Line: 1, Reason: "not a wrapped data key"}
	}
	ct, err = base64.StdEncoding.DecodeString(f[3])
	if err != nil {
		return "", DataKey{}, nil, &KeyFileError{Path: path, Line: 1, Reason: "bad base64", Err: err}
	}
	return f[1], DataKey{ID: f[2]}, ct, nil
}

// DestroyKey implements KeyProvider: it writes the subject's erased
// marker, then removes its key file.
func (p *FileKeyProvider) DestroyKey(ctx context.Context, subject string) error {
	if err := history.ValidateID("subject", subject); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	tmp, err := p.writeTemp([]byte("erased " + time.Now().UTC().Format(time.RFC3339) + "\n"))
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p.path(subject, ".erased")); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Remove(p.path(subject, ".key")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(p.dir)
}

// Rotate implements KeyProvider: every key file wrapped by another KEK
// than the first is re-wrapped under the first.
func (p *FileKeyProvider) Rotate(ctx context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ent := range ents {
		name := ent.Name()
		if !strings.HasSuffix(name, ".key") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		path := filepath.Join(p.dir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // destroyed meanwhile
		}
		if err != nil {
			return n, err
		}
		kekID, dk, ct, err := parseKeyFile(path, data)
		if err != nil {
			return n, err
		}
		if kekID == p.keks[0].id {
			continue
		}
		old := -1
		for i, k := range p.keks {
			if k.id == kekID {
				old = i
			}
		}
		if old < 0 {
			return n, &KeyFileError{Path: path, Line: 1, Reason: "wrapped by KEK " + kekID + ", which the provider does not hold"}
		}
		name = strings.TrimSuffix(name, ".key")
		k := p.keks[old]
		nsz := k.aead.NonceSize()
		if len(ct) < nsz {
			return n, &KeyFileError{Path: path, Line: 1, Reason: "the wrapped key is too short"}
		}
		if dk.Key, err = k.aead.Open(nil, ct[:nsz], ct[nsz:], wrapAAD(name, dk.ID)); err != nil {
			return n, &KeyFileError{Path: path, Line: 1, Reason: "the wrapped key does not open with KEK " + kekID}
		}
		wrapped, err := p.wrap(name, dk, p.keks[0])
		if err != nil {
			return n, err
		}
		tmp, err := p.writeTemp(wrapped)
		if err != nil {
			return n, err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return n, err
		}
		n++
	}
	return n, nil
}

func (p *FileKeyProvider) writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp(p.dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
