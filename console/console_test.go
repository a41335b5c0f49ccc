package console_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/internal/leakcheck"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// seed returns the demo data on a fresh memory store.
func seed(t *testing.T) *demodata.Demo {
	t.Helper()
	d, err := demodata.Seed(context.Background(), memory.New(memory.Options{}))
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

// newConsole returns the console of e with opts; a discarding logger
// unless opts has one.
func newConsole(t *testing.T, e *chronicle.Engine, opts console.Options) http.Handler {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h, err := console.New(e, opts)
	require.NoError(t, err)
	return h
}

// as returns a user hook that always answers u.
func as(u chronicle.User) func(*http.Request) (chronicle.User, error) {
	return func(*http.Request) (chronicle.User, error) { return u, nil }
}

// browser sends requests to a handler and keeps its cookies, as a
// browser would.
type browser struct {
	t       *testing.T
	h       http.Handler
	cookies map[string]*http.Cookie
}

func newBrowser(t *testing.T, h http.Handler) *browser {
	return &browser{t: t, h: h, cookies: map[string]*http.Cookie{}}
}

// page is a response.
type page struct {
	code   int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	res := rec.Result()
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return page{code: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	return b.do(httptest.NewRequest(http.MethodGet, path, nil))
}

// post posts form as a same-origin browser form would.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// token is the CSRF token of the browser's session, read from a page's
// form as a browser would.
func (b *browser) token(path string) string {
	b.t.Helper()
	p := b.get(path)
	require.Equal(b.t, http.StatusOK, p.code, p.body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(p.body)
	require.NotNil(b.t, m, "no CSRF field on %s", path)
	return m[1]
}

// ids returns the data-id attributes of the rows of class row in body.
func ids(body, row string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="`+row+`" data-id="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func deadLetterID(t *testing.T, d *demodata.Demo) string {
	t.Helper()
	letters, err := d.Engine.ListDeadLetters(context.Background(), chronicle.DeadLetterFilter{InstanceID: "REF-4001"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	return letters[0].ID
}

func TestNew(t *testing.T) {
	t.Parallel()
	d := seed(t)
	_, err := console.New(d.Engine, console.Options{Actions: true})
	require.ErrorIs(t, err, console.ErrNoUserHook)
	_, err = console.New(nil, console.Options{})
	require.Error(t, err)
	for _, base := range []string{"ops", "/ops?x=1", "/a b%zz"} {
		_, err = console.New(d.Engine, console.Options{BasePath: base})
		require.Error(t, err, base)
	}
	_, err = console.New(d.Engine, console.Options{BasePath: "/ops/"})
	require.NoError(t, err)
}

func TestInstanceList(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))

	p := b.get("/")
	require.Equal(t, http.StatusSeeOther, p.code)
	require.Equal(t, "/instances", p.header.Get("Location"))

	all := []string{"CLM-1001", "CLM-1002", "CLM-1003", "CLM-1004", "KYC-3001", "LOAN-2001", "LOAN-2002", "REF-4001"}
	p = b.get("/instances")
	require.Equal(t, http.StatusOK, p.code)
	require.Equal(t, all, ids(p.body, "instance"))
	require.Contains(t, p.body, `unknown-activity: no activity named &#34;issue-refund&#34; is registered`, "the refund's incident")

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"status=running", []string{"CLM-1002", "CLM-1003", "LOAN-2002", "REF-4001"}},
		{"status=failed", []string{"KYC-3001"}},
		{"workflow=claim&status=terminated", []string{"CLM-1004"}},
		{"workflow=loan-application", []string{"LOAN-2001", "LOAN-2002"}},
		{"key=LOAN-2001", []string{"LOAN-2001"}},
		// Created 09:20 and 09:25; the refund, at 09:30, is past the bound.
		{"from=2026-11-22T09:20&to=2026-11-22T09:30", []string{"KYC-3001", "LOAN-2001"}},
		{"from=2026-11-23", nil},
	} {
		p := b.get("/instances?" + tt.query)
		require.Equal(t, http.StatusOK, p.code, tt.query)
		require.Equal(t, tt.want, ids(p.body, "instance"), tt.query)
		if tt.want == nil {
			require.Contains(t, p.body, "No instance matches.")
		}
	}
	p = b.get("/instances?status=running&workflow=claim")
	require.Contains(t, p.body, `<option value="running" selected>`, "the filter keeps its values")
	require.Contains(t, p.body, `id="filter-workflow" value="claim"`)

	for _, q := range []string{"status=sleeping", "from=yesterday", "to=2026-13-01"} {
		p := b.get("/instances?" + q)
		require.Equal(t, http.StatusBadRequest, p.code, q)
		require.Contains(t, p.body, `class="problem"`, q)
		require.Empty(t, ids(p.body, "instance"), q)
	}
}

// TestInstanceSearch checks the query box: it narrows the list, shows the
// custom status and the chosen attributes, counts the filter's instances
// by status, and shows a query that does not parse, escaped, as a problem
// of the page rather than an error.
func TestInstanceSearch(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"amount > 1000", []string{"CLM-1001", "CLM-1002", "CLM-1004", "LOAN-2001", "LOAN-2002"}},
		{"amount > 1000 AND status = 'running'", []string{"CLM-1002", "LOAN-2002"}},
		{"policy = 'POL-8812'", []string{"CLM-1002", "CLM-1004"}},
		{"custom_status = 'awaiting review'", []string{"CLM-1002", "CLM-1003", "CLM-1004"}},
		{"approved = true", []string{"CLM-1001"}},
		{"NOT approved = true AND workflow = 'claim'", []string{"CLM-1002", "CLM-1003", "CLM-1004"}},
		{"amount IS NULL", []string{"KYC-3001"}},
	} {
		p := b.get("/instances?q=" + url.QueryEscape(tt.query))
		require.Equal(t, http.StatusOK, p.code, tt.query)
		require.Equal(t, tt.want, ids(p.body, "instance"), tt.query)
	}

	// The query narrows the other fields; the count row counts the
	// filter's instances by status, the status field aside, and links to
	// each status.
	p := b.get("/instances?workflow=claim&status=running&q=" + url.QueryEscape("amount >= 1000"))
	require.Equal(t, http.StatusOK, p.code)
	require.Equal(t, []string{"CLM-1002"}, ids(p.body, "instance"))
	require.Contains(t, p.body, `data-status="completed"><span class="status status-completed">completed</span> <span class="n">1</span>`, "CLM-1001")
	require.Contains(t, p.body, `data-status="running"><span class="status status-running">running</span> <span class="n">1</span>`, "CLM-1002")
	require.Contains(t, p.body, `data-status="terminated"><span class="status status-terminated">terminated</span> <span class="n">1</span>`, "CLM-1004")
	require.Contains(t, p.body, `3 in all`)
	require.Contains(t, p.body, `value="amount &gt;= 1000"`, "the box keeps the query, escaped")

	// Custom status and the attribute columns.
	p = b.get("/instances?columns=amount,policy&q=" + url.QueryEscape("id = 'CLM-1001'"))
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<th class="attr">amount</th><th class="attr">policy</th>`)
	require.Contains(t, p.body, `<td class="custom-status">paid</td>`)
	require.Contains(t, p.body, `<td class="attr">1280</td><td class="attr">POL-7731</td>`)
	require.NotContains(t, p.body, `<th class="attr">approved</th>`)

	// An instance's page lists its attributes.
	p = b.get("/instance?id=CLM-1001")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<dt class="attr">amount</dt><dd class="attr" data-attr="amount">1280</dd><dt class="attr">approved</dt><dd class="attr" data-attr="approved">true</dd>`)

	for _, q := range []string{"amount >", "customer = 'Ada'", "amount = 'lots'", `status = '<script>x</script>'`} {
		p := b.get("/instances?q=" + url.QueryEscape(q))
		require.Equal(t, http.StatusBadRequest, p.code, q)
		require.Contains(t, p.body, `id="filter-problem"`, q)
		require.Empty(t, ids(p.body, "instance"), q)
		require.NotContains(t, p.body, "<script>", q)
	}
	p = b.get("/instances?columns=customer")
	require.Equal(t, http.StatusBadRequest, p.code)
	require.Contains(t, p.body, `&#34;customer&#34; not declared`)
}

