package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	t.Run("ServerDefaults", func(t *testing.T) {
		t.Parallel()
		providertest.Exercise(t, func(t *testing.T) provider.Store {
			return pgtest.NewStore(t, postgres.Options{})
		})
	})
	// A store of 16 partitions: every instance's rows carry its
	// partition and the dequeue looks at one partition at a time.
	t.Run("Partitions16", func(t *testing.T) {
		t.Parallel()
		providertest.Exercise(t, func(t *testing.T) provider.Store {
			s := pgtest.NewStore(t, postgres.Options{Partitions: 16})
			require.Equal(t, 16, s.Partitions())
			return s
		})
	})
	// A DBA may make another isolation level the default; the store must
	// not depend on the server's default, so the suite runs again on
	// connections whose default is REPEATABLE READ.
	t.Run("RepeatableReadDefault", func(t *testing.T) {
		t.Parallel()
		cfg, err := pgxpool.ParseConfig(url)
		require.NoError(t, err)
		cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
		providertest.Exercise(t, func(t *testing.T) provider.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			var level string
			require.NoError(t, pool.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&level))
			require.Equal(t, "repeatable read", level)
			return pgtest.NewStore(t, postgres.Options{Pool: pool})
		})
	})
}
