package chronicle_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// newSigner returns an Ed25519 signer of a deterministic key.
func newSigner(t *testing.T, id string) chronicle.Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, id)
	s, err := chronicle.NewEd25519Signer(id, ed25519.NewKeyFromSeed(seed))
	require.NoError(t, err)
	return s
}

func keyringOf(t *testing.T, signers ...chronicle.Signer) *chronicle.Keyring {
	t.Helper()
	k := &chronicle.Keyring{}
	for _, s := range signers {
		require.NoError(t, k.Add(s.KeyID(), s.Public()))
	}
	return k
}

func signed(s chronicle.Signer) chronicle.Options {
	return chronicle.Options{Checkpoints: &chronicle.CheckpointOptions{Signer: s}}
}

// runEchoes starts and drains echo instances and writes a checkpoint.
func runEchoes(t *testing.T, b *bundle, ids ...string) *chronicle.Checkpoint {
	t.Helper()
	for _, id := range ids {
		b.start(t, "echo", id, "hello "+id)
	}
	b.drain(t)
	c, err := b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, c, "no head waited for the checkpoint")
	return c
}

// resealed returns a history with the payload of its event seq changed
// and every hash recomputed: a forgery plain chain verification accepts.
func resealed(t *testing.T, events []history.Event, seq int64) []history.Event {
	t.Helper()
	out := make([]history.Event, len(events))
	copy(out, events)
	out[seq-1].Actor = "forger"
	history.Seal(nil, out)
	require.NoError(t, history.Verify(out))
	return out
}

func requireMismatch(t *testing.T, rep *chronicle.CheckpointReport, id string, seq int64) {
	t.Helper()
	require.False(t, rep.OK())
	for _, r := range rep.Instances {
		if r.InstanceID != id {
			require.NoError(t, r.Err, "instance %s", r.InstanceID)
			continue
		}
		var m *chronicle.CheckpointMismatchError
		require.ErrorAs(t, r.Err, &m)
		require.Equal(t, seq, m.Seq)
		require.ErrorIs(t, r.Err, chronicle.ErrCheckpointMismatch)
		return
	}
	t.Fatalf("%s is not in the report", id)
}

func TestCheckpointDetectsRewrittenHistoryOnMemory(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	c := runEchoes(t, b, "a-1", "a-2")
	require.Equal(t, int64(1), c.Number)
	require.Len(t, c.Leaves, 2)

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)

	events := b.history(t, "a-1")
	last := events[len(events)-1].Seq
	require.True(t, b.mem.RewriteHistory("a-1", func(ev []history.Event) []history.Event { return resealed(t, ev, 2) }))
	require.NoError(t, b.engine.Verify(b.ctx, "a-1"), "plain chain verification should pass on a resealed history")

	rep, err = b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	requireMismatch(t, rep, "a-1", last)
}

func TestCheckpointDetectsRewrittenHistoryOnPostgres(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	store := newPostgresStore(t)
	b := setupOn(t, store, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "p-1", "p-2")
	events := b.history(t, "p-1")
	last := events[len(events)-1].Seq

	// An operator with write access rewrites the rows, hashes recomputed.
	forged := resealed(t, events, 2)
	conn, err := store.Pool().Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	table := pgx.Identifier{store.Schema(), "history"}.Sanitize()
	for i := range forged {
		_, err := conn.Exec(b.ctx, "UPDATE "+table+" SET hash = $3, event = $4 WHERE instance_id = $1 AND seq = $2",
			"p-1", forged[i].Seq, forged[i].Hash, history.MarshalEvent(&forged[i]))
		require.NoError(t, err)
	}
	require.NoError(t, b.engine.Verify(b.ctx, "p-1"), "plain chain verification should pass on a resealed history")

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	requireMismatch(t, rep, "p-1", last)

	// A checkpoint deleted from the table is a gap.
	b.start(t, "echo", "p-3", "x")
	b.drain(t)
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	_, err = conn.Exec(b.ctx, "DELETE FROM "+pgx.Identifier{store.Schema(), "checkpoints"}.Sanitize()+" WHERE number = 1")
	require.NoError(t, err)
	rep, err = b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.Len(t, rep.Gaps, 1)
	require.Equal(t, int64(1), rep.Gaps[0].Number)
}

func TestCheckpointKeyRotation(t *testing.T) {
	t.Parallel()
	old, next := newSigner(t, "2026-01"), newSigner(t, "2026-02")
	b := setup(t, signed(old))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "r-1")
	// The node restarts with the new key.
	b.opts = signed(next)
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	c2 := runEchoes(t, b, "r-2")
	require.Equal(t, "2026-02", c2.KeyID)
	require.Equal(t, int64(2), c2.Number)

	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, old, next))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)

	// Without the retired key, its checkpoint does not verify, by name.
	rep, err = b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, next))
	require.NoError(t, err)
	require.Len(t, rep.Gaps, 1)
	require.Equal(t, int64(1), rep.Gaps[0].Number)
	require.ErrorIs(t, rep.Gaps[0], history.ErrUnknownKey)

	// A key of the right id but the wrong bytes: a bad signature.
	impostor := &chronicle.Keyring{}
	require.NoError(t, impostor.Add("2026-01", newSigner(t, "someone-else").Public()))
	require.NoError(t, impostor.Add("2026-02", next.Public()))
	rep, err = b.engine.VerifyCheckpoints(b.ctx, impostor)
	require.NoError(t, err)
	require.Len(t, rep.Gaps, 1)
	require.ErrorIs(t, rep.Gaps[0], history.ErrBadSignature)
}

