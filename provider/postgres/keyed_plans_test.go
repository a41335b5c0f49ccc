package postgres_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chronicleflow/chronicle/provider/postgres"
)

// partOnly matches a scan of a whole partition: an index condition that
// is the partition's equality alone. On a PostgreSQL store a statement
// that names a row by its key names the partition only as a check, and
// must find the row by the key's index: a plan that walks a part-led
// index reads every row of the partition (every row of the table with
// P = 1).
var partOnly = regexp.MustCompile(`(Index|Recheck) Cond: \((\w+\.)?part = \$\d+\)$`)

// seqScanned are the tables that grow with the store or with the work in
// flight, which no statement may read by a sequential scan.
var seqScanned = regexp.MustCompile(`Seq Scan on (instances|history|messages|activity_tasks|activity_task_ids|human_tasks|human_task_events|custom_projections|tombstones|legal_holds) `)

// TestStatementPlans checks the generic plan (plan_cache_mode =
// force_generic_plan, as pgx's cached statements may settle on) of every
// statement of the store, planned on empty tables, on full tables without
// statistics and after ANALYZE: none reads a whole partition through a
// part-led index, and none scans a growing table sequentially. The
// planner ties a key's index with a part-led one on tables it knows
// nothing about, and the first-listed won: a completion's DELETE then
// walked every queued task.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	ctx, s, conn := planStore(t)
	statements := postgres.Statements(s)
	names := make([]string, 0, len(statements))
	for name := range statements {
		names = append(names, name)
	}
	slices.Sort(names)
	inStates(ctx, t, conn, s, func(t *testing.T, state string) {
		for _, name := range names {
			lines := explainGeneric(ctx, t, conn, "plan_"+strings.ToLower(name)+"_"+state, statements[name], "")
			plan := strings.Join(lines, "\n")
			for _, line := range lines {
				if partOnly.MatchString(line) {
					t.Errorf("%s, %s: a scan of the whole partition:\n%s", name, state, plan)
					break
				}
				if seqScanned.MatchString(line) {
					t.Errorf("%s, %s: a sequential scan of a growing table:\n%s", name, state, plan)
					break
				}
			}
		}
	})
}
