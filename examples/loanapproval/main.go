// Command loanapproval is a guided tour of Chronicle: two loan applications
// run through one durable workflow on the embedded memory store, and the
// program prints what happens, the decisions, and each instance's
// hash-chained history as a timeline.
//
// The workflow (workflow.go) shows the building blocks of the library:
//
//   - an activity that fails and is retried by the engine's retry policy
//     (credit-check);
//   - a saga: funds are reserved, and released again when the application
//     is rejected (reserve-funds, release-funds);
//   - a sub-workflow with an activity of its own (property-valuation);
//   - external signals raised by a portal through the client API, one of
//     them sent twice with the same idempotency key and recorded once
//     (documents-uploaded, offer-signed);
//   - a durable timer used as a deadline (the document upload window).
//
// Run it with `make demo` or `go run ./examples/loanapproval`; it takes
// about three seconds. activities.go holds the activities and portal.go
// the simulated customer portal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/provider/memory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// The demo needs a few seconds; a minute means something is stuck.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loanapproval:", err)
		os.Exit(1)
	}
}

// The two applications. Both get a 2-second document window; Ada uploads at
// once, Charles never does.
var applications = []Application{
	{
		ID: "APP-1001", Applicant: "Ada Lovelace", Email: "ada@example.org", Amount: 240000,
		Property: "12 Analytical Row, London", DocumentWindow: 2 * time.Second, OfferWindow: 30 * time.Second,
	},
	{
		ID: "APP-1002", Applicant: "Charles Babbage", Email: "charles@example.org", Amount: 300000,
		Property: "1 Difference Lane, London", DocumentWindow: 2 * time.Second, OfferWindow: 30 * time.Second,
	},
}

// run runs the demo and writes its report to w.
func run(ctx context.Context, w io.Writer) error {
	_, err := demo(ctx, w)
	return err
}

// outcome is what the demo produced; the test checks it.
type outcome struct {
	// Decisions are the results of the applications, by instance id.
	Decisions map[string]Decision
	// Histories holds every instance's history, children included.
	Histories map[string][]history.Event
	// Reserved are the treasury's reservations at the end.
	Reserved []reservation
}

