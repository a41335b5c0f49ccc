package memory_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
	"github.com/chronicleflow/chronicle/round"
)

func TestConformanceTransactional(t *testing.T) {
	t.Parallel()
	providertest.Exercise(t, func(t *testing.T) round.Store {
		return memory.New(memory.Options{})
	})
}

func TestConformancePeekLock(t *testing.T) {
	t.Parallel()
	providertest.Exercise(t, func(t *testing.T) round.Store {
		return memory.New(memory.Options{Mode: round.ModePeekLock})
	})
}
