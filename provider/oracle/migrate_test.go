package oracle

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/chronicleflow/chronicle/provider"
)

func TestEmbeddedMigrations(t *testing.T) {
	if LatestSchemaVersion() < 1 || len(migrations) != LatestSchemaVersion() {
		t.Fatalf("%d migrations, latest version %d", len(migrations), LatestSchemaVersion())
	}
	created := map[string]bool{}
	createPattern := regexp.MustCompile(`^CREATE (?:UNIQUE )?(TABLE|INDEX|SEQUENCE) \{\{obj:([A-Z0-9_]+)\}\}`)
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migration %s has version %d at position %d", m.name, m.version, i)
		}
		if len(m.statements) == 0 {
			t.Errorf("migration %s has no statements", m.name)
		}
		for j, stmt := range m.statements {
			rendered := testNames.render(stmt)
			if strings.Contains(rendered, "{{") {
				t.Errorf("%s statement %d keeps a marker:\n%s", m.name, j+1, rendered)
			}
			if sub := createPattern.FindStringSubmatch(stmt); sub != nil {
				if created[sub[2]] {
					t.Errorf("%s creates %s twice", m.name, sub[2])
				}
				created[sub[2]] = true
			}
		}
	}
	// Every table the store reads is created, and DropObjects removes it.
	for _, table := range dataTables {
		if !created[table] {
			t.Errorf("no migration creates table %s", table)
		}
	}
	if !created[sequenceLeaseTokens] {
		t.Error("no migration creates the lease token sequence")
	}
	all := strings.Join(migrations[0].statements, "\n")
	for _, want := range []string{"DBMS_AQADM.CREATE_QUEUE_TABLE", "queue_payload_type => 'RAW'", "DBMS_AQADM.CREATE_QUEUE(", "DBMS_AQADM.START_QUEUE"} {
		if !strings.Contains(all, want) {
			t.Errorf("the first migration lacks %s", want)
		}
	}
	drops := strings.Join(dropSQL, "\n")
	for table := range created {
		if strings.Contains(table, "_PK") {
			continue
		}
		if slices.Contains(dataTables, table) && !strings.Contains(drops, "{{obj:"+table+"}}") {
			t.Errorf("DropObjects leaves table %s", table)
		}
	}
}

func TestSplitStatements(t *testing.T) {
	stmts, err := splitStatements("-- a comment\nCREATE TABLE t (\n    a NUMBER -- inline stays\n)\n/\n\nBEGIN\n    x;\nEND;\n/\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATE TABLE t (\n    a NUMBER -- inline stays\n)", "BEGIN\n    x;\nEND;"}
	if !slices.Equal(stmts, want) {
		t.Fatalf("statements %q, want %q", stmts, want)
	}
	for text, wantErr := range map[string]string{
		"CREATE TABLE t (a NUMBER);\n/\n": "must not end with ;",
		"BEGIN\n  x;\n/\n":                "must end with END;",
		"CREATE TABLE t (a NUMBER)\n":     "must end with a line holding only /",
		"-- nothing\n":                    "no statements",
		"/\n":                             "empty statement",
	} {
		if _, err := splitStatements(text); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("splitStatements(%q): %v, want %q", text, err, wantErr)
		}
	}
}

