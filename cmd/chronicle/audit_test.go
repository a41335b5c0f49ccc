package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// writeTestKey writes a signing key file and its keyring file with a fixed
// seed, so that signatures, and the tool's output, are the same every run.
func writeTestKey(t *testing.T, dir string) (key, pub string) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	key, pub = filepath.Join(dir, "2026-11.key"), filepath.Join(dir, "2026-11.key.pub")
	require.NoError(t, os.WriteFile(key, []byte("2026-11 "+base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600))
	require.NoError(t, os.WriteFile(pub, []byte("2026-11 "+base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))+"\n"), 0o644))
	return key, pub
}

// The demo data, bundled with a signing key, verifies offline with the
// keyring alone, and fails on edited bytes.
func TestAuditBundleOfTheDemo(t *testing.T) {
	tmp := t.TempDir()
	writeTestKey(t, tmp)
	r := runTool(t, tmp, hooks{}, "--sign-key", "$TMP/2026-11.key", "audit", "bundle", "--all", "--out", "$TMP/demo.bundle")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "wrote the audit bundle of 8 instances")
	again := runTool(t, tmp, hooks{}, "--sign-key", "$TMP/2026-11.key", "audit", "bundle", "--all", "--out", "$TMP/demo.bundle")
	require.NotEqual(t, exitOK, again.code, "a bundle is never overwritten")

	args := []string{"audit", "verify", "$TMP/demo.bundle", "--key", "$TMP/2026-11.key.pub"}
	r = runTool(t, tmp, hooks{}, args...)
	require.Equal(t, exitOK, r.code, r.stderr)
	checkGolden(t, "audit-verify", transcript(args, r))

	// Another keyring proves nothing.
	other := t.TempDir()
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	require.NoError(t, os.WriteFile(filepath.Join(other, "k.pub"), []byte("2026-11 "+base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))+"\n"), 0o644))
	r = runTool(t, tmp, hooks{}, "audit", "verify", "$TMP/demo.bundle", "--key", filepath.Join(other, "k.pub"))
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, "FAILED")

	// Edited bytes: every 64th byte (every 512th under the race detector;
	// the library's test edits every byte of a smaller bundle),
	// from an offset drawn from a seed printed here.
	b, err := os.ReadFile(filepath.Join(tmp, "demo.bundle"))
	require.NoError(t, err)
	keys, err := chronicle.ReadKeyring(filepath.Join(tmp, "2026-11.key.pub"))
	require.NoError(t, err)
	step := 64
	if raceEnabled {
		step = 512
	}
	seed := time.Now().UnixNano()
	offset := int(seed % int64(step))
	t.Logf("editing every %dth byte of %d from %d (seed %d)", step, len(b), offset, seed)
	edited := make([]byte, len(b))
	for i := offset; i < len(b); i += step {
		copy(edited, b)
		edited[i] ^= 0x01
		if _, err := chronicle.VerifyAuditBundle(bytes.NewReader(edited), keys); !errors.Is(err, chronicle.ErrAuditBundle) {
			t.Fatalf("byte %d (%q) edited: the bundle still verifies (err %v)", i, b[i], err)
		}
	}
	// The tool reports the line of an edit.
	edited = bytes.Replace(bytes.Clone(b), []byte(`"actor":"user:clerk.ines"`), []byte(`"actor":"user:clerk.eve"`), 1)
	require.NotEqual(t, b, edited)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "edited.bundle"), edited, 0o644))
	r = runTool(t, tmp, hooks{}, "audit", "verify", "$TMP/edited.bundle", "--key", "$TMP/2026-11.key.pub")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, "FAILED: $TMP/edited.bundle does not verify (line ")
}

// The demo's checkpoint, published to a directory by one command, is
// carried by a bundle another command writes and proven in its log.
func TestAuditBundleWithThePublishedNote(t *testing.T) {
	tmp := t.TempDir()
	writeTestKey(t, tmp)
	r := runTool(t, tmp, hooks{}, "--sign-key", "$TMP/2026-11.key", "checkpoint", "publish", "--dir", "$TMP/published", "--origin", "chronicle.example/demo")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	notes, err := filepath.Glob(filepath.Join(tmp, "published", "*.checkpoint"))
	require.NoError(t, err)
	require.Len(t, notes, 1)
	r = runTool(t, tmp, hooks{}, "--sign-key", "$TMP/2026-11.key", "audit", "bundle", "CLM-1001", "LOAN-2001", "--published", notes[0], "--out", "$TMP/b.bundle")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = runTool(t, tmp, hooks{}, "audit", "verify", "$TMP/b.bundle", "--key", "$TMP/2026-11.key.pub")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "The published note of chronicle.example/demo (size 1, root ")
	require.Contains(t, r.stdout, "holds checkpoints 1 of the bundle")
}
