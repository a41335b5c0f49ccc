package providertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// testQueries covers the read side: instances, tasks, task events and
// custom projections, and projection resets.
func testQueries(t *testing.T, factory Factory) {
	t.Run("ListInstancesFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		mk := func(id, name, key string, status provider.Status, created time.Duration) {
			p := projections(t, id, 5, id, true)
			p.Tasks, p.TaskEvents, p.Custom = nil, nil, nil
			p.Instance.Name, p.Instance.BusinessKey, p.Instance.Status = name, key, status
			p.Instance.CreatedAt, p.Instance.UpdatedAt = at(created), at(created+time.Minute)
			b.save(t, p)
		}
		mk("i-1", "claim", "C-1", provider.StatusRunning, time.Hour)
		mk("i-2", "claim", "C-2", provider.StatusCompleted, 2*time.Hour)
		mk("i-3", "loan", "L-1", provider.StatusFailed, 3*time.Hour)
		mk("i-4", "claim", "C-1", provider.StatusSuspended, 4*time.Hour)
		ids := func(p provider.ListInstancesParams) []string {
			recs, err := b.queries(t).ListInstances(t.Context(), &p)
			require.NoError(t, err)
			var out []string
			for _, r := range recs {
				out = append(out, r.InstanceID)
			}
			return out
		}
		require.Equal(t, []string{"i-1", "i-2", "i-3", "i-4"}, ids(provider.ListInstancesParams{}))
		require.Equal(t, []string{"i-1", "i-2", "i-4"}, ids(provider.ListInstancesParams{Name: "claim"}))
		require.Equal(t, []string{"i-2"}, ids(provider.ListInstancesParams{Status: provider.StatusCompleted}))
		require.Equal(t, []string{"i-1", "i-4"}, ids(provider.ListInstancesParams{BusinessKey: "C-1"}))
		require.Equal(t, []string{"i-2", "i-3"}, ids(provider.ListInstancesParams{CreatedFrom: at(2 * time.Hour), CreatedTo: at(4 * time.Hour)}))
		require.Equal(t, []string{"i-2", "i-3"}, ids(provider.ListInstancesParams{Terminal: true}))
		require.Equal(t, []string{"i-2"}, ids(provider.ListInstancesParams{Terminal: true, UpdatedBefore: at(3 * time.Hour)}))
		require.Equal(t, []string{"i-1", "i-2"}, ids(provider.ListInstancesParams{Limit: 2}))
		require.Equal(t, []string{"i-3", "i-4"}, ids(provider.ListInstancesParams{AfterID: "i-2", Limit: 2}))
		require.Empty(t, ids(provider.ListInstancesParams{Name: "none"}))
		recs, err := b.queries(t).ListInstances(t.Context(), &provider.ListInstancesParams{BusinessKey: "L-1"})
		require.NoError(t, err)
		require.Len(t, recs, 1)
		want := record("i-3", 5, "i-3")
		want.Name, want.BusinessKey, want.Status, want.CreatedAt, want.UpdatedAt = "loan", "L-1", provider.StatusFailed, at(3*time.Hour), at(3*time.Hour+time.Minute)
		require.True(t, want.Equal(&recs[0]), "record round-trips: %+v", recs[0])
	})

	t.Run("TasksFiltersPagesAndEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		task := func(id, instance string, status provider.TaskStatus, assignee string, roles ...string) provider.TaskRecord {
			return provider.TaskRecord{TaskID: id, InstanceID: instance, ExecutionID: execID, Name: "review-" + id, Status: status,
				Assignee: assignee, Roles: roles, Payload: []byte("p-" + id), Result: []byte("r-" + id), Due: at(48 * time.Hour),
				CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second), Seq: 4}
		}
		p := &provider.Projections{InstanceID: "i-1", Seq: 4, Tasks: []provider.TaskRecord{
			task("t-1", "i-1", provider.TaskOpen, "", "underwriter"),
			task("t-2", "i-1", provider.TaskOpen, "ana", "underwriter", "supervisor"),
		}, TaskEvents: []provider.TaskEventRecord{
			{InstanceID: "i-1", TaskID: "t-2", Seq: 4, Kind: history.KindTaskAssigned, Actor: "user:ana", At: at(2 * time.Second), Assignee: "ana", Detail: "claimed"},
			{InstanceID: "i-1", TaskID: "t-1", Seq: 3, Kind: history.KindTaskCreated, Actor: history.ActorSystem, At: at(time.Second)},
			{InstanceID: "i-1", TaskID: "t-2", Seq: 3, Kind: history.KindTaskCreated, Actor: history.ActorSystem, At: at(time.Second)},
		}}
		b.save(t, p)
		b.save(t, &provider.Projections{InstanceID: "i-2", Seq: 9, Tasks: []provider.TaskRecord{task("t-3", "i-2", provider.TaskCompleted, "bo", "clerk")}})
		ids := func(p provider.ListTasksParams) []string {
			recs, err := b.queries(t).ListTasks(t.Context(), &p)
			require.NoError(t, err)
			var out []string
			for _, r := range recs {
				out = append(out, r.TaskID)
			}
			return out
		}
		require.Equal(t, []string{"t-1", "t-2", "t-3"}, ids(provider.ListTasksParams{}))
		require.Equal(t, []string{"t-1", "t-2"}, ids(provider.ListTasksParams{InstanceID: "i-1"}))
		require.Equal(t, []string{"t-1", "t-2"}, ids(provider.ListTasksParams{Status: provider.TaskOpen}))
		require.Equal(t, []string{"t-2"}, ids(provider.ListTasksParams{Assignee: "ana"}))
		require.Equal(t, []string{"t-1"}, ids(provider.ListTasksParams{Unassigned: true, Status: provider.TaskOpen}))
		require.Equal(t, []string{"t-2", "t-3"}, ids(provider.ListTasksParams{Roles: []string{"supervisor", "clerk"}}))
		require.Equal(t, []string{"t-2"}, ids(provider.ListTasksParams{AfterID: "t-1", Limit: 1}))

		got, err := b.queries(t).GetTask(t.Context(), "t-2")
		require.NoError(t, err)
		require.Equal(t, task("t-2", "i-1", provider.TaskOpen, "ana", "underwriter", "supervisor"), *got)
		_, err = b.queries(t).GetTask(t.Context(), "t-none")
		require.ErrorIs(t, err, provider.ErrNotFound)

		events, err := b.queries(t).ListTaskEvents(t.Context(), &provider.ListTaskEventsParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Len(t, events, 3)
		require.Equal(t, int64(3), events[0].Seq)
		require.Equal(t, int64(4), events[2].Seq)
		require.Equal(t, p.TaskEvents[0], events[2])
		events, err = b.queries(t).ListTaskEvents(t.Context(), &provider.ListTaskEventsParams{InstanceID: "i-1", TaskID: "t-1"})
		require.NoError(t, err)
		require.Len(t, events, 1)
	})

	t.Run("CustomProjections", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		b.save(t, projections(t, "i-1", 5, "v1", true))
		rec, err := b.queries(t).GetCustomProjection(t.Context(), "totals", "i-1")
		require.NoError(t, err)
		require.Equal(t, provider.CustomRecord{Name: "totals", Version: 1, InstanceID: "i-1", Seq: 5, Data: []byte("v1")}, *rec)
		// An older fold does not overwrite, not even of a new version; a
		// new version folded as far or further does.
		p := projections(t, "i-1", 4, "old", false)
		b.save(t, p)
		p = projections(t, "i-1", 3, "v2", false)
		p.Custom[0].Version = 2
		b.save(t, p)
		rec, err = b.queries(t).GetCustomProjection(t.Context(), "totals", "i-1")
		require.NoError(t, err)
		require.Equal(t, []byte("v1"), rec.Data)
		p = projections(t, "i-1", 6, "v2", false)
		p.Custom[0].Version = 2
		b.save(t, p)
		rec, err = b.queries(t).GetCustomProjection(t.Context(), "totals", "i-1")
		require.NoError(t, err)
		require.Equal(t, 2, rec.Version)
		require.Equal(t, []byte("v2"), rec.Data)
		_, err = b.queries(t).GetCustomProjection(t.Context(), "none", "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
	})

	t.Run("ResetProjectionsClearsForRebuild", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		stale := projections(t, "i-1", 9, "stale", true)
		stale.Custom = append(stale.Custom, provider.CustomRecord{Name: "kept", Version: 1, InstanceID: "i-1", Seq: 9, Data: []byte("kept")})
		b.save(t, stale)
		other := projections(t, "i-2", 9, "other", true)
		other.Tasks[0].TaskID, other.TaskEvents[0].TaskID = "task-2", "task-2" // task ids are unique per store
		b.save(t, other)
		require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
			if err := s.ResetProjections(ctx, &provider.ResetProjectionsParams{InstanceID: "i-1", Custom: []string{"totals"}}); err != nil {
				return err
			}
			// A rebuild writes an older fold than the one it replaces.
			return s.SaveProjections(ctx, projections(t, "i-1", 3, "fresh", true))
		}))
		kept, err := b.queries(t).GetCustomProjection(t.Context(), "kept", "i-1")
		require.NoError(t, err, "custom projections the rebuild does not name are kept")
		require.Equal(t, []byte("kept"), kept.Data)
		_, seq := b.snapshotOf(t, "i-1")
		require.Equal(t, int64(3), seq)
		require.Equal(t, "claim-fresh", b.instanceOf(t, "i-1").BusinessKey)
		rec, err := b.queries(t).GetCustomProjection(t.Context(), "totals", "i-1")
		require.NoError(t, err)
		require.Equal(t, []byte("fresh"), rec.Data)
		require.Equal(t, "claim-other", b.instanceOf(t, "i-2").BusinessKey, "other instances are untouched")
	})
}

