package oracle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// The tests of this file run every method of the store on a fake
// database/sql driver that checks what Oracle would check before running
// a statement: that every bind of the SQL text gets a value and every
// value a bind (ORA-01008, ORA-01036), each named once. It answers
// queries with rows scripted per statement, so the methods run their
// whole course; what the statements do is for the gated suites on a real
// server.

// fakeRows are the rows the fake answers a query with, matched by a
// substring of its text; the first match wins.
type fakeRows struct {
	match string
	cols  []string
	rows  [][]driver.Value
}

type fakeDB struct {
	mu       sync.Mutex
	answers  []fakeRows
	affected int64
	// seen are the statements run, and "COMMIT" and "ROLLBACK"; args
	// their binds by name (nil for the ends of transactions).
	seen []string
	args []map[string]any
	errs []error
}

// record notes the end of a transaction.
func (f *fakeDB) record(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, what)
	f.args = append(f.args, nil)
	return nil
}

func (f *fakeDB) Connect(context.Context) (driver.Conn, error) { return &fakeConn{db: f}, nil }
func (f *fakeDB) Driver() driver.Driver                        { return nil }

// check compares the binds of query with the names of args.
func (f *fakeDB) check(query string, args []driver.NamedValue) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, query)
	binds := map[string]any{}
	for _, a := range args {
		binds[strings.ToLower(a.Name)] = a.Value
	}
	f.args = append(f.args, binds)
	want := map[string]bool{}
	for _, b := range bindNames(query) {
		want[strings.ToLower(b)] = true
	}
	got := map[string]bool{}
	var problems []string
	for _, a := range args {
		name := strings.ToLower(a.Name)
		if name == "" {
			problems = append(problems, fmt.Sprintf("positional argument %d", a.Ordinal))
		}
		if got[name] {
			problems = append(problems, "argument :"+name+" given twice")
		}
		got[name] = true
		if !want[name] {
			problems = append(problems, "argument :"+name+" has no bind (ORA-01036)")
		}
	}
	for name := range want {
		if !got[name] {
			problems = append(problems, "bind :"+name+" gets no value (ORA-01008)")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	err := fmt.Errorf("%s\n%s", strings.Join(problems, "; "), query)
	f.errs = append(f.errs, err)
	return err
}

func (f *fakeDB) answer(query string) *fakeRows {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.answers {
		if strings.Contains(query, f.answers[i].match) {
			return &f.answers[i]
		}
	}
	return &fakeRows{}
}

type fakeConn struct{ db *fakeDB }

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("fake: no prepare") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error)           { return c, nil }
func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return c, nil
}
func (c *fakeConn) Commit() error                            { return c.db.record("COMMIT") }
func (c *fakeConn) Rollback() error                          { return c.db.record("ROLLBACK") }
func (c *fakeConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *fakeConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.db.check(query, args); err != nil {
		return nil, err
	}
	for _, a := range args {
		if out, ok := a.Value.(sql.Out); ok {
			switch d := out.Dest.(type) {
			case *string:
				if a.Name == "tok" {
					*d = "42"
				}
			case *int64:
				*d = 0
			}
		}
	}
	return driver.RowsAffected(c.db.affected), nil
}

func (c *fakeConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.db.check(query, args); err != nil {
		return nil, err
	}
	a := c.db.answer(query)
	return &fakeResult{cols: a.cols, rows: a.rows}, nil
}

type fakeResult struct {
	cols []string
	rows [][]driver.Value
}

func (r *fakeResult) Columns() []string {
	if r.cols == nil {
		return []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}
	}
	return r.cols
}
func (r *fakeResult) Close() error { return nil }
func (r *fakeResult) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

// fakeStore returns a store on a fake database answering with answers.
func fakeStore(t *testing.T, answers ...fakeRows) (*Store, *fakeDB) {
	t.Helper()
	f := &fakeDB{answers: answers, affected: 1}
	db := sql.OpenDB(f)
	t.Cleanup(func() { _ = db.Close() })
	s := &Store{
		db: db, names: testNames, sql: newStatements(testNames), log: slog.New(slog.DiscardHandler),
		listenWait: time.Second, locked: map[string]int{},
	}
	return s, f
}