func TestPaging(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{PageSize: 3}))
	next := regexp.MustCompile(`<a href="([^"]+)" class="next"`)
	var seen [][]string
	path := "/instances"
	for range 5 {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.code)
		seen = append(seen, ids(p.body, "instance"))
		if len(seen) > 1 {
			require.Contains(t, p.body, `class="first"`, "a later page links the first")
		}
		m := next.FindStringSubmatch(p.body)
		if m == nil {
			break
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	require.Equal(t, [][]string{
		{"CLM-1001", "CLM-1002", "CLM-1003"}, {"CLM-1004", "KYC-3001", "LOAN-2001"}, {"LOAN-2002", "REF-4001"},
	}, seen)

	// Paging keeps the filter.
	p := b.get("/instances?workflow=claim")
	m := next.FindStringSubmatch(p.body)
	require.NotNil(t, m)
	require.Contains(t, m[1], "workflow=claim")
	p = b.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	require.Equal(t, []string{"CLM-1004"}, ids(p.body, "instance"))

	p = b.get("/deadletters?status=any")
	require.NotContains(t, p.body, `class="next"`)
	p = b.get("/tasks?status=any")
	require.Equal(t, []string{"review-CLM-1001", "review-CLM-1002", "review-CLM-1003"}, ids(p.body, "task"))
	require.Contains(t, p.body, `class="next"`)
}

func TestInstancePage(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))

	p := b.get("/instance?id=CLM-1001")
	require.Equal(t, http.StatusOK, p.code)
	body := p.body
	require.Contains(t, body, `<span class="status status-completed">completed</span>`)
	require.Regexp(t, `id="chain-status">Hash chain verified: \d+ events`, body)
	require.Contains(t, body, `id="projection-check">Stored projections agree with the history.`)
	// The result, decoded and indented.
	require.Contains(t, body, `&#34;paid&#34;: 1150`)
	require.Contains(t, body, `&#34;payment&#34;: &#34;PAY-CLM-1001&#34;`)
	// The timeline: the execution, two activities and the human task.
	require.Contains(t, body, `<svg class="timeline"`)
	require.Regexp(t, `<rect class="bar bar-execution outcome-completed"`, body)
	require.Regexp(t, `<rect class="bar bar-activity outcome-completed"`, body)
	require.Regexp(t, `<rect class="bar bar-task outcome-completed"`, body)
	require.Equal(t, 4, strings.Count(body, `<rect class="bar `))
	// The task and its audit trail.
	require.Contains(t, body, `id="human-tasks"`)
	require.Contains(t, body, `user:alice`)
	// Events with their decoded attributes.
	require.Contains(t, body, `id="seq-1"`)
	require.Contains(t, body, `&#34;policyholder&#34;: &#34;Grace Hopper&#34;`)
	require.NotContains(t, body, `id="terminate"`, "an ended instance cannot be terminated")

	p = b.get("/instance?id=KYC-3001")
	require.Contains(t, p.body, `passport P1234567 expired on 2026-03-31 [DocumentExpired]`)
	require.Contains(t, p.body, `<rect class="bar bar-activity outcome-failed"`)
	require.Contains(t, p.body, `✕ ↻2`, "the failure and its retry are marked")

	p = b.get("/instance?id=REF-4001")
	require.Contains(t, p.body, `<rect class="bar bar-activity outcome-open dead"`, "the dead-lettered activity is marked")
	require.Contains(t, p.body, `id="incident"`)
	require.Equal(t, []string{deadLetterID(t, d)}, ids(p.body, "letter"))
	require.Contains(t, p.body, `id="terminate"`)

	p = b.get("/instance?id=CLM-1003")
	require.Contains(t, p.body, `<rect class="bar bar-task outcome-open"`)
	require.Contains(t, p.body, `<line class="mark"`, "the claim by bob is marked on the task's bar")
	require.Contains(t, p.body, `<details class="task-detail" open>`)

	p = b.get("/instance?id=NOPE-1")
	require.Equal(t, http.StatusNotFound, p.code)
	require.Contains(t, p.body, "instance not found")
}