// testPurge covers purge and tombstones.
func testPurge(t *testing.T, factory Factory) {
	t.Run("PurgeEndedInstanceLeavesTombstone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		events := chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))
		require.NoError(t, b.appendEvents(t.Context(), "i-1", events))
		b.save(t, projections(t, "i-1", 2, "done", true)) // status completed
		task := activity("i-1", execID, 2, "")
		b.enqueueTasks(t, base, task)
		b.enqueue(t, base, signal(t, "m-1", "i-1"))
		b.deadLetter(t, at(time.Second), "i-1", []string{"m-1"}, provider.ReasonRejected, "late")
		b.enqueue(t, base, signal(t, "m-2", "i-1"))
		// Another instance stays.
		require.NoError(t, b.appendEvents(t.Context(), "i-2", chain("i-2", nil, startEvent(t, execID))))

		ts, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, provider.Tombstone{InstanceID: "i-1", LastSeq: 2, LastHash: events[1].Hash, PurgedAt: at(time.Hour), PurgedBy: "user:ops"}, *ts)
		got, err := b.purges(t).GetTombstone(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, ts, got)

		require.Empty(t, b.load(t, "i-1", 1))
		_, err = b.store.GetInstance(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, _, err = b.store.GetSnapshot(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, err = b.queries(t).GetTask(t.Context(), "task-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
		evs, err := b.queries(t).ListTaskEvents(t.Context(), &provider.ListTaskEventsParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Empty(t, evs)
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Empty(t, msgs)
		require.Nil(t, b.claim(t, at(time.Hour)), "activity tasks of a purged instance are gone")
		letters, err := b.deadLetters(t).ListDeadLetters(t.Context(), &provider.ListDeadLettersParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Empty(t, letters)
		require.Len(t, b.load(t, "i-2", 1), 1)
		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.ErrorIs(t, err, provider.ErrNotFound, "purging twice")
	})

	t.Run("EveryPurgeKeepsItsTombstone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		purge := func(now time.Time, by string) provider.Tombstone {
			t.Helper()
			ts, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: by, Now: now})
			require.NoError(t, err)
			return *ts
		}
		first := chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))
		require.NoError(t, b.appendEvents(t.Context(), "i-1", first))
		b.save(t, projections(t, "i-1", 2, "done", true))
		ts1 := purge(at(time.Hour), "user:ops")

		// The id is reused, and the new instance is purged in turn.
		second := chain("i-1", nil, startEvent(t, "exec-2"))
		require.NoError(t, b.appendEvents(t.Context(), "i-1", second))
		b.save(t, projections(t, "i-1", 1, "again", true))
		ts2 := purge(at(2*time.Hour), "user:ana")
		require.Equal(t, provider.Tombstone{InstanceID: "i-1", LastSeq: 1, LastHash: second[0].Hash, PurgedAt: at(2 * time.Hour), PurgedBy: "user:ana"}, ts2)

		got, err := b.purges(t).GetTombstone(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, ts2, *got, "GetTombstone returns the latest purge's")
		all, err := b.purges(t).ListTombstones(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, []provider.Tombstone{
			{InstanceID: "i-1", LastSeq: 2, LastHash: first[1].Hash, PurgedAt: at(time.Hour), PurgedBy: "user:ops"},
			ts2,
		}, all, "the first purge's tombstone was lost")
		require.Equal(t, ts1, all[0])

		none, err := b.purges(t).ListTombstones(t.Context(), "i-2")
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("PurgesOfAReusedIDAtOneInstantKeepTheirTombstones", func(t *testing.T) {
		// Two runs of an id end at the same seq and are purged at the
		// same clock reading: each purge keeps its own tombstone.
		t.Parallel()
		b := setup(t, factory)
		var want []provider.Tombstone
		for _, exec := range []string{"exec-1", "exec-2"} {
			events := chain("i-1", nil, startEvent(t, exec), markerEvent(t, "m"))
			require.NoError(t, b.appendEvents(t.Context(), "i-1", events))
			b.save(t, projections(t, "i-1", 2, exec, true))
			ts, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
			require.NoError(t, err)
			require.Equal(t, events[1].Hash, ts.LastHash)
			got, err := b.purges(t).GetTombstone(t.Context(), "i-1")
			require.NoError(t, err)
			require.Equal(t, ts, got, "the stored tombstone is not the one the purge returned")
			want = append(want, *ts)
		}
		all, err := b.purges(t).ListTombstones(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, want, all)
	})

	t.Run("OnlyUnfinishedPurgesNothingElse", func(t *testing.T) {
		// A client starting an id finishes a purge of it that stopped
		// half-way; an ended instance that no purge began stays.
		t.Parallel()
		b := setup(t, factory)
		events := chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))
		require.NoError(t, b.appendEvents(t.Context(), "i-1", events))
		b.save(t, projections(t, "i-1", 2, "done", true)) // status completed
		_, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour), OnlyUnfinished: true})
		require.ErrorIs(t, err, provider.ErrNotFound)
		require.Len(t, b.load(t, "i-1", 1), 2, "a purge no one began was made")
		require.Equal(t, provider.StatusCompleted, b.instanceOf(t, "i-1").Status)
		_, err = b.purges(t).GetTombstone(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "none", By: "user:ops", Now: at(time.Hour), OnlyUnfinished: true})
		require.ErrorIs(t, err, provider.ErrNotFound)
	})

	t.Run("PurgeKeepsTheQueuedStartOfTheNextRun", func(t *testing.T) {
		// A parent starting a child under an ended child's id, or a
		// client restarting an ended instance, queues the start of the
		// id's next run; a purge of the ended run must not take it away.
		t.Parallel()
		b := setup(t, factory)
		events := chain("i-1", nil, startEvent(t, execID), markerEvent(t, "m"))
		require.NoError(t, b.appendEvents(t.Context(), "i-1", events))
		b.save(t, projections(t, "i-1", 2, "done", true)) // status completed
		next, err := provider.NewMessage("start-2", "i-1", "exec-2", "exec-2", &history.ExecutionStarted{Name: "approve-claim"})
		require.NoError(t, err)
		b.enqueue(t, at(time.Minute), next)

		ts, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		if err != nil {
			// Refused: the instance is not ended while its next run waits.
			require.ErrorIs(t, err, provider.ErrInvalidState)
			require.Len(t, b.load(t, "i-1", 1), 2, "a refused purge deleted history")
		} else {
			require.Equal(t, int64(2), ts.LastSeq)
			require.Empty(t, b.load(t, "i-1", 1))
		}
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Equal(t, []string{"start-2"}, messageIDs(msgs), "the purge took the start of the next run away")
		d := b.take(t, at(time.Hour), 10, "")
		require.NotNil(t, d, "the start of the next run is never delivered")
		require.Equal(t, "i-1", d.InstanceID)
		require.Equal(t, []string{"start-2"}, messageIDs(d.Messages))
	})

	t.Run("PurgeRefusesRunningAndUnknownInstances", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		require.NoError(t, b.appendEvents(t.Context(), "i-1", chain("i-1", nil, startEvent(t, execID))))
		p := projections(t, "i-1", 1, "running", true)
		p.Instance.Status = provider.StatusRunning
		b.save(t, p)
		_, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.ErrorIs(t, err, provider.ErrInvalidState)
		require.Len(t, b.load(t, "i-1", 1), 1, "nothing was deleted")
		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "none", By: "user:ops", Now: at(time.Hour)})
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, err = b.purges(t).GetTombstone(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
	})
}
