package oracle

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
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