func TestTimeTravel(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	events, err := d.Engine.History(context.Background(), "LOAN-2001")
	require.NoError(t, err)
	// As of seq 7 the loan waits on its cooling-off timer.
	require.Equal(t, history.KindTimerCreated, events[6].Kind)

	p := b.get("/instance?id=LOAN-2001&seq=7")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, "Projections as of seq 7")
	require.Contains(t, p.body, `id="view-status"><span class="status status-running">running</span>`)
	require.Contains(t, p.body, `&#34;cooling-off period&#34;`)
	require.Contains(t, p.body, `<tr class="event current" id="seq-7">`)
	require.Contains(t, p.body, `<tr class="event later" id="seq-8">`)
	require.Contains(t, p.body, `<rect class="bar bar-timer outcome-open"`, "the timeline stops at seq 7")
	require.Contains(t, p.body, `id="travel-prev"`)
	require.Contains(t, p.body, `id="travel-next"`)
	require.Contains(t, p.body, `id="travel-latest"`)

	// Out of range: the latest.
	for _, seq := range []string{"0", "999", "x"} {
		p = b.get("/instance?id=LOAN-2001&seq=" + seq)
		require.Contains(t, p.body, "Projections as of seq "+strconv.Itoa(len(events)), seq)
		require.Contains(t, p.body, `id="view-status"><span class="status status-completed">completed</span>`, seq)
		require.NotContains(t, p.body, `class="event later"`, seq)
	}
}

func TestBrokenChain(t *testing.T) {
	t.Parallel()
	d := seed(t)
	ok := d.Store.(*memory.Store).TamperEvent("CLM-1001", 5, func(e *history.Event) { e.Actor = "user:mallory" })
	require.True(t, ok)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	p := b.get("/instance?id=CLM-1001")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<p class="chain broken" id="chain-status">Hash chain BROKEN at seq 5: hash does not match content</p>`)
	p = b.get("/instance?id=CLM-1002")
	require.Contains(t, p.body, `class="chain ok"`, "other chains still verify")
}

func TestDeadLettersAndTasks(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	id := deadLetterID(t, d)

	p := b.get("/deadletters")
	require.Equal(t, http.StatusOK, p.code)
	require.Equal(t, []string{id}, ids(p.body, "letter"))
	require.Contains(t, p.body, "activity issue-refund (#3, attempt 1)")
	require.Contains(t, p.body, `&#34;order&#34;: &#34;ORD-99817&#34;`, "the activity's input, decoded")
	require.Regexp(t, `(?s)action="/actions/redrive".*disabled title="Actions are disabled`, p.body, "read-only: the buttons are disabled")
	p = b.get("/deadletters?status=redriven")
	require.Empty(t, ids(p.body, "letter"))
	require.Contains(t, p.body, "No dead letter matches.")
	p = b.get("/deadletters?instance=CLM-1001")
	require.Empty(t, ids(p.body, "letter"))
	p = b.get("/deadletters?status=lost")
	require.Equal(t, http.StatusBadRequest, p.code)

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"review-CLM-1002", "review-CLM-1003"}},
		{"assignee=bob", []string{"review-CLM-1003"}},
		{"roles=adjuster&unassigned=1", []string{"review-CLM-1002"}},
		{"roles=supervisor,auditor", []string{"review-CLM-1002", "review-CLM-1003"}},
		{"roles=auditor", nil},
		{"status=completed", []string{"review-CLM-1001"}},
		{"status=any&instance=CLM-1004", []string{"review-CLM-1004"}},
	} {
		p := b.get("/tasks?" + tt.query)
		require.Equal(t, http.StatusOK, p.code, tt.query)
		require.Equal(t, tt.want, ids(p.body, "task"), tt.query)
	}
	for _, q := range []string{"status=lost", "assignee=bob&unassigned=1"} {
		p := b.get("/tasks?" + q)
		require.Equal(t, http.StatusBadRequest, p.code, q)
	}

	p = b.get("/task?id=review-CLM-1003")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `id="assignee">bob</dd>`)
	require.Contains(t, p.body, `&#34;estimate&#34;: 684`, "the payload, decoded")
	require.Contains(t, p.body, `id="audit-trail"`)
	require.Contains(t, p.body, "user:bob")
	require.Contains(t, p.body, `id="complete"`)
	p = b.get("/task?id=review-CLM-1001")
	require.NotContains(t, p.body, `id="task-actions"`, "a completed task has no actions")
	require.Contains(t, p.body, `&#34;note&#34;: &#34;estimate confirmed by photos&#34;`)
	p = b.get("/task?id=nope")
	require.Equal(t, http.StatusNotFound, p.code)
}

func TestRoutesAndHeaders(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	for _, path := range []string{"/instances", "/instance?id=CLM-1001", "/deadletters", "/tasks", "/task?id=review-CLM-1002", "/waiting", "/static/console.css", "/nope"} {
		p := b.get(path)
		h := p.header
		require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'self'", path)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'none'", path)
		require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
		require.NotContains(t, p.body, "<script", path)
	}
	p := b.get("/static/console.css")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.header.Get("Content-Type"), "text/css")
	require.Contains(t, p.body, "svg.timeline")
	require.Equal(t, http.StatusNotFound, b.get("/nope").code)
	require.Equal(t, http.StatusNotFound, b.get("/static/").code, "no listing of the assets")
	require.Equal(t, http.StatusMethodNotAllowed, b.post("/instances", nil).code)
	require.Equal(t, http.StatusMethodNotAllowed, b.get("/actions/redrive").code)

	ck := b.cookies["chronicle_console_csrf"]
	require.NotNil(t, ck)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.Equal(t, "/", ck.Path)
}

