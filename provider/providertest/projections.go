package providertest

import (
	"context"
	"testing"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/stretchr/testify/require"
)

// testProjections covers SaveProjections, GetSnapshot and GetInstance: a
// write lands only when it is folded beyond what is stored.
func testProjections(t *testing.T, factory Factory) {
	t.Run("SaveWritesSnapshotAndInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		p := projections(t, "inst-a", 3, "three", true)
		b.save(t, p)

		data, seq := b.snapshotOf(t, "inst-a")
		require.Equal(t, p.Snapshot, data)
		require.Equal(t, int64(3), seq)
		require.Equal(t, p.Instance, b.instanceOf(t, "inst-a"), "the instance record does not round-trip")
	})

	t.Run("OnlyNewerWritesLand", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		p3 := projections(t, "inst-a", 3, "three", true)
		b.save(t, p3)

		// Folded before or at the stored Seq: a retried or late write.
		b.save(t, projections(t, "inst-a", 2, "two", true))
		b.save(t, projections(t, "inst-a", 3, "three again", true))
		data, seq := b.snapshotOf(t, "inst-a")
		require.Equal(t, p3.Snapshot, data, "an older or equal write replaced the snapshot")
		require.Equal(t, int64(3), seq)
		require.Equal(t, p3.Instance, b.instanceOf(t, "inst-a"), "an older or equal write replaced the instance record")

		p5 := projections(t, "inst-a", 5, "five", true)
		b.save(t, p5)
		data, seq = b.snapshotOf(t, "inst-a")
		require.Equal(t, p5.Snapshot, data)
		require.Equal(t, int64(5), seq)
		require.Equal(t, p5.Instance, b.instanceOf(t, "inst-a"))

		// Without an instance record only the snapshot moves on.
		p6 := projections(t, "inst-a", 6, "six", false)
		b.save(t, p6)
		data, seq = b.snapshotOf(t, "inst-a")
		require.Equal(t, p6.Snapshot, data)
		require.Equal(t, int64(6), seq)
		require.Equal(t, p5.Instance, b.instanceOf(t, "inst-a"), "a write without an instance record changed it")
	})

	t.Run("TaskEventsAreAddedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		// The same task event in two writes, as a peek-lock round retried
		// after a crash writes it: the second write must not fail on it.
		// The store contract has no read path for task records, so only the
		// absence of an error and the snapshot are checked here.
		b.save(t, projections(t, "inst-a", 2, "two", true))
		p3 := projections(t, "inst-a", 3, "three", true)
		b.save(t, p3)
		_, seq := b.snapshotOf(t, "inst-a")
		require.Equal(t, int64(3), seq)
	})

	t.Run("InstancesAreIndependent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		pa := projections(t, "inst-a", 7, "a", true)
		pb := projections(t, "inst-b", 1, "b", true)
		pb.Tasks[0].TaskID, pb.TaskEvents[0].TaskID = "task-b", "task-b" // task ids are unique per store
		b.save(t, pa)
		b.save(t, pb)

		data, seq := b.snapshotOf(t, "inst-a")
		require.Equal(t, pa.Snapshot, data)
		require.Equal(t, int64(7), seq)
		data, seq = b.snapshotOf(t, "inst-b")
		require.Equal(t, pb.Snapshot, data)
		require.Equal(t, int64(1), seq, "a lower Seq of another instance was not written")
		require.Equal(t, pb.Instance, b.instanceOf(t, "inst-b"))
	})

	t.Run("CustomVersionsNeverGoBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		custom := func(version int, seq int64, data string) provider.CustomRecord {
			return provider.CustomRecord{Name: "totals", Version: version, InstanceID: "inst-a", Seq: seq, Data: []byte(data)}
		}
		save := func(c provider.CustomRecord) {
			t.Helper()
			b.save(t, &provider.Projections{InstanceID: "inst-a", Seq: c.Seq, Custom: []provider.CustomRecord{c}})
		}
		stored := func() provider.CustomRecord {
			t.Helper()
			rec, err := b.queries(t).GetCustomProjection(t.Context(), "totals", "inst-a")
			require.NoError(t, err)
			return *rec
		}

		save(custom(1, 5, "v1@5"))
		// A rolling deploy: nodes of both versions run rounds of the
		// instance, and late writes of either arrive.
		save(custom(2, 4, "v2@4"))
		require.Equal(t, custom(1, 5, "v1@5"), stored(), "a write folded at a lower Seq replaced the record")
		save(custom(2, 5, "v2@5"))
		require.Equal(t, custom(2, 5, "v2@5"), stored(), "a newer version at the same Seq did not replace the record")
		save(custom(1, 7, "v1@7"))
		require.Equal(t, custom(2, 5, "v2@5"), stored(), "an older version replaced a newer one")
		save(custom(2, 5, "v2@5 again"))
		require.Equal(t, custom(2, 5, "v2@5"), stored(), "a write at the stored Seq and version replaced the record")
		save(custom(2, 7, "v2@7"))
		require.Equal(t, custom(2, 7, "v2@7"), stored())

		// Going back to an older version takes a rebuild: reset, then save.
		require.NoError(t, b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error {
			return s.ResetProjections(ctx, &provider.ResetProjectionsParams{InstanceID: "inst-a", Custom: []string{"totals"}})
		}))
		save(custom(1, 7, "v1@7 rebuilt"))
		require.Equal(t, custom(1, 7, "v1@7 rebuilt"), stored())
	})

	t.Run("TaskIDsAreUniqueAcrossInstances", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		p1 := projections(t, "i-1", 3, "one", true)
		b.save(t, p1)

		// Another instance creates a task with the same explicit id, at a
		// higher Seq and then at a lower one: neither may take it over or
		// vanish silently.
		for _, seq := range []int64{5, 2} {
			p2 := projections(t, "i-2", seq, "two", true)
			err := b.steps(t.Context(), func(ctx context.Context, s provider.Steps) error { return s.SaveProjections(ctx, p2) })
			require.ErrorIs(t, err, provider.ErrTaskIDTaken, "seq %d", seq)
			var taken *provider.TaskIDTakenError
			require.ErrorAs(t, err, &taken)
			require.Equal(t, provider.TaskIDTakenError{TaskID: "task-1", InstanceID: "i-2", Owner: "i-1"}, *taken)
			_, _, err = b.store.GetSnapshot(t.Context(), "i-2")
			require.ErrorIs(t, err, provider.ErrNotFound, "a refused write saved some of its records")
		}
		got, err := b.queries(t).GetTask(t.Context(), "task-1")
		require.NoError(t, err)
		require.Equal(t, p1.Tasks[0], *got, "the first instance's task changed")
		recs, err := b.queries(t).ListTasks(t.Context(), &provider.ListTasksParams{})
		require.NoError(t, err)
		require.Len(t, recs, 1)

		// The owner itself moves its task on.
		b.save(t, projections(t, "i-1", 4, "one more", true))
		got, err = b.queries(t).GetTask(t.Context(), "task-1")
		require.NoError(t, err)
		require.Equal(t, int64(4), got.Seq)
	})
}
