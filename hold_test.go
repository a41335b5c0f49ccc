package chronicle_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// ended starts echo instances and ends them.
func (b *bundle) ended(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		b.start(t, "echo", id, id)
	}
	b.drain(t)
	for _, id := range ids {
		require.NoError(t, b.engine.RaiseEvent(b.ctx, id, "go", "!", nil))
	}
	b.drain(t)
	for _, id := range ids {
		require.Equal(t, chronicle.StatusCompleted, b.describe(t, id).Status)
	}
}

func holdOpts(reason string) chronicle.HoldOptions {
	return chronicle.HoldOptions{Reason: reason, Actor: "counsel", Ticket: "LIT-7"}
}

func TestHeldInstanceSurvivesPurgeUntilReleased(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	b.ended(t, "h-1", "h-2")

	h, err := b.engine.Hold(b.ctx, "h-1", holdOpts("litigation"))
	require.NoError(t, err)
	require.Equal(t, "user:counsel", h.Actor)
	b.drain(t)
	inst := b.describe(t, "h-1")
	require.NotNil(t, inst.Hold, "Describe shows the hold")
	require.Equal(t, h.HoldID, inst.Hold.HoldID)
	require.Equal(t, chronicle.StatusCompleted, inst.Status, "a hold does not change the status")
	events := b.history(t, "h-1")
	last := events[len(events)-1]
	require.Equal(t, history.KindHoldPlaced, last.Kind, "the hold is on record after the end: %v", kinds(events))
	require.Equal(t, "user:counsel", last.Actor)
	a, err := last.Attributes()
	require.NoError(t, err)
	require.Equal(t, &history.HoldPlaced{HoldID: h.HoldID, Reason: "litigation", Ticket: "LIT-7"}, a)

	// Holding again changes nothing and records nothing more.
	again, err := b.engine.Hold(b.ctx, "h-1", holdOpts("again"))
	require.NoError(t, err)
	require.Equal(t, h, again)
	b.drain(t)
	require.Equal(t, 1, count(b.history(t, "h-1"), history.KindHoldPlaced))

	rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"h-1", "h-2"}, By: "records-officer"})
	require.ErrorIs(t, err, chronicle.ErrHeld)
	var he *chronicle.HeldError
	require.True(t, errors.As(err, &he))
	require.Len(t, he.Holds, 1)
	require.Equal(t, "h-1", he.Holds[0].InstanceID)
	require.Len(t, rep.Purged, 1)
	require.Equal(t, "h-2", rep.Purged[0].InstanceID, "the instance not held is purged")
	require.Contains(t, rep.Skipped["h-1"], "legal hold")
	require.Len(t, b.history(t, "h-1"), len(events), "nothing of the held instance was deleted")
	require.ErrorIs(t, chronicle.CheckNotHeld(b.engine, b.ctx, "h-1"), chronicle.ErrHeld, "an erasure is refused too")

	require.NoError(t, b.engine.ReleaseHold(b.ctx, "h-1", holdOpts("case closed")))
	b.drain(t)
	require.Nil(t, b.describe(t, "h-1").Hold)
	events = b.history(t, "h-1")
	require.Equal(t, history.KindHoldReleased, events[len(events)-1].Kind)
	require.NoError(t, chronicle.CheckNotHeld(b.engine, b.ctx, "h-1"))
	require.ErrorIs(t, b.engine.ReleaseHold(b.ctx, "h-1", holdOpts("twice")), chronicle.ErrNotHeld)

	rep, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"h-1"}, By: "records-officer"})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1, "released, it is purged: %v", rep.Skipped)
	require.Equal(t, events[len(events)-1].Seq, rep.Purged[0].LastSeq, "the tombstone covers the hold's records")
}

func TestHoldOnARunningInstanceDoesNotMoveItsCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	b.start(t, "echo", "r-1", "a")
	b.drain(t)
	_, err := b.engine.Hold(b.ctx, "r-1", holdOpts("audit"))
	require.NoError(t, err)
	b.drain(t)
	// A node that never saw the instance replays a history holding the
	// record between its turns.
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", echo)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "r-1", "go", "b", nil))
	b.drain(t)
	require.Equal(t, "ab", result[string](t, b, "r-1"))
	rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"r-1"}, By: "officer"})
	require.ErrorIs(t, err, chronicle.ErrHeld)
	require.Empty(t, rep.Purged)
}

func TestHoldRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	_, err := b.engine.Hold(b.ctx, "nobody", holdOpts("x"))
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	b.ended(t, "x-1")
	_, err = b.engine.Hold(b.ctx, "x-1", chronicle.HoldOptions{Actor: "counsel"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "a hold needs a reason")
	_, err = b.engine.Hold(b.ctx, "x-1", chronicle.HoldOptions{Reason: "r"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "a hold needs an actor")
	require.ErrorIs(t, b.engine.ReleaseHold(b.ctx, "x-1", holdOpts("r")), chronicle.ErrNotHeld)
}

func TestBatchHoldAndPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.engine, "echo", echo)
	b.ended(t, "b-1", "b-2", "b-3")
	_, err := b.engine.Hold(b.ctx, "b-2", holdOpts("litigation"))
	require.NoError(t, err)
	b.drain(t)
	batch := func(o chronicle.BatchOptions) *chronicle.BatchDescription {
		t.Helper()
		o.Workflow, o.Actor = "echo", "officer"
		id, err := b.engine.StartBatch(b.ctx, o)
		require.NoError(t, err)
		b.drain(t)
		d, err := b.engine.DescribeBatch(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, chronicle.BatchCompleted, d.State, "%+v", d)
		return d
	}
	d := batch(chronicle.BatchOptions{Action: chronicle.BatchPurge, Reason: "cleanup"})
	require.Equal(t, int64(2), d.Done)
	require.Equal(t, int64(1), d.Skipped, "the held instance is skipped")
	require.Equal(t, int64(0), d.Failed)
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "b-2").Status, "the held instance survives a batch purge")

	b.ended(t, "b-4", "b-5")
	d = batch(chronicle.BatchOptions{Action: chronicle.BatchHold, Reason: "subpoena", Ticket: "SUB-1"})
	require.Equal(t, int64(2), d.Done, "%+v", d)
	require.Equal(t, int64(1), d.Skipped, "b-2 was held already")
	for _, id := range []string{"b-2", "b-4", "b-5"} {
		require.NotNil(t, b.describe(t, id).Hold, id)
	}
	events := b.history(t, "b-4")
	require.Equal(t, history.KindHoldPlaced, events[len(events)-1].Kind)
	require.Equal(t, "user:officer", events[len(events)-1].Actor)
	holds, err := b.engine.ListHolds(b.ctx)
	require.NoError(t, err)
	require.Len(t, holds, 3)

	d = batch(chronicle.BatchOptions{Action: chronicle.BatchRelease, Reason: "settled"})
	require.Equal(t, int64(3), d.Done, "%+v", d)
	holds, err = b.engine.ListHolds(b.ctx)
	require.NoError(t, err)
	require.Empty(t, holds)
}

func TestRetentionPurgesOnlyOldUnheldInstances(t *testing.T) {
	t.Parallel()
	for name, store := range map[string]func(t *testing.T) provider.Store{
		"memory":   func(*testing.T) provider.Store { return memory.New(memory.Options{}) },
		"postgres": func(t *testing.T) provider.Store { return pgtest.NewStore(t, postgres.Options{}) },
		"mongo":    func(t *testing.T) provider.Store { return mongotest.NewStore(t, chmongo.Options{}) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			retentionKeepsHeld(t, store(t))
		})
	}
}

func retentionKeepsHeld(t *testing.T, store provider.Store) {
	dir := t.TempDir()
	b := setupOn(t, store, chronicle.Options{Retention: map[string]chronicle.RetentionPolicy{
		"echo": {After: 24 * time.Hour, Archive: chronicle.ArchiveJSONL(dir)},
	}})
	register(t, b.engine, "echo", echo)
	register(t, b.engine, "other", echo)
	b.ended(t, "old-1", "old-held")
	b.start(t, "other", "other-1", "x")
	b.drain(t)
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "other-1", "go", "!", nil))
	b.start(t, "echo", "running", "x")
	_, err := b.engine.Hold(b.ctx, "old-held", holdOpts("litigation"))
	require.NoError(t, err)
	b.advance(t, 23*time.Hour)
	b.ended(t, "young")

	rep, err := b.engine.RunRetention(b.ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Count(), "nothing is 24 hours old yet: %+v", rep)

	b.advance(t, 2*time.Hour)
	rep, err = b.engine.RunRetention(b.ctx)
	require.NoError(t, err)
	require.Len(t, rep.Purged["echo"], 1, "%+v", rep)
	require.Equal(t, "old-1", rep.Purged["echo"][0].InstanceID)
	require.Equal(t, history.ActorRetention, rep.Purged["echo"][0].PurgedBy, "the purge is on record as retention's")
	require.Equal(t, []string{"old-held"}, rep.Held)
	require.FileExists(t, chronicle.ArchivePath(dir, "old-1"))
	for _, id := range []string{"old-held", "young", "other-1", "running"} {
		b.describe(t, id) // still there
	}

	require.NoError(t, b.engine.ReleaseHold(b.ctx, "old-held", holdOpts("settled")))
	b.drain(t)
	rep, err = b.engine.RunRetention(b.ctx)
	require.NoError(t, err)
	require.Len(t, rep.Purged["echo"], 1, "released, it is purged by the next run: %+v", rep)
	require.Equal(t, "old-held", rep.Purged["echo"][0].InstanceID)
	require.Empty(t, rep.Held)
	_, err = b.engine.Describe(b.ctx, "old-held")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
}

