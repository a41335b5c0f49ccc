package browsertest

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/demodata"
)

// TestWaiting opens the Waiting page from the menu, finds the key acme
// with its holder and its waiters in order, follows a waiter to its page
// to read why it waits, and follows its holder from there.
func TestWaiting(t *testing.T) {
	s := serveWith(t, false, func(d *demodata.Demo) {
		err := chronicle.RegisterWorkflow(d.Engine, "gate", func(ctx *chronicle.Context, in string) (string, error) {
			var out string
			err := ctx.WaitEvent("go", nil).Get(&out)
			return in + out, err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a-1", "a-2", "a-3"} {
			_, err := d.Engine.Start(context.Background(), "gate", id, &chronicle.StartOptions{
				InstanceID: id, Concurrency: &chronicle.Concurrency{Key: "acme", Limit: 1},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	ctx := browser(t, 1280, 900)

	do(t, ctx, chromedp.Navigate(s.url+"/instances"), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/waiting"]`)))
	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/waiting"]`)), chromedp.WaitVisible(chromedp.CSS(`#slots`)))
	if got, want := rows(t, ctx, `tr.slot-key`), []string{"acme"}; !equal(got, want) {
		t.Fatalf("keys with waiters %v, want %v", got, want)
	}
	holders := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('tr.slot-key a.holder'), a => a.textContent)`))
	waiters := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('tr.slot-key a.waiter'), a => a.textContent)`))
	if !equal(holders, []string{"a-1"}) || !equal(waiters, []string{"a-2", "a-3"}) {
		t.Fatalf("holders %v and waiters %v, want [a-1] and [a-2 a-3]", holders, waiters)
	}

	do(t, ctx, chromedp.Click(chromedp.CSS(`tr.slot-key a.waiter[href="/instance?id=a-3"]`)), chromedp.WaitVisible(chromedp.CSS(`#waiting`)))
	if why := run(t, ctx, chromedp.Text(chromedp.CSS(`#waiting`))); !strings.Contains(why, "concurrency key acme (limit 1), position 2") || !strings.Contains(why, "behind a-1") {
		t.Errorf("a-3 says it waits %q", why)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`#waiting a.holder`)), chromedp.WaitVisible(chromedp.CSS(`#timeline-section`)))
	if h1 := run(t, ctx, chromedp.Text(chromedp.CSS(`h1`))); !strings.HasPrefix(h1, "a-1") {
		t.Errorf("the holder's link leads to %q", h1)
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#waiting').length`)); n != 0 {
		t.Error("the holder's page says it waits")
	}
}
