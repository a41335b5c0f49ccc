package chronicletest_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// scenario runs a review with a retry, a signal and a task in env and
// returns the instance id.
func scenario(t *testing.T, env *chronicletest.Env) string {
	t.Helper()
	mustRegister(t, chronicle.RegisterWorkflow(env.Engine(), "publish", func(ctx *chronicle.Context, doc string) (string, error) {
		id, err := chronicle.CallActivity[string](ctx, "store", doc, &chronicle.ActivityOptions{Retry: chronicle.RetryPolicy{InitialInterval: 30 * time.Second}})
		if err != nil {
			return "", err
		}
		if _, err := chronicle.WaitEvent[string](ctx, "proofread", &chronicle.WaitOptions{Timeout: 14 * day}); err != nil {
			return "", err
		}
		verdict, err := review(ctx, id)
		if err != nil {
			return "", err
		}
		return id + ": " + verdict, nil
	}))
	chronicletest.MockActivity[string, string](env, "store").ReturnError(errors.New("disk full")).Once()
	chronicletest.MockActivity[string, string](env, "store").Return("DOC-7")
	id := env.Start("publish", "draft", &chronicle.StartOptions{InstanceID: "PUB-1", BusinessKey: "PUB-1"})
	env.RaiseEventAt(10*day, id, "proofread", "ok", &chronicle.RaiseOptions{Sender: "proofreader"})
	editor := chronicle.User{ID: "ed", Roles: []string{"editor"}}
	env.CompleteTaskAt(10*day+3*time.Hour, id, "review", "approved", editor)
	env.RunUntilIdle()
	return id
}

func TestHistoriesAreTheSameOnEveryRun(t *testing.T) {
	t.Parallel()
	var exports [2][]byte
	var lastHash [2][]byte
	for i := range exports {
		env := chronicletest.New(t)
		id := scenario(t, env)
		if got := chronicletest.Result[string](env, id); got != "DOC-7: approved" {
			t.Fatalf("result %q", got)
		}
		var b bytes.Buffer
		env.ExportHistory(id, &b)
		exports[i] = b.Bytes()
		events := env.History(id)
		if err := history.Verify(events); err != nil {
			t.Fatal(err)
		}
		lastHash[i] = events[len(events)-1].Hash
		read, err := history.ReadJSONL(bytes.NewReader(exports[i]))
		if err != nil || len(read) != len(events) || !bytes.Equal(read[len(read)-1].Hash, lastHash[i]) {
			t.Fatalf("the export reads back as %d events (%v), want the %d of history", len(read), err, len(events))
		}
	}
	if !bytes.Equal(exports[0], exports[1]) || !bytes.Equal(lastHash[0], lastHash[1]) {
		t.Fatalf("two runs exported different histories:\n%s\n---\n%s", exports[0], exports[1])
	}
}

func TestGoldenHistory(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	id := scenario(t, env)
	env.AssertGolden(id, "testdata/publish.golden")
}

// TestOnPostgres runs the scenario on a PostgreSQL store of its own (a
// schema dropped when the test ends) and expects the history the memory
// store gives.
func TestOnPostgres(t *testing.T) {
	t.Parallel()
	store := pgtest.NewStore(t, postgres.Options{})
	env := chronicletest.New(t, chronicletest.Store(store))
	id := scenario(t, env)
	env.AssertGolden(id, "testdata/publish.golden")
}
