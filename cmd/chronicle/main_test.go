package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/leakcheck"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) { leakcheck.Main(m) }

// result is what one run of the tool produced.
type result struct {
	code           int
	stdout, stderr string
}

// runTool runs the tool with args in which "$TMP" stands for a temporary
// directory; "$TMP" replaces the directory in the output again, so golden
// files do not depend on it.
func runTool(t *testing.T, tmp string, h hooks, args ...string) result {
	t.Helper()
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = strings.ReplaceAll(a, "$TMP", tmp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := runWith(ctx, expanded, &stdout, &stderr, h)
	clean := func(s string) string {
		if tmp == "" {
			return s
		}
		return strings.ReplaceAll(s, tmp, "$TMP")
	}
	return result{code: code, stdout: clean(stdout.String()), stderr: clean(stderr.String())}
}

// transcript renders a run for a golden file.
func transcript(args []string, r result) string {
	var b strings.Builder
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if a == "" || strings.ContainsAny(a, " \"'{}*|;&$") && !strings.HasPrefix(a, "$TMP") {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	fmt.Fprintf(&b, "$ chronicle %s\nexit %d\n", strings.Join(quoted, " "), r.code)
	if r.stdout != "" {
		b.WriteString("-- stdout --\n" + r.stdout)
	}
	if r.stderr != "" {
		b.WriteString("-- stderr --\n" + r.stderr)
	}
	return b.String()
}

// checkGolden compares got with testdata/<name>.golden, or rewrites the
// file with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./cmd/chronicle -update")
	require.Equal(t, string(want), got, "output differs from %s; run with -update if the change is intended", path)
}

// golden runs the tool, checks its exit code and compares its transcript
// with the golden file.
func golden(t *testing.T, name string, wantCode int, h hooks, args ...string) result {
	t.Helper()
	r := runTool(t, t.TempDir(), h, args...)
	require.Equal(t, wantCode, r.code, "exit code of %v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	checkGolden(t, name, transcript(args, r))
	return r
}

// deadLetterID returns the id of the demo's dead letter, read with the
// tool itself.
func deadLetterID(t *testing.T) string {
	t.Helper()
	r := runTool(t, "", hooks{}, "--json", "dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	var letters []struct {
		ID         string `json:"id"`
		InstanceID string `json:"instance_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &letters))
	require.Len(t, letters, 1)
	require.Equal(t, "REF-4001", letters[0].InstanceID)
	return letters[0].ID
}

// TestCommands runs every command, in text and JSON, and the usual
// mistakes, against the demo data and compares the output with golden
// files.
func TestCommands(t *testing.T) {
	t.Parallel()
	dl := deadLetterID(t)
	const ok, failed, usage = exitOK, exitFailure, exitUsage
	cases := []struct {
		name string
		code int
		args []string
	}{
		// Help.
		{"help", ok, []string{"help"}},
		{"help_flag", ok, []string{"-h"}},
		{"help_group", ok, []string{"help", "history"}},
		{"help_command", ok, []string{"help", "task", "complete"}},
		{"help_command_flag", ok, []string{"instances", "list", "-h"}},
		{"help_unknown", usage, []string{"help", "frobnicate"}},

		// demo
		{"demo", ok, []string{"demo"}},
		{"demo_json", ok, []string{"demo", "--json"}},

		// instances list
		{"instances_list", ok, []string{"instances", "list"}},
		{"instances_list_json", ok, []string{"--json", "instances", "list"}},
		{"instances_list_running_claims", ok, []string{"instances", "list", "--status", "running", "--workflow", "claim"}},
		{"instances_list_key", ok, []string{"instances", "list", "--key", "LOAN-2001"}},
		{"instances_list_created_between", ok, []string{"instances", "list", "--from", "2026-11-22T09:10:00Z", "--to", "2026-11-22T09:30:00Z"}},
		{"instances_list_page", ok, []string{"instances", "list", "--after", "CLM-1002", "--limit", "3"}},
		{"instances_list_none", ok, []string{"instances", "list", "--workflow", "mortgage"}},
		{"instance_list_alias", ok, []string{"instance", "list", "--status", "failed"}},

		// search: --where, --columns, instances count
		{"instances_list_where", ok, []string{"instances", "list", "--where", "amount > 1000 AND status = 'running'", "--columns", "amount,policy"}},
		{"instances_list_where_custom_status", ok, []string{"instances", "list", "--where", "custom_status IN ('awaiting review', 'paid')"}},
		{"instances_list_where_not", ok, []string{"instances", "list", "--where", "NOT approved = true", "--columns", "approved,amount"}},
		{"instances_list_where_json", ok, []string{"--json", "instances", "list", "--where", "policy = 'POL-8812'"}},
		{"instances_list_where_bad", usage, []string{"instances", "list", "--where", "amount >"}},
		{"instances_list_where_undeclared", usage, []string{"instances", "list", "--where", "customer = 'Ada'"}},
		{"instances_list_where_wrong_type", usage, []string{"instances", "list", "--where", "amount = 'lots'"}},
		{"instances_list_columns_undeclared", usage, []string{"instances", "list", "--columns", "customer"}},
		{"instances_list_declared", ok, []string{"--search-attributes", "region:keyword", "instances", "list", "--where", "region = 'eu' OR amount < 100", "--columns", "region,amount"}},
		{"instances_count", ok, []string{"instances", "count"}},
		{"instances_count_by_status", ok, []string{"instances", "count", "--by", "status"}},
		{"instances_count_by_custom_status", ok, []string{"instances", "count", "--by", "custom_status", "--where", "workflow = 'claim'"}},
		{"instances_count_by_attribute_json", ok, []string{"--json", "instances", "count", "--by", "approved"}},
		{"instances_count_bad_by", usage, []string{"instances", "count", "--by", "colour"}},
		{"instances_count_bad_where", usage, []string{"instances", "count", "--where", "status = 'sleeping'"}},
		{"bad_search_attributes", usage, []string{"--search-attributes", "amount:money", "instances", "list"}},
		{"search_attributes_conflict", usage, []string{"--search-attributes", "amount:int", "instances", "list"}},

		// instance show
		{"instance_show_completed", ok, []string{"instance", "show", "CLM-1001"}},
		{"instance_show_open_task", ok, []string{"instance", "show", "CLM-1003"}},
		{"instance_show_failed", ok, []string{"instance", "show", "KYC-3001"}},
		{"instance_show_terminated", ok, []string{"instance", "show", "CLM-1004"}},
		{"instance_show_incident", ok, []string{"instance", "show", "REF-4001"}},
		{"instance_show_json", ok, []string{"instance", "show", "CLM-1001", "--json"}},
		{"instance_show_json_incident", ok, []string{"--json", "instance", "show", "REF-4001"}},
		{"instance_show_unknown", failed, []string{"instance", "show", "CLM-9999"}},
		{"instance_show_invalid_id", failed, []string{"instance", "show", " CLM-1001"}},
		{"instance_show_missing_id", usage, []string{"instance", "show"}},
		{"instance_show_extra_arg", usage, []string{"instance", "show", "CLM-1001", "CLM-1002"}},

		// history
		{"history_show", ok, []string{"history", "show", "LOAN-2001"}},
		{"history_show_json", ok, []string{"history", "show", "KYC-3001", "--json"}},
		{"history_show_unknown", failed, []string{"history", "show", "CLM-9999"}},
		// replay (files: TestReplayCommand)
		{"replay_all", ok, []string{"replay", "--all"}},
		{"replay_all_json", ok, []string{"replay", "--all", "--json"}},
		{"replay_nothing", usage, []string{"replay"}},
		{"replay_both", usage, []string{"replay", "--all", "x.jsonl"}},
		{"replay_missing_file", failed, []string{"replay", "$TMP/none.jsonl"}},
		{"replay_empty_folder", failed, []string{"replay", "$TMP"}},

		{"history_export", ok, []string{"history", "export", "KYC-3001"}},
		{"history_export_file", ok, []string{"history", "export", "CLM-1001", "--out", "$TMP/CLM-1001.jsonl"}},
		{"history_export_file_json", ok, []string{"--json", "history", "export", "CLM-1001", "--out", "$TMP/CLM-1001.jsonl"}},
		{"history_verify", ok, []string{"history", "verify", "CLM-1001"}},
		{"history_verify_json", ok, []string{"history", "verify", "CLM-1001", "--json"}},
		{"history_verify_all", ok, []string{"history", "verify", "--all"}},
		{"history_verify_all_json", ok, []string{"history", "verify", "--all", "--json"}},
		{"history_verify_unknown", failed, []string{"history", "verify", "CLM-9999"}},
		{"history_verify_nothing", usage, []string{"history", "verify"}},
		{"history_verify_two_modes", usage, []string{"history", "verify", "CLM-1001", "--all"}},
		{"history_verify_missing_archive", failed, []string{"history", "verify", "--archive", "$TMP/missing.jsonl"}},
		{"checkpoint_list_none", ok, []string{"checkpoint", "list"}},

		// tasks list
		{"tasks_list", ok, []string{"tasks", "list"}},
		{"tasks_list_json", ok, []string{"tasks", "list", "--json"}},
		{"tasks_list_inbox", ok, []string{"tasks", "list", "--role", "adjuster", "--unassigned", "--status", "open"}},
		{"tasks_list_roles", ok, []string{"tasks", "list", "--role", "auditor,supervisor", "--role", "clerk", "--status", "open"}},
		{"tasks_list_assignee", ok, []string{"tasks", "list", "--assignee", "bob"}},
		{"tasks_list_instance", ok, []string{"task", "list", "--instance", "CLM-1001"}},
		{"tasks_list_none", ok, []string{"tasks", "list", "--role", "auditor"}},
		{"tasks_list_bad_status", usage, []string{"tasks", "list", "--status", "done"}},
		{"tasks_list_conflicting", usage, []string{"tasks", "list", "--unassigned", "--assignee", "bob"}},

		// task show and actions
		{"task_show", ok, []string{"task", "show", "review-CLM-1003"}},
		{"task_show_json", ok, []string{"task", "show", "review-CLM-1001", "--json"}},
		{"task_show_unknown", failed, []string{"task", "show", "review-CLM-9999"}},
		{"task_claim", ok, []string{"task", "claim", "review-CLM-1002", "--user", "alice", "--roles", "adjuster"}},
		{"task_claim_json", ok, []string{"--json", "task", "claim", "review-CLM-1002", "--user", "alice", "--roles", "adjuster"}},
		{"task_claim_assigned", failed, []string{"task", "claim", "review-CLM-1003", "--user", "alice", "--roles", "adjuster"}},
		{"task_assign", ok, []string{"task", "assign", "review-CLM-1002", "--to", "bob", "--user", "carol", "--roles", "supervisor"}},
		{"task_assign_missing_to", usage, []string{"task", "assign", "review-CLM-1002", "--user", "carol", "--roles", "supervisor"}},
		{"task_reassign", ok, []string{"task", "reassign", "review-CLM-1003", "--to", "alice", "--user", "carol", "--roles", "supervisor"}},
		{"task_release", ok, []string{"task", "release", "review-CLM-1003", "--user", "bob"}},
		{"task_release_forbidden", failed, []string{"task", "release", "review-CLM-1003", "--user", "alice"}},
		{"task_complete", ok, []string{"task", "complete", "review-CLM-1002", "--user", "alice", "--roles", "adjuster",
			"--result", `{"approved": true, "amount": 3900, "note": "roofer's invoice checked"}`}},
		{"task_complete_json", ok, []string{"task", "complete", "review-CLM-1003", "--user", "bob", "--json",
			"--result", `{"approved": false, "note": "pre-existing damage"}`}},
		{"task_complete_forbidden", failed, []string{"task", "complete", "review-CLM-1003", "--user", "carol", "--roles", "adjuster"}},
		{"task_complete_no_role", failed, []string{"task", "complete", "review-CLM-1002", "--user", "dave", "--roles", "auditor"}},
		{"task_complete_closed", failed, []string{"task", "complete", "review-CLM-1001", "--user", "alice", "--roles", "adjuster"}},
		{"task_complete_cancelled", failed, []string{"task", "complete", "review-CLM-1004", "--user", "alice", "--roles", "adjuster"}},
		{"task_complete_unknown", failed, []string{"task", "complete", "review-CLM-9999", "--user", "alice", "--roles", "adjuster"}},
		{"task_complete_bad_result", usage, []string{"task", "complete", "review-CLM-1002", "--user", "alice", "--result", `{"approved":`}},
		{"task_complete_missing_user", usage, []string{"task", "complete", "review-CLM-1002", "--roles", "adjuster"}},
		{"task_complete_missing_task", usage, []string{"task", "complete", "--user", "alice"}},

		// dlq
		{"dlq_list", ok, []string{"dlq", "list"}},
		{"dlq_list_json", ok, []string{"dlq", "list", "--json"}},
		{"dlq_list_instance", ok, []string{"dlq", "list", "--instance", "REF-4001", "--status", "dead"}},
		{"dlq_list_none", ok, []string{"dlq", "list", "--status", "discarded"}},
		{"dlq_list_bad_status", usage, []string{"dlq", "list", "--status", "gone"}},
		{"dlq_show", ok, []string{"dlq", "show", dl}},
		{"dlq_show_json", ok, []string{"dlq", "show", dl, "--json"}},
		{"dlq_show_unknown", failed, []string{"dlq", "show", "no-such-letter"}},
		{"dlq_redrive", ok, []string{"dlq", "redrive", dl, "--by", "ops"}},
		{"dlq_redrive_json", ok, []string{"--json", "dlq", "redrive", dl, "--by", "ops"}},
		{"dlq_redrive_missing_by", usage, []string{"dlq", "redrive", dl}},
		{"dlq_discard", ok, []string{"dlq", "discard", dl, "--by", "ops"}},
		{"dlq_discard_unknown", failed, []string{"dlq", "discard", "no-such-letter", "--by", "ops"}},

		// instance control
		{"instance_terminate", ok, []string{"instance", "terminate", "LOAN-2002", "--reason", "customer withdrew", "--by", "ops", "--ticket", "CS-4411"}},
		{"instance_terminate_json", ok, []string{"--json", "instance", "terminate", "LOAN-2002", "--reason", "customer withdrew", "--by", "ops", "--ticket", "CS-4411"}},
		{"instance_suspend", ok, []string{"instance", "suspend", "LOAN-2002", "--reason", "fraud review", "--by", "ops", "--ticket", "FRAUD-12"}},
		{"instance_suspend_no_ticket", ok, []string{"instance", "suspend", "LOAN-2002", "--reason", "fraud review", "--by", "ops"}},
		{"instance_resume_not_suspended", failed, []string{"instance", "resume", "LOAN-2002", "--reason", "cleared", "--by", "ops", "--ticket", "FRAUD-13"}},
		{"instance_terminate_bad_ticket", failed, []string{"instance", "terminate", "LOAN-2002", "--reason", "r", "--by", "ops", "--ticket", "CS\t1"}},
		{"instance_terminate_ended", failed, []string{"instance", "terminate", "CLM-1001", "--reason", "r", "--by", "ops"}},
		{"instance_terminate_unknown", failed, []string{"instance", "terminate", "NOPE-1", "--reason", "r", "--by", "ops"}},
		{"instance_terminate_missing_reason", usage, []string{"instance", "terminate", "LOAN-2002", "--by", "ops"}},
		{"instance_terminate_missing_by", usage, []string{"instance", "terminate", "LOAN-2002", "--reason", "r"}},
		{"instance_rerun", ok, []string{"instance", "rerun", "KYC-3001", "--from-seq", "4", "--input", `{"customer":"C-5521","name":"Charles Babbage","passport":"P7654321"}`, "--reason", "passport renewed", "--by", "ops", "--ticket", "KYC-88"}},
		{"instance_rerun_json", ok, []string{"--json", "instance", "rerun", "LOAN-2001", "--from-seq", "9", "--reason", "disbursement reversed by the bank", "--by", "ops"}},
		{"instance_rerun_running", ok, []string{"instance", "rerun", "LOAN-2002", "--from-seq", "4", "--reason", "credit bureau corrected the score", "--by", "ops", "--ticket", "CR-9"}},
		{"instance_rerun_command", failed, []string{"instance", "rerun", "LOAN-2001", "--from-seq", "13", "--reason", "r", "--by", "ops"}},
		{"instance_rerun_input_without_activity", failed, []string{"instance", "rerun", "LOAN-2001", "--from-seq", "9", "--input", "1", "--reason", "r", "--by", "ops"}},
		{"instance_rerun_unknown", failed, []string{"instance", "rerun", "NOPE-1", "--from-seq", "2", "--reason", "r", "--by", "ops"}},
		{"instance_rerun_missing_from", usage, []string{"instance", "rerun", "LOAN-2001", "--reason", "r", "--by", "ops"}},
		{"instance_rerun_bad_input", usage, []string{"instance", "rerun", "KYC-3001", "--from-seq", "4", "--input", "{", "--reason", "r", "--by", "ops"}},

		// projections
		{"projections_rebuild", ok, []string{"projections", "rebuild", "CLM-1001"}},
		{"projections_rebuild_all", ok, []string{"projections", "rebuild", "--all"}},
		{"projections_rebuild_json", ok, []string{"projections", "rebuild", "LOAN-2001", "--json"}},
		{"projections_rebuild_unknown", failed, []string{"projections", "rebuild", "CLM-9999"}},
		{"projections_rebuild_usage", usage, []string{"projections", "rebuild"}},
		{"projections_check", ok, []string{"projections", "check", "CLM-1003"}},
		{"projections_check_all_json", ok, []string{"projections", "check", "--all", "--json"}},

		// purge
		{"purge_ids", failed, []string{"purge", "CLM-1001", "CLM-1002", "CLM-9999", "--by", "ops"}},
		{"purge_older_than", ok, []string{"purge", "--older-than", "20h", "--by", "ops", "--archive", "$TMP/archive"}},
		{"purge_older_than_days_json", ok, []string{"--json", "purge", "--older-than", "1d", "--by", "ops"}},
		{"purge_missing_by", usage, []string{"purge", "CLM-1001"}},
		{"purge_nothing", usage, []string{"purge", "--by", "ops"}},
		{"purge_bad_age", usage, []string{"purge", "--older-than", "soon", "--by", "ops"}},

		// Commands whose success needs PostgreSQL or varies (see
		// postgres_test.go): their mistakes.
		{"migrate_memory", failed, []string{"migrate"}},
		{"migrate_extra_argument", usage, []string{"migrate", "now"}},
		{"bench_help", ok, []string{"bench", "-h"}},
		{"bench_zero_instances", usage, []string{"bench", "--instances", "0"}},
		{"bench_unknown_workload", usage, []string{"bench", "--workload", "W9", "--instances", "1"}},
		{"bench_preload_memory", usage, []string{"bench", "--preload", "10"}},

		// ui: serving is tested by TestUI; its help and mistakes here.
		{"ui_help", ok, []string{"ui", "-h"}},
		{"ui_not_loopback", usage, []string{"ui", "--listen", "0.0.0.0:8080"}},
		{"ui_all_interfaces", usage, []string{"ui", "--listen", ":8080"}},
		{"ui_bad_listen", usage, []string{"ui", "--listen", "8080"}},
		{"ui_user_without_actions", usage, []string{"ui", "--user", "ops"}},
		{"ui_bad_host", usage, []string{"ui", "--listen", "127.0.0.1:0", "--host", "bad host"}},

		// Mistakes.
		{"no_command", usage, []string{}},
		{"unknown_command", usage, []string{"frobnicate"}},
		{"unknown_subcommand", usage, []string{"history", "frobnicate"}},
		{"group_without_subcommand", usage, []string{"dlq"}},
		{"unknown_flag", usage, []string{"instances", "list", "--colour"}},
		{"unknown_global_flag", usage, []string{"--colour", "instances", "list"}},
		{"bad_flag_value", usage, []string{"instances", "list", "--limit", "many"}},
		{"bad_limit", usage, []string{"instances", "list", "--limit", "0"}},
		{"bad_status", usage, []string{"instances", "list", "--status", "sleeping"}},
		{"bad_time", usage, []string{"instances", "list", "--from", "yesterday"}},
		{"bad_store", usage, []string{"--store", "mysql://localhost/chronicle", "instances", "list"}},
		{"codec_memory", usage, []string{"--codec", "json", "instances", "list"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tc.name, tc.code, hooks{}, tc.args...)
		})
	}
}

// TestSearchAttributesFromEnvironment checks that CHRONICLE_SEARCH_ATTRIBUTES
// declares attributes when --search-attributes is not given, and that the
// flag wins over it.
func TestSearchAttributesFromEnvironment(t *testing.T) {
	t.Setenv("CHRONICLE_SEARCH_ATTRIBUTES", "region:keyword")
	r := runTool(t, "", hooks{}, "instances", "list", "--where", "region = 'eu'")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "no instances match\n", r.stdout)

	r = runTool(t, "", hooks{}, "--search-attributes", "zone:keyword", "instances", "list", "--where", "region = 'eu'")
	require.Equal(t, exitUsage, r.code, r.stdout)
	require.Contains(t, r.stderr, "region")
	require.Contains(t, r.stderr, "zone keyword")

	t.Setenv("CHRONICLE_SEARCH_ATTRIBUTES", "region:colour")
	r = runTool(t, "", hooks{}, "instances", "list")
	require.Equal(t, exitUsage, r.code, r.stdout)
	require.Contains(t, r.stderr, "invalid CHRONICLE_SEARCH_ATTRIBUTES")
}

// TestFlagsAfterDoubleDash checks that "--" ends the flags: what follows is
// an argument even when it looks like a flag.
func TestFlagsAfterDoubleDash(t *testing.T) {
	t.Parallel()
	r := runTool(t, "", hooks{}, "instance", "show", "--", "--json")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "chronicle: instance not found: --json\n", r.stderr)
}

// tamper changes an event of the stored history after seeding.
func tamper(t *testing.T, instanceID string, seq int64, mutate func(e *history.Event)) hooks {
	return hooks{afterSeed: func(s *memory.Store) {
		require.True(t, s.TamperEvent(instanceID, seq, mutate), "no event %d of %s", seq, instanceID)
	}}
}

// TestVerifyDetectsTampering flips a byte of a stored event: verification
// names its seq and fails, of the instance and of the whole store.
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	flip := tamper(t, "CLM-1001", 5, func(e *history.Event) { e.Payload[len(e.Payload)-1] ^= 0x01 })

	r := golden(t, "tampered_history_verify", exitFailure, flip, "history", "verify", "CLM-1001")
	require.Equal(t, "BROKEN at seq 5: hash does not match content\n", r.stdout)

	r = golden(t, "tampered_history_verify_all", exitFailure, flip, "history", "verify", "--all")
	require.Contains(t, r.stdout, "CLM-1001   BROKEN at seq 5")
	require.Contains(t, r.stdout, "8 histories verified: 7 ok, 1 broken")

	r = golden(t, "tampered_history_verify_json", exitFailure, flip, "--json", "history", "verify", "CLM-1001")
	var v verifyJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, verifyJSON{InstanceID: "CLM-1001", Events: 17, BrokenSeq: 5, Reason: "hash does not match content"}, v)

	// An actor rewritten in place breaks the chain just the same.
	r = runTool(t, "", tamper(t, "LOAN-2001", 9, func(e *history.Event) { e.Actor = "user:mallory" }), "history", "verify", "LOAN-2001")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "BROKEN at seq 9: hash does not match content\n", r.stdout)
}

// TestProjectionsCheckFindsDifferences forges a custom status in history:
// the stored projections no longer match a fold of it.
func TestProjectionsCheckFindsDifferences(t *testing.T) {
	t.Parallel()
	forge := tamper(t, "CLM-1001", 16, func(e *history.Event) {
		status, err := history.Encode("refunded")
		require.NoError(t, err)
		e.Payload, err = history.EncodeAttributes(&history.CustomStatusSet{Status: status})
		require.NoError(t, err)
	})
	r := golden(t, "tampered_projections_check", exitFailure, forge, "projections", "check", "CLM-1001")
	require.Contains(t, r.stdout, "DIFFERENT")
	r = runTool(t, "", forge, "projections", "check", "CLM-1002")
	require.Equal(t, exitOK, r.code, r.stdout)
}

// TestVerifyArchive verifies exported files: a sound export matches the
// store (every run seeds the same data, hashes included), a shortened one
// matches a prefix of it, an edited one is broken, and an archive of a
// purged instance is checked against its tombstone.
func TestVerifyArchive(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	export := filepath.Join(tmp, "CLM-1001.jsonl")
	r := runTool(t, tmp, hooks{}, "history", "export", "CLM-1001", "--out", export)
	require.Equal(t, exitOK, r.code, r.stderr)
	data, err := os.ReadFile(export)
	require.NoError(t, err)

	// The export on standard output is the same file.
	r = runTool(t, tmp, hooks{}, "history", "export", "CLM-1001")
	require.Equal(t, string(data), r.stdout)
	events, err := history.ReadJSONL(bytes.NewReader(data))
	require.NoError(t, err)
	require.Len(t, events, 17)

	verifyFile := func(name string, content []byte, h hooks) result {
		t.Helper()
		path := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(path, content, 0o644))
		return runTool(t, tmp, h, "history", "verify", "--archive", path)
	}

	r = verifyFile("sound.jsonl", data, hooks{})
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	checkGolden(t, "archive_verify", transcript([]string{"history", "verify", "--archive", "$TMP/sound.jsonl"}, r))

	lines := strings.SplitAfter(string(data), "\n")
	r = verifyFile("prefix.jsonl", []byte(strings.Join(lines[:9], "")), hooks{})
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "matches the store: CLM-1001 holds the same hash at seq 9 and continues to seq 17")

	// Edit the actor of seq 2: the chain breaks there.
	require.Contains(t, lines[1], `"actor":"worker:demo"`)
	edited := append([]string(nil), lines...)
	edited[1] = strings.Replace(edited[1], `"actor":"worker:demo"`, `"actor":"worker:mallory"`, 1)
	r = verifyFile("edited.jsonl", []byte(strings.Join(edited, "")), hooks{})
	require.Equal(t, exitFailure, r.code, r.stdout+r.stderr)
	checkGolden(t, "archive_verify_edited", transcript([]string{"history", "verify", "--archive", "$TMP/edited.jsonl"}, r))

	r = verifyFile("garbage.jsonl", []byte("{not json\n"), hooks{})
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "history: corrupt")

	// A purge in the store: the archive is checked against the tombstone.
	purged := hooks{afterSeed: func(s *memory.Store) {
		_, err := s.PurgeInstance(context.Background(), &provider.PurgeInstanceParams{InstanceID: "CLM-1001", By: "user:ops",
			Now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)})
		require.NoError(t, err)
	}}
	r = verifyFile("purged.jsonl", data, purged)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	checkGolden(t, "archive_verify_tombstone", transcript([]string{"history", "verify", "--archive", "$TMP/purged.jsonl"}, r))
	r = verifyFile("purged-prefix.jsonl", []byte(strings.Join(lines[:9], "")), purged)
	require.Equal(t, exitFailure, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "MISMATCH with the tombstone")

	// The purged instance is gone, and show says where it went.
	r = runTool(t, tmp, purged, "instance", "show", "CLM-1001")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "chronicle: instance not found: CLM-1001 (purged 2026-11-23 10:00:00 by user:ops at seq 17)\n", r.stderr)
}

// TestPurgeArchiveIsTheHistory checks that purge --archive writes the
// history as history export does, and that the archive verifies.
func TestPurgeArchiveIsTheHistory(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	r := runTool(t, tmp, hooks{}, "purge", "CLM-1004", "--by", "ops", "--archive", filepath.Join(tmp, "archive"))
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	archived, err := os.ReadFile(filepath.Join(tmp, "archive", "CLM-1004.jsonl"))
	require.NoError(t, err)
	r = runTool(t, tmp, hooks{}, "history", "export", "CLM-1004")
	require.Equal(t, string(archived), r.stdout)
	r = runTool(t, tmp, hooks{}, "history", "verify", "--archive", filepath.Join(tmp, "archive", "CLM-1004.jsonl"))
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
}

// TestRunsAreDeterministic runs a command twice: the demo data, hashes
// included, are the same on every run.
func TestRunsAreDeterministic(t *testing.T) {
	t.Parallel()
	a := runTool(t, "", hooks{}, "history", "verify", "--all")
	b := runTool(t, "", hooks{}, "history", "verify", "--all")
	require.Equal(t, exitOK, a.code)
	require.Equal(t, a, b)
}

func TestParseResult(t *testing.T) {
	t.Parallel()
	v, err := parseResult(`{"approved": true, "amount": 3900, "rate": 1.5, "items": [1, "x"]}`)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"approved": true, "amount": int64(3900), "rate": 1.5, "items": []any{int64(1), "x"}}, v)
	_, err = parseResult(`{} {}`)
	require.Error(t, err)
	_, err = parseResult(`nope`)
	require.Error(t, err)
	// A number beyond float64 is refused, not passed on as +Inf.
	_, err = parseResult(`{"amount": [1e400]}`)
	require.EqualError(t, err, "invalid value for flag --result: number 1e400 is out of range")
}

// TestDoctor checks that doctor reports what needs an operator — the
// demo's incident and dead letter, a round that fails and is retried,
// projections that differ from history — and exits 0 only when nothing
// does.
func TestDoctor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	// discard resolves the demo's dead letter as an operator would.
	discard := func(t *testing.T, s *memory.Store) {
		letters, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{Status: provider.DeadLetterDead})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.NoError(t, s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: letters[0].ID, Status: provider.DeadLetterDiscarded, By: "user:ops", Now: at}))
	}
	healthy := hooks{afterSeed: func(s *memory.Store) { discard(t, s) }}
	failing := hooks{afterSeed: func(s *memory.Store) {
		discard(t, s)
		queued, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "REF-4001"})
		require.NoError(t, err)
		require.Len(t, queued, 1)
		for i := 0; i < 2; i++ {
			require.NoError(t, s.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "REF-4001", MessageIDs: []string{queued[0].ID},
				VisibleAt: at.Add(time.Minute), Error: "project REF-4001: fold refunds: cannot read the amount"}))
		}
	}}
	forged := tamper(t, "CLM-1001", 16, func(e *history.Event) {
		status, err := history.Encode("refunded")
		require.NoError(t, err)
		e.Payload, err = history.EncodeAttributes(&history.CustomStatusSet{Status: status})
		require.NoError(t, err)
	})

	golden(t, "doctor", exitFailure, hooks{}, "doctor")
	golden(t, "doctor_json", exitFailure, hooks{}, "doctor", "--json")
	r := golden(t, "doctor_healthy", exitOK, healthy, "doctor")
	require.Contains(t, r.stdout, "nothing needs an operator")
	r = golden(t, "doctor_failing_round", exitFailure, failing, "doctor")
	require.Contains(t, r.stdout, "cannot read the amount")
	r = golden(t, "doctor_projections", exitFailure, forged, "doctor")
	require.Contains(t, r.stdout, "CLM-1001: instance: fields differ")
	golden(t, "doctor_extra_argument", exitUsage, hooks{}, "doctor", "now")
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestOutputWriteFailure: a command whose output cannot be written fails
// with exit code 1 and says why, instead of reporting success.
func TestOutputWriteFailure(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"demo"}, {"--json", "tasks", "list"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			code := run(t.Context(), args, failingWriter{}, &stderr)
			require.Equal(t, exitFailure, code)
			require.Regexp(t, `^chronicle: (write output: )?broken pipe\n$`, stderr.String())
		})
	}
}
