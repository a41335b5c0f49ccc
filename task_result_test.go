package chronicle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// refundApproval is a task result as a Go programmer writes it: no tags.
type refundApproval struct {
	Approved bool
	Amount   int
}

// refundWorkflow asks finance to approve a refund and says what they
// decided.
func refundWorkflow(ctx *chronicle.Context, order string) (string, error) {
	task := ctx.CreateTask("approve-refund", order, &chronicle.TaskOptions{TaskID: "refund-" + order, Roles: []string{"finance"}})
	a, err := chronicle.WaitTask[refundApproval](ctx, task)
	if err != nil {
		return "", err
	}
	if !a.Approved {
		return "rejected by finance", nil
	}
	return fmt.Sprintf("refunded %d", a.Amount), nil
}

var finance = chronicle.User{ID: "fin", Roles: []string{"finance"}}

// queued returns the messages queued for an instance.
func queued(t *testing.T, s provider.Store, id string) []provider.Message {
	t.Helper()
	msgs, err := s.ListMessages(context.Background(), &provider.ListMessagesParams{InstanceID: id, Limit: 100})
	require.NoError(t, err)
	return msgs
}

// TestCompleteTaskJSON completes a task with a result typed as JSON the
// way a person types it: keys in lower case reach the Go struct's fields,
// and a key the type lacks is refused before anything is written.
func TestCompleteTaskJSON(t *testing.T) {
	t.Parallel()
	for _, codec := range []chronicle.Codec{chronicle.MsgpackCodec{}, chronicle.JSONCodec{}} {
		t.Run(codec.Name(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, chronicle.Options{Codec: codec})
			register(t, b.engine, "refund", refundWorkflow)
			b.start(t, "refund", "order-1", "O-1")
			b.drain(t)

			events := b.history(t, "order-1")
			created, err := events[len(events)-1].Attributes()
			require.NoError(t, err)
			require.Equal(t, codec.Name(), created.(*history.TaskCreated).Codec)
			require.Equal(t, "chronicle_test.refundApproval", created.(*history.TaskCreated).ResultType.Name)

			for input, want := range map[string]string{
				`{"aproved": true}`:                  `does not decode to chronicle_test.refundApproval: unknown field "aproved"`,
				`{"approved": "yes"}`:                `cannot unmarshal string into field Approved of type bool`,
				`{"approved": true, "amount": 1.5}`:  `cannot unmarshal number 1.5 into field Amount of type int`,
				`{"approved": true`:                  `the result of task refund-O-1: not JSON: unexpected EOF`,
				`{"approved": true} {"amount": 900}`: `the result of task refund-O-1: more than one JSON value`,
			} {
				err := b.engine.CompleteTaskJSON(b.ctx, "refund-O-1", []byte(input), finance)
				var rerr *chronicle.TaskResultError
				require.ErrorAs(t, err, &rerr, input)
				require.ErrorIs(t, err, chronicle.ErrInvalidArgument, input)
				require.Equal(t, "refund-O-1", rerr.TaskID)
				require.ErrorContains(t, err, want, input)
			}
			// A generic Go value, as a product's own form handler may
			// build, is checked the same way.
			err = b.engine.CompleteTask(b.ctx, "refund-O-1", map[string]any{"aproved": true}, finance)
			require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
			require.ErrorContains(t, err, `does not decode to chronicle_test.refundApproval: unknown field "aproved"`)
			require.Empty(t, queued(t, b.store, "order-1"), "a refused result writes nothing")
			info, err := b.engine.GetTask(b.ctx, "refund-O-1")
			require.NoError(t, err)
			require.Equal(t, chronicle.TaskOpen, info.Status)

			require.NoError(t, b.engine.CompleteTaskJSON(b.ctx, "refund-O-1", []byte(`{"approved": true, "amount": 3900}`), finance))
			b.drain(t)
			require.Equal(t, "refunded 3900", result[string](t, b, "order-1"))
		})
	}
}

// TestCompleteTaskUsesTheWorkflowsCodec completes, from an engine with the
// default codec (the command line's, say), a task whose workers use
// JSONCodec: the result is encoded as the workflow decodes it. A codec the
// completing engine does not have is refused, writing nothing.
func TestCompleteTaskUsesTheWorkflowsCodec(t *testing.T) {
	t.Parallel()
	mem := memory.New(memory.Options{})
	worker := setupOn(t, mem, chronicle.Options{Codec: chronicle.JSONCodec{}})
	register(t, worker.engine, "refund", refundWorkflow)
	worker.start(t, "refund", "order-1", "O-1")
	worker.start(t, "refund", "order-2", "O-2")
	worker.drain(t)

	tool, err := chronicle.New(mem, chronicle.Options{NodeID: "tool", Clock: worker.clock})
	require.NoError(t, err)
	require.NoError(t, tool.CompleteTask(worker.ctx, "refund-O-1", map[string]any{"Approved": true, "Amount": 1200}, finance))
	worker.drain(t)
	inst := worker.describe(t, "order-1")
	require.Equal(t, chronicle.StatusCompleted, inst.Status, inst.LastError)
	require.Equal(t, "refunded 1200", result[string](t, worker, "order-1"))

	custom := setupOn(t, mem, chronicle.Options{Codec: namedCodec{chronicle.JSONCodec{}, "json-v2"}})
	register(t, custom.engine, "refund", refundWorkflow)
	custom.start(t, "refund", "order-3", "O-3")
	custom.drain(t)
	err = tool.CompleteTask(worker.ctx, "refund-O-3", map[string]any{"Approved": true}, finance)
	var cerr *chronicle.CodecMismatchError
	require.ErrorAs(t, err, &cerr)
	require.ErrorIs(t, err, chronicle.ErrCodecMismatch)
	require.Equal(t, chronicle.CodecMismatchError{TaskID: "refund-O-3", Recorded: "json-v2", Engine: "msgpack"}, *cerr)
	require.Empty(t, queued(t, mem, "order-3"))
}

// namedCodec is a codec under another name.
type namedCodec struct {
	chronicle.Codec
	name string
}

func (c namedCodec) Name() string { return c.name }
