package history_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/chronicleflow/chronicle"

// TestImportDirection keeps the architecture's imports pointing one way
// (docs/architecture.md): history is a leaf, the provider contract builds on
// it alone, round, projector and replay build on both, and a provider
// imports the contract and history only.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	imports := map[string]map[string]bool{} // package dir → project packages it imports
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if imports[rel] == nil {
			imports[rel] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == module {
				imports[rel]["."] = true
			} else if strings.HasPrefix(p, module+"/") {
				imports[rel][strings.TrimPrefix(p, module+"/")] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, imports, "history")

	allowed := func(pkg, imp string) bool {
		switch {
		case imp == "query":
			// The query language and its typed values: a leaf of the
			// standard library alone (checked below) that history records
			// and stores evaluate.
			return true
		case pkg == "query":
			return false
		case imp == "internal/mpack":
			// A leaf of the standard library alone (checked below) that
			// every layer's hand-written codecs share.
			return true
		case pkg == "internal/mpack":
			return false
		case pkg == "history":
			return false
		case pkg == "provider":
			return imp == "history"
		case pkg == "round":
			return imp == "history" || imp == "provider"
		case pkg == "projector", pkg == "replay":
			return imp == "history" || imp == "provider" || imp == "round"
		case pkg == "provider/providertest":
			return imp == "history" || imp == "provider" || imp == "round"
		case strings.HasPrefix(pkg, "provider/"):
			// A store: the contract, history and its own packages.
			own := strings.SplitN(pkg, "/", 3)[:2]
			return imp == "history" || imp == "provider" || strings.HasPrefix(imp+"/", strings.Join(own, "/")+"/")
		case pkg == ".":
			return !strings.HasPrefix(imp, "cmd/") && !strings.HasPrefix(imp, "examples/") && !strings.HasPrefix(imp, "provider/postgres") && !strings.HasPrefix(imp, "provider/mongo") && !strings.HasPrefix(imp, "provider/oracle")
		}
		return true
	}
	for pkg, imps := range imports {
		for imp := range imps {
			require.True(t, allowed(pkg, imp), "package %s must not import %s", pkg, imp)
		}
	}
	// history imports only the standard library, msgpack, uuid,
	// transparency-dev/merkle (its checkpoints' Merkle trees),
	// internal/mpack and query; the last two import only the standard
	// library.
	for dir, more := range map[string][]string{
		"history": {"github.com/vmihailenco/msgpack/v5", "github.com/google/uuid", module + "/internal/mpack", module + "/query",
			"github.com/transparency-dev/merkle/compact", "github.com/transparency-dev/merkle/proof", "github.com/transparency-dev/merkle/rfc6962"},
		"internal/mpack": nil,
		"query":          nil,
	} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		require.NoError(t, err)
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, e.Name()), nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				ok := !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") || slices.Contains(more, p)
				require.True(t, ok, "%s/%s imports %s", dir, e.Name(), p)
			}
		}
	}
}
