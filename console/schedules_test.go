package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
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
}
