package browsertest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// chromium returns the path of the browser, or skips the test (fails it
// under CI=true) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	msg := "!!! headless Chromium not found ($CHROMIUM, /usr/bin/chromium, /usr/bin/chromium-browser): " +
		"install Debian's chromium package (make services does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so this fails instead of skipping")
	}
	t.Skip(msg + "; skipping the browser tests")
	return ""
}

// site is the console on the demo data, served over HTTP with the demo
// engine running, as chronicle ui serves it.
type site struct {
	url  string
	demo *demodata.Demo
}

// serve starts a console on fresh demo data; actions, when enabled, are
// taken as "ops" with the adjuster role.
func serve(t *testing.T, actions bool) *site {
	t.Helper()
	return serveWith(t, actions, nil)
}

// serveWith is serve with prepare, when set, called with the demo data
// before the engine starts running (to register a workflow of the test
// and start its instances, say).
func serveWith(t *testing.T, actions bool, prepare func(*demodata.Demo)) *site {
	t.Helper()
	d, err := demodata.Seed(context.Background(), memory.New(memory.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(d)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	opts := console.Options{Actions: actions, Logger: slog.New(slog.DiscardHandler)}
	if actions {
		opts.User = func(*http.Request) (chronicle.User, error) {
			return chronicle.User{ID: "ops", Roles: []string{"adjuster"}}, nil
		}
	}
	h, err := console.New(d.Engine, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		stop()
		if err := <-ran; err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return &site{url: srv.URL, demo: d}
}

// browser starts headless Chromium and returns the context of its first
// tab, with a deadline for the whole test.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in containers and CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser on the tab's own context: a deadline on its first
	// Run would stop the browser.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rows returns the data-id of the rows matching the CSS selector sel.
func rows(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll(`+jsString(sel)+`), r => r.dataset.id)`))
}

// jsString quotes a selector written in this file for JavaScript.
func jsString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// TestConsole is the acceptance of the console in a real browser: open
// the instance list, filter it, open an instance and see its timeline and
// hash-chain status, redrive a dead letter and see its instance move on,
// and see an action refused when actions are disabled.
func TestConsole(t *testing.T) {
	s := serve(t, true)
	ctx := browser(t, 1280, 900)

	// The instance list.
	do(t, ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#instances`)))
	all := []string{"CLM-1001", "CLM-1002", "CLM-1003", "CLM-1004", "KYC-3001", "LOAN-2001", "LOAN-2002", "REF-4001"}
	if got := rows(t, ctx, `tr.instance`); !equal(got, all) {
		t.Fatalf("instances listed: %v, want %v", got, all)
	}
	if got := run(t, ctx, chromedp.Text(chromedp.CSS(`#mode`))); !strings.Contains(got, "acting as ops") {
		t.Errorf("mode %q does not name the acting user", got)
	}

	// Filter: running claims.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS(`#filter-status`), "running"),
		chromedp.SendKeys(chromedp.CSS(`#filter-workflow`), "claim"),
		chromedp.Click(chromedp.CSS(`#filter-apply`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr.instance[data-id="CLM-1001"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.instance[data-id="CLM-1003"]`)),
	)
	if got, want := rows(t, ctx, `tr.instance`), []string{"CLM-1002", "CLM-1003"}; !equal(got, want) {
		t.Fatalf("running claims: %v, want %v", got, want)
	}
	if loc := run(t, ctx, chromedp.Location()); !strings.Contains(loc, "status=running") || !strings.Contains(loc, "workflow=claim") {
		t.Errorf("the filter is not in the address: %s", loc)
	}

	// Open an instance: its timeline and its chain.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`tr.instance[data-id="CLM-1003"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline`)),
	)
	if h1 := run(t, ctx, chromedp.Text(chromedp.CSS(`h1`))); !strings.Contains(h1, "CLM-1003") || !strings.Contains(h1, "running") {
		t.Errorf("heading %q", h1)
	}
	bars := run(t, ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('svg.timeline rect.bar'), r => r.getAttribute('class'))`))
	wantBars := []string{"bar bar-execution outcome-open", "bar bar-activity outcome-completed", "bar bar-task outcome-open"}
	if !equal(bars, wantBars) {
		t.Errorf("timeline bars %v, want %v", bars, wantBars)
	}
	if w := run(t, ctx, chromedp.Evaluate[float64](`document.querySelector('svg.timeline').getBoundingClientRect().width`)); w < 600 {
		t.Errorf("the timeline is drawn %gpx wide", w)
	}
	if chain := run(t, ctx, chromedp.Text(chromedp.CSS(`#chain-status`))); !strings.HasPrefix(chain, "Hash chain verified") {
		t.Errorf("chain status %q", chain)
	}

	// Redrive the refund's dead letter from the dead-letter list.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/deadletters"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.letter`)),
	)
	letters := rows(t, ctx, `tr.letter`)
	if len(letters) != 1 {
		t.Fatalf("dead letters %v, want the refund's", letters)
	}
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`tr.letter form.action-redrive button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	)
	if notice := run(t, ctx, chromedp.Text(chromedp.CSS(`#notice`))); notice != "Dead letter "+letters[0]+" redriven by ops." {
		t.Errorf("notice %q", notice)
	}
	if left := rows(t, ctx, `tr.letter`); len(left) != 0 {
		t.Errorf("dead letters left: %v", left)
	}

	// See the refund move on: reload its page until it completed.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/instances"]`)),
		chromedp.Click(chromedp.CSS(`tr.instance[data-id="REF-4001"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#chain-status`)),
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status := run(t, ctx, chromedp.Text(chromedp.CSS(`h1 .status`)))
		if status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("REF-4001 is still %s 30s after the redrive", status)
		}
		do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#chain-status`)))
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('svg.timeline rect.bar-activity.outcome-completed').length`)); n != 1 {
		t.Errorf("the refund's activity is not drawn completed (%d bars)", n)
	}
	if chain := run(t, ctx, chromedp.Text(chromedp.CSS(`#chain-status`))); !strings.HasPrefix(chain, "Hash chain verified: 6 events") {
		t.Errorf("chain status after the redrive %q", chain)
	}

	// A read-only console refuses the same action: its button is disabled,
	// and a form submitted anyway is refused by the server.
	ro := serve(t, false)
	do(t, ctx,
		chromedp.Navigate(ro.url+"/deadletters"),
		chromedp.WaitVisible(chromedp.CSS(`tr.letter`)),
	)
	if disabled := run(t, ctx, chromedp.Evaluate[bool](`document.querySelector('tr.letter form.action-redrive button').disabled`)); !disabled {
		t.Error("the redrive button of a read-only console is enabled")
	}
	do(t, ctx,
		chromedp.RemoveAttribute(chromedp.CSS(`tr.letter form.action-redrive button`), "disabled"),
		chromedp.Click(chromedp.CSS(`tr.letter form.action-redrive button`)),
		chromedp.WaitVisible(chromedp.CSS(`#error`)),
	)
	if title := run(t, ctx, chromedp.Text(chromedp.CSS(`#error-title`))); title != "403 Forbidden" {
		t.Errorf("refusal titled %q", title)
	}
	if msg := run(t, ctx, chromedp.Text(chromedp.CSS(`#error`))); !strings.Contains(msg, "Actions are disabled") {
		t.Errorf("refusal says %q", msg)
	}
	l, err := ro.demo.Engine.GetDeadLetter(ctx, letters[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.Status != "dead" {
		t.Errorf("the read-only console's dead letter is %s", l.Status)
	}
}

// TestSearch types a query on a search attribute into the instance
// list's query box, submits it and sees only the matching instances, with
// their attributes as columns and the count of each status; then a query
// that does not parse, which the page explains instead of failing.
func TestSearch(t *testing.T) {
	s := serve(t, false)
	ctx := browser(t, 1280, 900)

	do(t, ctx, chromedp.Navigate(s.url+"/instances"), chromedp.WaitVisible(chromedp.CSS(`#filter-query`)))
	do(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`#filter-query`), "amount > 1000 AND policy != 'POL-7731'"),
		chromedp.Click(chromedp.CSS(`#filter-apply`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr.instance[data-id="CLM-1003"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.instance[data-id="CLM-1002"]`)),
	)
	// CLM-1001 is over 1000 but on POL-7731; the loans have no policy, so
	// != is false for them; CLM-1003 and the refund are under 1000.
	if got, want := rows(t, ctx, `tr.instance`), []string{"CLM-1002", "CLM-1004"}; !equal(got, want) {
		t.Fatalf("instances matching the query: %v, want %v", got, want)
	}
	if loc := run(t, ctx, chromedp.Location()); !strings.Contains(loc, "q=amount") {
		t.Errorf("the query is not in the address: %s", loc)
	}
	if v := run(t, ctx, chromedp.Value(chromedp.CSS(`#filter-query`))); v != "amount > 1000 AND policy != 'POL-7731'" {
		t.Errorf("the query box holds %q after the search", v)
	}
	cells := run(t, ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('tr.instance[data-id="CLM-1002"] td.custom-status, tr.instance[data-id="CLM-1002"] td.attr'), c => c.textContent)`))
	// The declared attributes in name order: amount, approved, policy.
	if want := []string{"awaiting review", "4300", "", "POL-8812"}; !equal(cells, want) {
		t.Errorf("CLM-1002's custom status and attributes %q, want %q", cells, want)
	}
	// The count row counts the query's instances by status: CLM-1002
	// running, CLM-1004 terminated.
	counts := run(t, ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#status-counts a.count'), a => a.dataset.status + '=' + a.querySelector('.n').textContent)`))
	if want := []string{"running=1", "terminated=1"}; !equal(counts, want) {
		t.Errorf("status counts %v, want %v", counts, want)
	}

	// A count links to the list narrowed to its status, the query kept.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`#status-counts a.count[data-status="terminated"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr.instance[data-id="CLM-1002"]`)),
	)
	if got, want := rows(t, ctx, `tr.instance`), []string{"CLM-1004"}; !equal(got, want) {
		t.Errorf("the terminated count lists %v, want %v", got, want)
	}

	// A query that does not parse: the page says why, and lists nothing.
	do(t, ctx,
		chromedp.Clear(chromedp.CSS(`#filter-query`)),
		chromedp.SendKeys(chromedp.CSS(`#filter-query`), "amount >"),
		chromedp.Click(chromedp.CSS(`#filter-apply`)),
		chromedp.WaitVisible(chromedp.CSS(`#filter-problem`)),
	)
	if msg := run(t, ctx, chromedp.Text(chromedp.CSS(`#filter-problem`))); !strings.HasPrefix(msg, "query: ") {
		t.Errorf("problem %q", msg)
	}
	if got := rows(t, ctx, `tr.instance`); len(got) != 0 {
		t.Errorf("a bad query lists %v", got)
	}
}

