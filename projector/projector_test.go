package projector_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/projector"
)

// definition returns a valid custom projection named name.
func definition(name string) projector.Definition {
	return projector.Definition{
		Name:   name,
		New:    func() any { return 0 },
		Fold:   func(state any, _ *history.Event) (any, error) { return state, nil },
		Encode: func(any) ([]byte, error) { return nil, nil },
	}
}

// TestNew: New registers valid definitions and refuses an invalid or
// duplicate one with history.ErrInvalid, instead of dropping it.
func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		p, err := projector.New(definition("b"), definition("a"))
		require.NoError(t, err)
		defs := p.Definitions()
		require.Len(t, defs, 2)
		require.Equal(t, "a", defs[0].Name)
		require.Equal(t, "b", defs[1].Name)
	})
	t.Run("duplicate", func(t *testing.T) {
		t.Parallel()
		p, err := projector.New(definition("a"), definition("a"))
		require.ErrorIs(t, err, history.ErrInvalid)
		require.Nil(t, p)
	})
	t.Run("incomplete", func(t *testing.T) {
		t.Parallel()
		d := definition("a")
		d.Fold = nil
		_, err := projector.New(d)
		require.ErrorIs(t, err, history.ErrInvalid)
	})
	t.Run("bad name", func(t *testing.T) {
		t.Parallel()
		_, err := projector.New(definition(""))
		require.ErrorIs(t, err, history.ErrInvalid)
	})
}
