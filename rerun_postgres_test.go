package chronicle_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider"
)

// The rerun tests on PostgreSQL (transactional rounds, its only mode): a
// completed instance rerun from a turn, a failed one from its failed
// activity with a replaced input, a running one, the refusals and a second
// request, a pending timer armed again and a suspended instance.
func TestPostgresRerun(t *testing.T) {
	t.Parallel()
	testRerunOn(t, func(t *testing.T) provider.Store { return newPostgresStore(t) })
}

// testRerunOn runs the rerun tests on stores made by newStore, one for
// each test.
func testRerunOn(t *testing.T, newStore func(t *testing.T) provider.Store) {
	for name, test := range map[string]func(*testing.T, *bundle){
		"CompletedFromMidHistory":            testRerunCompleted,
		"FailedActivityWithReplacedInput":    testRerunFailedActivity,
		"RunningInstanceEndsTheOldExecution": testRerunRunning,
		"RefusalsWriteNothing":               testRerunRefusals,
		"SecondRequestIsDeadLettered":        testRerunTwice,
		"PendingTimerIsArmedAgain":           testRerunTimer,
		"SuspendedInstance":                  testRerunSuspended,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, setupOn(t, newStore(t)))
		})
	}
}
