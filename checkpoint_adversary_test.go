package chronicle_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// sleeper is a workflow that waits a minute of its clock, then ends:
// covered by a checkpoint while it runs, its head moves on.
func sleeper(c *chronicle.Context, s string) (string, error) {
	if err := c.Sleep(time.Minute); err != nil {
		return "", err
	}
	return s, nil
}

// forgedTombstone is the tombstone row a DBA without the key can write:
// the covered head is readable from the leaves table.
func forgedTombstone(t *testing.T, mem *memory.Store, id string) {
	t.Helper()
	mem.Tamper(func(rows *memory.TamperRows) {
		var leaf history.CheckpointLeaf
		for _, c := range rows.Checkpoints {
			if l, _, ok := c.Leaf(id); ok {
				leaf = l
			}
		}
		require.NotZero(t, leaf.Seq, "no leaf of %s", id)
		rows.Tombstones[id] = append(rows.Tombstones[id], provider.Tombstone{InstanceID: id, LastSeq: leaf.Seq, LastHash: leaf.Hash, PurgedAt: t0, PurgedBy: "dba"})
	})
}

// Item 1: a tombstone row whose seq and hash equal the covered head does
// not excuse a rewritten history; only a signed tombstone leaf would.
func TestCheckpointForgedTombstoneDoesNotHideARewrite(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "f-1", "f-2")
	events := b.history(t, "f-1")
	last := events[len(events)-1].Seq
	require.True(t, b.mem.RewriteHistory("f-1", func(ev []history.Event) []history.Event { return resealed(t, ev, 1) }))
	forgedTombstone(t, b.mem, "f-1")

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	requireMismatch(t, rep, "f-1", last)
}

// Item 2: a running instance deleted behind the engine's back, with the
// same forged tombstone row, is reported as deleted, not as purged.
func TestCheckpointForgedTombstoneDoesNotExcuseADeletedRunningInstance(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "sleeper", sleeper)
	b.start(t, "sleeper", "r-1", "x")
	b.drain(t)
	require.Equal(t, chronicle.StatusRunning, b.describe(t, "r-1").Status)
	_, err := b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.True(t, b.mem.DeleteHistory("r-1"))
	forgedTombstone(t, b.mem, "r-1")

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Len(t, rep.Instances, 1)
	require.False(t, rep.Instances[0].Purged)
	var m *chronicle.CheckpointMismatchError
	require.ErrorAs(t, rep.Instances[0].Err, &m)
	require.True(t, m.Deleted)
}

// Item 3: deleting the leaf rows that cover a rewritten instance breaks
// the checkpoint they belong to, and the sweep does not sign the forged
// head; nor does it sign over a covered head the history no longer holds.
func TestCheckpointDeletedLeavesAreFoundAndNotSignedOver(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	register(t, b.engine, "sleeper", sleeper)
	runEchoes(t, b, "l-1")
	runEchoes(t, b, "l-2")
	require.True(t, b.mem.RewriteHistory("l-1", func(ev []history.Event) []history.Event { return resealed(t, ev, 1) }))
	b.mem.Tamper(func(rows *memory.TamperRows) {
		for i := range rows.Checkpoints {
			c := &rows.Checkpoints[i]
			kept := c.Leaves[:0]
			for _, l := range c.Leaves {
				if l.InstanceID != "l-1" {
					kept = append(kept, l)
				}
			}
			c.Leaves = kept
		}
	})

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.False(t, rep.OK(), "a checkpoint missing a leaf verified: %+v", rep)
	require.Len(t, rep.Gaps, 1)
	require.Equal(t, int64(1), rep.Gaps[0].Number)
	require.ErrorIs(t, rep.Gaps[0], history.ErrMalformedCheckpoint)

	// A new process sweeps (as Run does when it starts): it refuses.
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	register(t, b.engine, "sleeper", sleeper)
	c, err := b.engine.SweepCheckpoint(b.ctx)
	require.ErrorIs(t, err, chronicle.ErrCheckpointRefused)
	require.Nil(t, c)
	cs, err := b.engine.ListCheckpoints(b.ctx, 0, 0)
	require.NoError(t, err)
	require.Len(t, cs, 2, "the sweep signed over a broken chain")

	// Leaves intact, a running instance rewritten and moved on: the sweep
	// leaves it out and says so.
	b2 := setup(t, signed(s))
	register(t, b2.engine, "sleeper", sleeper)
	register(t, b2.engine, "echo", quick)
	b2.start(t, "sleeper", "w-1", "x")
	b2.drain(t)
	_, err = b2.engine.Checkpoint(b2.ctx)
	require.NoError(t, err)
	b2.engine = b2.newEngine(t) // the old process dies with nothing pending
	register(t, b2.engine, "sleeper", sleeper)
	register(t, b2.engine, "echo", quick)
	// The forger rewrites w-1 and adds an event beyond its covered head.
	b2.mem.Tamper(func(rows *memory.TamperRows) {
		ev := resealed(t, rows.Histories["w-1"], 1)
		extra := ev[len(ev)-1]
		extra.Seq++
		ev = append(ev, extra)
		history.Seal(nil, ev)
		rows.Histories["w-1"] = ev
		rows.Records["w-1"].LastSeq = extra.Seq
	})
	b2.start(t, "echo", "w-2", "x")
	b2.drain(t)
	b2.engine = b2.newEngine(t) // and this process dies too
	c, err = b2.engine.SweepCheckpoint(b2.ctx)
	var refused *chronicle.CheckpointRefusedError
	require.ErrorAs(t, err, &refused)
	var m *chronicle.CheckpointMismatchError
	require.ErrorAs(t, refused.Problems[0], &m)
	require.Equal(t, "w-1", m.InstanceID)
	require.NotNil(t, c, "the heads that continue their coverage are still signed")
	_, _, ok := c.Leaf("w-1")
	require.False(t, ok, "the sweep signed the forged head of w-1")
	_, _, ok = c.Leaf("w-2")
	require.True(t, ok)
}

