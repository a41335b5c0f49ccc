package chronicle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// jobInput is the input of the workflow schedules start in these tests.
type jobInput struct {
	// Run is how long the job runs; a ScheduleCancelEvent ends it early.
	Run time.Duration
}

func job(ctx *chronicle.Context, in jobInput) (string, error) {
	if in.Run <= 0 {
		return "done", nil
	}
	timer := ctx.Timer(in.Run, nil)
	cancel := ctx.WaitEvent(chronicle.ScheduleCancelEvent, nil)
	if ctx.WhenAny(timer, cancel) == 1 {
		return "cancelled", nil
	}
	return "done", nil
}

func scheduleEnv(t *testing.T, opts ...chronicletest.Option) *chronicletest.Env {
	t.Helper()
	env := chronicletest.New(t, opts...)
	if err := chronicle.RegisterWorkflow(env.Engine(), "job", job); err != nil {
		t.Fatal(err)
	}
	return env
}

// jobs returns the instances of "job" by id, failing the test when one
// of them has more than one execution.
func jobs(t *testing.T, e *chronicle.Engine) map[string]*chronicle.Instance {
	t.Helper()
	ctx := context.Background()
	list, err := e.ListInstances(ctx, chronicle.InstanceFilter{Workflow: "job", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*chronicle.Instance{}
	for _, inst := range list {
		events, err := e.History(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		starts := 0
		for _, ev := range events {
			if ev.Kind == history.KindExecutionStarted {
				starts++
			}
		}
		if starts != 1 {
			t.Errorf("instance %s has %d executions, want 1", inst.ID, starts)
		}
		out[inst.ID] = inst
	}
	return out
}

// firedAt returns the ids of the firings at the offsets from base.
func firedAt(id string, base time.Time, offsets ...time.Duration) []string {
	out := make([]string, len(offsets))
	for i, d := range offsets {
		out[i] = chronicle.ScheduleInstanceID(id, base.Add(d))
	}
	return out
}

func assertJobs(t *testing.T, e *chronicle.Engine, want []string) map[string]*chronicle.Instance {
	t.Helper()
	got := jobs(t, e)
	ids := make([]string, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("started instances:\n got %v\nwant %v", ids, want)
	}
	return got
}

func every(d time.Duration, overlap chronicle.OverlapPolicy, run time.Duration) chronicle.ScheduleOptions {
	return chronicle.ScheduleOptions{Spec: chronicle.ScheduleSpec{Every: d}, Workflow: "job", Input: jobInput{Run: run}, Overlap: overlap}
}

func TestScheduleCronAcrossDST(t *testing.T) {
	// 2026-03-08 is the day New York moves from EST (UTC-5) to EDT (UTC-4).
	env := scheduleEnv(t, chronicletest.StartAt(time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)))
	e := env.Engine()
	err := e.CreateSchedule(env.Context(), "ny", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Cron: "0 9 * * *", TimeZone: "America/New_York"}, Workflow: "job", Input: jobInput{},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.RunFor(4 * 24 * time.Hour)
	assertJobs(t, e, []string{
		"ny@2026-03-06T14:00:00Z", "ny@2026-03-07T14:00:00Z", "ny@2026-03-08T13:00:00Z", "ny@2026-03-09T13:00:00Z",
	})
	d, err := e.DescribeSchedule(env.Context(), "ny")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Next) == 0 || !d.Next[0].Equal(time.Date(2026, 3, 10, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("next firings %v, want 2026-03-10T13:00Z first", d.Next)
	}
	if d.Started != 4 {
		t.Errorf("started %d, want 4", d.Started)
	}
}

func TestScheduleCronDSTSkippedAndRepeated(t *testing.T) {
	// 02:30 does not exist in New York on 2026-03-08 and 01:30 happens
	// twice on 2026-11-01: the first does not fire that day, the second
	// fires once, at its first pass.
	env := scheduleEnv(t, chronicletest.StartAt(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)))
	e := env.Engine()
	if err := e.CreateSchedule(env.Context(), "gap", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Cron: "30 2 * * *", TimeZone: "America/New_York"}, Workflow: "job", Input: jobInput{}}); err != nil {
		t.Fatal(err)
	}
	env.RunFor(3 * 24 * time.Hour)
	assertJobs(t, e, []string{"gap@2026-03-09T06:30:00Z", "gap@2026-03-10T06:30:00Z"})

	later := scheduleEnv(t, chronicletest.StartAt(time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)))
	if err := later.Engine().CreateSchedule(later.Context(), "fold", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Cron: "30 1 * * *", TimeZone: "America/New_York"}, Workflow: "job", Input: jobInput{}}); err != nil {
		t.Fatal(err)
	}
	later.RunFor(2 * 24 * time.Hour)
	assertJobs(t, later.Engine(), []string{"fold@2026-11-01T05:30:00Z", "fold@2026-11-02T06:30:00Z"})
}