func cols(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

var base = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

func testMessage(t testing.TB, id, instance string) provider.Message {
	t.Helper()
	m, err := provider.NewMessage(id, instance, "", "", &history.EventRaised{Name: "go"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEveryMethodBindsWhatItsSQLNames(t *testing.T) {
	ctx := t.Context()
	msg := testMessage(t, "m-1", "inst-1")
	env, err := provider.MarshalMessage(&msg)
	if err != nil {
		t.Fatal(err)
	}
	task := provider.ActivityTask{ID: "task-1", InstanceID: "inst-1", ExecutionID: "e-1", ScheduledSeq: 2, Name: "act", Attempt: 1,
		Priority: 3, ConcurrencyKey: "customer-1", ConcurrencyLimit: 2}
	taskEnv, err := provider.MarshalActivityTask(&task)
	if err != nil {
		t.Fatal(err)
	}
	s, f := fakeStore(t,
		fakeRows{match: "SELECT waiting, seq FROM", cols: cols(2), rows: [][]driver.Value{{int64(1), int64(7)}}},
		fakeRows{match: "SELECT slot_limit FROM", cols: cols(1), rows: [][]driver.Value{{int64(2)}}},
		fakeRows{match: "SELECT s.slot_key, s.slot_limit", cols: cols(2), rows: [][]driver.Value{{"k-1", int64(2)}, {"k-2", int64(1)}}},
		fakeRows{match: "SELECT slot_key, instance_id, waiting, since", cols: cols(4), rows: [][]driver.Value{
			{"k-1", "i-1", int64(0), int64(5)}, {"k-1", "i-2", int64(1), int64(6)}, {"k-2", "i-3", int64(1), int64(7)}}},
		fakeRows{match: "SELECT used FROM", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "conc_key = :ckey AND locked_until > :now", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "LEAST(", cols: cols(1), rows: [][]driver.Value{{int64(9223372036854775807)}}},
		fakeRows{match: "NVL(MAX(version), 0)", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "FROM \"APP\".\"CHRONICLE_HUMAN_TASKS\" t", cols: cols(14)},
		fakeRows{match: "orphan", cols: cols(2), rows: [][]driver.Value{{"inst-1", int64(0)}, {"inst-1", int64(0)}}},
		fakeRows{match: "AS held", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "SELECT id, envelope, attempts, last_error", cols: cols(4), rows: [][]driver.Value{{"m-1", env, int64(0), nil}, {"m-bad", []byte{0xc1}, int64(2), "x"}}},
		fakeRows{match: "SELECT seq, hash FROM", cols: cols(2), rows: [][]driver.Value{{int64(1), make([]byte, 32)}}},
		fakeRows{match: "NVL(MAX(seq), 0)", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "SELECT envelope, token, owner, locked_until", cols: cols(4), rows: [][]driver.Value{{taskEnv, "41", "w-0", int64(5)}}},
		fakeRows{match: "SELECT t.id FROM", cols: cols(1), rows: [][]driver.Value{{"task-1"}}},
		fakeRows{match: "SELECT envelope FROM", cols: cols(1), rows: [][]driver.Value{{taskEnv}}},
		fakeRows{match: "SELECT instance_id, envelope FROM", cols: cols(2), rows: [][]driver.Value{{"inst-1", taskEnv}}},
		fakeRows{match: "SELECT instance_id FROM", cols: cols(1), rows: [][]driver.Value{{"inst-1"}}},
		fakeRows{match: "SELECT 1 FROM", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
		fakeRows{match: "SELECT instance_id, message, activity, status, reason, error", cols: cols(6), rows: [][]driver.Value{{"inst-1", env, taskEnv, "dead", "panic", "boom"}}},
		fakeRows{match: "AS has_record", cols: cols(3), rows: [][]driver.Value{{int64(1), "completed", "e-1"}}},
		fakeRows{match: "MIN(ready_at)", cols: cols(1), rows: [][]driver.Value{{nil}}},
		fakeRows{match: "FROM dual", cols: cols(2), rows: [][]driver.Value{{int64(1), int64(1)}}},
	)
	calls := []struct {
		name string
		call func() error
	}{
		{"EnqueueMessages", func() error {
			return s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{msg, msg}, Now: base})
		}},
		{"LoadHistory", func() error {
			_, err := s.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "inst-1"})
			return err
		}},
		{"ListMessages", func() error {
			_, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-1"})
			return err
		}},
		{"AbandonMessages", func() error {
			return s.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-1", MessageIDs: []string{"m-1"}, VisibleAt: base, Error: "x"})
		}},
		{"NextVisibleAt", func() error {
			_, ok, err := s.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueOrchestration})
			if ok {
				return errors.New("no time is a time")
			}
			if err != nil {
				return err
			}
			_, ok, err = s.NextVisibleAt(ctx, &provider.NextVisibleAtParams{Queue: provider.QueueActivity, Queues: []string{"", "gpu"}})
			if ok {
				return errors.New("NULL is a time")
			}
			return err
		}},
		{"ClaimActivity", func() error {
			l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w-1", Now: base, LockedUntil: base.Add(time.Minute)})
			if err == nil && (l == nil || l.Token != "42" || l.Expired == nil || l.Expired.Owner != "w-0" || l.Task.ID != "task-1") {
				return fmt.Errorf("claim: %+v", l)
			}
			return err
		}},
		{"ClaimActivity with rate limits", func() error {
			// One limit read as exhausted (its key has used 1 of 1), one
			// not: the candidates leave out the tasks of the first, the
			// claim takes a token of the second.
			l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "w-1", Now: base, LockedUntil: base.Add(time.Minute), Queues: []string{"", "gpu"},
				Rates: []provider.RateLimit{
					{Key: "mail", Activity: "send-mail", Tokens: 1, Interval: time.Minute},
					{Key: "gpu", Queue: "gpu", Activity: "render", Tokens: 1, Interval: time.Second},
					{Key: "all", Queue: "", Activity: "act", Tokens: 5, Interval: time.Hour},
					{Key: "default", Queue: "x", Tokens: 1, Interval: time.Hour},
				}})
			if err == nil && (l == nil || l.Task.ConcurrencyKey != "customer-1" || l.Task.Priority != 3) {
				return fmt.Errorf("claim: %+v", l)
			}
			return err
		}},
		{"CountClaims", func() error {
			n, err := s.CountClaims(ctx, "customer-1", base)
			if err == nil && n != 1 {
				return fmt.Errorf("%d claims", n)
			}
			return err
		}},
		{"GetSlots", func() error {
			rec, err := s.GetSlots(ctx, "k-1")
			if err == nil && (rec.Limit != 2 || len(rec.Holders) != 1 || len(rec.Waiters) != 1 || rec.Waiters[0].ID != "i-2" || !rec.Holders[0].Since.Equal(time.Unix(0, 5))) {
				return fmt.Errorf("slots %+v", rec)
			}
			return err
		}},
		{"ListSlots", func() error {
			recs, err := s.ListSlots(ctx, &provider.ListSlotsParams{AfterKey: "k-0", OnlyWaiting: true})
			if err == nil && (len(recs) != 2 || recs[1].Key != "k-2" || len(recs[1].Waiters) != 1 || len(recs[1].Holders) != 0) {
				return fmt.Errorf("slots %+v", recs)
			}
			return err
		}},
		{"WakeInstances", func() error {
			return s.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"inst-2", "inst-1", "inst-2"}})
		}},
		{"HeartbeatActivity", func() error {
			return s.HeartbeatActivity(ctx, &provider.HeartbeatActivityParams{TaskID: "task-1", Token: "42", LockedUntil: base})
		}},
		{"CompleteActivity", func() error {
			res, err := provider.ActivityOutcome(&task, []byte("r"), nil)
			if err != nil {
				return err
			}
			return s.CompleteActivity(ctx, &provider.CompleteActivityParams{TaskID: "task-1", Token: "42", Result: res, Now: base})
		}},
		{"RetryActivity", func() error {
			return s.RetryActivity(ctx, &provider.RetryActivityParams{TaskID: "task-1", Token: "42", VisibleAt: base, Error: "x"})
		}},
		{"DeadLetterActivity", func() error {
			return s.DeadLetterActivity(ctx, &provider.DeadLetterActivityParams{TaskID: "task-1", Token: "42",
				Letter: provider.DeadLetter{ID: "dl-1", InstanceID: "inst-1", Reason: provider.ReasonPanic, Error: strings.Repeat("e", 5000)}})
		}},
		{"GetInstance", func() error { _, err := s.GetInstance(ctx, "inst-1"); return notFoundIsFine(err) }},
		{"GetSnapshot", func() error { _, _, err := s.GetSnapshot(ctx, "inst-1"); return notFoundIsFine(err) }},
		{"ListInstances", func() error {
			_, err := s.ListInstances(ctx, &provider.ListInstancesParams{Status: provider.StatusCompleted, CreatedFrom: base, Terminal: true})
			return err
		}},
		{"GetTask", func() error { _, err := s.GetTask(ctx, "t-1"); return notFoundIsFine(err) }},
		{"ListTasks", func() error {
			if _, err := s.ListTasks(ctx, &provider.ListTasksParams{Roles: []string{"a", "b", "c"}, Unassigned: true}); err != nil {
				return err
			}
			_, err := s.ListTasks(ctx, &provider.ListTasksParams{AfterID: "t-0"})
			return err
		}},
		{"ListTaskEvents", func() error {
			_, err := s.ListTaskEvents(ctx, &provider.ListTaskEventsParams{InstanceID: "inst-1"})
			return err
		}},
		{"GetCustomProjection", func() error { _, err := s.GetCustomProjection(ctx, "p", "inst-1"); return notFoundIsFine(err) }},
		{"ListDeadLetters", func() error { _, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{}); return err }},
		{"GetDeadLetter", func() error { _, err := s.GetDeadLetter(ctx, "dl-1"); return notFoundIsFine(err) }},
		{"ResolveDeadLetter redrive", func() error {
			return s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: "dl-1", Status: provider.DeadLetterRedriven, By: "ops", Now: base})
		}},
		{"ResolveDeadLetter discard", func() error {
			return s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: "dl-1", Status: provider.DeadLetterDiscarded, By: "ops", Now: base})
		}},
		{"PurgeInstance", func() error {
			ts, err := s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-1", By: "ops", Now: base})
			if err == nil && ts.LastSeq != 1 {
				return fmt.Errorf("tombstone %+v", ts)
			}
			return err
		}},
		{"GetTombstone", func() error { _, err := s.GetTombstone(ctx, "inst-1"); return notFoundIsFine(err) }},
		{"ListTombstones", func() error { _, err := s.ListTombstones(ctx, "inst-1"); return err }},
		{"PlaceHold", func() error {
			_, _, err := s.PlaceHold(ctx, &provider.Hold{InstanceID: "inst-1", HoldID: "h-1", Reason: "r", Actor: "user:a", PlacedAt: base})
			return notFoundIsFine(err)
		}},
		{"ReleaseHold", func() error { return notFoundIsFine(s.ReleaseHold(ctx, "inst-1", "h-1")) }},
		{"GetHold", func() error { _, err := s.GetHold(ctx, "inst-1"); return notFoundIsFine(err) }},
		{"ListHolds", func() error { _, err := s.ListHolds(ctx, "", 10); return err }},
		{"SchemaVersion", func() error {
			v, err := s.SchemaVersion(ctx)
			if err == nil && v != 1 {
				return fmt.Errorf("version %d", v)
			}
			return err
		}},
		{"RunRound", func() error { return runEveryStep(ctx, s, msg, task) }},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Errorf("%d statements bound wrongly: %v", len(f.errs), errors.Join(f.errs...))
	}
	ran := strings.Join(f.seen, "\n")
	for _, want := range []string{"SAVEPOINT chronicle_dequeued", "ROLLBACK TO SAVEPOINT chronicle_dequeued", "INSERT ALL", "DBMS_AQ.ENQUEUE",
		"MERGE INTO", "FOR UPDATE SKIP LOCKED", "RETURNING token INTO :tok",
		`"CHRONICLE_ACTIVITY_KEYS" WHERE conc_key = :ckey FOR UPDATE`, `UPDATE "APP"."CHRONICLE_RATE_WINDOWS" SET used = used + 1`,
		`t.name <> :rn0`, `t.queue <> :rq1`, `UPDATE "APP"."CHRONICLE_FLOW_SLOTS" SET slot_limit`, `"CHRONICLE_FLOW_SLOTS" WHERE slot_key = :skey FOR UPDATE`,
		`DELETE FROM "APP"."CHRONICLE_FLOW_SLOT_MEMBERS"`,
		"SET hold_until = 9223372036854775807", "SET hold_until = NULL WHERE instance_id = :inst AND hold_until = 9223372036854775807"} {
		if !strings.Contains(ran, want) {
			t.Errorf("no statement with %q ran", want)
		}
	}
}