func TestCheckpointMissingFromTheChain(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "m-1")
	runEchoes(t, b, "m-2")
	runEchoes(t, b, "m-3")
	require.True(t, b.mem.DeleteCheckpoint(2))
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Len(t, rep.Gaps, 1)
	require.Equal(t, int64(2), rep.Gaps[0].Number)
	require.ErrorIs(t, rep.Gaps[0], chronicle.ErrCheckpointGap)
	require.Equal(t, 2, rep.Checkpoints)
}

func TestCheckpointDeletedInstance(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "d-1", "d-2")

	// A proper purge: checkpointed first, then a tombstone.
	dir := t.TempDir()
	prep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"d-1"}, By: "records-officer", Archive: chronicle.ArchiveJSONL(dir)})
	require.NoError(t, err)
	require.Len(t, prep.Purged, 1, "skipped: %v", prep.Skipped)
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.True(t, rep.Instances[0].Purged)

	// Deleted behind the engine's back: no tombstone.
	require.True(t, b.mem.DeleteHistory("d-2"))
	rep, err = b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.False(t, rep.OK())
	var m *chronicle.CheckpointMismatchError
	require.ErrorAs(t, rep.Instances[1].Err, &m)
	require.True(t, m.Deleted)
	require.Equal(t, "d-2", m.InstanceID)
	require.Contains(t, m.Error(), "deleted without a purge")
}

func TestCheckpointOfflineArchive(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "o-1", "o-2", "o-3")
	dir := t.TempDir()
	rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"o-2"}, By: "records-officer", Archive: chronicle.ArchiveJSONL(dir)})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1, "skipped: %v", rep.Skipped)

	f, err := os.Open(chronicle.ArchivePath(dir, "o-2"))
	require.NoError(t, err)
	events, proofs, err := history.ReadExport(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	require.NotEmpty(t, proofs)
	keys := keyringOf(t, s)
	// The engine and its store are not needed: the keyring is enough.
	require.NoError(t, chronicle.VerifyExport(events, proofs, keys))
	require.NoError(t, chronicle.VerifyArchive(events, &rep.Purged[0]))

	// A forged archive, resealed, is caught offline.
	last := events[len(events)-1].Seq
	var m *chronicle.CheckpointMismatchError
	require.ErrorAs(t, chronicle.VerifyExport(resealed(t, events, 1), proofs, keys), &m)
	require.Equal(t, "o-2", m.InstanceID)
	require.Equal(t, last, m.Seq)
	// A proof with a tampered leaf or a foreign key does not verify.
	bad := append([]chronicle.CheckpointProof(nil), proofs...)
	bad[0].Leaf.Seq--
	require.ErrorIs(t, chronicle.VerifyExport(events, bad, keys), history.ErrMalformedCheckpoint)
	require.ErrorIs(t, chronicle.VerifyExport(events, proofs, keyringOf(t, newSigner(t, "k2"))), history.ErrUnknownKey)
	require.ErrorIs(t, chronicle.VerifyExport(events, nil, keys), chronicle.ErrNotCovered)
}

func TestCheckpointsWrittenByRun(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	mem := memory.New(memory.Options{})
	e, err := chronicle.New(mem, chronicle.Options{NodeID: "run", Checkpoints: &chronicle.CheckpointOptions{Signer: s, Interval: time.Hour, EndDelay: time.Millisecond}})
	require.NoError(t, err)
	register(t, e, "echo", quick)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	_, err = e.Start(ctx, "echo", "x", &chronicle.StartOptions{InstanceID: "run-1"})
	require.NoError(t, err)
	inst, err := e.Wait(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusCompleted, inst.Status)
	cancel()
	require.NoError(t, <-done)
	// The execution's end (or, at the latest, the stop) wrote a checkpoint
	// covering its final head.
	rep, err := e.VerifyCheckpoints(context.Background(), keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Len(t, rep.Instances, 1)
	require.Equal(t, int64(rep.Instances[0].Events), rep.Instances[0].CoveredSeq)
}

func TestCheckpointErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.engine.Checkpoint(b.ctx)
	require.ErrorIs(t, err, chronicle.ErrCheckpointsOff)

	_, err = chronicle.New(memory.New(memory.Options{}), chronicle.Options{Checkpoints: &chronicle.CheckpointOptions{}})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)

	// A store without the capability: a typed unsupported error.
	e, err := chronicle.New(providertest.CoreOnly(memory.New(memory.Options{})), signed(newSigner(t, "k1")))
	require.NoError(t, err)
	_, err = e.VerifyCheckpoints(context.Background(), keyringOf(t, newSigner(t, "k1")))
	var unsupported *chronicle.UnsupportedError
	require.ErrorAs(t, err, &unsupported)
	require.Equal(t, "provider.CheckpointStore", unsupported.Capability)
	require.True(t, errors.Is(err, chronicle.ErrUnsupported))

	_, err = b.engine.VerifyCheckpoints(b.ctx, nil)
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	require.True(t, strings.Contains(err.Error(), "keyring"))
}

// quick is a workflow that ends in its first round.
func quick(_ *chronicle.Context, s string) (string, error) { return s, nil }

func TestCheckpointSweepCoversHeadsOfADeadProcess(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	b := setup(t, signed(s))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "s-1")
	// This process commits s-2 and dies before its checkpoint.
	b.start(t, "echo", "s-2", "x")
	b.drain(t)
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	c, err := b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	require.Nil(t, c, "the new process committed nothing")
	rep, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "not yet covered is not a failure")
	require.Zero(t, rep.Instances[1].CoveredSeq)

	c, err = b.engine.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, c)
	_, _, ok := c.Leaf("s-2")
	require.True(t, ok, "the sweep missed s-2")
	rep, err = b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, int64(rep.Instances[1].Events), rep.Instances[1].CoveredSeq)
}
