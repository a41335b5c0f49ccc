package chronicle_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

func TestReadSigningKeyAndKeyring(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	// The format `chronicle keygen` writes, with a comment and blank lines.
	key := write("2026-11.key", "# made for the tests\n\n2026-11 "+base64.StdEncoding.EncodeToString(seed)+"\n")
	pub := write("2026-11.key.pub", history.KeyringLine("2026-11", priv.Public().(ed25519.PublicKey))+"\n")

	s, err := chronicle.ReadSigningKey(key)
	require.NoError(t, err)
	require.Equal(t, "2026-11", s.KeyID())
	require.Equal(t, priv.Public(), s.Public())
	k, err := chronicle.ReadKeyring(pub)
	require.NoError(t, err)
	got, ok := k.Key("2026-11")
	require.True(t, ok)
	require.Equal(t, priv.Public(), got)

	cases := []struct {
		name, text string
		line       int
		reason     string
	}{
		{"empty", "# nothing\n\n", 0, "no key in the file"},
		{"one-field", "2026-11\n", 1, `want "KEYID BASE64-SEED"`},
		{"three-fields", "2026-11 a b\n", 1, `want "KEYID BASE64-SEED"`},
		{"not-base64", "2026-11 !!!\n", 1, "the seed is not 32 bytes of base64"},
		{"short-seed", "2026-11 " + base64.StdEncoding.EncodeToString(seed[:16]) + "\n", 1, "the seed is not 32 bytes of base64"},
		{"two-keys", "a " + base64.StdEncoding.EncodeToString(seed) + "\n\nb " + base64.StdEncoding.EncodeToString(seed) + "\n", 3, "a signing key file holds one key"},
		{"bad-id", "\x00id " + base64.StdEncoding.EncodeToString(seed) + "\n", 1, "invalid key id"},
	}
	for _, c := range cases {
		p := write(c.name, c.text)
		_, err := chronicle.ReadSigningKey(p)
		var kf *chronicle.KeyFileError
		require.ErrorAs(t, err, &kf, c.name)
		require.Equal(t, p, kf.Path, c.name)
		require.Equal(t, c.line, kf.Line, c.name)
		require.Equal(t, c.reason, kf.Reason, c.name)
		require.True(t, strings.HasPrefix(err.Error(), "chronicle: key file "+p), err.Error())
	}

	_, err = chronicle.ReadSigningKey(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = chronicle.ReadKeyring(pub, filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	var kf *chronicle.KeyFileError
	_, err = chronicle.ReadKeyring(write("bad.pub", "2026-11 !!!\n"))
	require.ErrorAs(t, err, &kf)
	require.Contains(t, err.Error(), "keyring line 1")
	_, err = chronicle.ReadKeyring(write("none.pub", "# retired keys go here\n"))
	require.ErrorAs(t, err, &kf)
	require.Equal(t, "no public key in the keyring", kf.Reason)
	require.False(t, errors.Is(err, fs.ErrNotExist))
}