func equal(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

// screenshots are the pages TestScreenshots takes: file name and path.
var screenshots = []struct{ file, path, wait string }{
	{"instances.png", "/instances", `#instances`},
	{"instance.png", "/instance?id=CLM-1003", `svg.timeline`},
	{"instance-incident.png", "/instance?id=REF-4001", `svg.timeline`},
	{"time-travel.png", "/instance?id=LOAN-2001&seq=7", `#projections`},
	{"deadletters.png", "/deadletters", `tr.letter`},
	{"tasks.png", "/tasks", `#tasks`},
	{"task.png", "/task?id=review-CLM-1003", `#audit-trail`},
}

// TestScreenshots writes PNG screenshots of the console's main pages into
// the directory CHRONICLE_SCREENSHOTS names; it is skipped without it.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("CHRONICLE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set CHRONICLE_SCREENSHOTS=DIR to write screenshots of the console into DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := serve(t, true)
	ctx := browser(t, 1280, 900)
	for _, shot := range screenshots {
		do(t, ctx, chromedp.Navigate(s.url+shot.path), chromedp.WaitVisible(chromedp.CSS(shot.wait)))
		png := run(t, ctx, chromedp.FullScreenshot(100))
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			t.Fatalf("%s: not a PNG", shot.file)
		}
		if err := os.WriteFile(filepath.Join(dir, shot.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(dir, shot.file), len(png))
	}
}
