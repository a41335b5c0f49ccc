package oracle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// sampleRates are exhausted limits of each kind: an activity, a queue,
// both, with values that must never reach the SQL text.
var sampleRates = []provider.RateLimit{
	{Key: "a", Activity: "send' OR 1=1 --", Tokens: 1, Interval: time.Minute},
	{Key: "q", Queue: "gpu:x", Tokens: 1, Interval: time.Minute},
	{Key: "b", Activity: "render", Queue: "", Tokens: 1, Interval: time.Minute},
	{Key: "c", Activity: "render", Queue: "gpu", Tokens: 1, Interval: time.Minute},
}

func TestRateFilter(t *testing.T) {
	text, args := rateFilter(sampleRates)
	for _, v := range []string{"send", "gpu", "render", "'"} {
		if strings.Contains(text, v) {
			t.Errorf("a value reached the SQL text: %q in\n%s", v, text)
		}
	}
	want := []string{
		"\n  AND (t.name IS NULL OR t.name <> :rn0)",
		"\n  AND t.queue <> :rq1",
		"\n  AND (t.name IS NULL OR t.name <> :rn2)",
		"\n  AND (t.name IS NULL OR t.name <> :rn3 OR t.queue <> :rq3)",
	}
	if text != strings.Join(want, "") {
		t.Errorf("rate filter:\n%s\nwant\n%s", text, strings.Join(want, ""))
	}
	got := map[string]any{}
	for _, a := range args {
		n := a.(sql.NamedArg)
		got[n.Name] = n.Value
	}
	wantArgs := map[string]any{"rn0": "send' OR 1=1 --", "rq1": ":gpu:x", "rn2": "render", "rn3": "render", "rq3": ":gpu"}
	if fmt.Sprint(got) != fmt.Sprint(wantArgs) {
		t.Errorf("binds %v, want %v", got, wantArgs)
	}
	if b := bindNames(text); len(b) != len(args) {
		t.Errorf("%d binds in the text, %d args", len(b), len(args))
	}
	if text, args := rateFilter(nil); text != "" || args != nil {
		t.Errorf("no exhausted limit: %q %v", text, args)
	}
}

