package memory_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

func TestConformanceTransactional(t *testing.T) {
	t.Parallel()
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		return memory.New(memory.Options{})
	})
}

func TestConformancePeekLock(t *testing.T) {
	t.Parallel()
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		return memory.New(memory.Options{Mode: provider.ModePeekLock})
	})
}

// TestConformanceCoreOnly runs the suite on the memory store seen through
// its core alone, as a new provider ships first: the core cases pass and
// the cases of the optional capabilities are skipped.
func TestConformanceCoreOnly(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			providertest.Exercise(t, func(t *testing.T) provider.Store {
				return providertest.CoreOnly(memory.New(memory.Options{Mode: mode}))
			})
		})
	}
}
