package round_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// rerunLog builds one sealed execution from attributes, each with the
// correlation given (or none); seqs start at 1.
func rerunLog(t *testing.T, evs ...struct {
	a    history.Attributes
	corr string
}) []history.Event {
	t.Helper()
	var out []history.Event
	for i, e := range evs {
		p, err := history.EncodeAttributes(e.a)
		require.NoError(t, err)
		out = append(out, history.Event{Seq: int64(i + 1), InstanceID: "i", ExecutionID: "x1", Kind: e.a.EventKind(), CorrelationID: e.corr, At: t0, Actor: "worker:n1", Payload: p})
	}
	history.Seal(nil, out)
	return out
}

type ev = struct {
	a    history.Attributes
	corr string
}

func TestPlanRerun(t *testing.T) {
	t.Parallel()
	start := ev{&history.ExecutionStarted{Name: "w"}, "x1"}
	turn := ev{&history.TurnStarted{}, ""}
	// 1 start, 2 turn, 3 activity, 4 timer, 5 its result, 6 turn,
	// 7 status, 8 the timer fires, 9 turn, 10 end.
	events := rerunLog(t, start, turn,
		ev{&history.ActivityScheduled{Name: "a", Input: []byte{1}}, ""},
		ev{&history.TimerCreated{FireAt: t0}, ""},
		ev{&history.ActivityCompleted{Attempts: 1}, "3"},
		turn,
		ev{&history.CustomStatusSet{Text: "s"}, ""},
		ev{&history.TimerFired{FireAt: t0}, "4"},
		turn,
		ev{&history.ExecutionCompleted{}, "x1"},
	)

	t.Run("Turn", func(t *testing.T) {
		p, err := round.PlanRerun(events, 6, nil)
		require.NoError(t, err)
		require.Len(t, p.Keep, 4, "seqs 2 to 5")
		require.Zero(t, p.ActivitySeq)
	})
	t.Run("ActivityResultAndSchedule", func(t *testing.T) {
		for _, from := range []int64{3, 5} {
			p, err := round.PlanRerun(events, from, []byte{2})
			require.NoError(t, err, "from %d", from)
			require.Equal(t, int64(3), p.ActivitySeq)
			require.Len(t, p.Keep, 3, "seqs 2 to 4: the activity's result is left out")
			copies, err := p.Copy("x2", 20, []byte{2})
			require.NoError(t, err)
			require.Equal(t, []int64{20, 21, 22}, []int64{copies[0].Seq, copies[1].Seq, copies[2].Seq})
			a, err := copies[1].Attributes()
			require.NoError(t, err)
			require.Equal(t, []byte{2}, a.(*history.ActivityScheduled).Input, "the copy records the replaced input")
			for _, c := range copies {
				require.Equal(t, "x2", c.ExecutionID)
				require.Nil(t, c.Hash)
			}
		}
	})
	t.Run("CorrelationsAreRemapped", func(t *testing.T) {
		p, err := round.PlanRerun(events, 9, nil)
		require.NoError(t, err)
		copies, err := p.Copy("x2", 100, nil)
		require.NoError(t, err)
		// The activity (seq 3, copied as 101) and the timer (4, 102).
		require.Equal(t, "101", copies[3].CorrelationID)
		require.Equal(t, "102", copies[6].CorrelationID)
	})
	t.Run("Refusals", func(t *testing.T) {
		for name, c := range map[string]struct {
			events  []history.Event
			from    int64
			replace []byte
		}{
			"the start":              {events, 1, nil},
			"zero":                   {events, 0, nil},
			"past the end":           {events, 11, nil},
			"a command":              {events, 7, nil},
			"the end, a command":     {events, 10, nil},
			"an input for a turn":    {events, 6, []byte{1}},
			"a timer with an input":  {events, 8, []byte{1}},
			"a sub-workflow":         {rerunLog(t, ev{&history.ExecutionStarted{Name: "w", Parent: &history.ParentRef{InstanceID: "p", ExecutionID: "px", ScheduledSeq: 3}}, "x1"}, turn, turn), 3, nil},
			"a human task":           {rerunLog(t, start, turn, ev{&history.TaskCreated{TaskID: "t", Name: "n"}, ""}, turn), 4, nil},
			"an open child":          {rerunLog(t, start, turn, ev{&history.SubWorkflowScheduled{Name: "c", InstanceID: "c1"}, ""}, turn), 4, nil},
			"an open signal":         {rerunLog(t, start, turn, ev{&history.SignalSent{Name: "s", InstanceID: "r"}, ""}, turn), 4, nil},
			"not opening with start": {events[1:], 3, nil},
		} {
			_, err := round.PlanRerun(c.events, c.from, c.replace)
			require.ErrorIs(t, err, round.ErrCannotRerun, name)
		}
	})
	t.Run("ActivityStillRunning", func(t *testing.T) {
		evs := rerunLog(t, start, turn, ev{&history.ActivityScheduled{Name: "a"}, ""}, ev{&history.EventRaised{Name: "s", IdempotencyKey: "k"}, "k"})
		p, err := round.PlanRerun(evs, 3, []byte{7})
		require.NoError(t, err)
		require.Equal(t, int64(3), p.ActivitySeq)
		require.Len(t, p.Keep, 3, "everything after the start is kept")
		terminated := rerunLog(t, start, turn, ev{&history.ActivityScheduled{Name: "a"}, ""}, ev{&history.ExecutionTerminated{Reason: "r"}, "x1"})
		p, err = round.PlanRerun(terminated, 3, nil)
		require.NoError(t, err)
		require.Len(t, p.Keep, 2, "kept up to the termination")
	})
	t.Run("FinishedChildIsCopied", func(t *testing.T) {
		evs := rerunLog(t, start, turn, ev{&history.SubWorkflowScheduled{Name: "c", InstanceID: "c1"}, ""},
			ev{&history.SubWorkflowCompleted{}, "3"}, turn)
		p, err := round.PlanRerun(evs, 5, nil)
		require.NoError(t, err)
		require.Len(t, p.Keep, 3)
	})
}

// The record of a rerun is the one event a snapshot takes after the end
// of its execution, and only there.
func TestSnapshotTakesARerunRecordAfterTheEnd(t *testing.T) {
	t.Parallel()
	rec := ev{&history.ExecutionRerun{FromSeq: 2, NewExecutionID: "x2", Reason: "r"}, "m1"}
	ended := rerunLog(t, ev{&history.ExecutionStarted{Name: "w"}, "x1"}, ev{&history.TurnStarted{}, ""}, ev{&history.ExecutionCompleted{}, "x1"}, rec)
	s, err := round.Fold("i", ended)
	require.NoError(t, err)
	require.True(t, s.Ended)
	require.Equal(t, int64(4), s.LastSeq)

	running := rerunLog(t, ev{&history.ExecutionStarted{Name: "w"}, "x1"}, ev{&history.TurnStarted{}, ""}, rec)
	_, err = round.Fold("i", running)
	require.Error(t, err, "a rerun record before the end")

	twice := rerunLog(t, ev{&history.ExecutionStarted{Name: "w"}, "x1"}, ev{&history.ExecutionCompleted{}, "x1"}, ev{&history.TurnStarted{}, ""})
	_, err = round.Fold("i", twice)
	require.Error(t, err, "other events after the end are still refused")
}
