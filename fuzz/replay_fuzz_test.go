package fuzz_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// fuzzWorkflow touches every kind of command, so corrupt histories meet
// every branch of the executor.
func fuzzWorkflow(ctx *replay.Context, _ []byte) ([]byte, error) {
	a := ctx.CallActivity("a", 1, nil)
	t := ctx.Timer(time.Minute, &replay.TimerOptions{Name: "t"})
	ctx.WhenAny(a, t)
	_ = ctx.SetCustomStatus("s")
	_ = ctx.SideEffect(func() (any, error) { return 1, nil }, nil)
	_ = ctx.Version("v", replay.DefaultVersion, 1)
	child := ctx.CallSubWorkflow("wf", nil, nil)
	task := ctx.CreateTask("review", nil, nil)
	w := ctx.WaitEvent("go", &replay.WaitOptions{Timeout: time.Hour})
	f := ctx.Go(func(ctx *replay.Context) error { return ctx.Sleep(time.Second) })
	if err := ctx.WhenAll(child, f); err != nil {
		return nil, err
	}
	_ = w.Get(nil)
	_ = ctx.WaitTask(task).Get(nil)
	saga := ctx.NewSaga()
	saga.AddCompensation("undo", func(ctx *replay.Context) error { return ctx.CallActivity("undo", nil, nil).Get(nil) })
	if err := saga.Compensate("fuzz"); err != nil {
		return nil, err
	}
	return nil, ctx.ContinueAsNew(nil)
}

func newFuzzReplayer() *replay.Replayer {
	return replay.New(replay.Options{Lookup: func(name string) (replay.WorkflowFunc, bool) {
		return fuzzWorkflow, name == "wf"
	}})
}

// fuzzHistory builds a history from fuzz bytes: an ExecutionStarted, then
// one event per three bytes (kind, correlation, payload choice), sealed so
// that only the content, not the chain, is corrupt.
func fuzzHistory(data []byte) []history.Event {
	start, _ := history.EncodeAttributes(&history.ExecutionStarted{Name: "wf"})
	events := []history.Event{{Seq: 1, InstanceID: "i", ExecutionID: "x", Kind: history.KindExecutionStarted, CorrelationID: "x", Payload: start}}
	kinds := history.Kinds()
	for i := 0; i+2 < len(data) && len(events) < 200; i += 3 {
		k := kinds[int(data[i])%len(kinds)]
		payload := []byte{0x80} // every attributes struct decodes from an empty map
		if data[i+2]&1 == 1 {
			payload = data[i+2 : min(i+2+int(data[i+2]>>4), len(data))]
		}
		corr := strconv.Itoa(int(data[i+1]) % 24)
		if data[i+1] >= 240 {
			corr = "x"
		}
		events = append(events, history.Event{Seq: int64(len(events) + 1), InstanceID: "i", ExecutionID: "x", Kind: k, CorrelationID: corr, Payload: payload})
	}
	history.Seal(nil, events)
	return events
}

func FuzzReplayCorruptHistory(f *testing.F) {
	f.Add([]byte{7, 0, 0, 8, 2, 0})
	f.Add([]byte{8, 0, 0, 10, 3, 0, 1, 2, 0})
	f.Add([]byte{7, 0, 0, 9, 2, 0, 7, 0, 0, 10, 4, 0, 11, 4, 0})
	f.Add([]byte{7, 0, 0, 8, 2, 0, 14, 255, 0, 7, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		events := fuzzHistory(data)
		r := newFuzzReplayer()
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Replay-only check: an error or nil, never a panic.
			_ = r.Check("i", events)
			// A round on the same history: the turn either fails with an
			// error or produces events that continue the log.
			snap, err := round.Fold("i", events)
			if err != nil {
				return // the round runner refuses histories that do not fold
			}
			out, err := r.Turn(context.Background(), &round.TurnInput{
				InstanceID: "i", Snapshot: snap, History: events[snap.ExecutionStartSeq-1:], Now: time.Unix(0, 0).UTC(),
			})
			if err != nil {
				var nd *replay.NondeterminismError
				var dl *round.DeadLetterError
				var pe *replay.PanicError
				if !errors.As(err, &nd) && !errors.As(err, &dl) && !errors.As(err, &pe) {
					require.Error(t, err)
				}
				return
			}
			for i, e := range out.Events {
				require.Equal(t, snap.LastSeq+1+int64(i), e.Seq)
			}
			if c, ok := out.Cached.(interface{ Close() }); ok {
				c.Close()
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("replay hangs")
		}
	})
}
