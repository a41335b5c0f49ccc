package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
)

// heldClaim places a legal hold on the demo's completed claim CLM-1001.
func heldClaim(t *testing.T) hooks {
	return hooks{demoEngine: func(e *chronicle.Engine) {
		_, err := e.Hold(context.Background(), "CLM-1001", chronicle.HoldOptions{Reason: "coverage dispute", Actor: "counsel", Ticket: "LIT-7"})
		require.NoError(t, err)
		drainEngine(t, e)
	}}
}

func TestHoldCommands(t *testing.T) {
	t.Parallel()
	const ok, failed, usage = exitOK, exitFailure, exitUsage
	cases := []struct {
		name string
		code int
		held bool
		args []string
	}{
		{"instance_hold", ok, false, []string{"instance", "hold", "CLM-1001", "--reason", "coverage dispute", "--by", "counsel", "--ticket", "LIT-7"}},
		{"instance_hold_json", ok, false, []string{"--json", "instance", "hold", "CLM-1001", "--reason", "coverage dispute", "--by", "counsel"}},
		{"instance_hold_running", ok, false, []string{"instance", "hold", "LOAN-2002", "--reason", "regulator inquiry", "--by", "counsel"}},
		{"instance_hold_again", ok, true, []string{"instance", "hold", "CLM-1001", "--reason", "second request", "--by", "ops"}},
		{"instance_hold_unknown", failed, false, []string{"instance", "hold", "NOPE-1", "--reason", "r", "--by", "counsel"}},
		{"instance_hold_missing_reason", usage, false, []string{"instance", "hold", "CLM-1001", "--by", "counsel"}},
		{"instance_show_held", ok, true, []string{"instance", "show", "CLM-1001"}},
		{"instance_show_held_json", ok, true, []string{"--json", "instance", "show", "CLM-1001"}},
		{"instance_release", ok, true, []string{"instance", "release", "CLM-1001", "--reason", "dispute settled", "--by", "counsel", "--ticket", "LIT-7"}},
		{"instance_release_not_held", failed, false, []string{"instance", "release", "CLM-1001", "--reason", "r", "--by", "counsel"}},
		{"purge_held", failed, true, []string{"purge", "CLM-1001", "CLM-1002", "--by", "ops"}},
		{"history_show_held", ok, true, []string{"history", "show", "CLM-1001"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := hooks{}
			if tc.held {
				h = heldClaim(t)
			}
			golden(t, tc.name, tc.code, h, tc.args...)
		})
	}
}
