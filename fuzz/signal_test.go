package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/replay"
	"github.com/chronicleflow/chronicle/round"
)

// Signals between workflows (Context.SignalWorkflow) under crashes: a
// round of the sender or of the receiver dies at each crash point, and
// the signal must still be recorded exactly once by the receiver and its
// outcome exactly once by the sender, on every store and mode.

// sigWorkflows are the workflows of these tests; inputs and outputs are
// strings.
var sigWorkflows = map[string]replay.WorkflowFunc{
	// listener waits for "go" and returns its payload.
	"listener": waitForGo,
	// relay waits for "go" and continues as new; the next execution waits
	// for "go" again and returns its payload.
	"relay": relayGo,
	// notifier sends "go" with "hello" to the instance its input names
	// and returns "delivered" or the failure's type.
	"notifier": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var to string
		if err := history.Decode(input, &to); err != nil {
			return nil, &replay.InputError{Workflow: "notifier", Err: err}
		}
		err := ctx.SignalWorkflow(to, "go", "hello").Get(nil)
		var se *replay.SignalError
		switch {
		case err == nil:
			return history.Encode("delivered")
		case errors.As(err, &se):
			return history.Encode(se.Failure.Type)
		}
		return nil, err
	},
	// dropper sends "go" with "hello" and ends without waiting.
	"dropper": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var to string
		if err := history.Decode(input, &to); err != nil {
			return nil, &replay.InputError{Workflow: "dropper", Err: err}
		}
		ctx.SignalWorkflow(to, "go", "hello")
		return nil, nil
	},
	// canDropper sends "go" with "hello" to the instance its input names
	// and continues as new in the same turn; the next execution, whose
	// input is "", completes.
	"canDropper": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var to string
		if err := history.Decode(input, &to); err != nil {
			return nil, &replay.InputError{Workflow: "canDropper", Err: err}
		}
		if to == "" {
			return nil, nil
		}
		ctx.SignalWorkflow(to, "go", "hello")
		return nil, ctx.ContinueAsNew("")
	},
	// launcher starts the child "kid" under the id "kid" without waiting
	// for it. Its input says how it goes on in the same turn: "return"
	// completes, "fail" fails, "can" continues as new (the next execution
	// completes), "wait" waits for "go" first.
	"launcher": func(ctx *replay.Context, input []byte) ([]byte, error) {
		var how string
		if err := history.Decode(input, &how); err != nil {
			return nil, &replay.InputError{Workflow: "launcher", Err: err}
		}
		if how == "done" {
			return nil, nil
		}
		ctx.CallSubWorkflow("kid", "", &replay.SubWorkflowOptions{InstanceID: "kid"})
		switch how {
		case "fail":
			return nil, errors.New("launcher fails")
		case "can":
			return nil, ctx.ContinueAsNew("done")
		case "wait":
			if err := ctx.WaitEvent("go", nil).Get(nil); err != nil {
				return nil, err
			}
		}
		return nil, nil
	},
	// kid completes at once.
	"kid": func(*replay.Context, []byte) ([]byte, error) { return history.Encode("kid done") },
}

// sigCrash is one planned crash: the next round of instance id that
// passes point dies there.
type sigCrash struct {
	id    string
	point round.CrashPoint
}

// sigBundle is one process on a store whose rounds crash as planned.
type sigBundle struct {
	store  provider.Store
	clock  *round.ManualClock
	runner *round.Runner
	mu     sync.Mutex
	plan   []sigCrash
	// crashed counts the crashes that happened.
	crashed int
}

func newSigBundle(t *testing.T, store provider.Store) *sigBundle {
	t.Helper()
	b := &sigBundle{store: store, clock: round.NewManualClock(t0)}
	lookup := func(name string) (replay.WorkflowFunc, bool) { fn, ok := sigWorkflows[name]; return fn, ok }
	var err error
	b.runner, err = round.NewRunner(store, round.RunnerOptions{
		Node: "node", Turn: replay.New(replay.Options{Lookup: lookup}).Turn, Clock: nowOnly{b.clock},
		LeaseDuration: leaseDuration, Hooks: round.Hooks{Crash: b.hook},
	})
	require.NoError(t, err)
	t.Cleanup(b.runner.Forget)
	return b
}

func (b *sigBundle) hook(_ context.Context, p round.CrashPoint, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.plan) > 0 && b.plan[0].id == id && b.plan[0].point == p {
		b.plan = b.plan[1:]
		b.crashed++
		return errKill
	}
	return nil
}

func (b *sigBundle) crashes(plan ...sigCrash) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.plan = append(b.plan, plan...)
}

func (b *sigBundle) start(t *testing.T, id, workflow string, input any) {
	t.Helper()
	data, err := history.Encode(input)
	require.NoError(t, err)
	exec := "exec-" + id
	m, err := provider.NewMessage(history.DeterministicID(id, 0, "start:"+exec), id, exec, exec, &history.ExecutionStarted{Name: workflow, Input: data})
	require.NoError(t, err)
	require.NoError(t, b.store.EnqueueMessages(context.Background(), &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: b.clock.Now()}))
}

