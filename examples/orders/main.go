// Command orders runs four orders through one durable order workflow on
// the embedded memory store and prints what happens, the outcomes and two
// histories.
//
// The workflow (workflow.go) shows:
//
//   - a saga: stock is reserved and the payment taken, and both are undone,
//     last first, when the order is cancelled, rejected or expires;
//   - an activity retried by its retry policy (the payment gateway times
//     out once);
//   - a human task with a due time (a sales manager approves large
//     orders) and a durable auto-cancel timer;
//   - a cancellation signal from the customer;
//   - a 14-day return window before the order is settled (the demo
//     shortens it to two seconds);
//   - search attributes: each order carries its customer number, amount
//     and region from its start, and its tracking number once shipped;
//     its custom status says where its saga is ("paid", "shipped",
//     "refunded", "cancelled"); the demo ends by finding orders by custom
//     status and amount (ListInstances with Where) and counting them by
//     custom status (CountInstances);
//   - typed handles: the workflow is a chronicle.Workflow[Order, Result],
//     the cancellation a chronicle.Signal[Cancellation] and the approval a
//     chronicle.HumanTask[ApprovalRequest, Approval], so the compiler
//     checks what the shop, the customer and the manager pass;
//   - a schedule: the demo creates the nightly settlement report
//     (settlement.go), which counts the day's orders by custom status at
//     02:00 London time, and prints its next firings;
//   - flow control: each order starts with a per-customer concurrency
//     limit (at most two orders of one customer are processed at once;
//     a third waits until one of them ends, while other customers'
//     orders run) and express orders with a higher priority
//     (orderStartOptions in workflow.go; flow_test.go shows a third
//     order waiting).
//
// Run it with `go run ./examples/orders`; it takes about two seconds. With
// -store and a postgres:// URL it runs on PostgreSQL instead, in the
// schema -schema names (migrated first, as chronicle migrate does), and
// leaves the orders there for the chronicle tool and console to find:
//
//	go run ./examples/orders -store postgres://127.0.0.1:5432/test -schema shop
//
// The orders have fixed ids, so each run needs a fresh schema.
//
// kit_test.go tests the same workflow with the chronicletest kit, on a
// virtual clock, with the real 14-day window; replay_test.go replays the
// histories this demo recorded (testdata/histories) against the code, as
// a replay test in CI does before a deploy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

func main() {
	storeURL := flag.String("store", "memory", `run on this store: "memory" (the embedded memory store) or a postgres:// URL`)
	schema := flag.String("schema", "", "with a postgres:// -store, the schema to migrate and run in (default "+postgres.DefaultSchema+")")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "orders: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	store, closeStore, err := openStore(ctx, *storeURL, *schema)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(2)
	}
	_, err = demoOn(ctx, os.Stdout, store)
	closeStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// errUnsupportedStore is the error of a -store value the demo cannot run
// on.
var errUnsupportedStore = errors.New(`unsupported -store: use "memory" or a postgres:// URL`)

// openStore opens the store the demo runs on, with the function that
// closes it: a new memory store for "memory", or PostgreSQL for a
// postgres:// (postgresql://) URL, its tables in schema ("" for
// postgres.DefaultSchema), which it creates or migrates to the latest
// version first, as chronicle migrate does.
func openStore(ctx context.Context, url, schema string) (provider.Store, func(), error) {
	switch {
	case url == "memory":
		if schema != "" {
			return nil, nil, errors.New("-schema applies to a postgres:// -store only")
		}
		return memory.New(memory.Options{}), func() {}, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		store, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MigrateOnStart: true})
		if err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", redact(url), err)
		}
		return store, store.Close, nil
	}
	return nil, nil, fmt.Errorf("%w, not %q", errUnsupportedStore, redact(url))
}