func TestScheduleIntervalStartEnd(t *testing.T) {
	env := scheduleEnv(t)
	e, s := env.Engine(), env.StartTime()
	o := every(time.Hour, "", 0)
	o.Spec.Start, o.Spec.End = s.Add(90*time.Minute), s.Add(330*time.Minute)
	if err := e.CreateSchedule(env.Context(), "iv", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(10 * time.Hour)
	assertJobs(t, e, firedAt("iv", s, 90*time.Minute, 150*time.Minute, 210*time.Minute, 270*time.Minute, 330*time.Minute))
	if d, _ := e.DescribeSchedule(env.Context(), "iv"); d == nil || len(d.Next) != 0 {
		t.Errorf("a schedule past its end has next firings: %+v", d)
	}
}

func TestSchedulePauseResumeTrigger(t *testing.T) {
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	if err := e.CreateSchedule(ctx, "pr", every(time.Hour, "", 0)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(150 * time.Minute)
	if err := e.PauseSchedule(ctx, "pr", "database maintenance", "alice"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(3 * time.Hour) // 5h30
	d, err := e.DescribeSchedule(ctx, "pr")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Paused || d.Note != "database maintenance" || len(d.Next) != 0 {
		t.Errorf("paused schedule described as %+v", d)
	}
	last := d.Changes[len(d.Changes)-1]
	if last.Kind != "pause" || last.Actor != "user:alice" || last.Note != "database maintenance" {
		t.Errorf("pause recorded as %+v", last)
	}
	if err := e.TriggerSchedule(ctx, "pr", "bob"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute) // 5h31: the trigger fires though paused
	if err := e.ResumeSchedule(ctx, "pr", "done", "alice"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(2 * time.Hour) // 7h31
	want := firedAt("pr", s, time.Hour, 2*time.Hour, 330*time.Minute, 6*time.Hour, 7*time.Hour)
	got := assertJobs(t, e, want)
	if inst := got[want[2]]; inst == nil {
		t.Errorf("the trigger started nothing")
	}
	d, _ = e.DescribeSchedule(ctx, "pr")
	var trig *chronicle.ScheduleFiring
	for i := range d.Recent {
		if d.Recent[i].InstanceID == want[2] {
			trig = &d.Recent[i]
		}
	}
	if trig == nil || trig.Actor != "user:bob" || trig.Outcome != "started" {
		t.Errorf("trigger recorded as %+v", trig)
	}
}

func TestScheduleBackfill(t *testing.T) {
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	if err := e.CreateSchedule(ctx, "bf", every(time.Hour, chronicle.OverlapSkip, 0)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(200 * time.Minute) // fires at 1h, 2h, 3h
	if err := e.BackfillSchedule(ctx, "bf", s.Add(-3*time.Hour), s.Add(3*time.Hour), "carol"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	h := time.Hour
	assertJobs(t, e, firedAt("bf", s, -3*h, -2*h, -h, 0, h, 2*h, 3*h))
	d, _ := e.DescribeSchedule(ctx, "bf")
	outcomes := map[string]int{}
	for _, f := range d.Recent {
		if f.Actor == "user:carol" {
			outcomes[f.Outcome]++
		}
	}
	if outcomes["started"] != 4 || outcomes["already-started"] != 3 {
		t.Errorf("backfill outcomes %v, want 4 started and 3 already-started", outcomes)
	}
	// A second backfill of the same range starts nothing.
	if err := e.BackfillSchedule(ctx, "bf", s.Add(-3*time.Hour), s.Add(3*time.Hour), "carol"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	assertJobs(t, e, firedAt("bf", s, -3*h, -2*h, -h, 0, h, 2*h, 3*h))
	if err := e.BackfillSchedule(ctx, "bf", s, s.Add(-time.Hour), ""); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("reversed backfill: %v", err)
	}
	if err := e.BackfillSchedule(ctx, "bf", time.Time{}, s, "carol"); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("backfill without a from: %v", err)
	}
}

func TestScheduleOverlap(t *testing.T) {
	h := time.Hour
	cases := []struct {
		policy chronicle.OverlapPolicy
		want   []time.Duration
		check  func(t *testing.T, got map[string]*chronicle.Instance, ids []string)
	}{
		{chronicle.OverlapSkip, []time.Duration{h, 3 * h, 5 * h}, nil},
		{chronicle.OverlapAllowAll, []time.Duration{h, 2 * h, 3 * h, 4 * h, 5 * h}, nil},
		// 2h waits for 1h to end (2h30), 3h for 2h (4h01); 4h finds the
		// buffer full; 5h is buffered behind 3h, which runs to 5h31.
		{chronicle.OverlapBufferOne, []time.Duration{h, 2 * h, 3 * h}, nil},
		{chronicle.OverlapTerminatePrevious, []time.Duration{h, 2 * h, 3 * h, 4 * h, 5 * h},
			func(t *testing.T, got map[string]*chronicle.Instance, ids []string) {
				for _, id := range ids[:4] {
					if got[id].Status != chronicle.StatusTerminated {
						t.Errorf("%s is %s, want terminated", id, got[id].Status)
					}
				}
			}},
		{chronicle.OverlapCancelPrevious, []time.Duration{h, 2 * h, 3 * h, 4 * h, 5 * h},
			func(t *testing.T, got map[string]*chronicle.Instance, ids []string) {
				for _, id := range ids[:4] {
					var out string
					if err := got[id].Result(&out); err != nil || out != "cancelled" {
						t.Errorf("%s ended with %q, %v; want cancelled", id, out, err)
					}
				}
			}},
	}
	for _, c := range cases {
		t.Run(string(c.policy), func(t *testing.T) {
			env := scheduleEnv(t)
			e, s := env.Engine(), env.StartTime()
			if err := e.CreateSchedule(env.Context(), "ov", every(h, c.policy, 90*time.Minute)); err != nil {
				t.Fatal(err)
			}
			env.RunFor(5*h + 10*time.Minute)
			ids := firedAt("ov", s, c.want...)
			got := assertJobs(t, e, ids)
			if c.check != nil && len(got) == len(ids) {
				c.check(t, got, ids)
			}
		})
	}
}

func TestScheduleCatchupAfterDowntime(t *testing.T) {
	store := memory.New(memory.Options{})
	env := scheduleEnv(t, chronicletest.Store(store))
	s := env.StartTime()
	o := every(10*time.Minute, chronicle.OverlapAllowAll, 0)
	o.CatchupWindow = 25 * time.Minute
	if err := env.Engine().CreateSchedule(env.Context(), "cu", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(35 * time.Minute)
	// Every node is down for five hours; then one comes up.
	later := scheduleEnv(t, chronicletest.Store(store), chronicletest.StartAt(env.Now().Add(5*time.Hour)), chronicletest.IDPrefix("b-"))
	later.RunFor(time.Minute) // 5h36
	m := time.Minute
	assertJobs(t, later.Engine(), firedAt("cu", s, 10*m, 20*m, 30*m, 310*m, 320*m, 330*m))
	d, err := later.Engine().DescribeSchedule(later.Context(), "cu")
	if err != nil {
		t.Fatal(err)
	}
	// 40m ... 300m, older than the window at 5h35: 27 missed.
	if d.Skipped != 27 {
		t.Errorf("skipped %d, want 27", d.Skipped)
	}
	missed := 0
	for _, f := range d.Recent {
		if f.Outcome == "missed" {
			missed++
		}
	}
	if missed == 0 {
		t.Errorf("no missed firing recorded: %+v", d.Recent)
	}
}

func TestScheduleUpdateDelete(t *testing.T) {
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	if err := e.CreateSchedule(ctx, "ud", every(time.Hour, "", 0)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(70 * time.Minute)
	o := every(30*time.Minute, "", 0)
	o.Actor, o.Note = "dave", "twice as often"
	if err := e.UpdateSchedule(ctx, "ud", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	d, err := e.DescribeSchedule(ctx, "ud")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Next) < 2 || !d.Next[0].Equal(s.Add(90*time.Minute)) || !d.Next[1].Equal(s.Add(2*time.Hour)) {
		t.Errorf("next after update: %v", d.Next)
	}
	env.RunFor(60 * time.Minute) // 2h11
	if err := e.DeleteSchedule(ctx, "ud", "not needed", "dave"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(5 * time.Hour)
	m := time.Minute
	assertJobs(t, e, firedAt("ud", s, 60*m, 90*m, 120*m))
	if _, err := e.DescribeSchedule(ctx, "ud"); !errors.Is(err, chronicle.ErrScheduleNotFound) {
		t.Errorf("describe after delete: %v", err)
	}
	if l, err := e.ListSchedules(ctx); err != nil || len(l) != 0 {
		t.Errorf("list after delete: %v, %v", l, err)
	}
	if err := e.PauseSchedule(ctx, "ud", "", ""); !errors.Is(err, chronicle.ErrScheduleNotFound) {
		t.Errorf("pause after delete: %v", err)
	}
	// The id of a deleted schedule can be reused.
	if err := e.CreateSchedule(ctx, "ud", every(time.Hour, "", 0)); err != nil {
		t.Errorf("recreate: %v", err)
	}
	if err := e.CreateSchedule(ctx, "ud", every(time.Hour, "", 0)); !errors.Is(err, chronicle.ErrScheduleExists) {
		t.Errorf("create twice: %v", err)
	}
}

func TestScheduleValidation(t *testing.T) {
	env := scheduleEnv(t)
	e, ctx := env.Engine(), env.Context()
	bad := map[string]chronicle.ScheduleOptions{
		"cron":      {Spec: chronicle.ScheduleSpec{Cron: "61 * * * *"}, Workflow: "job"},
		"zone":      {Spec: chronicle.ScheduleSpec{Cron: "@daily", TimeZone: "Mars/Olympus"}, Workflow: "job"},
		"overlap":   {Spec: chronicle.ScheduleSpec{Cron: "@daily"}, Workflow: "job", Overlap: "sometimes"},
		"interval":  {Spec: chronicle.ScheduleSpec{Every: -time.Hour}, Workflow: "job"},
		"both":      {Spec: chronicle.ScheduleSpec{Cron: "@daily", Every: time.Hour}, Workflow: "job"},
		"neither":   {Workflow: "job"},
		"jitter":    {Spec: chronicle.ScheduleSpec{Every: time.Hour, Jitter: -1}, Workflow: "job"},
		"catchup":   {Spec: chronicle.ScheduleSpec{Every: time.Hour}, Workflow: "job", CatchupWindow: -1},
		"input":     {Spec: chronicle.ScheduleSpec{Every: time.Hour}, Workflow: "job", Input: 42},
		"workflow":  {Spec: chronicle.ScheduleSpec{Every: time.Hour}},
		"tz-prefix": {Spec: chronicle.ScheduleSpec{Cron: "CRON_TZ=UTC @daily"}, Workflow: "job"},
	}
	for name, o := range bad {
		if err := e.CreateSchedule(ctx, "v-"+name, o); !errors.Is(err, chronicle.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := e.CreateSchedule(ctx, "a@b", every(time.Hour, "", 0)); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("id with @: %v", err)
	}
	if err := e.CreateSchedule(ctx, strings.Repeat("x", 190), every(time.Hour, "", 0)); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("an id too long for its firings: %v", err)
	}
	list, err := e.ListInstances(ctx, chronicle.InstanceFilter{})
	if err != nil || len(list) != 0 {
		t.Errorf("a refused schedule wrote instances: %v %v", list, err)
	}
	if _, err := e.DescribeSchedule(ctx, "none"); !errors.Is(err, chronicle.ErrScheduleNotFound) {
		t.Errorf("describe unknown: %v", err)
	}
}

func TestScheduleBeforeItsFirstTurn(t *testing.T) {
	// No worker has run the schedule yet: its description is the
	// definition, and a backfill is accepted and applied once it runs.
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	if err := e.CreateSchedule(ctx, "early", every(time.Hour, "", 0)); err != nil {
		t.Fatal(err)
	}
	d, err := e.DescribeSchedule(ctx, "early")
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Every != time.Hour || d.Workflow != "job" || len(d.Next) == 0 || !d.Next[0].Equal(s.Add(time.Hour)) {
		t.Errorf("description before the first turn: %+v", d)
	}
	if err := e.BackfillSchedule(ctx, "early", s.Add(-2*time.Hour), s.Add(-time.Hour), "erin"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	assertJobs(t, e, firedAt("early", s, -2*time.Hour, -time.Hour))
}

func TestScheduleThroughClient(t *testing.T) {
	// A Client without the workflow's code creates the schedule; the
	// engine's workers run it.
	store := memory.New(memory.Options{})
	env := scheduleEnv(t, chronicletest.Store(store))
	c, err := chronicle.NewClient(store, chronicle.ClientOptions{Clock: envClock{env}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateSchedule(env.Context(), "cl", every(time.Hour, "", 0)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(2*time.Hour + time.Minute)
	assertJobs(t, env.Engine(), firedAt("cl", env.StartTime(), time.Hour, 2*time.Hour))
	l, err := c.ListSchedules(env.Context())
	if err != nil || len(l) != 1 || l[0].ID != "cl" || l[0].Started != 2 {
		t.Errorf("list through the client: %+v, %v", l, err)
	}
}

// envClock reads the clock of an environment.
type envClock struct{ env *chronicletest.Env }

func (c envClock) Now() time.Time { return c.env.Now() }

func TestScheduleJitterDeterministic(t *testing.T) {
	env := scheduleEnv(t)
	e, s := env.Engine(), env.StartTime()
	o := every(time.Hour, "", 0)
	o.Spec.Jitter = 10 * time.Minute
	if err := e.CreateSchedule(env.Context(), "jt", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(3*time.Hour + 11*time.Minute)
	got := assertJobs(t, e, firedAt("jt", s, time.Hour, 2*time.Hour, 3*time.Hour))
	delayed := false
	for id, inst := range got {
		nominal, _ := time.Parse(time.RFC3339, id[strings.Index(id, "@")+1:])
		lag := inst.CreatedAt.Sub(nominal)
		if lag < 0 || lag >= 10*time.Minute {
			t.Errorf("%s started %s after its nominal time, want in [0, 10m)", id, lag)
		}
		delayed = delayed || lag > 0
	}
	if !delayed {
		t.Errorf("no firing was delayed by the jitter")
	}
}

func TestScheduleJSONCodec(t *testing.T) {
	// The schedule's state, signals and firings go through the engine's
	// codec: the JSON one keeps them too.
	env := scheduleEnv(t, chronicletest.EngineOptions(chronicle.Options{Codec: chronicle.JSONCodec{}}))
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	o := every(time.Hour, chronicle.OverlapBufferOne, 0)
	o.Spec.TimeZone, o.CatchupWindow = "Asia/Kolkata", 2*time.Hour
	if err := e.CreateSchedule(ctx, "js", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(90 * time.Minute)
	if err := e.PauseSchedule(ctx, "js", "json", "fay"); err != nil {
		t.Fatal(err)
	}
	if err := e.BackfillSchedule(ctx, "js", s.Add(-time.Hour), s.Add(-time.Hour), "fay"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Hour)
	assertJobs(t, e, firedAt("js", s, -time.Hour, time.Hour))
	d, err := e.DescribeSchedule(ctx, "js")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Paused || d.Note != "json" || d.Spec.TimeZone != "Asia/Kolkata" || d.CatchupWindow != 2*time.Hour || d.Overlap != chronicle.OverlapBufferOne {
		t.Errorf("described as %+v", d)
	}
}

// TestScheduleFiresFromItsRound: under OverlapAllowAll a firing of the
// spec is started by the schedule's own round (a detached start, no fire
// activity), with the schedule's start options, "workflow:schedule:<id>"
// as the start's actor and the firing recorded as started; a firing a
// backfill started before its time is not started a second time.
func TestScheduleFiresFromItsRound(t *testing.T) {
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	o := every(time.Hour, chronicle.OverlapAllowAll, 0)
	o.Priority = 3
	o.Concurrency = &chronicle.Concurrency{Key: "reports", Limit: 2}
	if err := e.CreateSchedule(ctx, "direct", o); err != nil {
		t.Fatal(err)
	}
	h := time.Hour
	env.RunFor(150 * time.Minute) // fires at 1h and 2h
	// 3h is backfilled (through the fire activity) before it is due.
	if err := e.BackfillSchedule(ctx, "direct", s.Add(3*h), s.Add(3*h), "carol"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	env.RunFor(time.Hour) // the spec reaches 3h
	got := assertJobs(t, e, firedAt("direct", s, h, 2*h, 3*h))

	events, err := e.History(ctx, chronicle.SchedulePrefix+"direct")
	if err != nil {
		t.Fatal(err)
	}
	detached, activities := 0, 0
	for _, ev := range events {
		switch ev.Kind {
		case history.KindActivityScheduled:
			activities++
		case history.KindSubWorkflowScheduled:
			a, err := ev.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if sw := a.(*history.SubWorkflowScheduled); sw.Detached {
				detached++
			}
		}
	}
	// 1h, 2h and 3h from the round; the backfill's one through the activity.
	if detached != 3 || activities != 1 {
		t.Errorf("schedule history: %d detached starts and %d activities, want 3 and 1", detached, activities)
	}
	for id := range got {
		events, err := e.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a, err := events[0].Attributes()
		if err != nil {
			t.Fatal(err)
		}
		start := a.(*history.ExecutionStarted)
		wantActor := "workflow:" + chronicle.SchedulePrefix + "direct"
		if id == chronicle.ScheduleInstanceID("direct", s.Add(3*h)) {
			wantActor = "user:carol" // the backfill's start; the round's was dropped
		}
		if events[0].Actor != wantActor || start.Priority != 3 || start.Concurrency == nil ||
			*start.Concurrency != (chronicle.Concurrency{Key: "reports", Limit: 2}) || start.Tags["chronicle.schedule"] != "direct" {
			t.Errorf("%s started by %s with priority %d, concurrency %+v, tags %v; want %s, 3, reports/2, the schedule's tag",
				id, events[0].Actor, start.Priority, start.Concurrency, start.Tags, wantActor)
		}
	}
	d, err := e.DescribeSchedule(ctx, "direct")
	if err != nil {
		t.Fatal(err)
	}
	if d.Priority != 3 || d.Concurrency == nil || d.Concurrency.Key != "reports" || d.Started != 4 {
		t.Errorf("description: priority %d, concurrency %+v, %d started; want 3, reports, 4 (the backfill's and three of the spec)", d.Priority, d.Concurrency, d.Started)
	}
	for _, f := range d.Recent {
		if f.Actor == "schedule" && f.Outcome != "started" {
			t.Errorf("firing %s of the spec: %s", f.Nominal.Sub(s), f.Outcome)
		}
	}
}

// TestScheduleStartOptionsValidation: a schedule's start options are
// checked as a start's are, before anything is written.
func TestScheduleStartOptionsValidation(t *testing.T) {
	env := scheduleEnv(t)
	e, ctx := env.Engine(), env.Context()
	o := every(time.Hour, chronicle.OverlapAllowAll, 0)
	o.Priority = provider.MaxPriority + 1
	if err := e.CreateSchedule(ctx, "bad", o); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("priority over the maximum: %v", err)
	}
	o.Priority, o.Concurrency = 0, &chronicle.Concurrency{Key: "k", Limit: 0}
	if err := e.CreateSchedule(ctx, "bad", o); !errors.Is(err, chronicle.ErrInvalidArgument) {
		t.Errorf("limit 0: %v", err)
	}
	if _, err := e.DescribeSchedule(ctx, "bad"); !errors.Is(err, chronicle.ErrScheduleNotFound) {
		t.Errorf("a refused schedule was written: %v", err)
	}
}

// TestScheduleShortExecutions: a schedule continues as new every ten
// wake-ups, so that a round without its cached executor replays a few
// events; an execution recorded when it continued every fifty keeps
// doing so, replays without divergence, and its successor is short.
func TestScheduleShortExecutions(t *testing.T) {
	env := scheduleEnv(t)
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	restore := chronicle.SetScheduleVersion(1)
	if err := e.CreateSchedule(ctx, "short", every(time.Minute, chronicle.OverlapAllowAll, 0)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(30 * time.Second) // the first execution starts under version 1
	restore()
	env.RunFor(80 * time.Minute)
	want := make([]time.Duration, 80)
	for i := range want {
		want[i] = time.Duration(i+1) * time.Minute
	}
	assertJobs(t, e, firedAt("short", s, want...))

	events, err := e.History(ctx, chronicle.SchedulePrefix+"short")
	if err != nil {
		t.Fatal(err)
	}
	if rep := e.ReplayHistory(events); rep.Divergence != nil || rep.Err != nil {
		t.Fatalf("replay: divergence %v, error %v", rep.Divergence, rep.Err)
	}
	// Wake-ups and the recorded version of each execution.
	var wakes, versions []int
	for _, ev := range events {
		switch ev.Kind {
		case history.KindExecutionStarted:
			wakes, versions = append(wakes, 0), append(versions, chronicle.DefaultVersion)
		case history.KindTimerFired:
			wakes[len(wakes)-1]++
		case history.KindMarkerRecorded:
			a, err := ev.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if m := a.(*history.MarkerRecorded); m.Marker == history.MarkerVersion {
				versions[len(versions)-1] = m.Version
			}
		}
	}
	// 50 wake-ups under version 1, then 10 each under version 2, the
	// last execution still running.
	if len(wakes) != 5 || wakes[0] != 50 || versions[0] != 1 {
		t.Fatalf("executions' wake-ups %v and versions %v; want 50 under version 1, then 10s under 2", wakes, versions)
	}
	for i := 1; i < len(wakes); i++ {
		if versions[i] != 2 || wakes[i] > 10 || (i < len(wakes)-1 && wakes[i] != 10) {
			t.Errorf("execution %d: %d wake-ups under version %d; want 10 under 2", i+1, wakes[i], versions[i])
		}
	}
	// The status is set at each start and after each wake-up, but not
	// after the wake-up a version 2 execution continues at: 51 in the
	// first, 10 in each of the next three, 1 in the running one.
	if got, want := count(events, history.KindCustomStatusSet), 51+3*10+1; got != want {
		t.Errorf("%d statuses set, want %d", got, want)
	}
	d, err := e.DescribeSchedule(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	if d.Started != 80 || len(d.Recent) != 20 {
		t.Errorf("description: %d started, %d recent; want 80 and 20", d.Started, len(d.Recent))
	}
}
