package console_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestErasedSubject shows an instance of a data subject before and after
// its erasure: its payloads decoded, then marked erased, and the chain
// still verified.
func TestErasedSubject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, chronicle.GenerateKEK(filepath.Join(dir, "kek"), "kek-1"))
	keys, err := chronicle.NewFileKeyProvider(filepath.Join(dir, "keys"), filepath.Join(dir, "kek"))
	require.NoError(t, err)
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "test", Keys: keys})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	require.NoError(t, chronicle.RegisterWorkflow(e, "greet", func(ctx *chronicle.Context, name string) (string, error) {
		return "Dear " + name, nil
	}))
	_, err = e.Start(ctx, "greet", "Ada Lovelace", &chronicle.StartOptions{InstanceID: "g-1", Subject: "C-1"})
	require.NoError(t, err)
	drain(t, e)
	b := newBrowser(t, newConsole(t, e, console.Options{}))

	p := b.get("/instance?id=g-1")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, "Dear Ada Lovelace")
	require.Contains(t, p.body, "data_subject")

	_, err = e.Erase(ctx, "C-1", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.NoError(t, err)
	drain(t, e)
	p = b.get("/instance?id=g-1")
	require.Equal(t, http.StatusOK, p.code)
	require.NotContains(t, p.body, "Ada")
	require.Contains(t, p.body, "&lt;erased: data subject C-1&gt;")
	require.Regexp(t, `id="chain-status">Hash chain verified: \d+ events`, p.body)
}