func TestBasePath(t *testing.T) {
	t.Parallel()
	d := seed(t)
	h := newConsole(t, d.Engine, console.Options{BasePath: "/ops/chronicle", Actions: true, User: as(chronicle.User{ID: "ops"})})
	p := newBrowser(t, h).get("/ops/chronicle")
	require.Equal(t, http.StatusSeeOther, p.code)
	require.Equal(t, "/ops/chronicle/", p.header.Get("Location"))
	mux := http.NewServeMux()
	mux.Handle("/ops/chronicle/", h)
	b := newBrowser(t, mux)
	p = b.get("/ops/chronicle/")
	require.Equal(t, "/ops/chronicle/instances", p.header.Get("Location"))
	p = b.get("/ops/chronicle/instances")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `href="/ops/chronicle/instance?id=CLM-1001"`)
	require.Contains(t, p.body, `href="/ops/chronicle/static/console.css"`)
	require.Equal(t, "/ops/chronicle/", b.cookies["chronicle_console_csrf"].Path)
	require.Equal(t, http.StatusOK, b.get("/ops/chronicle/static/console.css").code)

	tok := b.token("/ops/chronicle/deadletters")
	p = b.post("/ops/chronicle/actions/redrive", url.Values{"csrf": {tok}, "id": {deadLetterID(t, d)}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	require.Equal(t, "/ops/chronicle/deadletters", p.header.Get("Location"))
}

func TestEscaping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	const (
		script = `<script>alert("payload")</script>`
		signal = `<svg onload=alert(1)>`
		id     = `<b>x</b>"'`
	)
	require.NoError(t, chronicle.RegisterWorkflow(e, "echo", func(ctx *chronicle.Context, in string) (string, error) {
		if _, err := chronicle.CallActivity[string](ctx, "shout", in, nil); err != nil {
			return "", err
		}
		return chronicle.WaitEvent[string](ctx, signal, nil)
	}))
	require.NoError(t, chronicle.RegisterActivity(e, "shout", func(_ context.Context, in string) (string, error) { return in + "!", nil }))
	_, err = e.Start(ctx, "echo", script, &chronicle.StartOptions{InstanceID: id, BusinessKey: `<i>key</i>`})
	require.NoError(t, err)
	drain(t, e)
	require.NoError(t, e.RaiseEvent(ctx, id, signal, script, nil))
	drain(t, e)

	b := newBrowser(t, newConsole(t, e, console.Options{}))
	for _, path := range []string{"/instances", "/instance?id=" + url.QueryEscape(id), "/instance?id=" + url.QueryEscape(id) + "&seq=3"} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.code, path)
		for _, raw := range []string{"<script", "<svg onload", "<b>", "<i>"} {
			require.NotContains(t, p.body, raw, path)
		}
	}
	p := b.get("/instance?id=" + url.QueryEscape(id))
	require.Contains(t, p.body, `&lt;script&gt;alert(\&#34;payload\&#34;)&lt;/script&gt;`, "the result, escaped")
	require.Contains(t, p.body, `signal &lt;svg onload=alert(1)&gt;`, "the signal's bar, escaped")
	require.Contains(t, p.body, `&lt;b&gt;x&lt;/b&gt;&#34;&#39;`, "the id, escaped")
}

// drain runs the engine until no work is left.
func drain(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	for range 1000 {
		worked, err := e.RunOnce(context.Background())
		require.NoError(t, err)
		if !worked {
			return
		}
	}
	t.Fatal("work left after 1000 steps")
}

