package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// flowTask is a task of instanceID named name.
func flowTask(instanceID, name string) provider.ActivityTask {
	return provider.ActivityTask{
		ID: provider.ActivityTaskID(instanceID, "exec-1", 2), InstanceID: instanceID, ExecutionID: "exec-1",
		ScheduledSeq: 2, Name: name, Attempt: 1,
	}
}

func enqueueTasks(t *testing.T, s *postgres.Store, now time.Time, tasks ...provider.ActivityTask) {
	t.Helper()
	require.NoError(t, s.RunRound(t.Context(), func(ctx context.Context, tx provider.Tx) error {
		return tx.EnqueueActivities(ctx, &provider.EnqueueActivitiesParams{Tasks: tasks, Now: now})
	}))
}

// sameSchema opens n more stores on the schema of s, as other processes
// would.
func sameSchema(t *testing.T, s *postgres.Store, n int) []*postgres.Store {
	t.Helper()
	out := []*postgres.Store{s}
	for range n {
		o, err := postgres.New(t.Context(), postgres.Options{URL: pgtest.URL(t), Schema: s.Schema()})
		require.NoError(t, err)
		t.Cleanup(o.Close)
		out = append(out, o)
	}
	return out
}

// TestFlowLimitsAcrossStores claims keyed and rate-limited tasks from
// several stores at once, each claim an owner of its own (no two
// combined into one statement): the per-key lock and the token rows keep
// the limits among them, and the tasks without limits are all claimed.
func TestFlowLimitsAcrossStores(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	stores := sameSchema(t, s, 3)
	var tasks []provider.ActivityTask
	for i := range 12 {
		keyed := flowTask(fmt.Sprintf("key-%02d", i), "work")
		keyed.ConcurrencyKey, keyed.ConcurrencyLimit = "tenant", 3
		mail := flowTask(fmt.Sprintf("mail-%02d", i), "send-mail")
		tasks = append(tasks, keyed, mail, flowTask(fmt.Sprintf("free-%02d", i), "work"))
	}
	enqueueTasks(t, s, base, tasks...)
	now := base.Add(time.Second)
	rates := []provider.RateLimit{{Key: "mail", Activity: "send-mail", Tokens: 2, Interval: time.Hour}}

	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			st := stores[w%len(stores)]
			for i := 0; ; i++ {
				l, err := st.ClaimActivity(context.Background(), &provider.ClaimActivityParams{
					Owner: fmt.Sprintf("node-%d-%d", w, i), Now: now, LockedUntil: now.Add(time.Minute), Rates: rates,
				})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if l == nil {
					return
				}
				mu.Lock()
				claimed[l.Task.Name+"/"+l.Task.ConcurrencyKey]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"work/tenant": 3, "send-mail/": 2, "work/": 12}, claimed)
	n, err := s.CountClaims(t.Context(), "tenant", now)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// TestNegativePriorityTasks claims a task of negative priority, ordered
