package providertest

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testNotFound covers lookups of what does not exist and reads of an empty
// store.
func testNotFound(t *testing.T, factory Factory) {
	t.Run("UnknownIDsAreNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ctx := t.Context()
		_, err := b.store.GetInstance(ctx, "no-such-instance")
		require.ErrorIs(t, err, provider.ErrNotFound, "GetInstance")
		_, _, err = b.store.GetSnapshot(ctx, "no-such-instance")
		require.ErrorIs(t, err, provider.ErrNotFound, "GetSnapshot")
		_, err = b.deadLetters(t).GetDeadLetter(ctx, "no-such-letter")
		require.ErrorIs(t, err, provider.ErrNotFound, "GetDeadLetter")
		require.ErrorIs(t, b.resolve(t, "no-such-letter", provider.DeadLetterRedriven, "user:ops", base), provider.ErrNotFound, "ResolveDeadLetter")

		// History alone makes no instance record or snapshot.
		require.NoError(t, b.appendEvents(ctx, "inst-a", chain("inst-a", nil, startEvent(t, execID))))
		_, err = b.store.GetInstance(ctx, "inst-a")
		require.ErrorIs(t, err, provider.ErrNotFound, "GetInstance of an instance without projections")
		_, _, err = b.store.GetSnapshot(ctx, "inst-a")
		require.ErrorIs(t, err, provider.ErrNotFound, "GetSnapshot of an instance without projections")
	})

	t.Run("EmptyStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		require.Empty(t, b.load(t, "no-such-instance", 1))
		_, ok := b.nextVisible(t)
		require.False(t, ok)
		_, ok = b.nextTask(t, "")
		require.False(t, ok)
		require.Nil(t, b.take(t, at(time.Hour), 100, ""))
		require.Nil(t, b.take(t, at(time.Hour), 100, "no-such-instance"))
		require.Nil(t, b.claim(t, at(time.Hour)))
		require.Nil(t, b.claim(t, at(time.Hour), "x"))
		require.Empty(t, b.listLetters(t, provider.ListDeadLettersParams{}))
	})
}
