package main

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// TestKeygenFilesReadByTheLibrary checks that the files keygen writes are
// those chronicle.ReadSigningKey and chronicle.ReadKeyring read: a
// signature of the key verifies with the keyring's public key.
func TestKeygenFilesReadByTheLibrary(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "2026-11.key")
	r := runTool(t, "", hooks{}, "keygen", "--id", "2026-11", "--out", key)
	require.Equal(t, exitOK, r.code, r.stderr)

	s, err := chronicle.ReadSigningKey(key)
	require.NoError(t, err)
	require.Equal(t, "2026-11", s.KeyID())
	keys, err := chronicle.ReadKeyring(key + ".pub")
	require.NoError(t, err)
	pub, ok := keys.Key("2026-11")
	require.True(t, ok)
	sig, err := s.Sign([]byte("checkpoint"))
	require.NoError(t, err)
	require.True(t, ed25519.Verify(pub, []byte("checkpoint"), sig))
}
