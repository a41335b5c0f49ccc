package postgres_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestDefaultLoggerIsSlogDefault: the store's warnings (a schema not
// migrated) go where the MongoDB and Oracle stores' go, not nowhere.
func TestDefaultLoggerIsSlogDefault(t *testing.T) {
	t.Parallel()
	require.Same(t, slog.Default(), postgres.DefaultLogger())
}

// TestNotMigrated checks that a store whose schema lacks a migration
// fails with a *NotMigratedError naming the migration, not with the
// server's bare "relation does not exist".
func TestNotMigrated(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := t.Context()
	quiet := slog.New(slog.DiscardHandler)
	open := func(t *testing.T) *postgres.Store {
		s, err := postgres.New(ctx, postgres.Options{URL: url, Schema: pgtest.Schema(t), Logger: quiet})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	check := func(t *testing.T, err error, migration string) {
		t.Helper()
		require.ErrorIs(t, err, postgres.ErrNotMigrated)
		var nm *postgres.NotMigratedError
		require.ErrorAs(t, err, &nm)
		require.Equal(t, migration, nm.Migration, "%v", err)
		require.Contains(t, err.Error(), "migration "+migration+" is not applied to the schema; run chronicle migrate")
	}

	t.Run("NoSchema", func(t *testing.T) {
		s := open(t)
		_, err := s.ListInstances(ctx, &provider.ListInstancesParams{Limit: 1})
		check(t, err, "0001_init.sql")
		err = s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "i-1")}, Now: base})
		check(t, err, "0001_init.sql")
	})

	t.Run("MissingTable", func(t *testing.T) {
		s := open(t)
		v, err := postgres.MigrateTo(ctx, s, 2)
		require.NoError(t, err)
		require.Equal(t, 2, v)
		_, err = s.ListCheckpoints(ctx, &provider.ListCheckpointsParams{Limit: 1})
		check(t, err, "0003_checkpoints.sql")
		require.Contains(t, err.Error(), `checkpoints" does not exist`)
	})

	t.Run("MissingColumn", func(t *testing.T) {
		s := open(t)
		_, err := postgres.MigrateTo(ctx, s, 3)
		require.NoError(t, err)
		c := &history.Checkpoint{Number: 1, KeyID: "k", Root: []byte{1}, Size: 1, Hash: []byte{2}, Signature: []byte{3},
			At: base, Leaves: []history.CheckpointLeaf{{InstanceID: "i-1", Seq: 1, Hash: []byte{4}}}}
		err = s.AppendCheckpoint(ctx, c)
		check(t, err, "0004_checkpoint_tombstone_leaves.sql")

		// Migrated, the same calls work.
		v, err := s.Migrate(ctx)
		require.NoError(t, err)
		require.Equal(t, postgres.LatestSchemaVersion(), v)
		require.NoError(t, s.AppendCheckpoint(ctx, c))
	})
}