func TestRateTakes(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	task := &provider.ActivityTask{Name: "send", Queue: "mail"}
	got := rateTakes(task, []provider.RateLimit{
		{Key: "z", Activity: "send", Tokens: 5, Interval: time.Minute},
		{Key: "other", Activity: "render", Tokens: 1, Interval: time.Minute},
		{Key: "a", Queue: "mail", Tokens: 3, Interval: time.Hour},
		{Key: "z", Queue: "mail", Tokens: 2, Interval: time.Second},
		{Key: "q", Queue: "gpu", Tokens: 1, Interval: time.Minute},
	}, now)
	want := []rateTake{
		{key: "a", window: now.Truncate(time.Hour), tokens: 3},
		{key: "z", window: now.Truncate(time.Minute), tokens: 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("takes %+v, want %+v", got, want)
	}
	if got := rateTakes(task, nil, now); got != nil {
		t.Errorf("no limits: %+v", got)
	}
}

func TestFlowStatements(t *testing.T) {
	st := newStatements(testNames)
	if parkedHold != strconv.FormatInt(math.MaxInt64, 10) {
		t.Errorf("parkedHold %s is not the greatest time", parkedHold)
	}
	for name, c := range map[string]struct{ sql, want string }{
		"dequeueCandidates by order": {st.dequeueCandidates, "ORDER BY m.order_at, m.seq\nFETCH FIRST"},
		"claimCandidates by order":   {st.claimCandidates, "ORDER BY t.order_at, t.seq\nFETCH FIRST"},
		"claimCandidates key filter": {st.claimCandidates, "c.conc_key = t.conc_key AND c.locked_until > :now"},
		"claimCandidates visibility": {st.claimCandidates, "t.ready_at <= :now"},
		"dequeue visibility":         {st.dequeueCandidates, "m.visible_at <= :now"},
		"next leaves parked out":     {st.nextOrchestration, "i.hold_until < 9223372036854775807"},
		"park":                       {st.parkInstance, "SET hold_until = 9223372036854775807 WHERE instance_id = :inst"},
		"wake only parked":           {st.wakeInstance, "hold_until = NULL WHERE instance_id = :inst AND hold_until = 9223372036854775807"},
		"message priority":           {st.insertMessage, ":prio"},
		"task columns":               {st.insertTask, "name, priority, conc_key, conc_limit)"},
		"task binds":                 {st.insertTask, ":aname, :prio, :ckey, :clim)"},
		"live claims":                {st.countClaims, "conc_key = :ckey AND locked_until > :now"},
		"token while one is left":    {st.takeRateToken, "used < :tokens"},
		"waiters in order":           {st.firstWaiters, "WHERE slot_key = :skey AND waiting = 1\nORDER BY seq"},
		"holders, then waiters":      {st.slotMembers, "ORDER BY slot_key, waiting, CASE WHEN waiting = 0 THEN since END, seq"},
	} {
		if !strings.Contains(c.sql, c.want) {
			t.Errorf("%s: no %q in\n%s", name, c.want, c.sql)
		}
	}
	// A parked instance is never dequeued: the hold tests of the dequeue
	// compare with :now, which the greatest time never passes.
	for name, sql := range map[string]string{"dequeueCandidates": st.dequeueCandidates, "lockInstance": st.lockInstance, "clearHold": st.clearHold} {
		if !strings.Contains(sql, "hold_until <= :now") {
			t.Errorf("%s does not test the hold against :now:\n%s", name, sql)
		}
	}
}

// TestAcquireSlotDecides runs AcquireSlot on the fake driver for each
// state of the holder and counts of the set, and checks the answer and
// the write: a holder holds; a waiter is promoted when it is among the
// first (limit - holders) waiters, else keeps its place; a newcomer
// holds when fewer waiters than that wait, else waits.
func TestAcquireSlotDecides(t *testing.T) {
	for _, c := range []struct {
		name           string
		member         []driver.Value // waiting, seq; nil for a newcomer
		holders, ahead int64
		limit          int
		want           bool
		write          string // the statement that writes, "" for none
		waiting        any    // the bind of an insert
	}{
		{"holder", []driver.Value{int64(0), int64(3)}, 5, 0, 1, true, "", nil},
		{"first waiter, a slot free", []driver.Value{int64(1), int64(3)}, 1, 0, 2, true, "UPDATE", nil},
		{"second waiter, one slot free", []driver.Value{int64(1), int64(3)}, 1, 1, 2, false, "", nil},
		{"second waiter, two slots free", []driver.Value{int64(1), int64(3)}, 1, 1, 3, true, "UPDATE", nil},
		{"waiter, slots full", []driver.Value{int64(1), int64(3)}, 2, 0, 2, false, "", nil},
		{"waiter, limit lowered", []driver.Value{int64(1), int64(3)}, 3, 0, 2, false, "", nil},
		{"newcomer, room", nil, 1, 0, 2, true, "INSERT", int64(0)},
		{"newcomer behind waiters", nil, 0, 2, 2, false, "INSERT", int64(1)},
		{"newcomer, full", nil, 2, 0, 2, false, "INSERT", int64(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := []fakeRows{{match: "FROM dual", cols: cols(2), rows: [][]driver.Value{{c.holders, c.ahead}}}}
			if c.member != nil {
				answers = append(answers, fakeRows{match: "SELECT waiting, seq FROM", cols: cols(2), rows: [][]driver.Value{c.member}})
			}
			s, f := fakeStore(t, answers...)
			ok, err := s.acquireSlot(t.Context(), s.db, &provider.AcquireSlotParams{Key: "k", Limit: c.limit, Holder: "i-1", Now: base})
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.want {
				t.Errorf("acquire: %v, want %v", ok, c.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.errs) > 0 {
				t.Fatal(errors.Join(f.errs...))
			}
			var writes []string
			for i, q := range f.seen {
				if !strings.Contains(q, "FLOW_SLOT_MEMBERS") {
					continue
				}
				verb := strings.Fields(q)[0]
				if verb == "SELECT" {
					continue
				}
				writes = append(writes, verb)
				if verb == "INSERT" && f.args[i]["waiting"] != c.waiting {
					t.Errorf("inserted with waiting %v, want %v", f.args[i]["waiting"], c.waiting)
				}
				if verb == "UPDATE" && f.args[i]["since"] != base.UnixNano() {
					t.Errorf("promoted with since %v", f.args[i]["since"])
				}
			}
			var want []string
			if c.write != "" {
				want = []string{c.write}
			}
			if !slices.Equal(writes, want) {
				t.Errorf("writes %v, want %v", writes, want)
			}
			// The set's row is created and locked, with the new limit,
			// before anything is read.
			if len(f.seen) < 2 || !strings.Contains(f.seen[0], `INSERT INTO "APP"."CHRONICLE_FLOW_SLOTS"`) ||
				!strings.Contains(f.seen[1], `UPDATE "APP"."CHRONICLE_FLOW_SLOTS" SET slot_limit = :lim`) || f.args[1]["lim"] != int64(c.limit) {
				t.Errorf("the set's row is not locked first: %q", f.seen)
			}
		})
	}
}

// TestReleaseSlotWakes checks what a release returns: the first (limit -
// holders) waiters, none when the set is full or unknown.
func TestReleaseSlotWakes(t *testing.T) {
	for _, c := range []struct {
		name                    string
		limit, holders, waiters int64
		wantLim                 any // the bind of the waiters' query; nil when it does not run
	}{
		{"one free", 2, 1, 3, int64(1)},
		{"three free, two wait", 5, 2, 2, int64(2)},
		{"full", 2, 2, 3, nil},
		{"lowered", 1, 3, 3, nil},
		{"nobody waits", 3, 0, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, f := fakeStore(t,
				fakeRows{match: "SELECT slot_limit FROM", cols: cols(1), rows: [][]driver.Value{{c.limit}}},
				fakeRows{match: "FROM dual", cols: cols(2), rows: [][]driver.Value{{c.holders, c.waiters}}},
				fakeRows{match: "SELECT instance_id FROM", cols: cols(1), rows: [][]driver.Value{{"w-1"}}},
			)
			wake, err := s.releaseSlot(t.Context(), s.db, &provider.ReleaseSlotParams{Key: "k", Holder: "i-1"})
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			var lim any
			for i, q := range f.seen {
				if strings.Contains(q, "SELECT instance_id FROM") {
					lim = f.args[i]["lim"]
				}
			}
			if lim != c.wantLim {
				t.Errorf("waiters asked for %v, want %v", lim, c.wantLim)
			}
			if (c.wantLim == nil) != (wake == nil) {
				t.Errorf("woke %v", wake)
			}
			if !strings.HasSuffix(f.seen[0], "FOR UPDATE") || !strings.HasPrefix(strings.TrimSpace(f.seen[1]), "DELETE") {
				t.Errorf("the set's row is not locked before the member goes: %q", f.seen)
			}
		})
	}
	s, f := fakeStore(t)
	wake, err := s.releaseSlot(t.Context(), s.db, &provider.ReleaseSlotParams{Key: "never", Holder: "i-1"})
	if err != nil || wake != nil {
		t.Fatalf("release of an unknown set: %v, %v", wake, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 1 {
		t.Errorf("an unknown set wrote: %q", f.seen)
	}
}

// TestClaimTurnsDown: a candidate whose key is full, or whose rate limit
// has no token left, is not claimed: its transaction rolls back (giving
// back the tokens it took and the locks) and the claim goes on to the
// next candidate.
func TestClaimTurnsDown(t *testing.T) {
	task := provider.ActivityTask{ID: "task-1", InstanceID: "inst-1", ExecutionID: "e-1", ScheduledSeq: 2, Name: "send", Attempt: 1,
		ConcurrencyKey: "customer-1", ConcurrencyLimit: 2}
	env, err := provider.MarshalActivityTask(&task)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		live     int64
		affected int64
		rates    []provider.RateLimit
	}{
		{"key full", 2, 1, nil},
		{"no token left", 1, 0, []provider.RateLimit{{Key: "mail", Activity: "send", Tokens: 3, Interval: time.Minute}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, f := fakeStore(t,
				fakeRows{match: "SELECT t.id FROM", cols: cols(1), rows: [][]driver.Value{{"task-1"}, {"task-2"}}},
				fakeRows{match: "SELECT envelope, token, owner, locked_until", cols: cols(4), rows: [][]driver.Value{{env, nil, nil, nil}}},
				fakeRows{match: "conc_key = :ckey AND locked_until > :now", cols: cols(1), rows: [][]driver.Value{{c.live}}},
				fakeRows{match: "SELECT 1 FROM", cols: cols(1), rows: [][]driver.Value{{int64(1)}}},
			)
			f.affected = c.affected
			l, err := s.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: "w-1", Now: base, LockedUntil: base.Add(time.Minute), Rates: c.rates})
			if err != nil || l != nil {
				t.Fatalf("claim: %+v, %v", l, err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.errs) > 0 {
				t.Fatal(errors.Join(f.errs...))
			}
			tries, rollbacks := 0, 0
			for _, q := range f.seen {
				switch {
				case strings.Contains(q, "RETURNING token"), q == "COMMIT":
					t.Errorf("a candidate turned down was claimed: %s", q)
				case strings.Contains(q, "FOR UPDATE SKIP LOCKED"):
					tries++
				case q == "ROLLBACK":
					rollbacks++
				}
			}
			// The fake lists the same two candidates again until the skip
			// list is full; each try rolls back.
			if tries < 2 || rollbacks != tries {
				t.Errorf("%d tries, %d rollbacks", tries, rollbacks)
			}
		})
	}
}

func TestFlowParamsAreChecked(t *testing.T) {
	s, f := fakeStore(t)
	ctx := t.Context()
	for name, err := range map[string]error{
		"acquire without key": func() error {
			_, err := s.acquireSlot(ctx, s.db, &provider.AcquireSlotParams{Limit: 1, Holder: "i", Now: base})
			return err
		}(),
		"acquire limit 0": func() error {
			_, err := s.acquireSlot(ctx, s.db, &provider.AcquireSlotParams{Key: "k", Holder: "i", Now: base})
			return err
		}(),
		"acquire without holder": func() error {
			_, err := s.acquireSlot(ctx, s.db, &provider.AcquireSlotParams{Key: "k", Limit: 1, Now: base})
			return err
		}(),
		"acquire key too long": func() error {
			_, err := s.acquireSlot(ctx, s.db, &provider.AcquireSlotParams{Key: strings.Repeat("k", provider.MaxFlowKeyLength+1), Limit: 1, Holder: "i", Now: base})
			return err
		}(),
		"release without key": func() error {
			_, err := s.releaseSlot(ctx, s.db, &provider.ReleaseSlotParams{Holder: "i"})
			return err
		}(),
		"park without id": s.parkInstance(ctx, s.db, ""),
		"message priority": s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Now: base,
			Messages: []provider.Message{{ID: "m", InstanceID: "i", Priority: provider.MaxPriority + 1}}}),
		"task priority": enqueueTasks(s, &provider.EnqueueActivitiesParams{Now: base,
			Tasks: []provider.ActivityTask{{ID: "t", InstanceID: "i", Priority: provider.MinPriority - 1}}}),
		"task limit without key": enqueueTasks(s, &provider.EnqueueActivitiesParams{Now: base,
			Tasks: []provider.ActivityTask{{ID: "t", InstanceID: "i", ConcurrencyLimit: 2}}}),
		"task key without limit": enqueueTasks(s, &provider.EnqueueActivitiesParams{Now: base,
			Tasks: []provider.ActivityTask{{ID: "t", InstanceID: "i", ConcurrencyKey: "k"}}}),
		"bad rate limit": func() error {
			_, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Now: base, Rates: []provider.RateLimit{{Key: "r", Activity: "a", Interval: time.Minute}}})
			return err
		}(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want %v", name, err, ErrInvalidArgument)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.seen {
		if q != "ROLLBACK" {
			t.Errorf("refused params ran a statement: %s", q)
		}
	}
}

// enqueueTasks enqueues tasks in a round, as the engine does.
func enqueueTasks(s *Store, p *provider.EnqueueActivitiesParams) error {
	return s.RunRound(context.Background(), func(ctx context.Context, tx provider.Tx) error {
		return tx.EnqueueActivities(ctx, p)
	})
}
