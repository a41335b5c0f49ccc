package demodata_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/internal/leakcheck"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/query"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func seed(t *testing.T) *demodata.Demo {
	t.Helper()
	d, err := demodata.Seed(context.Background(), memory.New(memory.Options{}))
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

func TestSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StatesAsDocumented", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		want := map[string]chronicle.Status{
			"CLM-1001": chronicle.StatusCompleted, "CLM-1002": chronicle.StatusRunning, "CLM-1003": chronicle.StatusRunning,
			"CLM-1004": chronicle.StatusTerminated, "KYC-3001": chronicle.StatusFailed, "LOAN-2001": chronicle.StatusCompleted,
			"LOAN-2002": chronicle.StatusRunning, "REF-4001": chronicle.StatusRunning,
		}
		list, err := d.Engine.ListInstances(ctx, chronicle.InstanceFilter{})
		require.NoError(t, err)
		got := map[string]chronicle.Status{}
		for _, in := range list {
			got[in.ID] = in.Status
		}
		require.Equal(t, want, got)
		var stories []string
		for _, s := range demodata.Stories() {
			stories = append(stories, s.InstanceID)
			require.Contains(t, want, s.InstanceID)
		}
		require.Len(t, stories, len(want))

		open, err := d.Engine.ListTasks(ctx, chronicle.TaskFilter{Status: chronicle.TaskOpen})
		require.NoError(t, err)
		require.Len(t, open, 2)
		require.Equal(t, demodata.ReviewTaskID("CLM-1002"), open[0].TaskID)
		require.Empty(t, open[0].Assignee)
		require.Equal(t, "bob", open[1].Assignee)

		letters, err := d.Engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		require.Equal(t, "REF-4001", letters[0].InstanceID)

		res, err := d.Engine.VerifyAll(ctx)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err, r.InstanceID)
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		t.Parallel()
		a, b := seed(t), seed(t)
		ids := a.Store.(*memory.Store).InstanceIDs()
		require.Equal(t, ids, b.Store.(*memory.Store).InstanceIDs())
		for _, id := range ids {
			ha, err := a.Engine.History(ctx, id)
			require.NoError(t, err)
			hb, err := b.Engine.History(ctx, id)
			require.NoError(t, err)
			require.Equal(t, ha, hb, id)
		}
		require.Equal(t, a.Clock.Now(), b.Clock.Now())
	})

	t.Run("RedriveAfterTheFix", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		letters, err := d.Engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.NoError(t, d.Engine.RedriveDeadLetter(ctx, letters[0].ID, "ops"))
		require.NoError(t, d.Drain(ctx))
		in, err := d.Engine.Describe(ctx, "REF-4001")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, in.Status)
		var ref string
		require.NoError(t, in.Result(&ref))
		require.Equal(t, "RFD-ORD-99817", ref)
	})

	t.Run("RunWorksARedrive", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		start := d.Clock.Now()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- d.Run(runCtx) }()
		letters, err := d.Engine.ListDeadLetters(ctx, chronicle.DeadLetterFilter{})
		require.NoError(t, err)
		require.NoError(t, d.Engine.RedriveDeadLetter(ctx, letters[0].ID, "ops"))
		in, err := d.Engine.Wait(ctx, "REF-4001")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, in.Status)
		stop()
		require.NoError(t, <-ran)
		require.False(t, d.Clock.Now().Before(start), "the demo clock only moves on")
	})

	t.Run("ReviewCompletesAClaim", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		err := d.Engine.CompleteTask(ctx, demodata.ReviewTaskID("CLM-1002"), demodata.Review{Approved: true, Amount: 3900},
			chronicle.User{ID: "alice", Roles: []string{"adjuster"}})
		require.NoError(t, err)
		require.NoError(t, d.Drain(ctx))
		in, err := d.Engine.Describe(ctx, "CLM-1002")
		require.NoError(t, err)
		var s demodata.Settlement
		require.NoError(t, in.Result(&s))
		require.Equal(t, demodata.Settlement{Claim: "CLM-1002", Approved: true, Paid: 3900, Payment: "PAY-CLM-1002"}, s)
	})

	t.Run("TimerFiresWhenTheClockMoves", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		d.Clock.Advance(demodata.CoolingOff)
		require.NoError(t, d.Drain(ctx))
		in, err := d.Engine.Describe(ctx, "LOAN-2002")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, in.Status)
	})

	t.Run("RejectsAStoreWithData", func(t *testing.T) {
		t.Parallel()
		d := seed(t)
		_, err := demodata.Seed(ctx, d.Store)
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
		_, err = demodata.Seed(ctx, nil)
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	})
}

// TestHistoriesAreSealed checks the start of the demo's first instance: a
// user started it at Start, and its chain verifies.
func TestHistoriesAreSealed(t *testing.T) {
	t.Parallel()
	d := seed(t)
	events, err := d.Engine.History(context.Background(), "CLM-1001")
	require.NoError(t, err)
	require.Equal(t, history.KindExecutionStarted, events[0].Kind)
	require.Equal(t, "user:clerk.ines", events[0].Actor)
	require.Equal(t, demodata.Start, events[0].At)
	require.NoError(t, history.Verify(events))
}

// TestSearchAttributes checks the attributes the demo sets at start and
// from workflow code, and that SeedWith refuses to redeclare one of them
// with another type.
func TestSearchAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := seed(t)
	want := map[string]map[string]any{
		"CLM-1001":  {"amount": 1280.0, "policy": "POL-7731", "approved": true},
		"CLM-1002":  {"amount": 4300.0, "policy": "POL-8812"},
		"KYC-3001":  nil,
		"LOAN-2001": {"amount": 240000.0},
		"REF-4001":  {"amount": 89.0},
	}
	for id, attrs := range want {
		in, err := d.Engine.Describe(ctx, id)
		require.NoError(t, err)
		if attrs == nil {
			require.Empty(t, in.SearchAttributes, id)
			continue
		}
		require.Equal(t, attrs, in.SearchAttributes, id)
	}
	in, err := d.Engine.Describe(ctx, "CLM-1001")
	require.NoError(t, err)
	require.Equal(t, "paid", in.CustomStatusText)

	_, err = demodata.SeedWith(ctx, memory.New(memory.Options{}), demodata.SeedOptions{SearchAttributes: map[string]query.Type{"amount": query.Int}})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	extra, err := demodata.SeedWith(ctx, memory.New(memory.Options{}), demodata.SeedOptions{SearchAttributes: map[string]query.Type{"region": query.Keyword}})
	require.NoError(t, err)
	t.Cleanup(extra.Close)
	require.Equal(t, query.Keyword, extra.Engine.Options().SearchAttributes["region"])
	require.Equal(t, query.Float, extra.Engine.Options().SearchAttributes["amount"])
}
