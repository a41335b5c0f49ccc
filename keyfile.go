package chronicle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// Key files, as `chronicle keygen --id KEYID --out FILE` writes them:
//
//   - a signing key file (FILE, mode 0600) is one line "KEYID BASE64-SEED",
//     the 32-byte Ed25519 seed in standard base64;
//   - a keyring file (FILE.pub) holds public keys, one "KEYID
//     BASE64-PUBLIC-KEY" a line ([Keyring]).
//
// In both, blank lines and lines starting with # are ignored.

// KeyFileError reports a signing-key or keyring file that cannot be
// used: it names the file and, when the fault is on one, the line.
type KeyFileError struct {
	Path string
	// Line is the 1-based line at fault, 0 when the fault is not on a
	// line (an empty file).
	Line int
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *KeyFileError) Error() string {
	msg := "chronicle: key file " + e.Path
	if e.Line > 0 {
		msg += fmt.Sprintf(" line %d", e.Line)
	}
	msg += ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *KeyFileError) Unwrap() error { return e.Err }

// ReadSigningKey reads a signing key file that `chronicle keygen` wrote
// and returns its signer, for [CheckpointOptions.Signer]. A file that
// cannot be read returns the os error; a malformed one (not exactly one
// "KEYID BASE64-SEED" line, a seed that is not 32 bytes of base64, an
// invalid key id) a *[KeyFileError].
func ReadSigningKey(path string) (Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var signer Signer
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(reason string, err error) (Signer, error) {
			return nil, &KeyFileError{Path: path, Line: i + 1, Reason: reason, Err: err}
		}
		if signer != nil {
			return bad("a signing key file holds one key", nil)
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return bad(`want "KEYID BASE64-SEED"`, nil)
		}
		seed, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil || len(seed) != ed25519.SeedSize {
			return bad(fmt.Sprintf("the seed is not %d bytes of base64", ed25519.SeedSize), nil)
		}
		s, err := NewEd25519Signer(fields[0], ed25519.NewKeyFromSeed(seed))
		if err != nil {
			return bad("invalid key id", err)
		}
		signer = s
	}
	if signer == nil {
		return nil, &KeyFileError{Path: path, Reason: "no key in the file"}
	}
	return signer, nil
}

// ReadKeyring reads keyring files (the FILE.pub of `chronicle keygen`,
// or several such lines gathered in one file) into one keyring, to verify
// checkpoints with ([Engine.VerifyCheckpoints], [VerifyExport]). A file
// that cannot be read returns the os error; a malformed line, or no key in
// any file, a *[KeyFileError].
func ReadKeyring(paths ...string) (*Keyring, error) {
	k := &Keyring{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := k.Parse(bytes.NewReader(data)); err != nil {
			return nil, &KeyFileError{Path: path, Reason: "not a keyring", Err: err}
		}
	}
	if k.Len() == 0 {
		return nil, &KeyFileError{Path: strings.Join(paths, ", "), Reason: "no public key in the keyring"}
	}
	return k, nil
}
