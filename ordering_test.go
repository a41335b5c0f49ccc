package chronicle_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestOutageKeepsArrivalOrder runs testOutageKeepsArrivalOrder on the
// memory store in both modes; testEndToEnd runs it on the database
// providers.
func TestOutageKeepsArrivalOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			testOutageKeepsArrivalOrder(t, setupOn(t, memory.New(memory.Options{Mode: mode})))
		})
	}
}

// testOutageKeepsArrivalOrder: a workflow waits for a signal with a
// two-minute timeout and no round runs for a while (workers down, a
// backlog). A signal raised 10 s into the wait wins when the round that
// finally runs finds the timeout due too, although the timer's message was
// queued first; a signal raised after the timeout was due loses.
func testOutageKeepsArrivalOrder(t *testing.T, b *bundle) {
	register(t, b.engine, "loan", func(ctx *chronicle.Context, _ string) (string, error) {
		v, err := chronicle.WaitEvent[string](ctx, "approval", &chronicle.WaitOptions{Timeout: 2 * time.Minute})
		if errors.Is(err, chronicle.ErrTimeout) {
			return "timed out", nil
		}
		return v, err
	})
	b.start(t, "loan", "in-time", "")
	b.start(t, "loan", "too-late", "")
	b.drain(t) // both wait; their timeouts are due at +2 min

	b.clock.Advance(10 * time.Second)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "in-time", "approval", "approved", nil))
	b.clock.Advance(2 * time.Minute) // still no round: the timeouts come due
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "too-late", "approval", "approved", nil))
	b.drain(t) // each instance's round takes its timer and its signal

	require.Equal(t, "approved", result[string](t, b, "in-time"), "the signal came 110 s before the timeout")
	require.Equal(t, "timed out", result[string](t, b, "too-late"), "the signal came 10 s after the timeout")
	for id, want := range map[string]struct {
		kinds  []history.Kind
		result string
	}{
		"in-time":  {[]history.Kind{history.KindEventRaised, history.KindTimerFired}, "approved"},
		"too-late": {[]history.Kind{history.KindTimerFired, history.KindEventRaised}, "timed out"},
	} {
		events := b.history(t, id)
		var got []history.Kind
		for _, e := range events {
			if e.Kind == history.KindEventRaised || e.Kind == history.KindTimerFired {
				got = append(got, e.Kind)
			}
		}
		require.Equal(t, want.kinds, got, "%s records its messages in the order they took effect", id)
		// History holds the order the workflow saw: a replay, which goes
		// by seq whatever the messages' times, gets the same result.
		rep := b.engine.ReplayHistory(events)
		require.True(t, rep.OK(), "%s: divergence %v, error %v", id, rep.Divergence, rep.Err)
		require.True(t, rep.Ended, id)
		var replayed string
		require.NoError(t, chronicle.MsgpackCodec{}.Decode(rep.Output, &replayed))
		require.Equal(t, want.result, replayed, "%s replays to another result", id)
	}
}