func TestActionsDisabled(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	tok := b.token("/deadletters")
	id := deadLetterID(t, d)
	for _, action := range []string{"redrive", "discard", "terminate", "suspend", "resume", "rerun", "claim", "complete"} {
		p := b.post("/actions/"+action, url.Values{"csrf": {tok}, "id": {id}})
		require.Equal(t, http.StatusForbidden, p.code, action)
		require.Contains(t, p.body, "Actions are disabled", action)
	}
	l, err := d.Engine.GetDeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "dead", string(l.Status), "nothing was done")
	require.Contains(t, b.get("/instances").body, `id="mode">read-only</span>`)
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	d := seed(t)
	h := newConsole(t, d.Engine, console.Options{Actions: true, User: as(chronicle.User{ID: "ops"})})
	b := newBrowser(t, h)
	id := deadLetterID(t, d)
	tok := b.token("/deadletters")

	refused := func(name string, p page) {
		t.Helper()
		require.Equal(t, http.StatusForbidden, p.code, name)
		l, err := d.Engine.GetDeadLetter(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, "dead", string(l.Status), name)
	}
	refused("no token", b.post("/actions/redrive", url.Values{"id": {id}}))
	refused("wrong token", b.post("/actions/redrive", url.Values{"id": {id}, "csrf": {strings.Repeat("A", 43)}}))
	// Another browser (no cookie) replaying this browser's token.
	refused("token without its cookie", newBrowser(t, h).post("/actions/redrive", url.Values{"id": {id}, "csrf": {tok}}))
	// A form posted from another site: the browser says so.
	req := httptest.NewRequest(http.MethodPost, "/actions/redrive", strings.NewReader(url.Values{"id": {id}, "csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	p := b.do(req)
	refused("cross-site", p)
	require.Contains(t, p.body, "cross-origin")

	p = b.post("/actions/redrive", url.Values{"id": {id}, "csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
}

func TestActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	user := chronicle.User{ID: "alice", Roles: []string{"adjuster"}}
	var hookErr error
	hook := func(*http.Request) (chronicle.User, error) { return user, hookErr }
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{Actions: true, User: hook}))
	tok := b.token("/deadletters")
	require.Contains(t, b.get("/instances").body, `acting as <strong>alice</strong>`)
	post := func(action string, form url.Values) page {
		t.Helper()
		form.Set("csrf", tok)
		return b.post("/actions/"+action, form)
	}
	ok := func(p page, location string) {
		t.Helper()
		require.Equal(t, http.StatusSeeOther, p.code, p.body)
		require.Equal(t, location, p.header.Get("Location"))
		require.NoError(t, d.Drain(ctx))
	}

	t.Run("Redrive", func(t *testing.T) {
		id := deadLetterID(t, d)
		ok(post("redrive", url.Values{"id": {id}, "return": {"/instance?id=REF-4001"}}), "/instance?id=REF-4001")
		p := b.get("/instance?id=REF-4001")
		require.Contains(t, p.body, `id="notice" role="status">Dead letter `+id+` redriven by alice.`)
		require.Contains(t, p.body, `<span class="status status-completed">completed</span>`, "the instance moved on")
		require.NotContains(t, b.get("/instance?id=REF-4001").body, `id="notice"`, "a notice shows once")
		l, err := d.Engine.GetDeadLetter(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "user:alice", l.ResolvedBy, "the acting user is recorded")

		p = post("discard", url.Values{"id": {id}})
		require.Equal(t, http.StatusConflict, p.code, "a resolved dead letter")
		require.Contains(t, p.body, "already resolved")
		p = post("redrive", url.Values{"id": {"nope"}})
		require.Equal(t, http.StatusNotFound, p.code)
	})

	t.Run("SuspendResume", func(t *testing.T) {
		require.Contains(t, b.get("/instance?id=CLM-1003").body, `id="suspend"`)
		ok(post("suspend", url.Values{"id": {"CLM-1003"}, "reason": {"fraud review"}, "ticket": {"FRAUD-12"}}), "/instance?id=CLM-1003")
		p := b.get("/instance?id=CLM-1003")
		require.Contains(t, p.body, `<span class="status status-suspended">suspended</span>`)
		require.Contains(t, p.body, "reason: fraud review, ticket FRAUD-12", "the history shows the ticket")
		require.Contains(t, p.body, `id="resume"`)
		require.NotContains(t, p.body, `id="suspend"`)
		ok(post("resume", url.Values{"id": {"CLM-1003"}, "ticket": {"FRAUD-13"}}), "/instance?id=CLM-1003")
		p = b.get("/instance?id=CLM-1003")
		require.Contains(t, p.body, "reason: resumed in the console, ticket FRAUD-13")
		require.Contains(t, p.body, `<span class="status status-running">running</span>`)
		events, err := d.Engine.History(ctx, "CLM-1003")
		require.NoError(t, err)
		last := events[len(events)-1]
		for i := range events {
			if events[i].Kind == history.KindExecutionResumed {
				last = events[i]
			}
		}
		require.Equal(t, "user:alice", last.Actor)
		a, err := last.Attributes()
		require.NoError(t, err)
		require.Equal(t, &history.ExecutionResumed{Reason: "resumed in the console", Ticket: "FRAUD-13"}, a)
		require.Equal(t, http.StatusConflict, post("resume", url.Values{"id": {"CLM-1003"}}).code, "not suspended")
	})

	t.Run("Terminate", func(t *testing.T) {
		p := post("terminate", url.Values{"id": {"LOAN-2002"}, "reason": {"customer withdrew"}, "ticket": {"OPS\x01"}})
		require.Equal(t, http.StatusBadRequest, p.code, "a ticket with a control character")
		ok(post("terminate", url.Values{"id": {"LOAN-2002"}, "reason": {"customer withdrew"}, "ticket": {" CS-4411 "}, "return": {"//evil.example/x"}}),
			"/instance?id=LOAN-2002")
		events, err := d.Engine.History(ctx, "LOAN-2002")
		require.NoError(t, err)
		var term *history.Event
		for i := range events {
			if events[i].Kind == history.KindExecutionTerminated {
				term = &events[i]
			}
		}
		require.NotNil(t, term)
		require.Equal(t, "user:alice", term.Actor)
		a, err := term.Attributes()
		require.NoError(t, err)
		require.Equal(t, &history.ExecutionTerminated{Reason: "customer withdrew", Ticket: "CS-4411"}, a)
		require.Contains(t, b.get("/instance?id=LOAN-2002").body, "reason: customer withdrew, ticket CS-4411", "the history shows the ticket")
		p = post("terminate", url.Values{"id": {"LOAN-2002"}})
		require.Equal(t, http.StatusConflict, p.code)
	})

	t.Run("Rerun", func(t *testing.T) {
		before, err := d.Engine.History(ctx, "KYC-3001")
		require.NoError(t, err)
		require.Contains(t, b.get("/instance?id=KYC-3001").body, `id="rerun"`, "a failed instance can be rerun")
		for name, form := range map[string]url.Values{
			"no seq":         {"id": {"KYC-3001"}},
			"the start":      {"id": {"KYC-3001"}, "from_seq": {"1"}},
			"bad input":      {"id": {"KYC-3001"}, "from_seq": {"4"}, "input": {"{"}},
			"bad ticket":     {"id": {"KYC-3001"}, "from_seq": {"4"}, "ticket": {"KYC\x01"}},
			"input for turn": {"id": {"KYC-3001"}, "from_seq": {"5"}, "input": {"1"}},
		} {
			p := post("rerun", form)
			require.Equal(t, http.StatusBadRequest, p.code, name)
		}
		require.Equal(t, http.StatusNotFound, post("rerun", url.Values{"id": {"NOPE-1"}, "from_seq": {"2"}}).code)
		require.NoError(t, d.Drain(ctx))
		after, err := d.Engine.History(ctx, "KYC-3001")
		require.NoError(t, err)
		require.Equal(t, before, after, "a refused rerun writes nothing")

		ok(post("rerun", url.Values{"id": {"KYC-3001"}, "from_seq": {"4"}, "reason": {"passport renewed"}, "ticket": {"KYC-88"},
			"input": {`{"customer":"C-5521","name":"Charles Babbage","passport":"P7654321"}`}}), "/instance?id=KYC-3001")
		p := b.get("/instance?id=KYC-3001")
		require.Contains(t, p.body, `id="notice" role="status">Instance KYC-3001 rerun from seq 4 by alice as execution `)
		require.Contains(t, p.body, `<span class="status status-completed">completed</span>`, "the rerun activity passed")
		require.Contains(t, p.body, `<a href="#seq-8" class="lineage">new execution at #8</a>`, "the record links to the new execution")
		require.Contains(t, p.body, `<a href="#seq-4" class="lineage">reran from #4</a>`, "the new execution links to where it reran from")
		require.Contains(t, p.body, "reason: passport renewed, ticket KYC-88")
		events, err := d.Engine.History(ctx, "KYC-3001")
		require.NoError(t, err)
		require.Equal(t, before, events[:len(before)])
		rec := events[len(before)]
		require.Equal(t, history.KindExecutionRerun, rec.Kind)
		require.Equal(t, "user:alice", rec.Actor)
		a, err := rec.Attributes()
		require.NoError(t, err)
		require.Equal(t, "KYC-88", a.(*history.ExecutionRerun).Ticket)
		require.NoError(t, d.Engine.Verify(ctx, "KYC-3001"))
	})

	t.Run("Tasks", func(t *testing.T) {
		task := demodata.ReviewTaskID("CLM-1002")
		ok(post("claim", url.Values{"id": {task}}), "/task?id="+task)
		got, err := d.Engine.GetTask(ctx, task)
		require.NoError(t, err)
		require.Equal(t, "alice", got.Assignee)

		ok(post("reassign", url.Values{"id": {task}, "to": {"carol"}}), "/task?id="+task)
		got, err = d.Engine.GetTask(ctx, task)
		require.NoError(t, err)
		require.Equal(t, "carol", got.Assignee)

		p := post("complete", url.Values{"id": {task}, "result": {`{"approved": true}`}})
		require.Equal(t, http.StatusForbidden, p.code, "carol has the task")
		p = post("release", url.Values{"id": {task}})
		require.Equal(t, http.StatusForbidden, p.code, "only the assignee releases")

		user = chronicle.User{ID: "carol", Roles: []string{"adjuster"}}
		ok(post("release", url.Values{"id": {task}}), "/task?id="+task)
		ok(post("assign", url.Values{"id": {task}, "to": {"dave"}}), "/task?id="+task)
		user = chronicle.User{ID: "dave"}
		p = post("complete", url.Values{"id": {task}, "result": {`{"approved": tru`}})
		require.Equal(t, http.StatusBadRequest, p.code)
		require.Contains(t, p.body, "not JSON")
		ok(post("complete", url.Values{"id": {task}, "result": {`{"approved": true, "amount": 3900, "note": "roof photos"}`}}), "/task?id="+task)

		in, err := d.Engine.Describe(ctx, "CLM-1002")
		require.NoError(t, err)
		var s demodata.Settlement
		require.NoError(t, in.Result(&s))
		require.Equal(t, 3900, s.Paid, "the whole number decoded into an int")
		trail, err := d.Engine.TaskEvents(ctx, task)
		require.NoError(t, err)
		var actors []string
		for _, ev := range trail {
			actors = append(actors, ev.Actor)
		}
		require.Equal(t, []string{"worker:demo", "user:alice", "user:alice", "user:carol", "user:carol", "user:dave"}, actors)
		p = b.get("/task?id=" + task)
		require.Contains(t, p.body, `Task `+task+` completed by dave.`)
	})

	t.Run("Refusals", func(t *testing.T) {
		p := post("explode", url.Values{"id": {"x"}})
		require.Equal(t, http.StatusNotFound, p.code)
		user = chronicle.User{ID: "bad user "}
		p = post("claim", url.Values{"id": {demodata.ReviewTaskID("CLM-1003")}})
		require.Equal(t, http.StatusForbidden, p.code)
		require.Contains(t, p.body, "No acting user")
		user, hookErr = chronicle.User{}, errors.New("not signed in")
		p = post("claim", url.Values{"id": {demodata.ReviewTaskID("CLM-1003")}})
		require.Equal(t, http.StatusForbidden, p.code)
		require.Contains(t, p.body, "not signed in")
	})
}

// TestAllowedHosts checks the defence against DNS rebinding: a console
// with AllowedHosts answers only requests whose Host is one of them, so
// that a page whose name was rebound to the console's address can neither
// read a page (and its CSRF token) nor act.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	d := seed(t)
	h := newConsole(t, d.Engine, console.Options{Actions: true, User: as(chronicle.User{ID: "ops"}),
		AllowedHosts: []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "Ops.Example"}})
	id := deadLetterID(t, d)
	request := func(method, host, path string, body string) page {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = host
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		return newBrowser(t, h).do(req)
	}

	for _, host := range []string{"evil.example:8080", "evil.example", "127.0.0.1:9090", "127.0.0.2:8080", "localhost", ""} {
		for _, path := range []string{"/instances", "/deadletters", "/static/console.css", "/no-such-page"} {
			p := request(http.MethodGet, host, path, "")
			require.Equal(t, http.StatusMisdirectedRequest, p.code, "%s %s", host, path)
			require.Contains(t, p.body, "does not answer for host")
			require.NotContains(t, p.body, `name="csrf"`)
			require.Empty(t, p.header.Values("Set-Cookie"), "no CSRF cookie for a foreign host")
		}
	}
	// A rebound page that got a token somehow still cannot act.
	tok := newBrowser(t, h)
	req := httptest.NewRequest(http.MethodGet, "/deadletters", nil)
	req.Host = "127.0.0.1:8080"
	pg := tok.do(req)
	require.Equal(t, http.StatusOK, pg.code)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(pg.body)
	require.NotNil(t, m)
	post := httptest.NewRequest(http.MethodPost, "/actions/redrive", strings.NewReader(url.Values{"id": {id}, "csrf": {m[1]}}.Encode()))
	post.Host = "evil.example:8080"
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Origin", "http://evil.example:8080")
	p := tok.do(post)
	require.Equal(t, http.StatusMisdirectedRequest, p.code, p.body)
	l, err := d.Engine.GetDeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "dead", string(l.Status))

	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080", "ops.example", "ops.example:443"} {
		p := request(http.MethodGet, host, "/instances", "")
		require.Equal(t, http.StatusOK, p.code, host)
		require.Contains(t, p.body, `data-id="CLM-1001"`, host)
	}

	_, err = console.New(d.Engine, console.Options{AllowedHosts: []string{"bad host:80"}})
	require.ErrorContains(t, err, `AllowedHosts`)
}