func TestRetentionRunsAsDurableBackgroundWork(t *testing.T) {
	t.Parallel()
	b := setup(t, chronicle.Options{
		Retention:      map[string]chronicle.RetentionPolicy{"echo": {After: 24 * time.Hour}},
		RetentionEvery: time.Hour,
	})
	register(t, b.engine, "echo", echo)
	b.ended(t, "e-1", "e-2")
	_, err := b.engine.Hold(b.ctx, "e-2", holdOpts("litigation"))
	require.NoError(t, err)
	require.NoError(t, chronicle.StartRetention(b.engine, b.ctx))
	require.NoError(t, chronicle.StartRetention(b.engine, b.ctx), "a second start finds it running")
	b.drain(t)
	b.describe(t, "e-1")

	b.clock.Advance(25 * time.Hour)
	// The node restarts: the retention workflow goes on from its history.
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", echo)
	b.drain(t)
	_, err = b.engine.Describe(b.ctx, "e-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "the timer's run purged it")
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "e-2").Status, "the held one is kept")
	ts, err := b.engine.GetTombstone(b.ctx, "e-1")
	require.NoError(t, err)
	require.Equal(t, history.ActorRetention, ts.PurgedBy)
	inst := b.describe(t, chronicle.RetentionInstanceID)
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	var st struct {
		Runs  int64 `json:"runs"`
		Total int64 `json:"total"`
		Held  int   `json:"held"`
	}
	ok, err := inst.CustomStatus(&st)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), st.Total)
	require.Equal(t, 1, st.Held)
}

func TestRetentionOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for _, o := range []chronicle.Options{
		{Retention: map[string]chronicle.RetentionPolicy{"echo": {}}},
		{Retention: map[string]chronicle.RetentionPolicy{"echo": {After: time.Second}}},
		{Retention: map[string]chronicle.RetentionPolicy{chronicle.BatchWorkflow: {After: time.Hour}}},
		{RetentionEvery: -time.Second},
	} {
		require.ErrorIs(t, o.Validate(), chronicle.ErrInvalidArgument, "%+v", o)
	}
}

// Retention with signed checkpoints: its purges are signed tombstones,
// the held instance and the hold's events are covered by checkpoints,
// and verification holds; an engine that cannot sign purges nothing.
func TestRetentionSignsItsTombstones(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	o := signed(s)
	o.Retention = map[string]chronicle.RetentionPolicy{"echo": {After: time.Hour}}
	b := setup(t, o)
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "s-1", "s-2")
	_, err := b.engine.Hold(b.ctx, "s-2", holdOpts("audit"))
	require.NoError(t, err)
	b.drain(t)
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)

	// A node that cannot sign keeps its hands off.
	unsigned := b.opts
	unsigned.Checkpoints = nil
	plain, err := chronicle.New(b.store, unsigned)
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	b.clock.Advance(2 * time.Hour)
	_, err = plain.RunRetention(b.ctx)
	require.ErrorIs(t, err, chronicle.ErrPurgeUnsigned)
	b.describe(t, "s-1")

	rep, err := b.engine.RunRetention(b.ctx)
	require.NoError(t, err)
	require.Len(t, rep.Purged["echo"], 1)
	require.Equal(t, []string{"s-2"}, rep.Held)
	v, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, v.OK(), "%+v", v)
	purged := map[string]bool{}
	for _, in := range v.Instances {
		purged[in.InstanceID] = in.Purged
	}
	require.Equal(t, map[string]bool{"s-1": true, "s-2": false}, purged)
}

// TestPostgresDescribeReadsRecordAndHoldTogether: on PostgreSQL,
// describing a running instance is one statement, held or not (its
// record and its legal hold are read together), and describing an ended
// one two (the queue is read too, for a start of the id queued again).
func TestPostgresDescribeReadsRecordAndHoldTogether(t *testing.T) {
	t.Parallel()
	log := &statementLog{seen: map[string]int{}}
	_, store := storeOnPool(t.Context(), t, pgtest.Schema(t), postgres.Options{}, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = log })
	b := setupOn(t, store)
	register(t, b.engine, "echo", echo)
	b.start(t, "echo", "running", "x")
	b.ended(t, "ended")
	b.drain(t)

	log.count()
	inst := b.describe(t, "running")
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	require.Nil(t, inst.Hold)
	require.Equal(t, 1, log.count(), "statements to describe a running instance")

	_, err := b.engine.Hold(b.ctx, "running", holdOpts("litigation"))
	require.NoError(t, err)
	b.drain(t)
	log.count()
	inst = b.describe(t, "running")
	require.NotNil(t, inst.Hold)
	require.Equal(t, "litigation", inst.Hold.Reason)
	require.Equal(t, 1, log.count(), "statements to describe a held running instance")

	inst = b.describe(t, "ended")
	require.Equal(t, chronicle.StatusCompleted, inst.Status)
	require.Nil(t, inst.Hold)
	// The record, then the queue: a read on generic plans, the setting
	// and the read in one round trip.
	require.Equal(t, 3, log.count(), "statements to describe an ended instance")
}
