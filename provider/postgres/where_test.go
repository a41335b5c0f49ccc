package postgres

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// TestWhereSQLHasNoQueryText compiles filters full of text that would
// break or change a statement if it reached it, on every kind of term,
// and checks that none of it is in the statement: values and attribute
// names travel as bind parameters, one per placeholder.
func TestWhereSQLHasNoQueryText(t *testing.T) {
	const evil = `x'); DROP TABLE instances; -- % _ " \ $1`
	schema := query.SchemaOf(map[string]query.Type{
		"customer": query.Keyword, "tags": query.KeywordList, "amount": query.Float, "n": query.Int,
		"due": query.Time, "ok": query.Bool, "Weird_Name_9": query.Keyword,
	})
	quoted := strings.ReplaceAll(evil, "'", "''")
	for _, src := range []string{
		`customer = '` + quoted + `'`,
		`customer != '` + quoted + `' AND customer < '` + quoted + `'`,
		`customer IN ('` + quoted + `', 'b') OR tags IN ('` + quoted + `')`,
		`NOT customer STARTS_WITH '` + quoted + `' AND tags STARTS_WITH '` + quoted + `'`,
		`tags = '` + quoted + `' AND tags != '` + quoted + `'`,
		`business_key = '` + quoted + `' AND workflow IN ('` + quoted + `') AND id STARTS_WITH '` + quoted + `'`,
		`Weird_Name_9 IS NULL AND amount > 1.5 AND n BETWEEN -3 AND 9 AND due < '2026-01-02' AND ok = true`,
	} {
		where, err := query.Parse(src, schema)
		require.NoError(t, err, src)
		for _, p := range []*provider.ListInstancesParams{{Where: where}, {Where: where, Status: "running", BusinessKey: evil, AfterID: evil}} {
			w := &whereSQL{}
			s := &Store{schema: "chronicle"}
			sql, err := s.instanceFilter(w, p)
			require.NoError(t, err, src)
			for _, bad := range []string{evil, quoted, "DROP", "customer", "tags", "amount", "Weird_Name_9", "1.5", "2026"} {
				require.NotContains(t, sql, bad, "query %s compiled to\n%s", src, sql)
			}
			for i := range w.args {
				require.Contains(t, sql, "$"+strconv.Itoa(i+1), "every argument has its placeholder")
			}
			require.NotContains(t, sql, "$"+strconv.Itoa(len(w.args)+1))
		}
	}
}