// refundApproval is a task result as a Go programmer writes it: no tags.
type refundApproval struct {
	Approved bool
	Amount   int
}

// TestCompleteTypedResult completes in the console a task whose result is
// a Go struct without tags: {"approved": true} reaches Approved, and a key
// the struct lacks is refused with nothing written.
func TestCompleteTypedResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	require.NoError(t, chronicle.RegisterWorkflow(d.Engine, "order-refund", func(ctx *chronicle.Context, order string) (string, error) {
		task := ctx.CreateTask("approve-refund", order, &chronicle.TaskOptions{TaskID: "refund-" + order, Roles: []string{"finance"}})
		a, err := chronicle.WaitTask[refundApproval](ctx, task)
		if err != nil || !a.Approved {
			return "rejected by finance", err
		}
		return "refunded " + strconv.Itoa(a.Amount), nil
	}))
	_, err := d.Engine.Start(ctx, "order-refund", "R-1", &chronicle.StartOptions{InstanceID: "R-1"})
	require.NoError(t, err)
	require.NoError(t, d.Drain(ctx))
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{Actions: true, User: as(chronicle.User{ID: "fin", Roles: []string{"finance"}})}))
	tok := b.token("/task?id=refund-R-1")
	page := b.get("/task?id=refund-R-1")
	require.Contains(t, page.body, `The workflow reads the result as <code>console_test.refundApproval</code>`)
	require.Contains(t, page.body, `placeholder="{&#34;Approved&#34;:false,&#34;Amount&#34;:0}"`)

	p := b.post("/actions/complete", url.Values{"csrf": {tok}, "id": {"refund-R-1"}, "result": {`{"aproved": true}`}})
	require.Equal(t, http.StatusBadRequest, p.code, p.body)
	require.Contains(t, p.body, `does not decode to console_test.refundApproval: unknown field &#34;aproved&#34;`)
	require.NoError(t, d.Drain(ctx))
	task, err := d.Engine.GetTask(ctx, "refund-R-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.TaskOpen, task.Status, "nothing written")

	p = b.post("/actions/complete", url.Values{"csrf": {tok}, "id": {"refund-R-1"}, "result": {`{"approved": true, "amount": 250}`}})
	require.Equal(t, http.StatusSeeOther, p.code, p.body)
	require.NoError(t, d.Drain(ctx))
	in, err := d.Engine.Describe(ctx, "R-1")
	require.NoError(t, err)
	var out string
	require.NoError(t, in.Result(&out))
	require.Equal(t, "refunded 250", out)
}

