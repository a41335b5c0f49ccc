package chronicle_test

import (
	"testing"
)

// The rerun tests on PostgreSQL (transactional rounds, its only mode): a
// completed instance rerun from a turn, a failed one from its failed
// activity with a replaced input, a running one, the refusals and a second
// request, a pending timer armed again and a suspended instance.
func TestPostgresRerun(t *testing.T) {
	t.Parallel()
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
			test(t, setupPostgres(t))
		})
	}
}
