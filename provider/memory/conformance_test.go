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

// TestConformanceCoreOnly runs the suite on the memory store seen through
// its core alone, as a new provider ships first: the core cases pass and
// the cases of the optional capabilities are skipped.
func TestConformanceCoreOnly(t *testing.T) {
	t.Parallel()
	for _, mode := range []round.Mode{round.ModeTransactional, round.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			providertest.Exercise(t, func(t *testing.T) round.Store {
				return providertest.CoreOnly(memory.New(memory.Options{Mode: mode}))
			})
		})
	}
}