func notFoundIsFine(err error) error {
	if errors.Is(err, provider.ErrNotFound) {
		return nil
	}
	return err
}

// runEveryStep runs a round that calls every method of provider.Tx.
func runEveryStep(ctx context.Context, s *Store, msg provider.Message, task provider.ActivityTask) error {
	return s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		b, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "w-1", Limit: 10})
		if err != nil {
			return err
		}
		if b == nil || b.InstanceID != "inst-1" || len(b.Messages) != 1 || b.Head == nil || b.Head.Seq != 1 {
			return fmt.Errorf("batch %+v", b)
		}
		if _, err := tx.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: "inst-1", FromSeq: 1}); err != nil {
			return err
		}
		if _, _, err := tx.GetSnapshot(ctx, "inst-1"); notFoundIsFine(err) != nil {
			return err
		}
		e := history.Event{InstanceID: "inst-1", ExecutionID: "e-1", Kind: history.KindEventRaised, At: base}
		events := []history.Event{e, e}
		events[0].Seq, events[1].Seq = 2, 3
		history.Seal(make([]byte, history.HashSize), events)
		if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-1", Events: events}); err != nil {
			return err
		}
		err = tx.SaveProjections(ctx, &provider.Projections{
			InstanceID: "inst-1", Seq: 3, Snapshot: make([]byte, 3000),
			Instance: &provider.InstanceRecord{InstanceID: "inst-1", Status: provider.StatusRunning, BusinessParts: map[string]string{"a": "b"},
				Failure: &history.Failure{Message: "x"}, CreatedAt: base},
			Tasks:      []provider.TaskRecord{{TaskID: "t-1", InstanceID: "inst-1", Roles: []string{"a", "a", ""}, Seq: 3}},
			TaskEvents: []provider.TaskEventRecord{{InstanceID: "inst-1", TaskID: "t-1", Seq: 3, Kind: history.KindTaskAssigned}},
			Custom:     []provider.CustomRecord{{Name: "p", Version: 1, InstanceID: "inst-1", Seq: 3, Data: []byte("d")}},
		})
		if err != nil {
			return err
		}
		if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{testMessage(nilT{}, "m-2", "inst-2")}, Now: base}); err != nil {
			return err
		}
		if err := tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: []provider.ActivityTask{task}, Now: base}); err != nil {
			return err
		}
		if err := tx.CancelActivities(ctx, &provider.CancelActivitiesParams{InstanceID: "inst-1", OtherThan: "e-1"}); err != nil {
			return err
		}
		if err := tx.ResetProjections(ctx, &provider.ResetProjectionsParams{InstanceID: "inst-1", Custom: []string{"p"}}); err != nil {
			return err
		}
		if err := tx.DeadLetterMessages(ctx, &provider.DeadLetterMessagesParams{InstanceID: "inst-1",
			Letters: []provider.DeadLetter{{ID: "dl-2", InstanceID: "inst-1", Message: &msg, Reason: provider.ReasonRejected}}}); err != nil {
			return err
		}
		if err := tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: "inst-1", MessageIDs: []string{"m-1"}}); err != nil {
			return err
		}
		if err := tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-1", MessageIDs: []string{"m-1"}, VisibleAt: base, Error: "x"}); err != nil {
			return err
		}
		if err := tx.AbandonMessages(ctx, &provider.AbandonMessagesParams{InstanceID: "inst-9"}); err == nil {
			return errors.New("abandon of an instance the round does not hold")
		}
		f, ok := tx.(provider.FlowSteps)
		if !ok {
			return errors.New("the round has no flow steps")
		}
		if ok, err := f.AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k-1", Limit: 2, Holder: "inst-1", Now: base}); err != nil || ok {
			return fmt.Errorf("acquire: %v, %v", ok, err)
		}
		wake, err := f.ReleaseSlot(ctx, &provider.ReleaseSlotParams{Key: "k-1", Holder: "inst-1"})
		if err != nil || !slices.Equal(wake, []string{"inst-1"}) {
			return fmt.Errorf("release: %v, %v", wake, err)
		}
		if err := f.ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: "inst-1"}); err != nil {
			return err
		}
		return f.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"inst-2"}})
	})
}

