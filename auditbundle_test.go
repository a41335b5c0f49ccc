package chronicle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// bundleRig is an engine with signed checkpoints whose store holds a
// completed instance with an activity and a human task, a running one
// waiting on a task, and a purged one.
type bundleRig struct {
	ctx    context.Context
	store  *memory.Store
	engine *chronicle.Engine
	keys   *chronicle.Keyring
	dir    *chronicle.DirPublisher
}

func newBundleRig(t *testing.T) *bundleRig {
	t.Helper()
	ctx := context.Background()
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	require.NoError(t, err)
	store := memory.New(memory.Options{})
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)
	engine, err := chronicle.New(store, chronicle.Options{NodeID: "bundle", Checkpoints: &chronicle.CheckpointOptions{
		Signer: signer, Origin: "chronicle.example/claims", Publishers: []chronicle.Publisher{dir}}})
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	require.NoError(t, chronicle.RegisterActivity(engine, "score", func(_ context.Context, claim string) (int, error) { return len(claim), nil }))
	require.NoError(t, chronicle.RegisterWorkflow(engine, "claim", func(ctx *chronicle.Context, claim string) (string, error) {
		score, err := chronicle.CallActivity[int](ctx, "score", claim, nil)
		if err != nil {
			return "", err
		}
		task := ctx.CreateTask("review", score, &chronicle.TaskOptions{TaskID: "review-" + claim, Roles: []string{"adjuster"}})
		return chronicle.WaitTask[string](ctx, task)
	}))
	r := &bundleRig{ctx: ctx, store: store, engine: engine, keys: &chronicle.Keyring{}, dir: dir}
	require.NoError(t, r.keys.Add(signer.KeyID(), signer.Public()))
	for _, id := range []string{"CLM-1", "CLM-2", "CLM-3"} {
		_, err := engine.Start(ctx, "claim", id, &chronicle.StartOptions{InstanceID: id})
		require.NoError(t, err)
	}
	r.drain(t)
	user := chronicle.User{ID: "alice", Roles: []string{"adjuster"}}
	require.NoError(t, engine.CompleteTask(ctx, "review-CLM-1", "approved", user))
	require.NoError(t, engine.CompleteTask(ctx, "review-CLM-3", "declined", user))
	r.drain(t)
	_, err = engine.Checkpoint(ctx)
	require.NoError(t, err)
	_, err = engine.Purge(ctx, chronicle.PurgeOptions{InstanceIDs: []string{"CLM-3"}, By: "records-officer"})
	require.NoError(t, err)
	return r
}

func (r *bundleRig) drain(t *testing.T) {
	t.Helper()
	for worked := true; worked; {
		var err error
		worked, err = r.engine.RunOnce(r.ctx)
		require.NoError(t, err)
	}
}

func (r *bundleRig) bundle(t *testing.T, ids ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.engine.WriteAuditBundle(r.ctx, &b, chronicle.AuditBundleOptions{InstanceIDs: ids}))
	return b.Bytes()
}

// published bundles ids with the newest note the directory holds.
func (r *bundleRig) published(t *testing.T, ids ...string) []byte {
	t.Helper()
	note, err := r.dir.Latest(r.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, note)
	var b bytes.Buffer
	require.NoError(t, r.engine.WriteAuditBundle(r.ctx, &b, chronicle.AuditBundleOptions{InstanceIDs: ids, Published: note}))
	return b.Bytes()
}

func TestAuditBundleVerifiesOffline(t *testing.T) {
	r := newBundleRig(t)
	b := r.bundle(t, "CLM-3", "CLM-1", "CLM-2", "CLM-1")
	rep, err := chronicle.VerifyAuditBundle(bytes.NewReader(b), r.keys)
	require.NoError(t, err)
	require.Len(t, rep.Instances, 3)
	done, running, purged := rep.Instances[0], rep.Instances[1], rep.Instances[2]
	require.Equal(t, "CLM-1", done.InstanceID)
	require.Equal(t, chronicle.StatusCompleted, done.Status)
	require.Equal(t, "claim", done.Workflow)
	require.Equal(t, 1, done.Tasks)
	require.Equal(t, done.LastSeq, done.CoveredSeq, "the checkpoint covers the whole history")
	require.Equal(t, chronicle.StatusRunning, running.Status)
	require.Equal(t, "CLM-3", purged.InstanceID)
	require.True(t, purged.Purged)
	require.Zero(t, purged.Events)
	require.NotZero(t, purged.CoveredSeq)
	require.Equal(t, []string{"2026-11"}, rep.KeyIDs)
	require.NotEmpty(t, rep.Checkpoints)

	// Without the key nothing verifies.
	_, err = chronicle.VerifyAuditBundle(bytes.NewReader(b), &chronicle.Keyring{})
	require.ErrorIs(t, err, chronicle.ErrAuditBundle)
}

