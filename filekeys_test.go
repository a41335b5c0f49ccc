package chronicle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

func TestFileKeyProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, dir, kek := fileKeys(t)

	_, err := keys.DataKey(ctx, "C-1", false)
	require.ErrorIs(t, err, chronicle.ErrNoDataKey)
	k1, err := keys.DataKey(ctx, "C-1", true)
	require.NoError(t, err)
	require.Len(t, k1.Key, 32)
	// Another process on the same directory gets the same key.
	other, err := chronicle.NewFileKeyProvider(dir, kek)
	require.NoError(t, err)
	k2, err := other.DataKey(ctx, "C-1", true)
	require.NoError(t, err)
	require.Equal(t, k1, k2)
	// The directory does not name the subject, and the key file is 0600.
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.NotContains(t, ents[0].Name(), "C-1")
	info, err := ents[0].Info()
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// A key file wrapped by a KEK the provider does not hold, or changed,
	// is a *KeyFileError.
	kekB := filepath.Join(t.TempDir(), "kek-b")
	require.NoError(t, chronicle.GenerateKEK(kekB, "kek-b"))
	stranger, err := chronicle.NewFileKeyProvider(dir, kekB)
	require.NoError(t, err)
	var kfe *chronicle.KeyFileError
	_, err = stranger.DataKey(ctx, "C-1", false)
	require.ErrorAs(t, err, &kfe)
	path := filepath.Join(dir, ents[0].Name())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := []byte(strings.Replace(string(data), "A", "B", 1))
	if string(changed) == string(data) {
		changed = []byte(strings.Replace(string(data), "a", "b", 1))
	}
	require.NoError(t, os.WriteFile(path, changed, 0o600))
	_, err = keys.DataKey(ctx, "C-1", false)
	require.ErrorAs(t, err, &kfe)

	// Destroyed for good, also for a second process; destroying again is
	// harmless.
	require.NoError(t, keys.DestroyKey(ctx, "C-1"))
	require.NoError(t, other.DestroyKey(ctx, "C-1"))
	var erased *chronicle.ErasedError
	_, err = other.DataKey(ctx, "C-1", true)
	require.ErrorAs(t, err, &erased)
	require.Equal(t, "C-1", erased.Subject)

	// KEK files: never overwritten, malformed ones typed.
	require.Error(t, chronicle.GenerateKEK(kek, "again"))
	bad := filepath.Join(t.TempDir(), "bad")
	for _, content := range []string{"", "id\n", "id notbase64!\n", "id c2hvcnQ=\n", "a " + strings.Repeat("A", 43) + "=\nb " + strings.Repeat("A", 43) + "=\n"} {
		require.NoError(t, os.WriteFile(bad, []byte(content), 0o600))
		_, _, err := chronicle.ReadKEK(bad)
		require.ErrorAs(t, err, &kfe, "%q", content)
	}
	_, err = chronicle.NewFileKeyProvider(dir)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
}
