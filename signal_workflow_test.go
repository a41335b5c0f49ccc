package chronicle_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/round"
)

// signalOrder is the input of "notifier": whom to signal with what, and
// whether to wait for the outcome.
type signalOrder struct {
	To      string
	Payload string
	NoWait  bool
}

// registerSignals registers "listener", which waits for the signal "go"
// and returns its payload, and "notifier", which sends "go" to another
// instance and returns "delivered" or the type of the failure.
func registerSignals(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	register(t, e, "listener", func(ctx *chronicle.Context, prefix string) (string, error) {
		v, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return prefix + v, err
	})
	register(t, e, "notifier", func(ctx *chronicle.Context, in signalOrder) (string, error) {
		f := ctx.SignalWorkflow(in.To, "go", in.Payload)
		if in.NoWait {
			return "sent", nil
		}
		err := f.Get(nil)
		var se *chronicle.SignalError
		switch {
		case err == nil:
			return "delivered", nil
		case errors.As(err, &se) && errors.Is(err, chronicle.ErrSignalNotDelivered):
			return "failed: " + se.Failure.Type + " to " + se.InstanceID, nil
		}
		return "", err
	})
}

// raisedBy returns the EventRaised events of id's history that another
// workflow sent.
func raisedBy(t *testing.T, b *bundle, id string) []*history.EventRaised {
	t.Helper()
	var out []*history.EventRaised
	for _, e := range b.history(t, id) {
		if e.Kind != history.KindEventRaised {
			continue
		}
		a, err := e.Attributes()
		require.NoError(t, err)
		r := a.(*history.EventRaised)
		require.NotNil(t, r.Source, "event #%d names its sending workflow", e.Seq)
		require.Equal(t, history.WorkflowActor(r.Source.InstanceID), e.Actor)
		require.Equal(t, r.IdempotencyKey, e.CorrelationID)
		out = append(out, r)
	}
	return out
}

