package postgres

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// citusRefused are what Citus refuses in a statement on a distributed
// table: a volatile function in an UPDATE (nextval), a STABLE one of a
// column (timestamptz ± interval), and a conflict target without the
// distribution column.
var citusRefused = []*regexp.Regexp{
	regexp.MustCompile(`nextval\(`),
	regexp.MustCompile(`::timestamptz - make_interval\(mins => [a-z_.]+\)`),
	regexp.MustCompile(`(visible_at|order_at) [+-] interval '100000 years'`),
	regexp.MustCompile(`ON CONFLICT \((id|instance_id|task_id|instance_id, seq, task_id|instance_id, name)\)`),
}

// TestCitusForms checks every statement of a distributed store for what
// Citus refuses, and that the plain store's statements still have them
// (so that the check sees the forms it is meant to).
func TestCitusForms(t *testing.T) {
	texts := func(st *statements) []string {
		var out []string
		v := reflect.ValueOf(st).Elem()
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.String:
				out = append(out, f.String())
			case reflect.Slice:
				for j := range f.Len() {
					out = append(out, f.Index(j).String())
				}
			case reflect.Map:
				for _, k := range f.MapKeys() {
					out = append(out, f.MapIndex(k).String())
				}
			}
		}
		return out
	}
	plain := strings.Join(texts(newStatements("s", false)), "\n")
	for _, re := range citusRefused {
		if !re.MatchString(plain) {
			t.Errorf("no plain statement matches %s: the check is out of date", re)
		}
	}
	for _, sql := range texts(newStatements("s", true)) {
		for _, re := range citusRefused {
			if re.MatchString(sql) {
				t.Errorf("a Citus statement has %q (%s):\n%s", re.FindString(sql), re, sql)
			}
		}
	}
	st := newStatements("s", true)
	for _, n := range citusChunks {
		for _, sql := range []string{st.citusMessages[n], st.citusHistory[n], st.citusInstances[n], st.citusTaskIDs[n], st.citusTasks[n]} {
			if got := strings.Count(sql, "), ($") + 1; got != n {
				t.Errorf("insert of %d rows has %d: %s", n, got, sql)
			}
		}
	}
}