// after now although visible, only after the visible tasks ordered
// before it, and a task of high priority retried keeps its priority.
func TestNegativePriorityTasks(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	back := flowTask("inst-back", "work")
	back.Priority = -2
	enqueueTasks(t, s, base, back)
	plain := flowTask("inst-plain", "work")
	enqueueTasks(t, s, base.Add(provider.PriorityStep), plain)
	now := base.Add(provider.PriorityStep)
	claim := func(now time.Time) *provider.ActivityLease {
		l, err := s.ClaimActivity(t.Context(), &provider.ClaimActivityParams{Owner: "n", Now: now, LockedUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		return l
	}
	l := claim(now)
	require.NotNil(t, l)
	require.Equal(t, plain.ID, l.Task.ID)
	l = claim(now)
	require.NotNil(t, l, "the task ordered after now is claimed when it is the only one")
	require.Equal(t, back.ID, l.Task.ID)
	require.Nil(t, claim(now))

	// A retry moves the order with the ready time: the high-priority
	// task retried at now+1s goes before a plain one visible at now.
	high := flowTask("inst-high", "work")
	high.Priority = 1
	enqueueTasks(t, s, now, high)
	l = claim(now)
	require.Equal(t, high.ID, l.Task.ID)
	require.NoError(t, s.RetryActivity(t.Context(), &provider.RetryActivityParams{TaskID: high.ID, Token: l.Token, VisibleAt: now.Add(time.Second), Error: "again"}))
	other := flowTask("inst-other", "work")
	enqueueTasks(t, s, now, other)
	later := now.Add(2 * time.Second)
	l = claim(later)
	require.Equal(t, high.ID, l.Task.ID, "priority 1 a second later is a minute ahead")
	require.Equal(t, 1, l.Task.Priority)
	l = claim(later)
	require.Equal(t, other.ID, l.Task.ID)
}

// TestFlowMigration migrates a schema holding queued work from version 6:
// the rows get the order of priority 0, and a task queued before, which
// has no name column, is still matched by a rate limit on its name.
func TestFlowMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := postgres.New(ctx, postgres.Options{URL: pgtest.URL(t), Schema: pgtest.Schema(t)})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	v, err := postgres.MigrateTo(ctx, s, 6)
	require.NoError(t, err)
	require.Equal(t, 6, v)
	conn := adminConn(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	for i, name := range []string{"send-mail", "send-mail", "work"} {
		task := flowTask(fmt.Sprintf("inst-%d", i), name)
		task.SetDefaults(base)
		env, err := provider.MarshalActivityTask(&task)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "INSERT INTO "+schema+".activity_tasks (id, instance_id, execution_id, queue, ready_at, envelope) VALUES ($1, $2, 'exec-1', '', $3, $4)",
			task.ID, task.InstanceID, base.Add(time.Duration(i)*time.Second), env)
		require.NoError(t, err)
	}
	m := signal(t, "m-1", "inst-m")
	m.SetDefaults(base)
	env, err := provider.MarshalMessage(&m)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO "+schema+".instances (instance_id) VALUES ('inst-m')")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO "+schema+".messages (id, instance_id, visible_at, envelope) VALUES ('m-1', 'inst-m', $1, $2)", base, env)
	require.NoError(t, err)

	_, err = s.Migrate(ctx)
	require.NoError(t, err)
	var unordered int
	require.NoError(t, conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+schema+".messages WHERE order_at <> visible_at) + (SELECT count(*) FROM "+schema+".activity_tasks WHERE order_at <> ready_at)").Scan(&unordered))
	require.Zero(t, unordered, "existing rows are ordered as of priority 0")

	require.NotNil(t, take(t, s, base.Add(time.Minute)), "the migrated message is dequeued")
	now := base.Add(time.Minute)
	rates := []provider.RateLimit{{Key: "mail", Activity: "send-mail", Tokens: 1, Interval: time.Hour}}
	var got []string
	for {
		l, err := s.ClaimActivity(ctx, &provider.ClaimActivityParams{Owner: "n", Now: now, LockedUntil: now.Add(time.Minute), Rates: rates})
		require.NoError(t, err)
		if l == nil {
			break
		}
		got = append(got, l.Task.InstanceID)
	}
	require.Equal(t, []string{"inst-0", "inst-2"}, got, "one token for send-mail, read from the envelope")
}