// nilT lets testMessage run outside a test's goroutine.
type nilT struct{ testing.TB }

func (nilT) Helper()           {}
func (nilT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

// TestLongAppendIsChunked: a round that appends more events than one
// INSERT ALL may carry (Oracle takes at most 999 target columns, 9 per
// event) writes them in chunks behind a savepoint, every chunk within the
// limit.
func TestLongAppendIsChunked(t *testing.T) {
	ctx := t.Context()
	s, f := fakeStore(t, fakeRows{match: "NVL(MAX(seq), 0)", cols: cols(1), rows: [][]driver.Value{{int64(1)}}})
	events := make([]history.Event, 250)
	for i := range events {
		events[i] = history.Event{InstanceID: "inst-1", ExecutionID: "e-1", Kind: history.KindEventRaised, At: base, Seq: int64(2 + i)}
	}
	history.Seal(make([]byte, history.HashSize), events)
	err := s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		return tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: "inst-1", Events: events})
	})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatal(errors.Join(f.errs...))
	}
	var chunks []int
	savepoint := false
	for _, q := range f.seen {
		if strings.Contains(q, "SAVEPOINT chronicle_append") {
			savepoint = true
		}
		if strings.HasPrefix(strings.TrimSpace(q), "INSERT ALL") {
			n := strings.Count(q, "INTO ")
			if n*9 > 999 {
				t.Errorf("an INSERT ALL of %d events has %d target columns, more than Oracle's 999", n, n*9)
			}
			chunks = append(chunks, n)
		}
	}
	if !savepoint {
		t.Error("no savepoint before the chunks")
	}
	if !slices.Equal(chunks, []int{100, 100, 50}) {
		t.Errorf("chunks of %v events, want [100 100 50]", chunks)
	}
}

