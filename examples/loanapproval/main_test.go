package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
)

// TestDemo runs the whole demo on the wall clock (about two seconds: the
// second applicant's document deadline) and checks what it claims to show.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := demo(ctx, &out)
	require.NoError(t, err, "output so far:\n%s", out.String())
	approved, rejected := res.Histories["APP-1001"], res.Histories["APP-1002"]

	t.Run("FirstApplicationApproved", func(t *testing.T) {
		d := res.Decisions["APP-1001"]
		require.True(t, d.Approved, "decision: %+v", d)
		require.NotNil(t, d.Offer)
		require.Equal(t, 3.9, d.Offer.RatePercent)
		require.Equal(t, 742, d.CreditScore)
		require.Equal(t, 400000, d.PropertyValue)
		require.Zero(t, count(approved, history.KindCompensationStarted, ""), "nothing to undo when approved")
		require.Equal(t, 2, count(approved, history.KindTimerCancelled, ""), "both deadlines were met and cancelled")
		require.Equal(t, history.KindExecutionCompleted, approved[len(approved)-1].Kind)
	})

	t.Run("SecondApplicationRejectedAndCompensated", func(t *testing.T) {
		d := res.Decisions["APP-1002"]
		require.False(t, d.Approved)
		require.Equal(t, "no documents within 2s", d.Reason)
		require.Equal(t, 1, count(rejected, history.KindTimerFired, ""), "the document deadline fired")
		require.Zero(t, count(rejected, history.KindEventRaised, ""))
		started := indexOf(t, rejected, history.KindCompensationStarted)
		completed := indexOf(t, rejected, history.KindCompensationCompleted)
		require.Less(t, started, completed)
		a, err := rejected[completed].Attributes()
		require.NoError(t, err)
		require.Empty(t, a.(*history.CompensationCompleted).Failures)
		// The compensation is the release-funds activity, run between the two.
		var released bool
		for _, e := range rejected[started:completed] {
			if e.Kind == history.KindActivityScheduled {
				a, err := e.Attributes()
				require.NoError(t, err)
				released = released || a.(*history.ActivityScheduled).Name == releaseFundsActivity
			}
		}
		require.True(t, released, "release-funds ran as the compensation")
		require.Equal(t, []reservation{{ID: "RES-APP-1001", Amount: 240000}}, res.Reserved, "only the approved loan keeps its funds")
	})

	t.Run("CreditCheckRetried", func(t *testing.T) {
		for _, id := range []string{"APP-1001", "APP-1002"} {
			events := res.Histories[id]
			scheduled := activitySeq(t, events, creditCheckActivity)
			var attempts int
			for _, e := range events {
				if e.Kind == history.KindActivityCompleted && e.CorrelationID == history.SeqCorrelation(scheduled) {
					a, err := e.Attributes()
					require.NoError(t, err)
					attempts = a.(*history.ActivityCompleted).Attempts
				}
			}
			require.Equal(t, 2, attempts, "%s: the first attempt timed out, the second succeeded", id)
		}
	})

	t.Run("DuplicateSignalRecordedOnce", func(t *testing.T) {
		require.Equal(t, 1, count(approved, history.KindEventRaised, documentsSignal))
		require.Equal(t, 1, count(approved, history.KindEventRaised, offerSignedSignal))
	})

	t.Run("ChildWorkflowsRan", func(t *testing.T) {
		for _, parent := range []string{"APP-1001", "APP-1002"} {
			kids := children(res.Histories[parent])
			require.Len(t, kids, 1)
			child := res.Histories[kids[0]]
			require.NotEmpty(t, child, "history of %s", kids[0])
			require.Equal(t, history.KindExecutionCompleted, child[len(child)-1].Kind)
		}
	})

	t.Run("HistoriesVerify", func(t *testing.T) {
		require.Len(t, res.Histories, 4)
		for id, events := range res.Histories {
			require.NoError(t, history.Verify(events), id)
		}
	})

	t.Run("ReportReadsWell", func(t *testing.T) {
		report := out.String()
		for _, want := range []string{
			"credit-check attempt 1 for APP-1001: credit bureau timeout (will retry)",
			"credit-check attempt 2 for APP-1001: score 742",
			"APP-1001  approved",
			"APP-1002  rejected",
			"RES-APP-1002  released by the saga's compensation",
			"SEQ  TIME (UTC)",
			"CompensationStarted",
			"Hash chains verified: 4 histories",
			"recorded once",
		} {
			require.Contains(t, report, want)
		}
	})
}

// TestRunStopsWithItsContext checks that the demo gives up, with an error,
// when its context ends instead of hanging.
func TestRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := run(ctx, &bytes.Buffer{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func indexOf(t *testing.T, events []history.Event, k history.Kind) int {
	t.Helper()
	for i, e := range events {
		if e.Kind == k {
			return i
		}
	}
	t.Fatalf("no %s in history", k)
	return -1
}

// activitySeq returns the Seq of the event that scheduled the activity.
func activitySeq(t *testing.T, events []history.Event, name string) int64 {
	t.Helper()
	for _, e := range events {
		if e.Kind != history.KindActivityScheduled {
			continue
		}
		a, err := e.Attributes()
		require.NoError(t, err)
		if a.(*history.ActivityScheduled).Name == name {
			return e.Seq
		}
	}
	t.Fatalf("%s was never scheduled", name)
	return 0
}