// redact hides the password of a store URL.
func redact(s string) string {
	u, err := neturl.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Short windows for the demo; the shop's are a day, three days and 14
// days.
const (
	demoApprovalDue     = time.Second
	demoApprovalTimeout = 1500 * time.Millisecond
	demoReturnWindow    = 2 * time.Second
)

// demoWorkflows returns the order workflow as the demo registers it,
// narrating with say (nil is silent) and retrying the payment after 200ms,
// 400ms, ... The recorded histories in testdata/histories were written by
// it, and replay_test.go replays them against it.
func demoWorkflows(say func(format string, args ...any)) *workflows {
	return &workflows{
		say:   say,
		retry: chronicle.RetryPolicy{MaxAttempts: 5, InitialInterval: 200 * time.Millisecond, Multiplier: 2},
	}
}

// orders are the demo's orders. Ada's is express and her payment times
// out once; Charles's order is approved; Grace cancels while hers awaits approval; nobody
// approves Alan's.
var orders = []Order{
	{ID: "ORD-1001", Customer: "Ada", Address: "12 Analytical Row, London", Items: []Item{{SKU: "NOTEBOOK-A5", Quantity: 3}}, Total: 8990, Express: true},
	{ID: "ORD-1002", Customer: "Charles", Address: "1 Difference Lane, London", Items: []Item{{SKU: "LATHE-200", Quantity: 1}}, Total: 129900},
	{ID: "ORD-1003", Customer: "Grace", Address: "7 Compiler Close, Arlington", Items: []Item{{SKU: "TERMINAL-3270", Quantity: 2}}, Total: 245000},
	{ID: "ORD-1004", Customer: "Alan", Address: "3 Bletchley Road, Milton Keynes", Items: []Item{{SKU: "BOMBE-KIT", Quantity: 1}}, Total: 180000},
}

// customers are the shop's customer numbers: the customer search
// attribute holds the number, never the name.
var customers = map[string]string{"Ada": "C-0815", "Charles": "C-1834", "Grace": "C-1906", "Alan": "C-1912"}

// regions are the regions the orders ship to.
var regions = map[string]string{"ORD-1001": "uk", "ORD-1002": "uk", "ORD-1003": "us", "ORD-1004": "uk"}

// orderAttributes are the search attributes the shop starts an order with.
func orderAttributes(o Order) map[string]any {
	attrs := map[string]any{"customer": customers[o.Customer], "amount": float64(o.Total) / 100}
	if r, ok := regions[o.ID]; ok {
		attrs["region"] = r
	}
	return attrs
}

// outcome is what the demo produced; its test checks it.
type outcome struct {
	Results   map[string]Result
	Histories map[string][]history.Event
	Books     books
	// Found are the ids the demo's search found, ByStatus its count by
	// custom status.
	Found    []string
	ByStatus map[string]int64
	// Listed are the instances the search found, as ListInstances
	// returned them.
	Listed []*chronicle.Instance
	// Nightly is the settlement schedule as DescribeSchedule returned it
	// after the demo created it.
	Nightly *chronicle.ScheduleDescription
}

// bigOrdersQuery is the demo's search: the orders of €1,000 or more that
// went through (ListInstances with Where; docs/search.md).
const bigOrdersQuery = "amount >= 1000 AND custom_status IN ('shipped', 'settled')"

// demo runs the demo on a new memory store, writing its report to w.
func demo(ctx context.Context, w io.Writer) (*outcome, error) {
	return demoOn(ctx, w, memory.New(memory.Options{}))
}

// demoOn runs the demo on store, which must hold no orders yet, writing
// its report to w. The store stays open, with the orders in it.
func demoOn(ctx context.Context, w io.Writer, store provider.Store) (*outcome, error) {
	out := newConsole(w)
	out.printf("Chronicle demo: orders\n======================\n\n" +
		"Four orders run through the durable \"order\" workflow: reserve stock, take the\n" +
		"payment, get a manager's approval for orders of €1,000 or more (a task due in\n" +
		"a day, cancelled after three), ship, and settle once the 14-day return window\n" +
		"has passed. The demo shortens the windows to seconds.\n")

	engine, err := chronicle.New(store, chronicle.Options{NodeID: "shop", ShutdownTimeout: 5 * time.Second,
		SearchAttributes: searchAttributes})
	if err != nil {
		return nil, err
	}
	inbox := make(chan Notice, 16)
	s := newShop(func(who, format string, args ...any) { out.log(who, format, args...) }, inbox, map[string]int{"Ada": 1})
	wf := demoWorkflows(func(format string, args ...any) { out.log("workflow", format, args...) })
	if err := errors.Join(register(engine, s, wf), registerSettlement(engine)); err != nil {
		return nil, err
	}

	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopRun()
		wg.Wait()
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = engine.Run(runCtx) // returns nil once runCtx ends
	}()
	officeErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		if err := backOffice(runCtx, engine, out, inbox); err != nil {
			officeErr <- err
			stopRun()
		}
	}()

	out.section("What happens")
	// orderWorkflow is typed: Start takes an Order, and the handles it
	// returns wait for a Result.
	runs := make([]chronicle.Handle[Result], 0, len(orders))
	for _, o := range orders {
		o.ApprovalDue, o.ApprovalTimeout, o.ReturnWindow = demoApprovalDue, demoApprovalTimeout, demoReturnWindow
		run, err := orderWorkflow.Start(ctx, engine, o, orderStartOptions(o))
		if errors.Is(err, chronicle.ErrInstanceExists) {
			return nil, fmt.Errorf("start %s: %w (the store holds a previous run: use a fresh schema)", o.ID, err)
		}
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		if o.Express {
			out.log("client", "%s ordered %s for %s, express", o.Customer, o.ID, cents(o.Total))
		} else {
			out.log("client", "%s ordered %s for %s", o.Customer, o.ID, cents(o.Total))
		}
	}
	res := &outcome{Results: map[string]Result{}, Histories: map[string][]history.Event{}}
	for _, run := range runs {
		r, err := run.Wait(runCtx)
		if err != nil {
			select {
			case oerr := <-officeErr:
				return nil, oerr
			default:
				return nil, fmt.Errorf("wait for %s: %w", run.ID, err)
			}
		}
		res.Results[run.ID] = r
		if res.Histories[run.ID], err = engine.History(ctx, run.ID); err != nil {
			return nil, err
		}
	}
	stopRun()
	wg.Wait()
	select {
	case err := <-officeErr:
		return nil, err
	default:
	}
	res.Books = s.books()

	out.section("Outcomes")
	for _, o := range orders {
		r := res.Results[o.ID]
		out.printf("%s  %-14s %s", o.ID, r.Status, cents(o.Total))
		if r.Reason != "" {
			out.printf("  %s", r.Reason)
		}
		if r.Tracking != "" {
			out.printf("  shipped as %s, paid by %s", r.Tracking, r.Payment)
		}
		out.printf("\n")
	}
	out.printf("\nStill reserved: %s\nStill charged:  %s\nSettled:        %s\n",
		list(res.Books.Reserved), list(res.Books.Charged), list(res.Books.Settled))

	if err := search(ctx, engine, out, res); err != nil {
		return nil, err
	}
	if err := nightly(ctx, engine, out, res); err != nil {
		return nil, err
	}

	out.section("Histories")
	out.printf("ORD-1001: the payment's two attempts are one ActivityScheduled and one\n" +
		"ActivityCompleted \"attempt 2\"; the return window is a timer.\n" +
		"ORD-1003: the customer's cancel-order signal wins over the approval task and\n" +
		"the auto-cancel timer; the saga refunds, then releases the stock.\n")
	for _, id := range []string{"ORD-1001", "ORD-1003"} {
		out.printf("\n%s (%d events)\n", id, len(res.Histories[id]))
		if err := out.timeline(res.Histories[id]); err != nil {
			return nil, err
		}
	}
	return res, out.err()
}

