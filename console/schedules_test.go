package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/internal/demodata"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	p := b.get("/schedules")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `id="no-schedules"`)

	ctx := context.Background()
	require.NoError(t, d.Engine.CreateSchedule(ctx, "nightly-claims", chronicle.ScheduleOptions{
		Spec:     chronicle.ScheduleSpec{Cron: "0 2 * * *", TimeZone: "Europe/Paris"},
		Workflow: "claim", Input: chronicle.RawPayload(nil), Actor: "ops",
	}))
	require.NoError(t, d.Engine.CreateSchedule(ctx, "hourly", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Every: time.Hour}, Workflow: "claim", Input: chronicle.RawPayload(nil), Paused: true, Note: "<freeze>",
	}))
	require.NoError(t, d.Drain(ctx))
	p = b.get("/schedules")
	require.Equal(t, http.StatusOK, p.code)
	require.Equal(t, []string{"hourly", "nightly-claims"}, ids(p.body, "schedule"))
	require.Contains(t, p.body, "0 2 * * * (Europe/Paris)")
	require.Contains(t, p.body, "&lt;freeze&gt;", "the pause note, escaped")
	require.Contains(t, p.body, `href="/instance?id=schedule%3Anightly-claims"`)
	require.Contains(t, p.body, `aria-current="page">Schedules`)

	// A schedule's page shows the start options of its firings when set.
	require.NoError(t, d.Engine.CreateSchedule(ctx, "urgent", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Every: time.Hour}, Workflow: "claim", Input: chronicle.RawPayload(nil),
		Priority: 7, Concurrency: &chronicle.Concurrency{Key: "claims", Limit: 3},
	}))
	require.NoError(t, d.Drain(ctx))
	p = b.get("/schedule?id=urgent")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<dd id="schedule-priority">7</dd>`)
	require.Contains(t, p.body, `<dd id="schedule-concurrency">claims (at most 3 running)</dd>`)
	p = b.get("/schedule?id=nightly-claims")
	require.NotContains(t, p.body, `id="schedule-priority"`)
}

// TestScheduleActions pauses, triggers and resumes a schedule from its
// page and checks that each change reaches the schedule with the note and
// the signed-in user.
func TestScheduleActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	require.NoError(t, d.Engine.CreateSchedule(ctx, "nightly", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Cron: "0 2 * * *"}, Workflow: demodata.ClaimWorkflow, Input: chronicle.RawPayload(nil), Actor: "ops",
	}))
	require.NoError(t, d.Drain(ctx))
	user := chronicle.User{ID: "alice"}
	var hookErr error
	hook := func(*http.Request) (chronicle.User, error) { return user, hookErr }
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{Actions: true, User: hook}))

	p := b.get("/schedules")
	require.Contains(t, p.body, `href="/schedule?id=nightly"`, "the list links to the schedule's page")
	p = b.get("/schedule?id=nightly")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Contains(t, p.body, `aria-current="page">Schedules`)
	require.Contains(t, p.body, `action="/actions/schedule-pause"`)
	require.Contains(t, p.body, `action="/actions/schedule-trigger"`)
	require.NotContains(t, p.body, `action="/actions/schedule-resume"`, "an active schedule is not resumed")
	tok := b.token("/schedule?id=nightly")

	post := func(action string, form url.Values) page {
		t.Helper()
		form.Set("csrf", tok)
		return b.post("/actions/"+action, form)
	}
	describe := func() *chronicle.ScheduleDescription {
		t.Helper()
		require.NoError(t, d.Drain(ctx))
		s, err := d.Engine.DescribeSchedule(ctx, "nightly")
		require.NoError(t, err)
		return s
	}
	lastChange := func(s *chronicle.ScheduleDescription) chronicle.ScheduleChange {
		t.Helper()
		require.NotEmpty(t, s.Changes)
		return s.Changes[len(s.Changes)-1]
	}

	// CSRF: no token, nothing paused.
	p = b.post("/actions/schedule-pause", url.Values{"id": {"nightly"}, "note": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.code)
	require.False(t, describe().Paused)

	p = post("schedule-pause", url.Values{"id": {"nightly"}, "note": {"  <month-end> freeze  "}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	require.Equal(t, "/schedule?id=nightly", p.header.Get("Location"))
	s := describe()
	require.True(t, s.Paused)
	require.Equal(t, "<month-end> freeze", s.Note)
	require.Equal(t, chronicle.ScheduleChange{Kind: "pause", Actor: "user:alice", Note: "<month-end> freeze", At: lastChange(s).At}, lastChange(s))
	p = b.get("/schedule?id=nightly")
	require.Contains(t, p.body, `id="notice" role="status">Schedule nightly paused by alice.`)
	require.Contains(t, p.body, "&lt;month-end&gt; freeze", "the note, escaped")
	require.Contains(t, p.body, `action="/actions/schedule-resume"`)

	started := s.Started
	p = post("schedule-trigger", url.Values{"id": {"nightly"}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	s = describe()
	require.Equal(t, started+1, s.Started, "the trigger started the workflow")
	require.NotEmpty(t, s.Recent)
	require.Equal(t, "user:alice", s.Recent[len(s.Recent)-1].Actor)

	p = post("schedule-resume", url.Values{"id": {"nightly"}, "note": {"freeze over"}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	s = describe()
	require.False(t, s.Paused)
	require.Equal(t, "resume", lastChange(s).Kind)
	require.Equal(t, "user:alice", lastChange(s).Actor)
	require.Equal(t, "freeze over", lastChange(s).Note)

	// Refusals: clear messages, never a 500.
	p = post("schedule-pause", url.Values{"id": {"nope"}, "note": {"x"}})
	require.Equal(t, http.StatusNotFound, p.code, p.body)
	require.Contains(t, p.body, "schedule not found")
	p = post("schedule-trigger", url.Values{})
	require.Equal(t, http.StatusBadRequest, p.code, p.body)
	p = b.get("/schedule?id=nope")
	require.Equal(t, http.StatusNotFound, p.code)
	require.Contains(t, p.body, "schedule not found")
	hookErr = errors.New("not signed in")
	p = post("schedule-pause", url.Values{"id": {"nightly"}, "note": {"x"}})
	require.Equal(t, http.StatusForbidden, p.code)
	require.Contains(t, p.body, "not signed in")
	require.False(t, describe().Paused)

	// A read-only console refuses every schedule action.
	ro := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	rtok := ro.token("/schedule?id=nightly")
	require.Contains(t, ro.get("/schedule?id=nightly").body, `disabled title="Actions are disabled`)
	for _, action := range []string{"schedule-pause", "schedule-resume", "schedule-trigger"} {
		p = ro.post("/actions/"+action, url.Values{"csrf": {rtok}, "id": {"nightly"}})
		require.Equal(t, http.StatusForbidden, p.code, action)
		require.Contains(t, p.body, "Actions are disabled", action)
	}
	s = describe()
	require.False(t, s.Paused)
	require.Equal(t, started+1, s.Started, "nothing fired")
}
