package round_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/scripted"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

type bundle struct {
	store  *memory.Store
	clock  *round.ManualClock
	runner *round.Runner
	worker *round.ActivityWorker
	ctx    context.Context
}

func setup(t *testing.T, mode provider.Mode, opts memory.Options, hooks round.Hooks) *bundle {
	t.Helper()
	opts.Mode = mode
	b := &bundle{store: memory.New(opts), clock: round.NewManualClock(t0), ctx: context.Background()}
	var err error
	b.runner, err = round.NewRunner(b.store, round.RunnerOptions{Node: "n1", Turn: scripted.Turn, Clock: b.clock, Hooks: hooks})
	require.NoError(t, err)
	b.worker, err = round.NewActivityWorker(b.store, round.ActivityWorkerOptions{Node: "n1", Resolve: scripted.Resolve, Clock: b.clock, Jitter: func() float64 { return 0 }})
	require.NoError(t, err)
	return b
}

func (b *bundle) start(t *testing.T, id string, steps ...scripted.Step) {
	t.Helper()
	m, err := scripted.StartMessage(id, scripted.Script{Steps: steps})
	require.NoError(t, err)
	require.NoError(t, b.store.EnqueueMessages(b.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: b.clock.Now()}))
}

func (b *bundle) signal(t *testing.T, id, name, key string) {
	t.Helper()
	m, err := scripted.SignalMessage(id, name, key)
	require.NoError(t, err)
	require.NoError(t, b.store.EnqueueMessages(b.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: b.clock.Now()}))
}

func (b *bundle) drain(t *testing.T) {
	t.Helper()
	require.NoError(t, scripted.Drain(b.ctx, b.runner, b.worker, 1000))
}

func (b *bundle) history(t *testing.T, id string) []history.Event {
	t.Helper()
	events, err := b.store.LoadHistory(b.ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	require.NoError(t, err)
	require.NoError(t, history.Verify(events))
	return events
}

func (b *bundle) status(t *testing.T, id string) provider.Status {
	t.Helper()
	rec, err := b.store.GetInstance(b.ctx, id)
	require.NoError(t, err)
	return rec.Status
}

func kinds(events []history.Event) []history.Kind {
	out := make([]history.Kind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func modes() []provider.Mode {
	return []provider.Mode{provider.ModeTransactional, provider.ModePeekLock}
}

func TestRunnerDrivesScriptToCompletion(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode, memory.Options{}, round.Hooks{})
			b.start(t, "claim-1",
				scripted.Step{Kind: scripted.Activity, Name: "credit"},
				scripted.Step{Kind: scripted.Timer, Delay: time.Hour},
				scripted.Step{Kind: scripted.Signal, Name: "docs"},
				scripted.Step{Kind: scripted.Child, Child: []scripted.Step{{Kind: scripted.Activity, Name: "inner"}}},
				scripted.Step{Kind: scripted.FanOut, Name: "flaky", Count: 3},
			)
			b.drain(t)
			require.Equal(t, provider.StatusRunning, b.status(t, "claim-1"), "parked on the timer")

			b.clock.Advance(time.Hour)
			b.signal(t, "claim-1", "docs", "upload-1")
			b.signal(t, "claim-1", "docs", "upload-1") // duplicate key
			b.drain(t)
			// The flaky fan-out waits for its retries.
			require.Equal(t, provider.StatusRunning, b.status(t, "claim-1"))
			b.clock.Advance(time.Minute)
			b.drain(t)
			require.Equal(t, provider.StatusCompleted, b.status(t, "claim-1"))

			events := b.history(t, "claim-1")
			require.Equal(t, []history.Kind{
				history.KindExecutionStarted, history.KindTurnStarted, history.KindActivityScheduled,
				history.KindActivityCompleted, history.KindTurnStarted, history.KindTimerCreated,
				history.KindTimerFired, history.KindEventRaised, history.KindTurnStarted, history.KindSubWorkflowScheduled,
				history.KindSubWorkflowCompleted, history.KindTurnStarted,
				history.KindActivityScheduled, history.KindActivityScheduled, history.KindActivityScheduled,
				history.KindActivityCompleted, history.KindActivityCompleted, history.KindActivityCompleted,
				history.KindTurnStarted, history.KindExecutionCompleted,
			}, kinds(events))
			child := b.history(t, "claim-1/child-10")
			require.Equal(t, history.KindExecutionCompleted, child[len(child)-1].Kind)
			require.Equal(t, provider.StatusCompleted, b.status(t, "claim-1/child-10"))
			require.Empty(t, b.store.QueuedMessages())
			require.Empty(t, b.store.QueuedActivities())

			snap, err := round.Fold("claim-1", events)
			require.NoError(t, err)
			data, seq, err := b.store.GetSnapshot(b.ctx, "claim-1")
			require.NoError(t, err)
			stored, err := round.UnmarshalSnapshot(data)
			require.NoError(t, err)
			require.Equal(t, snap.LastSeq, seq)
			// The stored snapshot leaves out the execution's idempotency
			// keys; its events give them back.
			require.Empty(t, stored.Seen)
			stored.RememberKeys(events[stored.ExecutionStartSeq-1:])
			require.Equal(t, snap, stored)
		})
	}
}

func TestRunnerCrashAtEveryPointLosesNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		for _, point := range round.CrashPoints() {
			t.Run(mode.String()+"/"+string(point), func(t *testing.T) {
				t.Parallel()
				crashes := 0
				hooks := round.Hooks{Crash: func(_ context.Context, p round.CrashPoint, _ string) error {
					if p == point && crashes < 3 {
						crashes++
						return errors.New("kill -9")
					}
					return nil
				}}
				b := setup(t, mode, memory.Options{}, hooks)
				b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "a"}, scripted.Step{Kind: scripted.Activity, Name: "b"})
				for i := 0; i < 50; i++ {
					_, err := b.runner.RunOnce(b.ctx)
					if round.IsCrash(err) {
						b.runner.Forget()
						// A crashed peek-lock round holds its lease until
						// it expires.
						b.clock.Advance(time.Minute)
						continue
					}
					require.NoError(t, err)
					_, err = b.worker.RunOnce(b.ctx)
					require.NoError(t, err)
				}
				require.Equal(t, 3, crashes)
				require.Equal(t, provider.StatusCompleted, b.status(t, "i"))
				events := b.history(t, "i")
				_, err := round.Fold("i", events)
				require.NoError(t, err)
				require.Equal(t, []history.Kind{
					history.KindExecutionStarted, history.KindTurnStarted, history.KindActivityScheduled,
					history.KindActivityCompleted, history.KindTurnStarted, history.KindActivityScheduled,
					history.KindActivityCompleted, history.KindTurnStarted, history.KindExecutionCompleted,
				}, kinds(events))
			})
		}
	}
}

func TestRunnerDeadLetters(t *testing.T) {
	t.Parallel()
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode, memory.Options{}, round.Hooks{})
			// A message for an instance that never started.
			b.signal(t, "ghost", "docs", "k")
			// An undecodable payload.
			bad := provider.Message{ID: "bad-1", InstanceID: "ghost2", Kind: history.KindEventRaised, CorrelationID: "k", Payload: []byte{0xc1}}
			require.NoError(t, b.store.EnqueueMessages(b.ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{bad}, Now: t0}))
			// An unknown activity.
			b.start(t, "i", scripted.Step{Kind: scripted.Activity, Name: "missing-activity"})
			b.drain(t)

			letters, err := b.store.ListDeadLetters(b.ctx, &provider.ListDeadLettersParams{})
			require.NoError(t, err)
			reasons := map[provider.Reason]string{}
			for _, l := range letters {
				reasons[l.Reason] = l.InstanceID
			}
			require.Equal(t, map[provider.Reason]string{
				provider.ReasonNotStarted:      "ghost",
				provider.ReasonUndecodable:     "ghost2",
				provider.ReasonUnknownActivity: "i",
			}, reasons)
			rec, err := b.store.GetInstance(b.ctx, "i")
			require.NoError(t, err)
			require.Contains(t, rec.Incident, "unknown-activity")
		})
	}
}