// search finds orders with the query API: the large orders that went
// through, and every order counted by its custom status.
func search(ctx context.Context, engine *chronicle.Engine, out *console, res *outcome) error {
	out.section("Search")
	found, err := engine.ListInstances(ctx, chronicle.InstanceFilter{Workflow: string(orderWorkflow), Where: bigOrdersQuery})
	if err != nil {
		return err
	}
	out.printf("%s:\n", bigOrdersQuery)
	for _, in := range found {
		amount, _ := in.SearchAttributes["amount"].(float64)
		out.printf("  %s  %-9s %-10s %-3s %s\n", in.ID, in.CustomStatusText, cents(int(math.Round(amount*100))), in.SearchAttributes["region"], in.SearchAttributes["tracking"])
		res.Found = append(res.Found, in.ID)
		res.Listed = append(res.Listed, in)
	}
	counts, err := engine.CountInstances(ctx, chronicle.CountFilter{Where: "workflow = 'order'", By: "custom_status"})
	if err != nil {
		return err
	}
	out.printf("\nOrders by custom status:\n")
	res.ByStatus = map[string]int64{}
	for _, c := range counts {
		status, _ := c.Value.(string)
		out.printf("  %-10s %d\n", status, c.Count)
		res.ByStatus[status] = c.Count
	}
	return nil
}

