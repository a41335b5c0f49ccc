package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/demodata"
)

// reloadUntil reloads the page until the text of sel holds want, for at
// most 30 seconds: an action takes effect once the demo engine's round
// has applied it.
func reloadUntil(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := run(t, ctx, chromedp.Text(chromedp.CSS(sel)))
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still says %q 30s later, want %q", sel, got, want)
		}
		do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(sel)))
	}
}

// TestScheduleAndBatchActions pauses a schedule with a note from its
// page, then pauses and cancels a batch from the Batches page, and sees
// each change recorded with the acting user.
func TestScheduleAndBatchActions(t *testing.T) {
	s := serve(t, true)
	ctx := browser(t, 1280, 900)
	e := s.demo.Engine
	if err := e.CreateSchedule(ctx, "nightly", chronicle.ScheduleOptions{
		Spec: chronicle.ScheduleSpec{Cron: "0 2 * * *"}, Workflow: demodata.ClaimWorkflow, Input: chronicle.RawPayload(nil), Actor: "ops",
	}); err != nil {
		t.Fatal(err)
	}
	// One claim every 100 seconds: the batch is still running when the
	// test acts on it.
	if _, err := e.StartBatch(ctx, chronicle.BatchOptions{
		ID: "slow", Action: chronicle.BatchRedrive, Workflow: demodata.ClaimWorkflow, Reason: "after the outage", Actor: "bob", Rate: 0.01,
	}); err != nil {
		t.Fatal(err)
	}

	// Pause the schedule with a note.
	do(t, ctx,
		chromedp.Navigate(s.url+"/schedules"),
		chromedp.WaitVisible(chromedp.CSS(`tr.schedule[data-id="nightly"]`)),
		chromedp.Click(chromedp.CSS(`tr.schedule[data-id="nightly"] a[href^="/schedule?"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedule-actions`)),
		chromedp.SendKeys(chromedp.CSS(`form.action-schedule-pause input[name="note"]`), "month-end freeze"),
		chromedp.Click(chromedp.CSS(`form.action-schedule-pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	)
	if notice := run(t, ctx, chromedp.Text(chromedp.CSS(`#notice`))); notice != "Schedule nightly paused by ops." {
		t.Errorf("notice %q", notice)
	}
	reloadUntil(t, ctx, `h1`, "paused")
	if note := run(t, ctx, chromedp.Text(chromedp.CSS(`#pause-note`))); note != "month-end freeze" {
		t.Errorf("pause note %q", note)
	}
	d, err := e.DescribeSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Changes[len(d.Changes)-1]; c.Kind != "pause" || c.Actor != "user:ops" || c.Note != "month-end freeze" {
		t.Errorf("last change %+v", c)
	}

	// Pause, then cancel the batch.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/batches"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.batch[data-id="slow"]`)),
		chromedp.Click(chromedp.CSS(`tr.batch[data-id="slow"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#batch-actions`)),
		chromedp.SendKeys(chromedp.CSS(`form.action-batch-pause input[name="note"]`), "too much load"),
		chromedp.Click(chromedp.CSS(`form.action-batch-pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	)
	if notice := run(t, ctx, chromedp.Text(chromedp.CSS(`#notice`))); notice != "Batch slow paused by ops." {
		t.Errorf("notice %q", notice)
	}
	reloadUntil(t, ctx, `h1 .status`, "paused")
	// Load the page afresh, without the pause's notice, and cancel.
	do(t, ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`form.action-batch-resume`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#notice`)),
		chromedp.SendKeys(chromedp.CSS(`form.action-batch-cancel input[name="note"]`), "wrong filter"),
		chromedp.Click(chromedp.CSS(`form.action-batch-cancel button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	)
	if notice := run(t, ctx, chromedp.Text(chromedp.CSS(`#notice`))); notice != "Batch slow cancelled by ops." {
		t.Errorf("notice %q", notice)
	}
	reloadUntil(t, ctx, `h1 .status`, "cancelled")
	if got, want := rows(t, ctx, `tr.change`), []string{"start", "pause", "cancel"}; !equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	b, err := e.DescribeBatch(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Changes[len(b.Changes)-1]; b.State != chronicle.BatchCancelled || c.Actor != "user:ops" || c.Note != "wrong filter" {
		t.Errorf("batch %s, last change %+v", b.State, c)
	}
}

// TestRerunFromTheInstancePage reruns the failed identity check of
// KYC-3001 from its failed activity with a renewed passport, from the
// rerun form of its page, and follows the links between the old and the
// new execution in its events.
func TestRerunFromTheInstancePage(t *testing.T) {
	s := serve(t, true)
	ctx := browser(t, 1280, 900)
	do(t, ctx,
		chromedp.Navigate(s.url+"/instance?id=KYC-3001"),
		chromedp.WaitVisible(chromedp.CSS(`form#rerun`)),
		chromedp.SendKeys(chromedp.CSS(`form#rerun input[name="from_seq"]`), "4"),
		chromedp.SendKeys(chromedp.CSS(`form#rerun input[name="input"]`), `{"customer":"C-5521","name":"Charles Babbage","passport":"P7654321"}`),
		chromedp.SendKeys(chromedp.CSS(`form#rerun input[name="reason"]`), "passport renewed"),
		chromedp.SendKeys(chromedp.CSS(`form#rerun input[name="ticket"]`), "KYC-88"),
		chromedp.Click(chromedp.CSS(`form#rerun button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	)
	if notice := run(t, ctx, chromedp.Text(chromedp.CSS(`#notice`))); !strings.HasPrefix(notice, "Instance KYC-3001 rerun from seq 4 by ops as execution ") {
		t.Errorf("notice %q", notice)
	}
	reloadUntil(t, ctx, `h1 .status`, "completed")
	links := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('a.lineage'), a => a.textContent + ' ' + a.getAttribute('href'))`))
	if want := []string{"new execution at #8 #seq-8", "reran from #4 #seq-4"}; !equal(links, want) {
		t.Errorf("lineage links %v, want %v", links, want)
	}
	events, err := s.demo.Engine.History(ctx, "KYC-3001")
	if err != nil {
		t.Fatal(err)
	}
	if e := events[6]; e.Kind != "ExecutionRerun" || e.Actor != "user:ops" {
		t.Errorf("seq 7 is %s by %s, want the rerun's record by user:ops", e.Kind, e.Actor)
	}
}
