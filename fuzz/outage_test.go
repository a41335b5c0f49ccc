package fuzz_test

import (
	"fmt"
	"strconv"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Outages: a while without rounds (workers down, a backlog, an instance
// held after failed rounds), then a burst of them. What waited is applied
// in the order it took effect (docs/semantics.md, "Order of an instance's
// messages"): a signal that arrived before a timer was due goes first,
// although the timer's message was queued earlier.

// outageWith runs an outage: the clock passes the times timers come due
// while clients go on sending (arrive sends what they send) and activity
// workers, which run outside rounds, deliver results; then the rounds come
// back in a burst, with crashes and faults as any round.
func (r *rig) outageWith(t *rapid.T, arrive func(*rapid.T)) {
	for i := rapid.IntRange(1, 8).Draw(t, "outage steps"); i > 0; i-- {
		switch rapid.IntRange(0, 3).Draw(t, "during the outage") {
		case 0, 1:
			r.advanceBy(time.Duration(rapid.IntRange(1, 150).Draw(t, "outage seconds")) * time.Second)
		case 2:
			arrive(t)
		default:
			r.activity(t)
		}
	}
	for i := rapid.IntRange(1, 6).Draw(t, "burst rounds"); i > 0; i-- {
		r.round(t)
	}
}

// outage is the rounds machine's outage: clients raise signals.
func (m *machine) outage(t *rapid.T) {
	m.outageWith(t, func(t *rapid.T) {
		if len(m.ids) > 0 {
			m.signal(t)
		}
	})
}

// outage is the workflows machine's outage: clients raise signals and
// users act on tasks.
func (m *wfMachine) outage(t *rapid.T) {
	m.stats.outages++
	m.outageWith(t, func(t *rapid.T) {
		open := m.openTasks(t)
		if len(open) > 0 && rapid.Bool().Draw(t, "task action in the outage") {
			task := rapid.SampledFrom(open).Draw(t, "task")
			if actions := wfAllowedActions(&task); len(actions) > 0 {
				m.sendTaskAction(t, &task, rapid.SampledFrom(actions).Draw(t, "action"))
				return
			}
		}
		if len(m.ids) > 0 {
			m.enqueue(t, m.signalMessage(t))
		}
	})
}

// outageStats count what the workflows machine's outages exercised.
type outageStats struct {
	// outages counts outage actions; late the timers recorded after a
	// signal or task action that arrived before the timer was due and was
	// applied only once the timer was due too (the order an outage puts
	// to the test).
	outages, late int
}

func (s *outageStats) add(o *outageStats) {
	s.outages += o.outages
	s.late += o.late
}

// arrivals is what the workflows machine knows of when the messages it
// sent took effect, to check the order rounds applied them in.
type arrivals struct {
	// at maps the tag of a signal (its payload) or of a task action ("task
	// action " and its message id) to when it took effect: when it was
	// queued or, when delayed, became visible.
	at map[string]time.Time
	// checked: the machine's batch limit is the default, which no
	// instance reaches; a smaller one cuts batches of timers alone, whose
	// order the runner cannot fully know (docs/semantics.md).
	checked bool
	// late holds the timers counted in outageStats.late, by execution and
	// seq.
	late map[string]bool
}

func newArrivals(batchLimit int) arrivals {
	return arrivals{at: map[string]time.Time{}, checked: batchLimit == 0, late: map[string]bool{}}
}

// sent records that the message tagged tag was queued now.
func (a *arrivals) sent(tag string, now time.Time, m *provider.Message) {
	at := now
	if m.VisibleAt.After(at) {
		at = m.VisibleAt
	}
	a.at[tag] = at
}

// checkArrivalOrder: within an execution, no TimerFired is recorded ahead
// of a signal or task action that arrived before the timer was due.
func (m *wfMachine) checkArrivalOrder(t *rapid.T, id string, events []history.Event) {
	if !m.arrivals.checked {
		return
	}
	type applied struct {
		arrived time.Time
		at      time.Time // the time of the round that applied it
	}
	var (
		exec    string
		due     time.Time // the latest FireAt of the execution's TimerFired events so far
		dueSeq  int64
		earlier []applied // the execution's tagged events so far
	)
	for i := range events {
		e := &events[i]
		if e.ExecutionID != exec {
			exec, due, dueSeq, earlier = e.ExecutionID, time.Time{}, 0, nil
		}
		var tag string
		switch e.Kind {
		case history.KindTimerFired:
			a, err := e.Attributes()
			if err != nil {
				t.Fatalf("%s: seq %d: %v", id, e.Seq, err)
			}
			fireAt := a.(*history.TimerFired).FireAt
			if fireAt.After(due) {
				due, dueSeq = fireAt, e.Seq
			}
			for _, x := range earlier {
				if x.arrived.Before(fireAt) && !fireAt.After(x.at) {
					m.arrivals.late[e.ExecutionID+"/"+strconv.FormatInt(e.Seq, 10)] = true
				}
			}
			continue
		case history.KindEventRaised:
			a, err := e.Attributes()
			if err != nil {
				t.Fatalf("%s: seq %d: %v", id, e.Seq, err)
			}
			if err := history.Decode(a.(*history.EventRaised).Payload, &tag); err != nil {
				t.Fatalf("%s: seq %d: signal payload: %v", id, e.Seq, err)
			}
		case history.KindTaskAssigned, history.KindTaskReleased, history.KindTaskReassigned, history.KindTaskCompleted:
			tag = "task action " + e.CorrelationID
		default:
			continue
		}
		arrived, ok := m.arrivals.at[tag]
		if !ok {
			continue
		}
		if arrived.Before(due) {
			t.Fatalf("%s: seq %d %s (%s) arrived at %s, before the timer fired at seq %d was due (%s), and is recorded after it\n%s",
				id, e.Seq, e.Kind, tag, arrived.Format(time.TimeOnly), dueSeq, due.Format(time.TimeOnly), wfDump(events))
		}
		earlier = append(earlier, applied{arrived: arrived, at: e.At})
	}
	m.stats.late = len(m.arrivals.late)
}

// String tells what the outages exercised.
func (s *outageStats) String() string {
	return fmt.Sprintf("%d outages; %d timers recorded after a signal or task action that arrived before they were due and was applied only once they were due", s.outages, s.late)
}
