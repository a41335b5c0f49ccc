package oracle

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var testNames = names{schema: "APP", prefix: "CHRONICLE"}

// allStatements returns every statement of st by field name, with the
// lists of {{list:NAME}} expanded to three values.
func allStatements(t *testing.T, st *statements) map[string]string {
	t.Helper()
	out := map[string]string{}
	v := reflect.ValueOf(st).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			out[name] = f.String()
		case reflect.Slice:
			for j := range f.Len() {
				out[name+"["+string(rune('0'+j))+"]"] = f.Index(j).String()
			}
		}
	}
	out["appendSQL(3)"] = st.appendSQL(3)
	out["insertAttributesSQL(3)"] = st.insertAttributesSQL(3)
	// The per-call markers of the search statements, as an empty filter
	// and a count without groups fill them (search_test.go checks what
	// real filters and groups give).
	// The rate filter of the claim's candidates, with one exhausted limit
	// of each kind (TestRateFilter checks its binds).
	rates, _ := rateFilter(sampleRates)
	fill := strings.NewReplacer("{{where}}", "1 = 1", "{{group}}", "0", "{{join}}", "", "{{groupby}}", "", "{{rates}}", rates)
	for name, sql := range out {
		out[name] = fill.Replace(sql)
	}
	lists := regexp.MustCompile(`\{\{list:([a-z_]+)\}\}`)
	for name, sql := range out {
		for _, m := range lists.FindAllStringSubmatch(sql, -1) {
			sql, _ = expandList(sql, m[1], []string{"a", "b", "c"})
		}
		out[name] = sql
	}
	if len(out) < 60 {
		t.Fatalf("only %d statements found", len(out))
	}
	return out
}

// literals matches SQL string literals, whose text holds no binds.
var literals = regexp.MustCompile(`'[^']*'`)