func TestLoadMigrationsOrder(t *testing.T) {
	stmt := []byte("CREATE TABLE {{obj:X}} (a NUMBER)\n/\n")
	ms, err := loadMigrations(fstest.MapFS{
		"m/0002_more.sql":  {Data: stmt},
		"m/0001_first.sql": {Data: stmt},
		"m/README.txt":     {Data: []byte("not a migration")},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].version != 1 || ms[1].version != 2 || ms[0].name != "0001_first.sql" {
		t.Fatalf("migrations out of order: %+v", ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":        {"m/0001_a.sql": {Data: stmt}, "m/0003_c.sql": {Data: stmt}},
		"no number":  {"m/first.sql": {Data: stmt}},
		"short":      {"m/1_a.sql": {Data: stmt}},
		"no name":    {"m/0001_.sql": {Data: stmt}},
		"duplicate":  {"m/0001_a.sql": {Data: stmt}, "m/0001_b.sql": {Data: stmt}},
		"empty file": {"m/0001_a.sql": {Data: []byte("-- nothing\n")}},
	} {
		if _, err := loadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
}

// TestEarlierMigrationsUnchanged pins the migrations that schemas in use
// have run: a change goes into a new migration, never an old one.
func TestEarlierMigrationsUnchanged(t *testing.T) {
	for name, want := range map[string]string{
		"0001_init.sql":   "55ce2c54acb2ce785eef8c1df4aa29d49b224295358fcd481079babac8046aa2",
		"0002_search.sql": "612c67d0386369705486a18bffb1d413f3b24b8cdaa7bd4c237d003c0cdcfb37",
	} {
		data, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != want {
			t.Errorf("migration %s changed (sha256 %s): add a migration instead", name, got)
		}
	}
}

// TestFlowMigration checks migration 3: priority as virtual order columns
// that shift by provider.PriorityStep per level (so existing rows, of
// priority 0, keep their visible or ready time as order), indexes that
// lead with the order, and the flow tables, which DropObjects removes
// and Tables lists.
func TestFlowMigration(t *testing.T) {
	if LatestSchemaVersion() < 3 || migrations[2].name != "0003_flow.sql" {
		t.Fatalf("migration 3 is %s of %d", migrations[2].name, LatestSchemaVersion())
	}
	stmts := migrations[2].statements
	all := strings.Join(stmts, "\n")
	step := strconv.FormatInt(provider.PriorityStep.Nanoseconds(), 10)
	for _, want := range []string{
		"priority NUMBER(5) DEFAULT 0 NOT NULL",
		"order_at NUMBER GENERATED ALWAYS AS (visible_at - priority * " + step + ") VIRTUAL",
		"order_at NUMBER GENERATED ALWAYS AS (ready_at - priority * " + step + ") VIRTUAL",
		"{{obj:MESSAGES_ORDER}} ON {{obj:MESSAGES}} (order_at, seq, visible_at)",
		"{{obj:ACTIVITY_TASKS_ORDER}} ON {{obj:ACTIVITY_TASKS}} (queue, order_at, seq, ready_at)",
		"{{obj:ACTIVITY_TASKS_CONC}} ON {{obj:ACTIVITY_TASKS}} (conc_key, locked_until)",
		"CONSTRAINT {{name:RATE_WINDOWS_PK}} PRIMARY KEY (rate_key, window_start)",
		"CONSTRAINT {{name:FLOW_SLOT_MEMBERS_PK}} PRIMARY KEY (slot_key, instance_id)",
		"{{obj:FLOW_SLOT_MEMBERS_QUEUE}} ON {{obj:FLOW_SLOT_MEMBERS}} (slot_key, waiting, seq)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("migration 3 lacks %s", want)
		}
	}
	// A column added to tables with rows is nullable, or has a default.
	addCol := regexp.MustCompile(`(?m)^\s+([a-z_]+)\s+(NUMBER|VARCHAR2)[^,\n]*NOT NULL`)
	checked := 0
	for _, stmt := range stmts {
		if !strings.HasPrefix(stmt, "ALTER TABLE") {
			continue
		}
		for _, m := range addCol.FindAllString(stmt, -1) {
			checked++
			if !strings.Contains(m, "DEFAULT") {
				t.Errorf("migration 3 adds a NOT NULL column without a default: %s", strings.TrimSpace(m))
			}
		}
	}
	if checked != 2 {
		t.Errorf("%d NOT NULL columns added, want the 2 priorities", checked)
	}
	for _, table := range []string{tableActivityKeys, tableRateWindows, tableFlowSlots, tableFlowSlotMembers} {
		if !strings.Contains(all, "CREATE TABLE {{obj:"+table+"}}") {
			t.Errorf("migration 3 does not create %s", table)
		}
		if !slices.Contains(Tables(), strings.ToLower(table)) {
			t.Errorf("Tables leaves out %s", table)
		}
	}
	// Only objects of this migration: nothing of an earlier one is
	// created again.
	for _, stmt := range stmts {
		if strings.HasPrefix(stmt, "DROP") || strings.Contains(stmt, "MODIFY") {
			t.Errorf("migration 3 drops or modifies: %s", stmt)
		}
	}
}
