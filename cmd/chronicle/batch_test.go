package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// batchHooks, with a batch, start the batch "slow" on the demo engine:
// it suspends the running claims at one instance every 1000 seconds, so
// that after its first page it waits on the demo clock, which stands
// still.
func batchHooks(t *testing.T, withBatch bool) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		if !withBatch {
			return
		}
		ctx := context.Background()
		_, err := e.StartBatch(ctx, chronicle.BatchOptions{
			ID: "slow", Action: chronicle.BatchSuspend, Workflow: "claim", Where: "status = 'running'",
			Reason: "fraud review", Ticket: "RISK-9", Actor: "ops", Rate: 0.001,
		})
		require.NoError(t, err)
		for idle := 0; idle < 3; {
			worked, err := e.RunOnce(ctx)
			require.NoError(t, err)
			if idle++; worked {
				idle = 0
			}
		}
	}}
}

func TestBatchCommands(t *testing.T) {
	const ok, failed, usage = 0, 1, 2
	cases := []struct {
		name  string
		code  int
		batch bool
		args  []string
	}{
		{"batch_start", ok, false, []string{"batch", "start", "--id", "retire", "--action", "terminate", "--workflow", "claim",
			"--where", "status = 'running'", "--reason", "claims system retired", "--ticket", "CHG-42", "--by", "alice"}},
		{"batch_start_json", ok, false, []string{"batch", "start", "--id", "retire", "--action", "terminate", "--workflow", "claim",
			"--where", "status = 'running'", "--reason", "claims system retired", "--by", "alice", "--json"}},
		{"batch_start_signal", ok, false, []string{"batch", "start", "--id", "nudge", "--action", "signal", "--signal", "nudge",
			"--payload", `{"note":"please"}`, "--where", "status = 'running'", "--reason", "stuck", "--by", "alice"}},
		{"batch_start_purge", ok, false, []string{"batch", "start", "--id", "tidy", "--action", "purge", "--workflow", "claim",
			"--reason", "retention", "--by", "alice"}},
		{"batch_start_bad_action", failed, false, []string{"batch", "start", "--action", "explode", "--reason", "x", "--by", "alice"}},
		{"batch_start_bad_where", failed, false, []string{"batch", "start", "--action", "terminate", "--where", "amount >", "--reason", "x", "--by", "alice"}},
		{"batch_start_signal_no_name", failed, false, []string{"batch", "start", "--action", "signal", "--reason", "x", "--by", "alice"}},
		{"batch_start_missing_reason", usage, false, []string{"batch", "start", "--action", "terminate", "--by", "alice"}},
		{"batch_list_none", ok, false, []string{"batch", "list"}},
		{"batch_list", ok, true, []string{"batch", "list"}},
		{"batch_list_json", ok, true, []string{"batches", "list", "--json"}},
		{"batch_show", ok, true, []string{"batch", "show", "slow"}},
		{"batch_show_json", ok, true, []string{"batch", "show", "slow", "--json"}},
		{"batch_show_unknown", failed, true, []string{"batch", "show", "fast"}},
		{"batch_pause", ok, true, []string{"batch", "pause", "slow", "--note", "wait for the auditors", "--by", "bob"}},
		{"batch_resume", ok, true, []string{"batch", "resume", "slow", "--by", "bob"}},
		{"batch_cancel", ok, true, []string{"batch", "cancel", "slow", "--note", "not needed", "--by", "carol"}},
		{"batch_cancel_missing_by", usage, true, []string{"batch", "cancel", "slow"}},
		{"batch_help", ok, false, []string{"help", "batch"}},
		{"batch_start_help", ok, false, []string{"batch", "start", "-h"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tc.name, tc.code, batchHooks(t, tc.batch), tc.args...)
		})
	}
}