// bindNames returns the bind names of a statement.
func bindNames(sql string) []string {
	text := literals.ReplaceAllString(sql, "''")
	var out []string
	for _, m := range regexp.MustCompile(`:([A-Za-z][A-Za-z0-9_$#]*)`).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestStatementsRender(t *testing.T) {
	for name, sql := range allStatements(t, newStatements(testNames)) {
		if strings.Contains(sql, "{{") || strings.Contains(sql, "}}") {
			t.Errorf("%s has an unreplaced marker:\n%s", name, sql)
		}
		if !strings.Contains(sql, `"APP"."CHRONICLE_`) && !strings.Contains(sql, `APP.CHRONICLE_WQ`) {
			t.Errorf("%s names no object of the store:\n%s", name, sql)
		}
		upper := strings.ToUpper(strings.TrimSpace(sql))
		plsql := strings.HasPrefix(upper, "DECLARE") || strings.HasPrefix(upper, "BEGIN")
		if !plsql && strings.HasSuffix(upper, ";") {
			t.Errorf("%s is SQL ending with a semicolon, which Oracle refuses", name)
		}
		if plsql && !strings.HasSuffix(upper, "END;") {
			t.Errorf("%s is a PL/SQL block not ending with END;", name)
		}
		// PostgreSQL syntax that Oracle does not have.
		for _, pg := range []string{"$1", "::", " LIMIT ", "ON CONFLICT", "unnest(", "coalesce(", "= ANY", "FOR NO KEY", "FOR KEY SHARE", "greatest(", "now()", "bytea", "timestamptz"} {
			if strings.Contains(sql, pg) {
				t.Errorf("%s uses %q, which is not Oracle SQL:\n%s", name, pg, sql)
			}
		}
		if strings.Contains(sql, "RETURNING") && !strings.Contains(sql, " INTO :") {
			t.Errorf("%s has RETURNING without INTO", name)
		}
		for _, b := range bindNames(sql) {
			if IsReserved(b) {
				t.Errorf("%s binds :%s, a reserved word (ORA-01745)", name, b)
			}
		}
	}
}

func TestStatementsUseOracleLocking(t *testing.T) {
	st := newStatements(testNames)
	for name, sql := range map[string]string{"lockInstance": st.lockInstance, "claimLock": st.claimLock, "purgeLock": st.purgeLock} {
		if !strings.Contains(sql, "FOR UPDATE SKIP LOCKED") {
			t.Errorf("%s does not skip locked rows:\n%s", name, sql)
		}
		// Oracle refuses FOR UPDATE with a row limit (ORA-02014), and
		// ROWNUM would be applied before the locked rows are skipped.
		if strings.Contains(sql, "FETCH FIRST") || strings.Contains(sql, "ROWNUM") {
			t.Errorf("%s limits rows in a FOR UPDATE query", name)
		}
	}
	// Locks that wait: the row of a concurrency key or a slot set
	// serializes the claims or rounds of the key.
	for name, sql := range map[string]string{"lockActivityKey": st.lockActivityKey, "lockSlot": st.lockSlot} {
		if !strings.HasSuffix(sql, "FOR UPDATE") || strings.Contains(sql, "FETCH FIRST") || strings.Contains(sql, "ROWNUM") {
			t.Errorf("%s is not a waiting lock of one row:\n%s", name, sql)
		}
	}
	for name, sql := range map[string]string{"dequeueCandidates": st.dequeueCandidates, "claimCandidates": st.claimCandidates, "listMessages": st.listMessages,
		"firstWaiters": st.firstWaiters, "listSlots": st.listSlots} {
		if !strings.Contains(sql, "FETCH FIRST") || strings.Contains(sql, "FOR UPDATE") {
			t.Errorf("%s should be a plain, limited read:\n%s", name, sql)
		}
	}
	for name, sql := range map[string]string{"saveTask": st.saveTask, "saveCustom": st.saveCustom, "setIncident": st.setIncident} {
		if !strings.HasPrefix(strings.TrimSpace(sql), "MERGE INTO") {
			t.Errorf("%s is not a MERGE upsert", name)
		}
	}
	if !strings.Contains(st.claim, `TO_CHAR("APP"."CHRONICLE_LEASE_TOKENS".NEXTVAL)`) || !strings.Contains(st.claim, "RETURNING token INTO :tok") {
		t.Errorf("claim does not take its token from the sequence:\n%s", st.claim)
	}
	if !strings.Contains(st.wake, "DBMS_AQ.ENQUEUE") || !strings.Contains(st.wake, "DBMS_AQ.ON_COMMIT") || !strings.Contains(st.wake, `'APP.CHRONICLE_WQ'`) {
		t.Errorf("wake does not enqueue on commit:\n%s", st.wake)
	}
	if !strings.Contains(st.wake, `"APP"."AQ$CHRONICLE_WQT"`) || !strings.Contains(st.wake, `''CHRONICLE_WQ''`) {
		t.Errorf("wake does not coalesce on the queue table's view:\n%s", st.wake)
	}
	if !strings.Contains(st.listen, "DBMS_AQ.DEQUEUE") || !strings.Contains(st.listen, "dopt.wait := :secs") || !strings.Contains(st.listen, "-25228") {
		t.Errorf("listen does not dequeue with a wait:\n%s", st.listen)
	}
}

func TestAppendSQL(t *testing.T) {
	st := newStatements(testNames)
	sql := st.appendSQL(3)
	if !strings.HasPrefix(sql, "INSERT ALL") || !strings.HasSuffix(sql, "SELECT 1 FROM dual") {
		t.Fatalf("append of 3 events:\n%s", sql)
	}
	if n := strings.Count(sql, `INTO "APP"."CHRONICLE_HISTORY"`); n != 3 {
		t.Errorf("append of 3 events has %d INTO clauses", n)
	}
	for _, b := range []string{":inst", ":seq0", ":seq2", ":event1", ":hash2", ":class0"} {
		if !strings.Contains(sql, b) {
			t.Errorf("append lacks bind %s", b)
		}
	}
	if strings.Contains(sql, ":seq3") || strings.Contains(sql, "%!") {
		t.Errorf("append of 3 events is malformed:\n%s", sql)
	}
	if st.appendSQL(3) != sql || st.appendSQL(1) == sql {
		t.Error("append texts are not kept per count")
	}
}

func TestExpandList(t *testing.T) {
	sql, args := expandList("a IN ({{list:ids}}) OR b IN ({{list:ids}})", "ids", []string{"x", "y", "z"})
	if sql != "a IN (:ids0, :ids1, :ids2, :ids3) OR b IN (:ids0, :ids1, :ids2, :ids3)" {
		t.Fatalf("expanded: %s", sql)
	}
	if len(args) != 4 {
		t.Fatalf("%d args, want 4 (padded to a power of two)", len(args))
	}
	var values []any
	for _, a := range args {
		values = append(values, reflect.ValueOf(a).FieldByName("Value").Interface())
	}
	if !reflect.DeepEqual(values, []any{"x", "y", "z", "x"}) {
		t.Fatalf("values %v: padding repeats the first", values)
	}
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 5: 8, 512: 512} {
		if got := listLength(n); got != want {
			t.Errorf("listLength(%d) = %d, want %d", n, got, want)
		}
	}
	long := make([]string, 1100)
	parts := chunks(long)
	if len(parts) != 3 || len(parts[0]) != maxListLength || len(parts[2]) != 1100-2*maxListLength {
		t.Errorf("chunks of 1100: %d parts", len(parts))
	}
	if chunks(nil) != nil {
		t.Error("no chunks of nothing")
	}
}

func TestNames(t *testing.T) {
	if got := testNames.object("INSTANCES"); got != `"APP"."CHRONICLE_INSTANCES"` {
		t.Errorf("object: %s", got)
	}
	got := testNames.render("{{obj:HISTORY}} {{name:HISTORY_PK}} '{{aq:WQ}}' {{aqname:WQ}} {{aqview:WQT}} {{list:ids}}")
	want := `"APP"."CHRONICLE_HISTORY" "CHRONICLE_HISTORY_PK" 'APP.CHRONICLE_WQ' CHRONICLE_WQ "APP"."AQ$CHRONICLE_WQT" {{list:ids}}`
	if got != want {
		t.Errorf("render:\n got %s\nwant %s", got, want)
	}
	tables := Tables()
	if !slices.Contains(tables, "instances") || !slices.Contains(tables, "history") || slices.Contains(tables, "schema_migrations") {
		t.Errorf("Tables: %v", tables)
	}
	if s := (&Store{names: testNames}); s.Table("messages") != `"APP"."CHRONICLE_MESSAGES"` {
		t.Errorf("Table: %s", s.Table("messages"))
	}
}