// Item 4: an instance covered while it ran, then purged and started again
// under its id, verifies, and so does its export.
func TestCheckpointPurgedAndReusedIDIsNotAForgery(t *testing.T) {
	t.Parallel()
	testPurgedAndReusedID(t, func(o chronicle.Options) *bundle { return setup(t, o) })
}

func TestCheckpointPurgedAndReusedIDIsNotAForgeryOnPostgres(t *testing.T) {
	t.Parallel()
	testPurgedAndReusedID(t, func(o chronicle.Options) *bundle { return setupOn(t, newPostgresStore(t), o) })
}

func TestCheckpointPurgedAndReusedIDIsNotAForgeryOnMongo(t *testing.T) {
	t.Parallel()
	testPurgedAndReusedID(t, func(o chronicle.Options) *bundle {
		return setupOn(t, mongotest.NewStore(t, chmongo.Options{}), o)
	})
}

func testPurgedAndReusedID(t *testing.T, setup func(chronicle.Options) *bundle) {
	s := newSigner(t, "k1")
	b := setup(signed(s))
	register(t, b.engine, "sleeper", sleeper)
	b.start(t, "sleeper", "u-1", "first")
	b.drain(t)
	mid, err := b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, mid, "the running instance's head was not covered")
	b.advance(t, time.Minute)
	require.Equal(t, chronicle.StatusCompleted, b.describe(t, "u-1").Status)
	prep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"u-1"}, By: "records-officer"})
	require.NoError(t, err)
	require.Len(t, prep.Purged, 1, "skipped: %v", prep.Skipped)

	b.start(t, "sleeper", "u-1", "second")
	b.drain(t)
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	keys := keyringOf(t, s)
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Len(t, rep.Instances, 1)
	require.Equal(t, int64(rep.Instances[0].Events), rep.Instances[0].CoveredSeq)

	events := b.history(t, "u-1")
	proofs, err := b.engine.CheckpointProofs(b.ctx, "u-1")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(proofs), 3, "the first incarnation's leaves, its tombstone, the second's head")
	require.NoError(t, chronicle.VerifyExport(events, proofs, keys))
	// The export of the second incarnation, rewritten, still fails.
	var m *chronicle.CheckpointMismatchError
	require.ErrorAs(t, chronicle.VerifyExport(resealed(t, events, 1), proofs, keys), &m)

	// After the second ends, purge it too: both tombstones are signed.
	b.advance(t, time.Minute)
	prep, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"u-1"}, By: "records-officer"})
	require.NoError(t, err)
	require.Len(t, prep.Purged, 1, "skipped: %v", prep.Skipped)
	rep, err = b.engine.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.True(t, rep.Instances[0].Purged)
}

// Item 5: a head a dead node committed long before the latest checkpoint
// of another node is covered by the next sweep: coverage is found by
// comparing heads with leaves, not within a window of time.
func TestCheckpointSweepCoversOldHeadsOfADeadNode(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "n-1")
	// Node A commits n-2 and dies before its checkpoint.
	b.start(t, "echo", "n-2", "x")
	b.drain(t)
	// Node B keeps checkpointing, hours later.
	b.clock.Advance(3 * time.Hour)
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "n-3")
	// A restarts and sweeps.
	b.engine = b.newEngine(t)
	c, err := b.engine.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, c, "the sweep found nothing to cover")
	leaf, _, ok := c.Leaf("n-2")
	require.True(t, ok, "the sweep missed n-2")
	events := b.history(t, "n-2")
	require.Equal(t, events[len(events)-1].Seq, leaf.Seq)
	require.True(t, bytes.Equal(events[len(events)-1].Hash, leaf.Hash))
	// Nothing else was left uncovered, so the next sweep has nothing.
	c, err = b.engine.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	require.Nil(t, c)
}

// A purge on a store that keeps checkpoints, by an engine that cannot
// sign, would delete covered history no signature explains: refused.
func TestPurgeWithoutSignerOnACheckpointedStore(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "p-1")
	b.opts.Checkpoints = nil
	e := b.newEngine(t)
	_, err := e.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"p-1"}, By: "records-officer"})
	require.ErrorIs(t, err, chronicle.ErrPurgeUnsigned)
	require.Len(t, b.history(t, "p-1"), len(b.history(t, "p-1")))
	require.NotEmpty(t, b.history(t, "p-1"), "the history was deleted")
}

// A node that committed an instance's final round signs its head after
// another node has signed the instance's tombstone and purged it: the
// late head is the one the tombstone ended, not a deletion.
func TestCheckpointHeadSignedAfterItsPurge(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	b.start(t, "echo", "h-1", "x")
	b.drain(t) // node B: h-1's final head waits for B's checkpoint
	nodeB := b.engine
	nodeA := b.newEngine(t)
	prep, err := nodeA.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"h-1"}, By: "records-officer"})
	require.NoError(t, err)
	require.Len(t, prep.Purged, 1, "skipped: %v", prep.Skipped)
	late, err := nodeB.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, late)
	leaf, _, ok := late.Leaf("h-1")
	require.True(t, ok)
	require.False(t, leaf.Purged)

	rep, err := nodeA.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.True(t, rep.Instances[0].Purged)

	// The id started again: a sweep covers the new incarnation.
	b.engine = nodeA
	register(t, nodeA, "echo", quick)
	b.start(t, "echo", "h-1", "again")
	b.drain(t)
	sweeper := b.newEngine(t)
	c, err := sweeper.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, c)
	_, _, ok = c.Leaf("h-1")
	require.True(t, ok)
}
