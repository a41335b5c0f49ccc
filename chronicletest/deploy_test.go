package chronicletest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// shipV1 charges, waits for the warehouse, and notifies.
func shipV1(ctx *chronicle.Context, order string) (string, error) {
	if _, err := chronicle.CallActivity[string](ctx, "charge", order, nil); err != nil {
		return "", err
	}
	if _, err := chronicle.WaitEvent[string](ctx, "shipped", nil); err != nil {
		return "", err
	}
	return chronicle.CallActivity[string](ctx, "notify", order, nil)
}

// shipV2Unguarded adds a fraud check before the charge, without Version.
func shipV2Unguarded(ctx *chronicle.Context, order string) (string, error) {
	if _, err := chronicle.CallActivity[string](ctx, "fraud-check", order, nil); err != nil {
		return "", err
	}
	return shipV1(ctx, order)
}

// shipV2 adds the fraud check behind Version: histories recorded before it
// replay without it.
func shipV2(ctx *chronicle.Context, order string) (string, error) {
	if ctx.Version("fraud-check", chronicle.DefaultVersion, 1) == 1 {
		if _, err := chronicle.CallActivity[string](ctx, "fraud-check", order, nil); err != nil {
			return "", err
		}
	}
	return shipV1(ctx, order)
}

// deploy starts an order on v1 code, parks it at its wait, and lets an
// environment with v2 code on the same store (another node after a
// rolling deploy) take it over; it returns the v2 environment.
func deploy(t *testing.T, v2 func(*chronicle.Context, string) (string, error), opts ...chronicletest.Option) (*chronicletest.Env, string) {
	t.Helper()
	store := memory.New(memory.Options{})
	old := chronicletest.New(t, append(opts, chronicletest.Store(store), chronicletest.IDPrefix("v1-"),
		chronicletest.EngineOptions(chronicle.Options{NodeID: "v1"}))...)
	mustRegister(t, chronicle.RegisterWorkflow(old.Engine(), "ship", shipV1))
	chronicletest.MockActivity[string, string](old, "charge").Return("paid").Once()
	id := old.Start("ship", "ORD-1", &chronicle.StartOptions{InstanceID: "ORD-1"})
	old.RunFor(time.Hour)
	old.AssertStatus(id, chronicle.StatusRunning)

	env := chronicletest.New(t, append(opts, chronicletest.Store(store), chronicletest.IDPrefix("v2-"), chronicletest.StartAt(old.Now()),
		chronicletest.EngineOptions(chronicle.Options{NodeID: "v2"}))...)
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "ship", v2))
	chronicletest.MockActivity[string, string](env, "fraud-check").Return("ok").Maybe()
	chronicletest.MockActivity[string, string](env, "charge").Return("paid").Maybe()
	chronicletest.MockActivity[string, string](env, "notify").Return("sent").Maybe()
	env.RaiseEvent(id, "shipped", "TRK-1", nil)
	return env, id
}

func TestRollingDeployWithoutVersionDeadLetters(t *testing.T) {
	t.Parallel()
	env, id := deploy(t, shipV2Unguarded, chronicletest.AllowDeadLetters())
	env.RunUntilIdle()
	letters, err := env.Engine().ListDeadLetters(env.Context(), chronicle.DeadLetterFilter{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].Reason != provider.ReasonNondeterminism ||
		!strings.Contains(letters[0].Error, `history holds ActivityScheduled "charge"`) {
		t.Fatalf("dead letters %+v, want one for nondeterminism naming the charge", letters)
	}
	env.AssertStatus(id, chronicle.StatusRunning)
}

func TestRollingDeployWithVersionCompletes(t *testing.T) {
	t.Parallel()
	env, id := deploy(t, shipV2)
	inst := env.Wait(id)
	if inst.Status != chronicle.StatusCompleted {
		t.Fatalf("status %s", inst.Status)
	}
	if env.ActivityAttempts("fraud-check") != 0 {
		t.Fatalf("the old instance ran the new fraud check")
	}
	// A new instance on v2 records the version and runs the check.
	id2 := env.Start("ship", "ORD-2", &chronicle.StartOptions{InstanceID: "ORD-2"})
	env.RaiseEventAt(env.Elapsed()+time.Hour, id2, "shipped", "TRK-2", nil)
	env.Wait(id2)
	if env.ActivityAttempts("fraud-check") != 1 {
		t.Fatalf("fraud check ran %d times for the new instance, want 1", env.ActivityAttempts("fraud-check"))
	}
}

// TestOldNodeDeadLettersNewInstances: an instance that recorded the new
// version fails its rounds on a node still running the old code; the
// rounds are retried (held 2s doubling to 1m, MaxDeliveries times: about six minutes) and
// then dead-lettered, and a redrive on a new node completes it.
func TestOldNodeDeadLettersNewInstances(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	v2 := chronicletest.New(t, chronicletest.Store(store), chronicletest.IDPrefix("v2-"), chronicletest.AllowDeadLetters())
	mustRegister(t, chronicle.RegisterWorkflow(v2.Engine(), "ship", shipV2))
	chronicletest.MockActivity[string, string](v2, "fraud-check").Return("ok").Once()
	chronicletest.MockActivity[string, string](v2, "charge").Return("paid").Once()
	chronicletest.MockActivity[string, string](v2, "notify").Return("sent").Once()
	id := v2.Start("ship", "ORD-3", &chronicle.StartOptions{InstanceID: "ORD-3"})
	v2.RunFor(time.Minute)

	v1 := chronicletest.New(t, chronicletest.Store(store), chronicletest.IDPrefix("v1-"), chronicletest.StartAt(v2.Now()), chronicletest.AllowDeadLetters())
	mustRegister(t, chronicle.RegisterWorkflow(v1.Engine(), "ship", shipV1))
	v1.RaiseEvent(id, "shipped", "TRK-3", nil)
	v1.RunUntilIdle()
	letters, err := v1.Engine().ListDeadLetters(v1.Context(), chronicle.DeadLetterFilter{InstanceID: id})
	if err != nil || len(letters) != 1 || letters[0].Reason != provider.ReasonNondeterminism {
		t.Fatalf("dead letters %+v, %v", letters, err)
	}
	t.Logf("the old node dead-lettered the signal after %s: %s", v1.Elapsed(), letters[0].Error)
	if v1.Elapsed() < 5*time.Minute || v1.Elapsed() > 7*time.Minute {
		t.Fatalf("dead-lettered after %s, want about six minutes of retries", v1.Elapsed())
	}

	// After the deploy: redrive on a new node.
	if err := v2.Engine().RedriveDeadLetter(v2.Context(), letters[0].ID, "ops"); err != nil {
		t.Fatal(err)
	}
	v2.RunUntil(v1.Now())
	if inst := v2.Wait(id); inst.Status != chronicle.StatusCompleted {
		t.Fatalf("status %s after the redrive", inst.Status)
	}
}
