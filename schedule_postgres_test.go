package chronicle_test

import (
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// A schedule on PostgreSQL: fires, is backfilled over times it already
// fired, and catches up after a downtime of every node, each nominal time
// started once.
func TestPostgresSchedule(t *testing.T) {
	t.Parallel()
	testScheduleCatchup(t, pgtest.NewStore(t, postgres.Options{}))
}

// testScheduleCatchup runs the schedule of TestPostgresSchedule on store.
func testScheduleCatchup(t *testing.T, store provider.Store) {
	env := scheduleEnv(t, chronicletest.Store(store))
	e, s, ctx := env.Engine(), env.StartTime(), env.Context()
	// Overlaps are allowed: with OverlapSkip, whether the catch-up's
	// second firing (8h) starts depends on whether the first one's
	// instance (7h), started a moment before, has already ended, which
	// is a race between two workers that each store may win.
	o := every(time.Hour, chronicle.OverlapAllowAll, 0)
	o.CatchupWindow = 90 * time.Minute
	if err := e.CreateSchedule(ctx, "pg", o); err != nil {
		t.Fatal(err)
	}
	env.RunFor(2*time.Hour + time.Minute)
	if err := e.BackfillSchedule(ctx, "pg", s.Add(-time.Hour), s.Add(2*time.Hour), "ops"); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	// Every node is down for six hours.
	later := scheduleEnv(t, chronicletest.Store(store), chronicletest.StartAt(env.Now().Add(6*time.Hour)), chronicletest.IDPrefix("b-"))
	later.RunFor(time.Minute) // 8h03: 7h and 8h are within the window, 3h to 6h are missed
	h := time.Hour
	assertJobs(t, later.Engine(), firedAt("pg", s, -h, 0, h, 2*h, 7*h, 8*h))
	d, err := later.Engine().DescribeSchedule(ctx, "pg")
	if err != nil {
		t.Fatal(err)
	}
	if d.Skipped != 4 {
		t.Errorf("skipped %d, want 4 (3h to 6h)", d.Skipped)
	}
}