// TestChainBadgeWithKeys: with Options.Keys the chain badge reports what
// the signed checkpoints find. A history rewritten with every hash
// recomputed keeps a plain hash chain intact ("verified"); the keys name
// the rewrite.
func TestChainBadgeWithKeys(t *testing.T) {
	t.Parallel()
	d := seed(t)
	seedKey := make([]byte, ed25519.SeedSize)
	copy(seedKey, "console")
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(seedKey))
	require.NoError(t, err)
	keys := &chronicle.Keyring{}
	require.NoError(t, keys.Add("2026-11", signer.Public()))
	e, err := chronicle.New(d.Store, chronicle.Options{Checkpoints: &chronicle.CheckpointOptions{Signer: signer}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	c, err := e.SweepCheckpoint(context.Background())
	require.NoError(t, err)
	require.NotNil(t, c)

	signed := newBrowser(t, newConsole(t, d.Engine, console.Options{Keys: keys}))
	plain := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	p := signed.get("/instance?id=CLM-1001")
	require.Regexp(t, `<p class="chain ok" id="chain-status">Hash chain verified against signed checkpoint 1: (\d+) events, covered up to seq (\d+)\.</p>`, p.body)

	require.True(t, d.Store.(*memory.Store).RewriteHistory("CLM-1001", func(ev []history.Event) []history.Event {
		ev[2].Actor = "user:mallory"
		return ev
	}))
	p = plain.get("/instance?id=CLM-1001")
	require.Contains(t, p.body, `<p class="chain ok" id="chain-status">Hash chain verified:`, "without keys a resealed forgery looks verified")
	p = signed.get("/instance?id=CLM-1001")
	require.Contains(t, p.body, `<p class="chain broken" id="chain-status">History FORGED: history rewritten after checkpoint 1: it differs at covered seq`)
	require.Contains(t, p.body, "Do not rebuild projections")
	p = signed.get("/instance?id=CLM-1002")
	require.Contains(t, p.body, `class="chain ok"`, "other histories still verify")
}

// waitingOrders registers "gate", a workflow that runs until its "go"
// signal, on the demo engine and starts orders with a concurrency limit
// per customer: acme (limit 1) runs a-1 while a-2 and a-3 wait behind it,
// bolt (limit 1) runs b-1 while b-2 waits, calm (limit 2) runs c-1 and
// nobody waits.
func waitingOrders(t *testing.T, d *demodata.Demo) {
	t.Helper()
	require.NoError(t, chronicle.RegisterWorkflow(d.Engine, "gate", func(ctx *chronicle.Context, in string) (string, error) {
		var s string
		err := ctx.WaitEvent("go", nil).Get(&s)
		return in + s, err
	}))
	ctx := context.Background()
	for _, o := range []struct {
		id, key string
		limit   int
	}{{"a-1", "acme", 1}, {"b-1", "bolt", 1}, {"c-1", "calm", 2}, {"a-2", "acme", 1}, {"b-2", "bolt", 1}, {"a-3", "acme", 1}} {
		_, err := d.Engine.Start(ctx, "gate", o.id, &chronicle.StartOptions{
			InstanceID: o.id, Concurrency: &chronicle.Concurrency{Key: o.key, Limit: o.limit},
		})
		require.NoError(t, err)
	}
	require.NoError(t, d.Drain(ctx))
}

// TestWaiting: the waiting page lists the concurrency keys somebody
// waits for, each with its holders and its waiters in order, linked to
// their pages, and pages them; a key's own page adds its running
// activities; an instance that waits says why on its page.
func TestWaiting(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{PageSize: 1}))
	p := b.get("/waiting")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Contains(t, p.body, `id="no-waiting"`)
	require.Contains(t, p.body, `aria-current="page">Waiting`)

	waitingOrders(t, d)
	p = b.get("/waiting")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Equal(t, []string{"acme"}, ids(p.body, "slot-key"), "one key a page")
	require.Contains(t, p.body, `<a href="/instance?id=a-1" class="holder">a-1</a>`)
	a2 := strings.Index(p.body, `<a href="/instance?id=a-2" class="waiter">a-2</a>`)
	a3 := strings.Index(p.body, `<a href="/instance?id=a-3" class="waiter">a-3</a>`)
	require.True(t, a2 > 0 && a3 > a2, "the waiters in the order they get a slot")
	require.Contains(t, p.body, `href="/waiting?key=acme"`)
	m := regexp.MustCompile(`<a href="([^"]+)" class="next"`).FindStringSubmatch(p.body)
	require.NotNil(t, m, "a next page")
	p = b.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	require.Equal(t, []string{"bolt"}, ids(p.body, "slot-key"), "calm, nobody waiting, is left out")
	require.Contains(t, p.body, `class="waiter">b-2</a>`)
	require.NotContains(t, p.body, `class="next"`)
	require.Contains(t, p.body, `class="first"`)

	p = b.get("/waiting?key=calm")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Equal(t, []string{"calm"}, ids(p.body, "slot-key"))
	require.Contains(t, p.body, `class="holder">c-1</a>`)
	require.Contains(t, p.body, "Activity tasks with this key running now: 0.")
	require.Equal(t, http.StatusNotFound, b.get("/waiting?key=zeta").code)

	p = b.get("/instance?id=a-3")
	require.Equal(t, http.StatusOK, p.code, p.body)
	m = regexp.MustCompile(`(?s)<dd id="waiting">(.*?)</dd>`).FindStringSubmatch(p.body)
	require.NotNil(t, m, "a-3 says why it waits")
	require.Contains(t, m[1], `<a href="/waiting?key=acme">acme</a> (limit 1), position 2 since`)
	require.Contains(t, m[1], `behind <a href="/instance?id=a-1" class="holder">a-1</a>`)
	p = b.get("/instance?id=a-1")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.NotContains(t, p.body, `id="waiting"`, "a holder does not wait")

	// a-1 ends: a-2 takes its slot and a-3 is next.
	require.NoError(t, d.Engine.RaiseEvent(context.Background(), "a-1", "go", "!", nil))
	require.NoError(t, d.Drain(context.Background()))
	p = b.get("/instance?id=a-3")
	require.Contains(t, p.body, `position 1 since`)
	require.Contains(t, p.body, `behind <a href="/instance?id=a-2" class="holder">a-2</a>`)
}