func demo(ctx context.Context, w io.Writer) (*outcome, error) {
	out := newConsole(w)
	intro(out)

	// The engine runs on a store. The memory store keeps everything in
	// this process; a PostgreSQL, Oracle or MongoDB store would keep it in
	// the database, and any number of processes could share it.
	store := memory.New(memory.Options{})
	engine, err := chronicle.New(store, chronicle.Options{
		NodeID:   "demo",              // recorded as the actor "worker:demo"
		Observer: &observer{out: out}, // prints what the engine decides about retries
		// The defaults suit production; the demo stops faster.
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	inbox := make(chan notice, 16)
	treasury := newTreasury()
	acts := &activities{
		out: out, treasury: treasury, portal: inbox,
		scores: map[string]int{"Ada Lovelace": 742, "Charles Babbage": 688},
		values: map[string]int{"12 Analytical Row, London": 400000, "1 Difference Lane, London": 450000},
	}
	if err := register(engine, acts, &workflows{out: out}); err != nil {
		return nil, err
	}

	// Run starts the engine's workers: they pick up rounds (resumes of
	// workflow code) and activity tasks until runCtx ends. The portal runs
	// beside it, as another system would.
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopRun()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Run returns nil once runCtx ends and the work in flight is
		// drained; its only error, ErrEngineRunning, cannot happen to
		// this engine, which nothing else runs.
		_ = engine.Run(runCtx)
	}()
	portalErr := make(chan error, 1)
	p := &portal{engine: engine, out: out, inbox: inbox, applicants: map[string]applicant{
		"APP-1001": {User: "ada.lovelace", Uploads: true},
		"APP-1002": {User: "charles.babbage", Uploads: false},
	}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.serve(runCtx); err != nil {
			portalErr <- err
			stopRun() // ends the waits below
		}
	}()

	out.section("What happens")
	for _, app := range applications {
		// The instance id is the business reference: starting the same
		// application twice is refused (chronicle.ErrInstanceExists).
		if _, err := engine.Start(ctx, loanApprovalWorkflow, app, &chronicle.StartOptions{
			InstanceID: app.ID, BusinessKey: app.ID, Version: "1", Actor: "clerk.ines",
		}); err != nil {
			return nil, err
		}
		out.log("client", "started %s for %s: %s for %s", loanApprovalWorkflow, app.ID, euros(app.Amount), app.Applicant)
	}

	// Wait blocks until an instance ends. Each application is independent;
	// they run concurrently.
	res := &outcome{Decisions: map[string]Decision{}, Histories: map[string][]history.Event{}}
	for _, app := range applications {
		inst, err := engine.Wait(runCtx, app.ID)
		if err != nil {
			select {
			case perr := <-portalErr:
				return nil, perr
			default:
				return nil, fmt.Errorf("wait for %s: %w", app.ID, err)
			}
		}
		var d Decision
		// Result decodes the workflow's return value; for a failed
		// instance it returns the failure as a *chronicle.WorkflowError.
		if err := inst.Result(&d); err != nil {
			return nil, err
		}
		res.Decisions[app.ID] = d
	}
	// Both instances are done: stop the engine so that its narration does
	// not mix with the report.
	stopRun()
	wg.Wait()
	select {
	case err := <-portalErr:
		return nil, err
	default:
	}
	res.Reserved = treasury.snapshot()

	out.section("Results")
	for _, app := range applications {
		describe(out, app, res.Decisions[app.ID])
	}
	out.printf("\nTreasury:\n")
	for _, app := range applications {
		id, held := "RES-"+app.ID, "released by the saga's compensation"
		for _, r := range res.Reserved {
			if r.ID == id {
				held = euros(r.Amount) + " still reserved for the approved loan"
			}
		}
		out.printf("  %s  %s\n", id, held)
	}

	// The history is the record of truth: everything above can be rebuilt
	// from it. engine.History returns it; internal/timeline prints it.
	out.section("Histories")
	out.printf("Each row is one event of an instance's append-only history. ACTOR is who\n" +
		"caused it: the clerk who started the application, the applicant who sent a\n" +
		"signal, or the engine's worker. TurnStarted marks a resume of the workflow\n" +
		"code; \"→ #n\" points at the event that a completion answers. The credit\n" +
		"check's two attempts show as one ActivityScheduled and one ActivityCompleted\n" +
		"\"attempt 2\": retries happen in the task queue; history records the outcome.\n")
	var order []string
	for _, app := range applications {
		events, err := engine.History(ctx, app.ID)
		if err != nil {
			return nil, err
		}
		order = append(order, app.ID)
		res.Histories[app.ID] = events
		for _, child := range children(events) {
			childEvents, err := engine.History(ctx, child)
			if err != nil {
				return nil, err
			}
			order = append(order, child)
			res.Histories[child] = childEvents
		}
	}
	for _, id := range order {
		events := res.Histories[id]
		title := fmt.Sprintf("%s (%d events)", id, len(events))
		if strings.Contains(id, "/") {
			title = fmt.Sprintf("%s, the property-valuation child of %s (%d events)", id, id[:strings.Index(id, "/")], len(events))
		}
		out.printf("\n%s\n", title)
		if err := out.timeline(events); err != nil {
			return nil, err
		}
	}

	// Every event's hash covers the previous event's hash: changing,
	// removing or reordering any stored event breaks the chain from there
	// on, and history.Verify names the first broken event.
	out.section("Checks")
	total := 0
	for _, id := range order {
		if err := history.Verify(res.Histories[id]); err != nil {
			return nil, err
		}
		total += len(res.Histories[id])
	}
	out.printf("Hash chains verified: %d histories, %d events, each SHA-256-chained to the one before.\n", len(order), total)
	uploads := count(res.Histories["APP-1001"], history.KindEventRaised, documentsSignal)
	recorded := fmt.Sprintf("%d times", uploads)
	if uploads == 1 {
		recorded = "once"
	}
	out.printf("%s was raised twice for APP-1001 with one idempotency key and recorded %s.\n", documentsSignal, recorded)

	out.section("Next")
	out.printf("Read examples/loanapproval/workflow.go: the workflow as you would write it.\n" +
		"Then docs/architecture.md (rounds, history, providers) and docs/semantics.md\n" +
		"(what is guaranteed), and `go doc github.com/chronicleflow/chronicle` for the API.\n")
	return res, out.err()
}

// intro explains what the demo is about to do.
func intro(out *console) {
	out.printf(`Chronicle demo: loan approval
=============================

Two applications run through the same durable workflow, "loan-approval":

  1. credit-check        activity; the bureau times out on the first try and
                         the engine retries it (after ~100ms)
  2. reserve-funds       activity, undone by release-funds if the loan is rejected
  3. property-valuation  sub-workflow with an activity of its own
  4. request-documents   activity that emails an upload link, then a wait for the
                         "documents-uploaded" signal with a deadline: a durable timer
                         (2 seconds here, 14 days in a real bank)
  5. issue-offer         activity, then a wait for the "offer-signed" signal

APP-1001 (Ada Lovelace) uploads her documents (her browser sends the upload
twice) and signs the offer. APP-1002 (Charles Babbage) never uploads: the
deadline fires, the application is rejected and the saga releases the funds.

Everything runs in this process on the embedded memory store, with the wall
clock. It takes about three seconds.
`)
}

// describe prints one application's decision.
func describe(out *console, app Application, d Decision) {
	verdict := "rejected"
	if d.Approved {
		verdict = "approved"
	}
	out.printf("%s  %s  %s, %s: credit score %d", app.ID, verdict, app.Applicant, euros(app.Amount), d.CreditScore)
	if d.PropertyValue > 0 {
		out.printf(", property valued %s (loan-to-value %d%%)", euros(d.PropertyValue), app.Amount*100/d.PropertyValue)
	}
	out.printf("\n          %s", d.Reason)
	if o := d.Offer; o != nil {
		out.printf("; %s at %.1f%% over %d years", euros(o.Amount), o.RatePercent, o.Years)
	}
	out.printf("\n")
}

// children returns the instance ids of the sub-workflows a history started.
func children(events []history.Event) []string {
	var ids []string
	for i := range events {
		if events[i].Kind != history.KindSubWorkflowScheduled {
			continue
		}
		if a, err := events[i].Attributes(); err == nil {
			ids = append(ids, a.(*history.SubWorkflowScheduled).InstanceID)
		}
	}
	return ids
}

// count returns how many events of kind k a history holds; for signals
// with a name other than "", only those named name.
func count(events []history.Event, k history.Kind, name string) int {
	n := 0
	for i := range events {
		if events[i].Kind != k {
			continue
		}
		if k == history.KindEventRaised && name != "" {
			a, err := events[i].Attributes()
			if err != nil || a.(*history.EventRaised).Name != name {
				continue
			}
		}
		n++
	}
	return n
}

// observer prints what the engine decides about activity attempts. Its
// methods run on the engine's workers and must not block; printing is
// quick enough.
type observer struct {
	out *console
}

// Round implements chronicle.Observer. Rounds are the engine's unit of
// work (one resume of one instance); the demo reports only the unusual.
func (o *observer) Round(s chronicle.RoundStats) {
	if s.Err != nil {
		o.out.log("engine", "round of %s failed and will be retried: %v", s.InstanceID, s.Err)
	}
	if s.DeadLettered > 0 {
		o.out.log("engine", "round of %s moved %d message(s) to the dead letters", s.InstanceID, s.DeadLettered)
	}
}

// Activity implements chronicle.Observer.
func (o *observer) Activity(s chronicle.ActivityStats) {
	switch s.Outcome {
	case "retry":
		o.out.log("engine", "%s attempt %d failed; the retry policy schedules attempt %d", s.Name, s.Attempt, s.Attempt+1)
	case "failed", "dead-lettered":
		o.out.log("engine", "%s attempt %d: %s: %v", s.Name, s.Attempt, s.Outcome, s.Err)
	}
}

// console serializes the demo's output: activities, the portal and the
// engine's observer print from their own goroutines.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	werr  error
}

func newConsole(w io.Writer) *console { return &console{w: w, start: time.Now()} }

// printf prints as fmt.Printf does.
func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(fmt.Sprintf(format, args...))
}

// log prints one line of narration: the time since the start, who speaks,
// and what happened.
func (c *console) log(who, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(fmt.Sprintf("%5.2fs  %-10s %s\n", time.Since(c.start).Seconds(), "["+who+"]", fmt.Sprintf(format, args...)))
}

// section prints a heading.
func (c *console) section(title string) {
	c.printf("\n%s\n%s\n\n", title, strings.Repeat("-", len(title)))
}

// timeline prints a history, indented.
func (c *console) timeline(events []history.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	if err := timeline.Write(&b, events, timeline.Options{Prefix: "  "}); err != nil {
		return err
	}
	c.write(b.String())
	return nil
}

func (c *console) write(s string) {
	if c.werr != nil {
		return
	}
	_, c.werr = io.WriteString(c.w, s)
}

// err returns the first write error.
func (c *console) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return fmt.Errorf("write report: %w", c.werr)
	}
	return nil
}

var _ chronicle.Observer = (*observer)(nil)
