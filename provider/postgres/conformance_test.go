package postgres_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
	"github.com/chronicleflow/chronicle/round"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	providertest.Exercise(t, func(t *testing.T) round.Store {
		return pgtest.NewStore(t, postgres.Options{})
	})
}
