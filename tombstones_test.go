package chronicle_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

func TestPurgeOfAReusedIDKeepsEveryTombstone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	readArchive := func(dir string) []history.Event {
		t.Helper()
		f, err := os.Open(chronicle.ArchivePath(dir, "e-1"))
		require.NoError(t, err)
		defer f.Close()
		events, err := history.ReadJSONL(f)
		require.NoError(t, err)
		return events
	}
	purge := func(dir string) chronicle.Tombstone {
		t.Helper()
		rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"e-1"}, By: "records-officer", Archive: chronicle.ArchiveJSONL(dir)})
		require.NoError(t, err)
		require.Len(t, rep.Purged, 1, "skipped: %v", rep.Skipped)
		return rep.Purged[0]
	}

	b.start(t, "echo", "e-1", "first")
	b.drain(t)
	require.NoError(t, b.engine.Terminate(b.ctx, "e-1", "closed", nil))
	b.drain(t)
	dir1 := t.TempDir()
	ts1 := purge(dir1)
	// The id's second life runs on another node, whose cache never saw
	// the first.
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", echo)
	b.start(t, "echo", "e-1", "second")
	b.drain(t)
	require.NoError(t, b.engine.Terminate(b.ctx, "e-1", "closed again", nil))
	b.drain(t)
	dir2 := t.TempDir()
	ts2 := purge(dir2)

	all, err := b.engine.ListTombstones(b.ctx, "e-1")
	require.NoError(t, err)
	require.Equal(t, []chronicle.Tombstone{ts1, ts2}, all, "the first purge's tombstone was lost")
	latest, err := b.engine.GetTombstone(b.ctx, "e-1")
	require.NoError(t, err)
	require.Equal(t, ts2, *latest)
	// Each archive proves itself against its own purge's tombstone.
	require.NoError(t, chronicle.VerifyArchive(readArchive(dir1), &all[0]))
	require.NoError(t, chronicle.VerifyArchive(readArchive(dir2), &all[1]))
	require.ErrorIs(t, chronicle.VerifyArchive(readArchive(dir1), latest), chronicle.ErrTombstoneMismatch)

	none, err := b.engine.ListTombstones(b.ctx, "never-purged")
	require.NoError(t, err)
	require.Empty(t, none)
}
