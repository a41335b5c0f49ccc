package postgres_test

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// Each variant's cases reuse schemas, emptied between them
	// (pgtest.Stores): migrating a new schema for each of the ~160
	// cases was most of the suite's time. TestMigrate and the tests that
	// call pgtest.NewStore open stores on new schemas.
	t.Run("ServerDefaults", func(t *testing.T) {
		t.Parallel()
		newStore := pgtest.Stores(t, postgres.Options{})
		providertest.Exercise(t, func(t *testing.T) provider.Store { return newStore(t) })
	})
	// A store of 16 partitions: every instance's rows carry its
	// partition and the dequeue looks at one partition at a time.
	t.Run("Partitions16", func(t *testing.T) {
		t.Parallel()
		newStore := pgtest.Stores(t, postgres.Options{Partitions: 16})
		providertest.Exercise(t, func(t *testing.T) provider.Store {
			s := newStore(t)
			require.Equal(t, 16, s.Partitions())
			return s
		})
	})
	// A DBA may make another isolation level the default; the store must
	// not depend on the server's default, so the suite runs again on
	// connections whose default is REPEATABLE READ (a run-time parameter
	// of the URL, so that each store owns its pool and closes it before
	// its schema is emptied).
	t.Run("RepeatableReadDefault", func(t *testing.T) {
		t.Parallel()
		u, err := neturl.Parse(url)
		require.NoError(t, err)
		q := u.Query()
		q.Set("default_transaction_isolation", "repeatable read")
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no + as a space
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u.String())
		require.NoError(t, err)
		var level string
		require.NoError(t, conn.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&level))
		require.NoError(t, conn.Close(ctx))
		require.Equal(t, "repeatable read", level)
		newStore := pgtest.Stores(t, postgres.Options{URL: u.String()})
		providertest.Exercise(t, func(t *testing.T) provider.Store { return newStore(t) })
	})
}
