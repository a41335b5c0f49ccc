package fuzz_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// TestChildStartSurvivesTheParentsEnd: a peek-lock parent starts a child
// and ends in the same round (it completes, fails or continues as new
// without waiting for the child), and the round dies after its append,
// before it queues the child's start. The parent's next round, cold,
// finds the execution ended; it must still start the child, once.
func TestChildStartSurvivesTheParentsEnd(t *testing.T) {
	t.Parallel()
	stores := sigStores()
	for _, name := range []string{"memory peek-lock", "mongo peek-lock", "memory transactional"} {
		newStore := stores[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, how := range []string{"return", "fail", "can"} {
				for _, p := range round.CrashPoints() {
					t.Run(how+"/"+string(p), func(t *testing.T) {
						b := newSigBundle(t, newStore(t))
						b.crashes(sigCrash{"parent", p})
						b.start(t, "parent", "launcher", how)
						b.drain(t)
						require.Equal(t, 1, b.crashed, "the planned crash happened")
						requireKidRanOnce(t, b)
						parent := b.history(t, "parent")
						require.Equal(t, 1, sigCount(parent, history.KindSubWorkflowScheduled), "%v", sigKinds(parent))
					})
				}
			}

			// The round that scheduled the child dies after its append
			// while the parent still runs; the round that repairs it
			// (cold, with a signal that ends the parent) must queue the
			// child's start although the execution it derives the work
			// from has ended by then; and so must the round after it,
			// when that one dies too.
			for _, second := range []round.CrashPoint{"", round.AfterAppend, round.AfterProject} {
				if name == "memory transactional" {
					break // a crashed round is rolled back whole
				}
				t.Run("EndedByTheRepairingRound/"+string(second), func(t *testing.T) {
					b := newSigBundle(t, newStore(t))
					b.crashes(sigCrash{"parent", round.AfterAppend})
					if second != "" {
						b.crashes(sigCrash{"parent", second})
					}
					b.start(t, "parent", "launcher", "wait")
					require.Equal(t, "parent", b.step(t), "the parent schedules the child and dies")
					b.start(t, "snd", "notifier", "parent")
					b.clock.Advance(time.Second)
					require.Equal(t, "snd", b.step(t), "the signal that ends the parent is queued")
					b.drain(t)
					want := 1
					if second != "" {
						want = 2
					}
					require.Equal(t, want, b.crashed, "the planned crashes happened")
					requireKidRanOnce(t, b)
				})
			}
		})
	}
}

// requireKidRanOnce checks that the child "kid" started once and
// completed once.
func requireKidRanOnce(t *testing.T, b *sigBundle) {
	t.Helper()
	kid := b.history(t, "kid")
	require.Equal(t, 1, sigCount(kid, history.KindExecutionStarted), "%v", sigKinds(kid))
	require.Equal(t, 1, sigCount(kid, history.KindExecutionCompleted), "%v", sigKinds(kid))
	require.Equal(t, "kid done", b.output(t, "kid"))
}
