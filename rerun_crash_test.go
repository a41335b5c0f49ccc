package chronicle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// TestRerunUnderCrashes requests reruns of completed, failed and running
// instances on two nodes sharing a store that fails a share of its
// operations and restarts nodes at random: every request is carried out
// exactly once (one record, one new execution), the chain verifies, the
// projections equal the fold of history and every instance ends as the
// rerun makes it end.
func TestRerunUnderCrashes(t *testing.T) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mode, seed), func(t *testing.T) {
				t.Parallel()
				crashRerun(t, mode, seed)
			})
		}
	}
}

func crashRerun(t *testing.T, mode provider.Mode, seed uint64) {
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed+200))
	var calls rerunCalls
	r := newCrashRig(t, mode, rng, chronicle.Options{}, func(e *chronicle.Engine) { registerRerunClaim(t, e, &calls) })
	ctx, e := context.Background(), r.nodes[0]
	const n = 6
	inputs := map[string]rerunClaim{}
	for i := range n {
		id := fmt.Sprintf("claim-%d", i)
		in := [...]rerunClaim{{Amount: 1}, {Amount: -1}, {Amount: 2, Wait: true}}[i%3]
		inputs[id] = in
		if _, err := e.Start(ctx, "claim", in, &chronicle.StartOptions{InstanceID: id}); err != nil {
			t.Fatal(err)
		}
	}
	r.quiesce(ctx)
	for id, in := range inputs {
		events, err := e.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		o := chronicle.RerunOptions{Reason: "rate table fixed", Actor: "ana", Ticket: "OPS-7"}
		switch {
		case in.Amount < 0:
			o.FromSeq, o.ActivityInput = seqOf(t, events, history.KindActivityFailed, 1), 4
		case in.Wait:
			o.FromSeq = seqOf(t, events, history.KindActivityCompleted, 1)
		default:
			o.FromSeq = seqOf(t, events, history.KindTurnStarted, 2)
		}
		if _, err := e.Rerun(ctx, id, o); err != nil {
			t.Fatal(err)
		}
	}
	r.arm(true)
	idle := 0
	for range 1500 {
		if r.step(ctx) {
			idle = 0
			continue
		}
		if idle++; idle >= 4 {
			idle = 0
			r.clock.Advance(time.Duration(1+rng.IntN(2000)) * time.Millisecond)
		}
	}
	r.arm(false)
	r.quiesce(ctx)
	e = r.nodes[0]
	for id, in := range inputs {
		if in.Wait {
			if err := e.RaiseEvent(ctx, id, "approve", true, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.quiesce(ctx)
	for id, in := range inputs {
		events, err := e.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := count(events, history.KindExecutionRerun); got != 1 {
			t.Errorf("%s: %d rerun records, want 1", id, got)
		}
		if got := count(events, history.KindExecutionStarted); got != 2 {
			t.Errorf("%s: %d executions, want 2", id, got)
		}
		if err := e.Verify(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if diffs, err := e.CheckProjections(ctx, id); err != nil || len(diffs) > 0 {
			t.Errorf("%s: projections: %v %v", id, err, diffs)
		}
		inst, err := e.Describe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != chronicle.StatusCompleted {
			t.Errorf("%s: %s after its rerun, want completed (%v)", id, inst.Status, inst.Failure)
			continue
		}
		var out string
		if err := inst.Result(&out); err != nil {
			t.Fatal(err)
		}
		amount := 4 // the failed ones were rerun with 4
		if in.Amount > 0 {
			amount = in.Amount
		}
		if want := fmt.Sprintf("paid %d ", amount*3); len(out) < len(want) || out[:len(want)] != want {
			t.Errorf("%s: result %q, want %q…", id, out, want)
		}
	}
	letters, err := e.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) > 0 {
		t.Errorf("dead letters: %+v", letters)
	}
}