// TestWaitingUnsupported: on a store that keeps no concurrency slots the
// waiting page says so instead of failing.
func TestWaitingUnsupported(t *testing.T) {
	t.Parallel()
	type slotless interface {
		provider.FullStore
		provider.TxStore
	}
	e, err := chronicle.New(struct{ slotless }{memory.New(memory.Options{})}, chronicle.Options{})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	b := newBrowser(t, newConsole(t, e, console.Options{}))
	for _, path := range []string{"/waiting", "/waiting?key=acme"} {
		p := b.get(path)
		require.Equal(t, http.StatusNotImplemented, p.code, path)
		require.Contains(t, p.body, `id="waiting-problem"`, path)
		require.Contains(t, p.body, "keeps no concurrency slots", path)
	}
}

// TestWaitingActivityKey: the page of a key only activity tasks use shows
// their live claims.
func TestWaitingActivityKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	require.NoError(t, chronicle.RegisterWorkflow(d.Engine, "charge", func(ctx *chronicle.Context, n int) (int, error) {
		var out int
		err := ctx.CallActivity("psp", n, &chronicle.ActivityOptions{
			Queue: "psp", Concurrency: &chronicle.Concurrency{Key: "psp", Limit: 2},
		}).Get(&out)
		return out, err
	}))
	_, err := d.Engine.Start(ctx, "charge", 7, &chronicle.StartOptions{InstanceID: "c-1"})
	require.NoError(t, err)
	require.NoError(t, d.Drain(ctx))
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	require.Equal(t, http.StatusNotFound, b.get("/waiting?key=psp").code, "nothing runs with the key yet")

	// A worker of the queue "psp" (the demo engine serves only the
	// default queue) claims the task.
	now := d.Clock.Now()
	lease, err := d.Store.ClaimActivity(ctx, &provider.ClaimActivityParams{
		Queues: []string{"psp"}, Owner: "psp-worker", Now: now, LockedUntil: now.Add(time.Hour),
	})
	require.NoError(t, err)
	require.NotNil(t, lease)
	p := b.get("/waiting?key=psp")
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Contains(t, p.body, `<p id="running-activities">Activity tasks with this key running now: 1.</p>`)
	require.Equal(t, []string{"psp"}, ids(p.body, "slot-key"))
}
