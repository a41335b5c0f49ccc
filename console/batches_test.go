package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/internal/demodata"
)

// startBatch starts a batch that handles one claim a second: after a
// drain it has handled the first and waits on its rate's timer, which the
// demo's clock never reaches, so that it stays running.
func startBatch(t *testing.T, d *demodata.Demo, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := d.Engine.StartBatch(ctx, chronicle.BatchOptions{
		ID: id, Action: chronicle.BatchRedrive, Workflow: demodata.ClaimWorkflow,
		Reason: "<redrive> after the outage", Ticket: "OPS-12", Actor: "bob", Rate: 1,
	})
	require.NoError(t, err)
	require.NoError(t, d.Drain(ctx))
}

func TestBatches(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	p := b.get("/batches")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `id="no-batches"`)
	require.Contains(t, p.body, `aria-current="page">Batches`)
	require.Contains(t, b.get("/instances").body, `href="/batches"`, "the navigation links to the batches")

	startBatch(t, d, "redrive-claims")
	p = b.get("/batches")
	require.Equal(t, http.StatusOK, p.code)
	require.Equal(t, []string{"redrive-claims"}, ids(p.body, "batch"))
	require.Contains(t, p.body, `href="/batch?id=redrive-claims"`)
	require.Contains(t, p.body, "&lt;redrive&gt; after the outage", "the reason, escaped")
	require.Contains(t, p.body, "user:bob")
	require.Contains(t, p.body, `status-running`)
	require.Regexp(t, `<td>redrive</td>\s*<td><span class="status status-running">running</span></td>\s*<td>1</td>\s*<td>0</td>\s*<td>1</td>\s*<td>0</td>`,
		p.body, "matched, done, skipped, failed: the first claim has no dead letter")

	p = b.get("/batch?id=redrive-claims")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Contains(t, p.body, `id="progress">1 matched: 0 done, 1 skipped, 0 failed`)
	require.Contains(t, p.body, `href="/instance?id=batch%3Aredrive-claims"`)
	require.Contains(t, p.body, "OPS-12")
	require.Contains(t, p.body, `action="/actions/batch-pause"`)
	require.Contains(t, p.body, `action="/actions/batch-cancel"`)
	require.Contains(t, p.body, `disabled title="Actions are disabled`, "read-only: the buttons are disabled")
	require.Equal(t, []string{"start"}, ids(p.body, "change"))

	p = b.get("/batch?id=nope")
	require.Equal(t, http.StatusNotFound, p.code)
	require.Contains(t, p.body, "batch not found")
	p = b.get("/batch")
	require.Equal(t, http.StatusNotFound, p.code, "no id")
}

// TestBatchActions pauses, resumes and cancels a batch from its page and
// checks that each reaches the batch with the note and the signed-in user.
func TestBatchActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	startBatch(t, d, "b1")
	user := chronicle.User{ID: "alice"}
	var hookErr error
	hook := func(*http.Request) (chronicle.User, error) { return user, hookErr }
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{Actions: true, User: hook}))
	tok := b.token("/batch?id=b1")
	post := func(action string, form url.Values) page {
		t.Helper()
		form.Set("csrf", tok)
		return b.post("/actions/"+action, form)
	}
	describe := func() *chronicle.BatchDescription {
		t.Helper()
		require.NoError(t, d.Drain(ctx))
		s, err := d.Engine.DescribeBatch(ctx, "b1")
		require.NoError(t, err)
		return s
	}
	lastChange := func(s *chronicle.BatchDescription) chronicle.BatchChange {
		t.Helper()
		require.NotEmpty(t, s.Changes)
		return s.Changes[len(s.Changes)-1]
	}

	// CSRF: no token, nothing paused.
	p := b.post("/actions/batch-pause", url.Values{"id": {"b1"}})
	require.Equal(t, http.StatusForbidden, p.code)
	require.Equal(t, chronicle.BatchRunning, describe().State)

	p = post("batch-pause", url.Values{"id": {"b1"}, "note": {"too much load"}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	require.Equal(t, "/batch?id=b1", p.header.Get("Location"))
	s := describe()
	require.Equal(t, chronicle.BatchPaused, s.State)
	require.Equal(t, chronicle.BatchChange{Kind: "pause", Actor: "user:alice", Note: "too much load", At: lastChange(s).At}, lastChange(s))
	p = b.get("/batch?id=b1")
	require.Contains(t, p.body, `id="notice" role="status">Batch b1 paused by alice.`)
	require.Contains(t, p.body, `action="/actions/batch-resume"`)
	require.NotContains(t, p.body, `action="/actions/batch-pause"`)

	p = post("batch-resume", url.Values{"id": {"b1"}, "note": {"load is down"}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	s = describe()
	require.Equal(t, chronicle.BatchRunning, s.State)
	require.Equal(t, chronicle.BatchChange{Kind: "resume", Actor: "user:alice", Note: "load is down", At: lastChange(s).At}, lastChange(s))

	// Refusals: clear messages, never a 500.
	hookErr = errors.New("not signed in")
	p = post("batch-cancel", url.Values{"id": {"b1"}})
	require.Equal(t, http.StatusForbidden, p.code)
	require.Contains(t, p.body, "not signed in")
	require.Equal(t, chronicle.BatchRunning, describe().State)
	hookErr = nil
	p = post("batch-pause", url.Values{"id": {"nope"}})
	require.Equal(t, http.StatusNotFound, p.code, p.body)
	require.Contains(t, p.body, "batch not found")

	p = post("batch-cancel", url.Values{"id": {"b1"}, "note": {"wrong filter"}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	s = describe()
	require.Equal(t, chronicle.BatchCancelled, s.State)
	require.Equal(t, chronicle.BatchChange{Kind: "cancel", Actor: "user:alice", Note: "wrong filter", At: lastChange(s).At}, lastChange(s))
	p = b.get("/batch?id=b1")
	require.Contains(t, p.body, `Batch b1 cancelled by alice.`)
	require.NotContains(t, p.body, `id="batch-actions"`, "an ended batch has no actions")
	p = post("batch-resume", url.Values{"id": {"b1"}})
	require.Equal(t, http.StatusConflict, p.code, p.body)
	require.Contains(t, p.body, "has ended")

	// A read-only console refuses every batch action.
	startBatch(t, d, "b2")
	ro := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	rtok := ro.token("/batch?id=b2")
	for _, action := range []string{"batch-pause", "batch-resume", "batch-cancel"} {
		p = ro.post("/actions/"+action, url.Values{"csrf": {rtok}, "id": {"b2"}})
		require.Equal(t, http.StatusForbidden, p.code, action)
		require.Contains(t, p.body, "Actions are disabled", action)
	}
	require.NoError(t, d.Drain(ctx))
	s2, err := d.Engine.DescribeBatch(ctx, "b2")
	require.NoError(t, err)
	require.Equal(t, chronicle.BatchRunning, s2.State)
	require.Len(t, s2.Changes, 1, "only its start")
}
