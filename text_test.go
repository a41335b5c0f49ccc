package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// testTextWithNUL checks that free text no store can keep as text (a NUL
// byte, invalid UTF-8) is refused by the client API with a *TextError
// naming the field, fails the workflow command that gives it, and is
// cleaned in the error texts the engine records, so that no round fails
// on it.
func testTextWithNUL(t *testing.T, store provider.Store) {
	t.Helper()
	b := setupOn(t, store)
	register(t, b.engine, "echo", echo)

	requireText := func(t *testing.T, err error, field string) {
		t.Helper()
		var te *chronicle.TextError
		require.ErrorAs(t, err, &te)
		require.Equal(t, field, te.Field)
		require.ErrorIs(t, err, chronicle.ErrInvalidText)
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	}
	start := func(o chronicle.StartOptions) error {
		_, err := b.engine.Start(b.ctx, "echo", "x", &o)
		return err
	}
	requireText(t, start(chronicle.StartOptions{BusinessKey: "CLM\x001"}), "business key")
	requireText(t, start(chronicle.StartOptions{BusinessKey: "CLM\xff"}), "business key")
	requireText(t, start(chronicle.StartOptions{BusinessParts: map[string]string{"branch": "N\x00"}}), `business part "branch"`)
	requireText(t, start(chronicle.StartOptions{Tags: map[string]string{"a\x00": "b"}}), "tag key")
	requireText(t, start(chronicle.StartOptions{Version: "v\x00"}), "version")
	b.start(t, "echo", "i", "x")
	requireText(t, b.engine.RaiseEvent(b.ctx, "i", "go", "!", &chronicle.RaiseOptions{Sender: "crm\x00"}), "sender")
	requireText(t, b.engine.Suspend(b.ctx, "i", "wait\x00", nil), "reason")
	requireText(t, b.engine.Terminate(b.ctx, "i", "bad\x00", nil), "reason")
	b.drain(t)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "i", "go", "!", nil))
	b.drain(t)
	require.Equal(t, "x!", result[string](t, b, "i"))

	// Text from workflow code fails the command, not the round.
	commands := []struct {
		field string
		fn    func(ctx *chronicle.Context) error
	}{
		{"task name", func(ctx *chronicle.Context) error {
			_, err := chronicle.WaitTask[string](ctx, ctx.CreateTask("review\x00", nil, nil))
			return err
		}},
		{"task role", func(ctx *chronicle.Context) error {
			_, err := chronicle.WaitTask[string](ctx, ctx.CreateTask("review", nil, &chronicle.TaskOptions{Roles: []string{"adj\x00"}}))
			return err
		}},
		{"custom status", func(ctx *chronicle.Context) error { return ctx.SetCustomStatus("half\x00way") }},
		{"timer name", func(ctx *chronicle.Context) error {
			return ctx.Timer(time.Minute, &chronicle.TimerOptions{Name: "t\x00"}).Get(nil)
		}},
		{"event name", func(ctx *chronicle.Context) error {
			_, err := chronicle.WaitEvent[string](ctx, "go\x00", nil)
			return err
		}},
	}
	for i, c := range commands {
		field, fn := c.field, c.fn
		var got error
		name := fmt.Sprintf("cmd-%d", i)
		register(t, b.engine, name, func(ctx *chronicle.Context, _ string) (string, error) {
			got = fn(ctx)
			var te *chronicle.TextError
			if !errors.As(got, &te) || te.Field != field {
				return "", errors.New("wrong error")
			}
			return "refused", nil
		})
		b.start(t, name, name, "")
		b.drain(t)
		require.Equal(t, "refused", result[string](t, b, name), "%s: %v", field, got)
	}

	// Error texts recorded from user errors are stored cleaned.
	register(t, b.engine, "fails", func(ctx *chronicle.Context, _ string) (string, error) {
		_, err := chronicle.CallActivity[string](ctx, "a", "", nil)
		return "", err
	})
	activity(t, b.engine, "a", func(context.Context, string) (string, error) {
		return "", chronicle.NonRetryable(errors.New("bad\x00byte \xff"))
	})
	b.start(t, "fails", "f", "")
	b.drain(t)
	inst := b.describe(t, "f")
	require.Equal(t, chronicle.StatusFailed, inst.Status)
	require.Contains(t, inst.Failure.Message, "bad\uFFFDbyte \uFFFD")
	require.Contains(t, inst.LastError, "bad\uFFFDbyte")

	register(t, b.engine, "panics", func(ctx *chronicle.Context, _ string) (string, error) {
		panic("boom\x00")
	})
	b.start(t, "panics", "p", "")
	for i := 0; i < 6; i++ {
		b.advance(t, time.Minute)
	}
	letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "p"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, provider.ReasonPanic, letters[0].Reason)
	require.Contains(t, letters[0].Error, "boom\uFFFD")
}

func TestTextWithNUL(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		testTextWithNUL(t, memory.New(memory.Options{}))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testTextWithNUL(t, newPostgresStore(t))
	})
}