// step runs one round and reports which instance it ran ("" for none); a
// crashed round is a process that died: its cache is gone, and its
// messages come again when its lease runs out.
func (b *sigBundle) step(t *testing.T) string {
	t.Helper()
	rep, err := b.runner.RunOnce(context.Background())
	if round.IsCrash(err) {
		b.runner.Forget()
		return rep.InstanceID
	}
	require.NoError(t, err)
	if rep == nil {
		return ""
	}
	return rep.InstanceID
}

// drain runs rounds until nothing is left, letting leases and holds run
// out.
func (b *sigBundle) drain(t *testing.T) {
	t.Helper()
	idle := 0
	for range 500 {
		if b.step(t) != "" {
			idle = 0
			continue
		}
		if idle++; idle > 3 {
			return
		}
		b.clock.Advance(2 * time.Minute)
	}
	t.Fatal("work left after 500 rounds")
}

func (b *sigBundle) history(t *testing.T, id string) []history.Event {
	t.Helper()
	events, err := b.store.LoadHistory(context.Background(), &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	require.NoError(t, err)
	require.NoError(t, history.Verify(events))
	_, err = round.Fold(id, events)
	require.NoError(t, err)
	return events
}

// output returns the decoded output of id's last completed execution.
func (b *sigBundle) output(t *testing.T, id string) string {
	t.Helper()
	events := b.history(t, id)
	last := events[len(events)-1]
	require.Equal(t, history.KindExecutionCompleted, last.Kind, "%s has not completed: %v", id, sigKinds(events))
	a, err := last.Attributes()
	require.NoError(t, err)
	var out string
	require.NoError(t, history.Decode(a.(*history.ExecutionCompleted).Output, &out))
	return out
}

func sigKinds(events []history.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("#%d %s", e.Seq, e.Kind)
	}
	return out
}

func sigCount(events []history.Event, k history.Kind) int {
	n := 0
	for _, e := range events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// sigStores are the stores the crash tests run on.
func sigStores() map[string]func(t *testing.T) provider.Store {
	return map[string]func(t *testing.T) provider.Store{
		"memory transactional": func(*testing.T) provider.Store {
			return memory.New(memory.Options{Mode: provider.ModeTransactional})
		},
		"memory peek-lock": func(*testing.T) provider.Store { return memory.New(memory.Options{Mode: provider.ModePeekLock}) },
		"postgres":         func(t *testing.T) provider.Store { return pgtest.NewStore(t, postgres.Options{}) },
		"mongo peek-lock": func(t *testing.T) provider.Store {
			s := mongotest.NewStore(t, chmongo.Options{})
			require.Equal(t, provider.ModePeekLock, s.Mode())
			return s
		},
	}
}

// TestSignalWorkflowSurvivesCrashes: a crash of the sender's or the
// receiver's round at any crash point neither loses the signal nor
// delivers it twice, and the sender records its outcome once.
func TestSignalWorkflowSurvivesCrashes(t *testing.T) {
	t.Parallel()
	for name, newStore := range sigStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, who := range []string{"snd", "rcv"} {
				for _, p := range round.CrashPoints() {
					t.Run(who+"/"+string(p), func(t *testing.T) {
						b := newSigBundle(t, newStore(t))
						b.start(t, "rcv", "listener", "")
						b.drain(t)
						b.crashes(sigCrash{who, p})
						b.start(t, "snd", "notifier", "rcv")
						b.drain(t)
						require.Equal(t, 1, b.crashed, "the planned crash happened")
						require.Equal(t, "delivered", b.output(t, "snd"))
						require.Equal(t, "hello", b.output(t, "rcv"))
						snd := b.history(t, "snd")
						require.Equal(t, 1, sigCount(snd, history.KindSignalSent), "%v", sigKinds(snd))
						require.Equal(t, 1, sigCount(snd, history.KindSignalDelivered), "%v", sigKinds(snd))
						require.Equal(t, 1, sigCount(b.history(t, "rcv"), history.KindEventRaised))
					})
				}
			}
		})
	}
}