// TestParkedMessagesLeaveTheQueueOrder: the queued messages of a parked
// instance, parked by its enqueue or by a round, are out of the range the
// dequeue walks (order_at and visible_at up to now), so a dequeue does
// not read past a thousand waiting starts to find work queued after them;
// a wake puts them back exactly where they were, and a second park or
// wake changes nothing.
func TestParkedMessagesLeaveTheQueueOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := pgtest.NewStore(t, postgres.Options{})
	conn := adminConn(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	type cols struct{ visible, order time.Time }
	columns := func() map[string]cols {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT id, visible_at, order_at FROM "+schema+".messages")
		require.NoError(t, err)
		out := map[string]cols{}
		for rows.Next() {
			var (
				id string
				c  cols
			)
			require.NoError(t, rows.Scan(&id, &c.visible, &c.order))
			out[id] = cols{c.visible.UTC(), c.order.UTC()}
		}
		require.NoError(t, rows.Err())
		return out
	}
	inRange := func() []string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT id FROM "+schema+".messages WHERE order_at <= $1 AND visible_at <= $1 ORDER BY order_at, seq", base.Add(time.Hour))
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	message := func(id, instanceID string, priority int) provider.Message {
		m, err := provider.NewMessage(id, instanceID, "", id, &history.EventRaised{Name: "poke"})
		require.NoError(t, err)
		m.Priority = priority
		return m
	}

	var msgs []provider.Message
	var waits []provider.SlotWait
	for i := range 20 {
		id := fmt.Sprintf("w-%02d", i)
		// Priorities of both signs: a moved message keeps its place
		// among the others, and its side of the partial index.
		msgs = append(msgs, message("m-"+id, id, i%3-1))
		waits = append(waits, provider.SlotWait{InstanceID: id, Key: "k", Limit: 1})
	}
	require.NoError(t, s.EnqueueWaiting(ctx, &provider.EnqueueWaitingParams{Messages: msgs, Now: base, Waits: waits}))
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{
		Messages: []provider.Message{message("m-other", "other", 0), message("m-round", "round", 0)}, Now: base.Add(time.Second)}))
	require.Equal(t, []string{"m-other", "m-round", "m-w-00"}, inRange(),
		"the first waiter's start (priority -1) and the other messages are in the dequeue's range, the parked starts are not")
	moved := columns()

	// A round parks an instance: its message leaves the range too; a second
	// park does not move it again.
	for range 2 {
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			return tx.(provider.FlowSteps).ParkInstance(ctx, &provider.ParkInstanceParams{InstanceID: "round"})
		}))
	}
	require.Equal(t, []string{"m-other", "m-w-00"}, inRange())
	require.Equal(t, moved["m-round"].visible.AddDate(100000, 0, 0), columns()["m-round"].visible)

	// Wakes put the messages back where they were enqueued, once.
	require.NoError(t, s.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"w-05", "round"}}))
	require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
		return tx.(provider.FlowSteps).WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{"w-05", "w-07", "round"}})
	}))
	now := columns()
	for _, id := range []string{"m-w-05", "m-w-07", "m-round"} {
		want := moved[id]
		if id != "m-round" {
			want = cols{want.visible.AddDate(-100000, 0, 0), want.order.AddDate(-100000, 0, 0)}
		}
		require.Equal(t, want, now[id], id)
	}
	require.Equal(t, cols{base, provider.OrderAt(base, 1)}, now["m-w-05"], "the enqueue's time and order of priority 1")
	require.Equal(t, []string{"m-w-05", "m-w-07", "m-other", "m-round", "m-w-00"}, inRange(),
		"woken, they come before the messages queued after them, in their priority order")
}

// TestAcquireWritesTheKeyOnlyForANewLimit: an acquire locks its key's row
// but writes a new version of it only when it changes the limit.
func TestAcquireWritesTheKeyOnlyForANewLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := pgtest.NewStore(t, postgres.Options{})
	conn := adminConn(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	acquire := func(holder string, limit int) {
		t.Helper()
		require.NoError(t, s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			_, err := tx.(provider.FlowSteps).AcquireSlot(ctx, &provider.AcquireSlotParams{Key: "k", Limit: limit, Holder: holder, Now: base})
			return err
		}))
	}
	version := func() (xmin string, limit int) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, "SELECT xmin::text, lim FROM "+schema+".flow_keys WHERE key = 'k'").Scan(&xmin, &limit))
		return xmin, limit
	}
	acquire("inst-a", 2)
	first, limit := version()
	require.Equal(t, 2, limit)
	acquire("inst-b", 2)
	acquire("inst-c", 2)
	again, _ := version()
	require.Equal(t, first, again, "the same limit: the row is not written")
	acquire("inst-d", 3)
	changed, limit := version()
	require.Equal(t, 3, limit)
	require.NotEqual(t, first, changed)
}
