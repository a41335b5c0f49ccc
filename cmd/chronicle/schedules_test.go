package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

type reportInput struct {
	Region string `json:"region"`
}

func report(ctx *chronicle.Context, in reportInput) (string, error) {
	return "report " + in.Region, nil
}

// scheduleHooks register the workflow "report" on the demo engine and,
// with a schedule, create the schedule "nightly" and run it to its first
// wait.
func scheduleHooks(t *testing.T, withSchedule bool) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		require.NoError(t, chronicle.RegisterWorkflow(e, "report", report))
		if !withSchedule {
			return
		}
		ctx := context.Background()
		require.NoError(t, e.CreateSchedule(ctx, "nightly", chronicle.ScheduleOptions{
			Spec:     chronicle.ScheduleSpec{Cron: "0 2 * * *", TimeZone: "Europe/Paris", Jitter: 10 * time.Minute},
			Workflow: "report", Input: reportInput{Region: "north"}, Overlap: chronicle.OverlapBufferOne,
			Actor: "ops", Note: "the nightly report",
		}))
		for {
			worked, err := e.RunOnce(ctx)
			require.NoError(t, err)
			if !worked {
				return
			}
		}
	}}
}

func TestScheduleCommands(t *testing.T) {
	const ok, failed, usage = 0, 1, 2
	cases := []struct {
		name     string
		code     int
		schedule bool
		args     []string
	}{
		{"schedules_list_none", ok, false, []string{"schedules", "list"}},
		{"schedules_list", ok, true, []string{"schedules", "list"}},
		{"schedules_list_json", ok, true, []string{"schedules", "list", "--json"}},
		{"schedule_show", ok, true, []string{"schedule", "show", "nightly"}},
		{"schedule_show_json", ok, true, []string{"schedule", "show", "nightly", "--json"}},
		{"schedule_show_unknown", failed, true, []string{"schedule", "show", "weekly"}},
		{"schedule_create", ok, false, []string{"schedule", "create", "hourly", "--workflow", "report", "--every", "1h",
			"--input", `{"region":"south"}`, "--overlap", "skip", "--by", "alice", "--note", "hourly report"}},
		{"schedule_create_options", ok, false, []string{"schedule", "create", "hourly", "--workflow", "report", "--every", "1h",
			"--input", `{"region":"north"}`, "--overlap", "allow-all", "--priority", "5", "--concurrency-key", "reports", "--concurrency-limit", "2", "--by", "alice"}},
		{"schedule_create_bad_priority", failed, false, []string{"schedule", "create", "bad", "--workflow", "report", "--every", "1h", "--priority", "5000", "--by", "alice"}},
		{"schedule_create_bad_cron", failed, false, []string{"schedule", "create", "bad", "--workflow", "report", "--cron", "61 * * * *", "--by", "alice"}},
		{"schedule_create_bad_zone", failed, false, []string{"schedule", "create", "bad", "--workflow", "report", "--cron", "@daily", "--zone", "Mars/Olympus", "--by", "alice"}},
		{"schedule_create_missing_by", usage, false, []string{"schedule", "create", "bad", "--workflow", "report", "--cron", "@daily"}},
		{"schedule_pause", ok, true, []string{"schedule", "pause", "nightly", "--note", "quarter-end freeze", "--by", "bob"}},
		{"schedule_resume", ok, true, []string{"schedule", "resume", "nightly", "--by", "bob"}},
		{"schedule_trigger", ok, true, []string{"schedule", "trigger", "nightly", "--by", "carol"}},
		{"schedule_backfill", ok, true, []string{"schedule", "backfill", "nightly", "--from", "2026-11-18", "--to", "2026-11-20", "--by", "carol"}},
		{"schedule_backfill_missing_to", usage, true, []string{"schedule", "backfill", "nightly", "--from", "2026-11-18", "--by", "carol"}},
		{"schedule_delete", ok, true, []string{"schedule", "delete", "nightly", "--note", "replaced", "--by", "dave"}},
		{"schedule_delete_unknown", failed, true, []string{"schedule", "delete", "weekly", "--by", "dave"}},
		{"schedule_help", ok, false, []string{"help", "schedule"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tc.name, tc.code, scheduleHooks(t, tc.schedule), tc.args...)
		})
	}
}
