package fuzz_test

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/oracle/oracletest"
)

// wfOracle runs the machine on one oracle store for the whole test, under
// an object prefix of its own (created and dropped by oracletest), emptied
// before every check. No Oracle server runs on the project's machines or
// in CI: without CHRONICLE_TEST_ORACLE_DSN the test is skipped loudly.
func wfOracle(t *testing.T) *wfBackend {
	db := oracletest.DB(t)
	store := oracletest.NewStore(t, oracle.Options{DB: db})
	pid := strconv.Itoa(os.Getpid())
	return &wfBackend{
		name: "oracle",
		mode: provider.ModeTransactional,
		open: func(t *rapid.T, _ *midStep) provider.FullStore {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, table := range oracle.Tables() {
				if _, err := db.ExecContext(ctx, "DELETE FROM "+store.Table(table)); err != nil {
					t.Fatalf("empty the store: %v", err)
				}
			}
			return store
		},
		census: func(t *rapid.T, _ provider.Store) wfCensus {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var c wfCensus
			rows, err := db.QueryContext(ctx, "SELECT DISTINCT instance_id FROM "+store.Table("history")+" ORDER BY instance_id")
			if err == nil {
				for rows.Next() {
					var id string
					if err = rows.Scan(&id); err != nil {
						break
					}
					c.instances = append(c.instances, id)
				}
				if err == nil {
					err = rows.Err()
				}
				rows.Close()
			}
			if err == nil {
				err = db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+store.Table("messages")+"), (SELECT COUNT(*) FROM "+
					store.Table("activity_tasks")+") FROM dual").Scan(&c.messages, &c.tasks)
			}
			if err != nil {
				t.Fatalf("census: %v", err)
			}
			return c
		},
		// waiting tells whether a session of this process waits for a row
		// lock that an idle session holds (the paused round's). It needs
		// SELECT on V$SESSION; without it, it says no, and a call that
		// waits for the paused round hangs the check until its timeout.
		waiting: func(ctx context.Context) bool {
			var n int
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM v$session w
				JOIN v$session b ON b.sid = w.blocking_session
				WHERE w.process LIKE :pid || '%' AND w.event LIKE 'enq: TX%' AND b.status = 'INACTIVE'`,
				sql.Named("pid", pid)).Scan(&n)
			return err == nil && n > 0
		},
	}
}

// wfOracleChecks caps the checks of TestRapidWorkflowsOracle as those of
// the postgres run are: a check costs thousands of round trips.
const (
	wfOracleChecks     = 150
	wfOracleRaceChecks = 40
)

// TestRapidWorkflowsOracle runs the workflows machine of
// TestRapidWorkflowsTransactional against an Oracle store: the same
// actions, faults and invariants, fewer checks. It needs the server named
// by CHRONICLE_TEST_ORACLE_DSN and is skipped loudly without one.
func TestRapidWorkflowsOracle(t *testing.T) {
	oracletest.DSN(t)
	backend := wfOracle(t)
	require.Equal(t, provider.ModeTransactional, backend.mode)
	limit := wfOracleChecks
	if raceEnabled {
		limit = wfOracleRaceChecks
	}
	capRapidChecks(t, limit)
	testRapidWorkflows(t, backend)
}