// TestSignalWorkflowPeekLockRepairs covers the repairs a peek-lock round
// makes after a crash between its writes, where the receiver continued as
// new or the sender ended in the round that crashed.
func TestSignalWorkflowPeekLockRepairs(t *testing.T) {
	t.Parallel()
	stores := sigStores()
	for _, name := range []string{"memory peek-lock", "mongo peek-lock"} {
		newStore := stores[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			// The receiver's round records the signal, continues as new
			// and dies before it queues the sender's notice. Its messages
			// come again pinned to the ended execution, which recorded the
			// signal: the sender hears that it was delivered, and the next
			// execution does not get it.
			t.Run("ReceiverContinuedAsNew", func(t *testing.T) {
				b := newSigBundle(t, newStore(t))
				b.start(t, "rcv", "relay", 0)
				b.drain(t)
				b.crashes(sigCrash{"rcv", round.AfterProject})
				b.start(t, "snd", "notifier", "rcv")
				b.drain(t)
				require.Equal(t, 1, b.crashed)
				require.Equal(t, "delivered", b.output(t, "snd"))
				rcv := b.history(t, "rcv")
				require.Equal(t, 1, sigCount(rcv, history.KindEventRaised), "%v", sigKinds(rcv))
				require.Equal(t, 1, sigCount(rcv, history.KindContinuedAsNew))
				require.NotEqual(t, history.KindExecutionCompleted, rcv[len(rcv)-1].Kind, "the next execution still waits for a signal of its own")
			})

			// The sender's round dies after it queued the signal, before
			// its ack; the receiver records the signal, continues as new and
			// dies before it queues the notice. The sender's next round,
			// cold, finds the signal without an outcome and sends it again
			// (SignalResendID): the receiver, now in its next execution,
			// must find it in the execution that recorded it and not
			// record it twice.
			t.Run("ResendAfterReceiverContinuedAsNew", func(t *testing.T) {
				b := newSigBundle(t, newStore(t))
				b.start(t, "rcv", "relay", 0)
				b.drain(t)
				b.crashes(sigCrash{"snd", round.BeforeAck}, sigCrash{"rcv", round.AfterAppend})
				b.start(t, "snd", "notifier", "rcv")
				require.Equal(t, "snd", b.step(t), "the sender sends and dies before its ack")
				b.clock.Advance(time.Second)
				require.Equal(t, "rcv", b.step(t), "the receiver records the signal, continues as new and dies")
				// The sender's lease runs out a second before the receiver's.
				b.clock.Advance(leaseDuration - time.Second/2)
				require.Equal(t, "snd", b.step(t), "the sender's cold round sends the signal again")
				b.drain(t)
				require.Equal(t, 2, b.crashed)
				require.Equal(t, "delivered", b.output(t, "snd"))
				rcv := b.history(t, "rcv")
				require.Equal(t, 1, sigCount(rcv, history.KindEventRaised), "%v", sigKinds(rcv))
				require.NotEqual(t, history.KindExecutionCompleted, rcv[len(rcv)-1].Kind, "the next execution still waits for a signal of its own")
			})

			// A cold round that sends a signal queues it once: its repair
			// of open work does not send it again under the resend id.
			t.Run("OneMessagePerSignal", func(t *testing.T) {
				b := newSigBundle(t, newStore(t))
				b.start(t, "snd", "notifier", "rcv")
				require.Equal(t, "snd", b.step(t))
				events, err := b.store.LoadHistory(context.Background(), &provider.LoadHistoryParams{InstanceID: "snd", FromSeq: 1})
				require.NoError(t, err)
				var sent int64
				for _, e := range events {
					if e.Kind == history.KindSignalSent {
						sent = e.Seq
					}
				}
				require.NotZero(t, sent)
				if ms, ok := b.store.(*memory.Store); ok {
					var ids []string
					for _, m := range ms.QueuedMessages() {
						if m.InstanceID == "rcv" {
							ids = append(ids, m.ID)
						}
					}
					require.Equal(t, []string{round.SignalMessageID("snd", "exec-snd", sent)}, ids)
				}
			})

			// The sender sends and ends in one round, which dies after its
			// append, before its enqueue: the signal is in the sender's
			// history only. The next round of the ended sender sends it.
			t.Run("SenderEndedInTheRoundThatSent", func(t *testing.T) {
				b := newSigBundle(t, newStore(t))
				b.start(t, "rcv", "listener", "")
				b.drain(t)
				b.crashes(sigCrash{"snd", round.AfterProject})
				b.start(t, "snd", "dropper", "rcv")
				b.drain(t)
				require.Equal(t, 1, b.crashed)
				require.Equal(t, "hello", b.output(t, "rcv"))
				require.Equal(t, 1, sigCount(b.history(t, "rcv"), history.KindEventRaised))
			})

			// The sender sends and continues as new in one round, which
			// dies after its append: the next execution's snapshot does
			// not keep the old one's signals. The redelivered round finds
			// the signal in the execution before and sends it.
			t.Run("SenderContinuedAsNewInTheRoundThatSent", func(t *testing.T) {
				for _, p := range []round.CrashPoint{round.AfterAppend, round.AfterProject, round.BeforeAck} {
					b := newSigBundle(t, newStore(t))
					b.start(t, "rcv", "listener", "")
					b.drain(t)
					b.crashes(sigCrash{"snd", p})
					b.start(t, "snd", "canDropper", "rcv")
					b.drain(t)
					require.Equal(t, 1, b.crashed)
					require.Equal(t, "hello", b.output(t, "rcv"), "crash at %s", p)
					require.Equal(t, 1, sigCount(b.history(t, "rcv"), history.KindEventRaised), "crash at %s", p)
				}
			})
		})
	}
}
