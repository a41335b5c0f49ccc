package timeline_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

func TestBars(t *testing.T) {
	t.Parallel()
	retry := history.RetryPolicy{MaxAttempts: 3}
	events := build(t, []eventCase{
		{attrs: &history.ExecutionStarted{Name: "loan-approval", Version: "1"}, correlation: "exec-1", actor: "user:ines"}, // 1
		{attrs: &history.TurnStarted{}},
		{attrs: &history.ActivityScheduled{Name: "credit-check", Retry: retry}},                                               // 3
		{attrs: &history.ActivityCompleted{Result: encode(t, 742), Attempts: 2}, correlation: "3"},                            // 4
		{attrs: &history.ActivityScheduled{Name: "reserve-funds"}},                                                            // 5
		{attrs: &history.ActivityFailed{Failure: history.Failure{Message: "treasury\nclosed"}}, correlation: "5"},             // 6
		{attrs: &history.TimerCreated{FireAt: t0.Add(time.Hour), Name: "cooling-off"}},                                        // 7
		{attrs: &history.TimerFired{FireAt: t0.Add(time.Hour)}, correlation: "7"},                                             // 8
		{attrs: &history.TimerCreated{FireAt: t0.Add(48 * time.Hour)}},                                                        // 9
		{attrs: &history.EventRaised{Name: "documents", IdempotencyKey: "k", Sender: "portal"}, correlation: "k"},             // 10
		{attrs: &history.SubWorkflowScheduled{Name: "valuation", InstanceID: "APP-1001/11", ExecutionID: "c"}},                // 11
		{attrs: &history.TaskCreated{TaskID: "t1", Name: "review", Roles: []string{"adjuster"}, Due: t0.Add(72 * time.Hour)}}, // 12
		{attrs: &history.TaskAssigned{TaskID: "t1", Assignee: "bob", Claimed: true}, correlation: "a", actor: "user:bob"},     // 13
		{attrs: &history.TaskReleased{TaskID: "t1", Previous: "bob"}, correlation: "b", actor: "user:bob"},                    // 14
		{attrs: &history.TaskReassigned{TaskID: "nope", To: "x"}, correlation: "c"},                                           // 15: unknown task
		{attrs: &history.TaskCompleted{TaskID: "t1"}, correlation: "d", actor: "user:alice"},                                  // 16
		{attrs: &history.SubWorkflowFailed{Failure: history.Failure{Message: "child terminated"}}, correlation: "11"},         // 17
		{attrs: &history.ActivityCompleted{Attempts: 1}, correlation: "99"},                                                   // 18: unmatched
		{attrs: &history.ExecutionSuspended{Reason: "audit"}, correlation: "s"},                                               // 19
		{attrs: &history.ExecutionTerminated{Reason: "duplicate"}, correlation: "exec-1", actor: "user:ops"},                  // 20
	})
	events = append(events, history.Event{Seq: 21, Kind: history.KindActivityScheduled, Payload: []byte{0xc1}}) // undecodable

	bars := timeline.Bars(events)
	var got []string
	for i := range bars {
		got = append(got, bars[i].String())
	}
	require.Equal(t, []string{
		"#1-#20 execution loan-approval v1 terminated: reason: duplicate",
		"#3-#4 activity credit-check completed (2 attempts)",
		"#5-#6 activity reserve-funds failed: treasury closed",
		"#7-#8 timer cooling-off completed",
		"#9 timer timer open",
		"#10 signal documents completed: from portal",
		"#11-#17 sub-workflow valuation failed: child terminated",
		"#12-#16 task review completed: completed by user:alice",
	}, got)

	require.True(t, bars[1].Retried())
	require.False(t, bars[2].Retried())
	require.True(t, bars[4].Open())
	require.True(t, bars[4].End.IsZero())
	require.Equal(t, t0.Add(48*time.Hour), bars[4].Due, "an open timer keeps its fire time")
	require.True(t, bars[3].Due.IsZero(), "a fired timer is no longer due")
	require.Equal(t, events[5].At, bars[2].End)
	require.Equal(t, bars[5].Start, bars[5].End, "a signal is a moment")
	require.Equal(t, []timeline.Mark{{Seq: 13, At: events[12].At, Label: "claimed by bob"}, {Seq: 14, At: events[13].At, Label: "released"}}, bars[7].Marks)
	require.Equal(t, []timeline.Mark{{Seq: 19, At: events[18].At, Label: "suspended"}}, bars[0].Marks)
}

func TestBarsOfContinuedExecutions(t *testing.T) {
	t.Parallel()
	events := build(t, []eventCase{
		{attrs: &history.ExecutionStarted{Name: "poller"}, correlation: "exec-1"},
		{attrs: &history.ContinuedAsNew{NewExecutionID: "exec-2"}, correlation: "exec-2"},
		{attrs: &history.ExecutionStarted{Name: "poller", ContinuedFrom: "exec-1"}, correlation: "exec-2"},
		{attrs: &history.ExecutionCompleted{}, correlation: "exec-2"},
	})
	events[2].ExecutionID, events[3].ExecutionID = "exec-2", "exec-2"
	bars := timeline.Bars(events)
	require.Len(t, bars, 2)
	require.Equal(t, "#1-#2 execution poller continued: continued as exec-2", bars[0].String())
	require.Equal(t, "#3-#4 execution poller completed", bars[1].String())
	require.Empty(t, timeline.Bars(nil))
}