// nightly creates the schedule of the nightly settlement report
// (settlement.go) and prints it with its next firings. The demo ends
// before the first night; kit_test.go runs three.
func nightly(ctx context.Context, engine *chronicle.Engine, out *console, res *outcome) error {
	out.section("Nightly settlement report")
	opts := settlementOptions()
	if err := engine.CreateSchedule(ctx, settlementSchedule, opts); err != nil {
		return fmt.Errorf("create schedule %s: %w", settlementSchedule, err)
	}
	d, err := engine.DescribeSchedule(ctx, settlementSchedule)
	if err != nil {
		return err
	}
	res.Nightly = d
	out.printf("Created schedule %q: workflow %q at %q in %s, overlap %s, catch-up window %s.\n",
		d.ID, d.Workflow, d.Spec.Cron, d.Spec.TimeZone, d.Overlap, d.CatchupWindow)
	loc, err := time.LoadLocation(d.Spec.TimeZone)
	if err != nil {
		return err
	}
	out.printf("Next firings:\n")
	for _, n := range d.Next {
		out.printf("  %s  %s\n", n.In(loc).Format("Mon 2006-01-02 15:04 MST"), chronicle.ScheduleInstanceID(d.ID, n))
	}
	return nil
}

// backOffice plays the people who get the shop's notices: the sales
// manager approves ORD-1002 and is on holiday for ORD-1004; Grace, told her
// order awaits approval, cancels ORD-1003.
func backOffice(ctx context.Context, engine *chronicle.Engine, out *console, inbox <-chan Notice) error {
	manager := chronicle.User{ID: "mia", Roles: []string{"sales-manager"}}
	for {
		var n Notice
		select {
		case <-ctx.Done():
			return nil
		case n = <-inbox:
		}
		switch n.Order {
		case "ORD-1002":
			out.log("manager", "mia approves %s (task %s)", n.Order, shortID(n.TaskID))
			if err := approvalTask.Complete(ctx, engine, n.TaskID, Approval{Approved: true, Note: "regular customer"}, manager); err != nil {
				return err
			}
		case "ORD-1003":
			out.log("customer", "Grace cancels %s while it awaits approval", n.Order)
			if err := cancelSignal.Raise(ctx, engine, n.Order, Cancellation{Reason: "found it cheaper"},
				&chronicle.RaiseOptions{IdempotencyKey: "cancel-" + n.Order, Actor: "grace"}); err != nil {
				return err
			}
		default:
			out.log("manager", "nobody looks at %s: the manager is on holiday", n.Order)
		}
	}
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8] + "…"
	}
	return id
}

// console serializes the demo's output, which activities, the back office
// and workflow code write from their own goroutines.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	werr  error
}

func newConsole(w io.Writer) *console { return &console{w: w, start: time.Now()} }

func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(fmt.Sprintf(format, args...))
}

// log prints a line of narration: seconds since the start, who, what.
func (c *console) log(who, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(fmt.Sprintf("%5.2fs  %-11s %s\n", time.Since(c.start).Seconds(), "["+who+"]", fmt.Sprintf(format, args...)))
}

func (c *console) section(title string) {
	c.printf("\n%s\n%s\n\n", title, strings.Repeat("-", len(title)))
}

func (c *console) timeline(events []history.Event) error {
	var b strings.Builder
	if err := timeline.Write(&b, events, timeline.Options{Prefix: "  "}); err != nil {
		return err
	}
	c.printf("%s", b.String())
	return nil
}

func (c *console) write(s string) {
	if c.werr == nil {
		_, c.werr = io.WriteString(c.w, s)
	}
}

func (c *console) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return fmt.Errorf("write report: %w", c.werr)
	}
	return nil
}
