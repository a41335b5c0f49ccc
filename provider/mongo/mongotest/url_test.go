package mongotest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFerretURL checks where the tests find the peek-lock server: the
// environment first, then the URL file that `make services` writes at the
// root of the checkout (found from a package folder below it), then the
// default port.
func TestFerretURL(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pkg := filepath.Join(root, "provider", "mongo")
	require.NoError(t, os.MkdirAll(pkg, 0o750))
	noEnv := func(string) string { return "" }

	url, from := ferretURL(noEnv, pkg)
	require.Equal(t, DefaultFerretURL, url)
	require.Equal(t, "the default", from)

	require.NoError(t, os.MkdirAll(filepath.Join(root, ".services"), 0o750))
	file := filepath.Join(root, URLFile)
	require.NoError(t, os.WriteFile(file, []byte("mongodb://127.0.0.1:27018/\n"), 0o600))
	url, from = ferretURL(noEnv, pkg)
	require.Equal(t, "mongodb://127.0.0.1:27018/", url)
	require.Equal(t, file, from)

	env := func(k string) string {
		if k == EnvFerretURL {
			return "mongodb://db:27019/"
		}
		return ""
	}
	url, from = ferretURL(env, pkg)
	require.Equal(t, "mongodb://db:27019/", url)
	require.Equal(t, EnvFerretURL, from)

	// An empty file is no URL.
	require.NoError(t, os.WriteFile(file, []byte("\n"), 0o600))
	url, _ = ferretURL(noEnv, pkg)
	require.Equal(t, DefaultFerretURL, url)
}