// testSignalWorkflow runs the signal scenarios on the stores newStore
// makes (one per subtest).
func testSignalWorkflow(t *testing.T, newStore func(t *testing.T) provider.Store) {
	on := func(t *testing.T) *bundle {
		b := setupOn(t, newStore(t))
		registerSignals(t, b.engine)
		return b
	}

	t.Run("Delivered", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		b.start(t, "listener", "rcv", "got ")
		b.drain(t)
		b.start(t, "notifier", "snd", signalOrder{To: "rcv", Payload: "hello"})
		b.drain(t)
		require.Equal(t, "delivered", result[string](t, b, "snd"))
		require.Equal(t, "got hello", result[string](t, b, "rcv"))

		snd := b.history(t, "snd")
		require.Equal(t, 1, count(snd, history.KindSignalSent))
		require.Equal(t, 1, count(snd, history.KindSignalDelivered))
		raised := raisedBy(t, b, "rcv")
		require.Len(t, raised, 1)
		require.Equal(t, "snd", raised[0].Source.InstanceID)
		require.Equal(t, "snd", raised[0].Sender)
		for _, e := range snd {
			if e.Kind == history.KindSignalSent {
				a, err := e.Attributes()
				require.NoError(t, err)
				sent := a.(*history.SignalSent)
				require.Equal(t, "rcv", sent.InstanceID)
				require.Equal(t, round.SignalKey("snd", e.ExecutionID, e.Seq), sent.IdempotencyKey)
				require.Equal(t, sent.IdempotencyKey, raised[0].IdempotencyKey, "the receiver records the sender's key")
				require.Equal(t, e.Seq, raised[0].Source.Seq)
			}
		}
	})

	t.Run("BufferedUntilTheReceiverWaits", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		// The receiver is started but has not run its first turn.
		b.start(t, "listener", "rcv", "")
		b.start(t, "notifier", "snd", signalOrder{To: "rcv", Payload: "early"})
		b.drain(t)
		require.Equal(t, "delivered", result[string](t, b, "snd"))
		require.Equal(t, "early", result[string](t, b, "rcv"))
	})

	t.Run("FireAndForget", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		b.start(t, "listener", "rcv", "")
		b.drain(t)
		b.start(t, "notifier", "snd", signalOrder{To: "rcv", Payload: "bye", NoWait: true})
		b.drain(t)
		require.Equal(t, "sent", result[string](t, b, "snd"))
		require.Equal(t, "bye", result[string](t, b, "rcv"), "a sender that ended in the round that sent still sends")
		snd := b.history(t, "snd")
		require.Equal(t, 1, count(snd, history.KindSignalSent))
		require.Zero(t, count(snd, history.KindSignalDelivered), "an ended sender records no outcome")
	})

	t.Run("ToItself", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		register(t, b.engine, "selfie", func(ctx *chronicle.Context, _ string) (string, error) {
			if err := ctx.SignalWorkflow(ctx.InstanceID(), "go", "me").Get(nil); err != nil {
				return "", err
			}
			return chronicle.WaitEvent[string](ctx, "go", nil)
		})
		b.start(t, "selfie", "self", "")
		b.drain(t)
		require.Equal(t, "me", result[string](t, b, "self"))
		raised := raisedBy(t, b, "self")
		require.Len(t, raised, 1)
		require.Equal(t, "self", raised[0].Source.InstanceID)
	})

	t.Run("UnknownInstanceFails", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		b.start(t, "notifier", "snd", signalOrder{To: "nobody", Payload: "x"})
		b.drain(t)
		require.Equal(t, "failed: "+round.FailureSignalTargetNotFound+" to nobody", result[string](t, b, "snd"))
		require.Equal(t, 1, count(b.history(t, "snd"), history.KindSignalFailed))
		_, err := b.engine.Describe(b.ctx, "nobody")
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "a signal does not create its receiver")
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.Empty(t, letters, "a signal to nobody is an outcome, not a dead letter")
	})

	t.Run("OutcomeForAPurgedSender", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		b.start(t, "notifier", "snd", signalOrder{To: "rcv", Payload: "x", NoWait: true})
		worked, err := b.engine.RunOnce(b.ctx) // snd's round only: the signal stays queued
		require.NoError(t, err)
		require.True(t, worked)
		require.Equal(t, "sent", result[string](t, b, "snd"))
		rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"snd"}, By: "ops"})
		require.NoError(t, err)
		require.Len(t, rep.Purged, 1)
		b.drain(t) // the signal finds no rcv: its failure goes to the purged sender
		letters, err := b.engine.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.Empty(t, letters, "the outcome of a purged sender's signal is dropped, not dead-lettered")
		_, err = b.engine.Describe(b.ctx, "snd")
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	})

	t.Run("EndedInstanceFails", func(t *testing.T) {
		t.Parallel()
		b := on(t)
		b.start(t, "listener", "rcv", "")
		b.drain(t)
		require.NoError(t, b.engine.RaiseEvent(b.ctx, "rcv", "go", "first", nil))
		b.drain(t)
		b.start(t, "notifier", "snd", signalOrder{To: "rcv", Payload: "late"})
		b.drain(t)
		require.Equal(t, "failed: "+round.FailureSignalTargetEnded+" to rcv", result[string](t, b, "snd"))
		require.Equal(t, 1, count(b.history(t, "rcv"), history.KindEventRaised), "the ended receiver records nothing")
	})
}

func TestSignalWorkflow(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			testSignalWorkflow(t, func(*testing.T) provider.Store { return memory.New(memory.Options{Mode: mode}) })
		})
	}
}

func TestPostgresSignalWorkflow(t *testing.T) {
	t.Parallel()
	testSignalWorkflow(t, func(t *testing.T) provider.Store { return newPostgresStore(t) })
}

// TestMongoSignalWorkflow runs them on the FerretDB test server:
// peek-lock rounds.
func TestMongoSignalWorkflow(t *testing.T) {
	t.Parallel()
	testSignalWorkflow(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStore(t, chmongo.Options{})
		require.Equal(t, provider.ModePeekLock, s.Mode())
		return s
	})
}

// TestSignalWorkflowInvalidArguments: a signal with an invalid receiver id
// fails its future at once and records nothing.
func TestSignalWorkflowInvalidArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "bad", func(ctx *chronicle.Context, to string) (string, error) {
		err := ctx.SignalWorkflow(to, "go", nil).Get(nil)
		if err == nil {
			return "", errors.New("no error")
		}
		return err.Error(), nil
	})
	b.start(t, "bad", "bad-1", "")
	b.drain(t)
	require.Contains(t, result[string](t, b, "bad-1"), "signal workflow")
	require.Zero(t, count(b.history(t, "bad-1"), history.KindSignalSent), "an invalid id sends nothing")
}