// TestPurgeKeepsTheQueuedStartOfTheNextRun: the purge of an ended
// instance whose next run's start is queued (a restart, or a parent
// starting a child under an ended child's id) is refused before it
// deletes anything, as the conformance case of the same name asks.
func TestPurgeKeepsTheQueuedStartOfTheNextRun(t *testing.T) {
	ctx := t.Context()
	next, err := provider.NewMessage("start-2", "inst-1", "exec-2", "exec-2", &history.ExecutionStarted{Name: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := provider.MarshalMessage(&next)
	if err != nil {
		t.Fatal(err)
	}
	s, f := fakeStore(t,
		fakeRows{match: "AS has_record", cols: cols(3), rows: [][]driver.Value{{int64(1), "completed", "exec-1"}}},
		fakeRows{match: "SELECT envelope FROM", cols: cols(1), rows: [][]driver.Value{{env}}},
		fakeRows{match: "SELECT seq, hash FROM", cols: cols(2), rows: [][]driver.Value{{int64(1), make([]byte, 32)}}},
	)
	_, err = s.PurgeInstance(ctx, &provider.PurgeInstanceParams{InstanceID: "inst-1", By: "ops", Now: base})
	if !errors.Is(err, provider.ErrInvalidState) {
		t.Fatalf("purge with the next run's start queued: %v, want %v", err, provider.ErrInvalidState)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatal(errors.Join(f.errs...))
	}
	for _, q := range f.seen {
		if strings.HasPrefix(strings.TrimSpace(q), "DELETE") {
			t.Errorf("a refused purge deleted: %s", q)
		}
	}
}