// Every single edited byte of a bundle fails its verification: each part
// is covered by a signature or a hash chain, or re-derived from what is,
// and the bundle must be written exactly as the writer writes it.
func TestAuditBundleFailsOnAnyEditedByte(t *testing.T) {
	r := newBundleRig(t)
	b := r.published(t, "CLM-1", "CLM-3")
	rep, err := chronicle.VerifyAuditBundle(bytes.NewReader(b), r.keys)
	require.NoError(t, err)
	require.NotNil(t, rep.Published)
	// Every byte; under the race detector or -short every 16th, from an
	// offset drawn from a seed printed here.
	step, offset := 1, 0
	if raceEnabled || testing.Short() {
		seed := time.Now().UnixNano()
		step, offset = 16, int(seed%16)
		t.Logf("every %dth byte from %d (seed %d)", step, offset, seed)
	}
	edited := make([]byte, len(b))
	for i := offset; i < len(b); i += step {
		for _, flip := range []byte{0x01, 0x20} {
			copy(edited, b)
			edited[i] ^= flip
			_, err := chronicle.VerifyAuditBundle(bytes.NewReader(edited), r.keys)
			if !errors.Is(err, chronicle.ErrAuditBundle) {
				t.Fatalf("byte %d of %d (%q) xor %#x: verification passed (err %v)", i, len(b), b[i], flip, err)
			}
		}
	}
	// Cut short, or with a line added, it fails too.
	_, err = chronicle.VerifyAuditBundle(bytes.NewReader(b[:len(b)-1]), r.keys)
	require.ErrorIs(t, err, chronicle.ErrAuditBundle)
	_, err = chronicle.VerifyAuditBundle(bytes.NewReader(append(bytes.Clone(b), "{}\n"...)), r.keys)
	require.ErrorIs(t, err, chronicle.ErrAuditBundle)
}

// A history rewritten in the store with every hash recomputed is bundled
// as it is stored, and the bundle fails on the checkpoint it contradicts.
func TestAuditBundleOfARewrittenHistoryFails(t *testing.T) {
	r := newBundleRig(t)
	r.store.RewriteHistory("CLM-1", func(events []history.Event) []history.Event {
		events[0].Actor = "user:mallory"
		return events
	})
	_, err := chronicle.VerifyAuditBundle(bytes.NewReader(r.bundle(t, "CLM-1")), r.keys)
	var mismatch *chronicle.CheckpointMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Equal(t, "CLM-1", mismatch.InstanceID)
	var be *chronicle.AuditBundleError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 2, be.Line)
}

func TestAuditBundleNeedsCheckpoints(t *testing.T) {
	r := newBundleRig(t)
	err := r.engine.WriteAuditBundle(r.ctx, &bytes.Buffer{}, chronicle.AuditBundleOptions{InstanceIDs: []string{"nobody"}})
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	err = r.engine.WriteAuditBundle(r.ctx, &bytes.Buffer{}, chronicle.AuditBundleOptions{})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)

	plain, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "plain"})
	require.NoError(t, err)
	defer plain.Close()
	err = plain.WriteAuditBundle(r.ctx, &bytes.Buffer{}, chronicle.AuditBundleOptions{InstanceIDs: []string{"x"}})
	require.Error(t, err)
}

// A bundle carries the note published outside the database; it proves
// that the bundle's checkpoints are in the log that note signs, and a
// signature on it that no key given verifies is refused.
func TestAuditBundleCarriesThePublishedNote(t *testing.T) {
	r := newBundleRig(t)
	b := r.published(t, "CLM-1", "CLM-3")
	rep, err := chronicle.VerifyAuditBundle(bytes.NewReader(b), r.keys)
	require.NoError(t, err)
	require.Equal(t, "chronicle.example/claims", rep.Published.Origin)
	require.Equal(t, uint64(len(rep.Checkpoints)), rep.Published.Size)
	require.Equal(t, rep.Checkpoints, rep.Published.Included)

	// A checkpoint written after the note is newer than it: not proven.
	_, err = r.engine.Start(r.ctx, "claim", "CLM-4", &chronicle.StartOptions{InstanceID: "CLM-4"})
	require.NoError(t, err)
	r.drain(t)
	note, err := r.dir.Latest(r.ctx)
	require.NoError(t, err)
	_, err = r.engine.Checkpoint(r.ctx)
	require.NoError(t, err)
	var older bytes.Buffer
	require.NoError(t, r.engine.WriteAuditBundle(r.ctx, &older, chronicle.AuditBundleOptions{InstanceIDs: []string{"CLM-4", "CLM-1"}, Published: note}))
	rep, err = chronicle.VerifyAuditBundle(&older, r.keys)
	require.NoError(t, err)
	require.Less(t, rep.Published.Size, uint64(rep.Checkpoints[len(rep.Checkpoints)-1]))
	require.NotContains(t, rep.Published.Included, rep.Checkpoints[len(rep.Checkpoints)-1])

	// A note with a signature no key given verifies (a cosignature whose
	// witness key the auditor lacks, or a forged one) is refused.
	i := bytes.Index(b, []byte(`{"published":`))
	require.Positive(t, i)
	forged := bytes.Replace(bytes.Clone(b), []byte(`\n\n`), []byte(`\n\n— witness.example/w1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n`), 1)
	require.NotEqual(t, b, forged)
	_, err = chronicle.VerifyAuditBundle(bytes.NewReader(forged), r.keys)
	require.ErrorIs(t, err, chronicle.ErrAuditBundle)
}
