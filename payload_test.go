package chronicle_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// TestPayloadLimitOnEveryPath checks that every payload entering history
// is held to Options.MaxPayloadSize, whether the client API or workflow
// code gives it, encoded by the codec or raw.
func TestPayloadLimitOnEveryPath(t *testing.T) {
	t.Parallel()
	const limit = 512
	big := strings.Repeat("x", 2*limit)
	raw := chronicle.RawPayload(big)

	workflows := map[string]func(ctx *chronicle.Context) (string, error){
		"output": func(ctx *chronicle.Context) (string, error) { return big, nil },
		"continue-as-new": func(ctx *chronicle.Context) (string, error) {
			return "", ctx.ContinueAsNew(big)
		},
		"continue-as-new-raw": func(ctx *chronicle.Context) (string, error) {
			return "", ctx.ContinueAsNew(raw)
		},
		"custom-status-raw": func(ctx *chronicle.Context) (string, error) {
			return "", ctx.SetCustomStatus(raw)
		},
		"side-effect-raw": func(ctx *chronicle.Context) (string, error) {
			_, err := chronicle.SideEffect(ctx, func() (chronicle.RawPayload, error) { return raw, nil })
			return "", err
		},
		"side-effect-raw-any": func(ctx *chronicle.Context) (string, error) {
			return "", ctx.SideEffect(func() (any, error) { return raw, nil }, nil)
		},
		"task-payload-raw": func(ctx *chronicle.Context) (string, error) {
			return chronicle.WaitTask[string](ctx, ctx.CreateTask("review", raw, nil))
		},
		"sub-workflow-input-raw": func(ctx *chronicle.Context) (string, error) {
			return chronicle.CallSubWorkflow[string](ctx, "echo", raw, nil)
		},
		"activity-input-raw": func(ctx *chronicle.Context) (string, error) {
			return chronicle.CallActivity[string](ctx, "a", raw, nil)
		},
	}
	for name, fn := range workflows {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, chronicle.Options{MaxPayloadSize: limit})
			register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) { return fn(ctx) })
			register(t, b.engine, "echo", echo)
			activity(t, b.engine, "a", func(_ context.Context, s string) (string, error) { return s, nil })
			b.start(t, "wf", "i", "")
			b.drain(t)
			inst := b.describe(t, "i")
			require.Equal(t, chronicle.StatusFailed, inst.Status, "the payload over the limit fails the command")
			require.Contains(t, inst.Failure.Message, chronicle.ErrPayloadTooLarge.Error())
			for _, e := range b.history(t, "i") {
				require.Less(t, len(e.Payload), 2*limit, "no payload over the limit entered history (seq %d, %s)", e.Seq, e.Kind)
			}
		})
	}

	t.Run("ErrorTextIsCut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, chronicle.Options{MaxPayloadSize: limit})
		huge := strings.Repeat("é", 10*limit)
		register(t, b.engine, "wf", func(ctx *chronicle.Context, _ string) (string, error) {
			_, err := chronicle.CallActivity[string](ctx, "a", "", nil)
			return "", err
		})
		activity(t, b.engine, "a", func(context.Context, string) (string, error) {
			return "", chronicle.NonRetryable(errors.New(huge))
		})
		b.start(t, "wf", "i", "")
		b.drain(t)
		inst := b.describe(t, "i")
		require.Equal(t, chronicle.StatusFailed, inst.Status)
		require.LessOrEqual(t, len(inst.Failure.Message), 2*limit)
		require.Contains(t, inst.Failure.Message, "cut to the payload limit")
		for _, e := range b.history(t, "i") {
			require.Less(t, len(e.Payload), 3*limit, "seq %d, %s", e.Seq, e.Kind)
		}
	})

	t.Run("ClientPayloads", func(t *testing.T) {
		t.Parallel()
		b := setup(t, chronicle.Options{MaxPayloadSize: limit})
		register(t, b.engine, "review", reviewWorkflow)
		_, err := b.engine.Start(b.ctx, "review", raw, nil)
		require.ErrorIs(t, err, chronicle.ErrPayloadTooLarge)
		b.start(t, "review", "claim-1", claimReview{Claim: "C-1"})
		b.drain(t)
		require.ErrorIs(t, b.engine.RaiseEvent(b.ctx, "claim-1", "note", big, nil), chronicle.ErrPayloadTooLarge)
		require.ErrorIs(t, b.engine.RaiseEvent(b.ctx, "claim-1", "note", raw, nil), chronicle.ErrPayloadTooLarge)
		ana := chronicle.User{ID: "ana", Roles: []string{"adjuster"}}
		require.ErrorIs(t, b.engine.CompleteTask(b.ctx, "review-C-1", big, ana), chronicle.ErrPayloadTooLarge)
	})
}
