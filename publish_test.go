package chronicle_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
	"github.com/chronicleflow/chronicle/tlog"
)

const testOrigin = "chronicle.example/test"

// publishing returns options that sign checkpoints with s and publish
// them to pubs.
func publishing(s chronicle.Signer, pubs ...chronicle.Publisher) chronicle.Options {
	o := signed(s)
	o.Checkpoints.Origin = testOrigin
	o.Checkpoints.Publishers = pubs
	return o
}

// truncateFunc deletes the stored checkpoints numbered above keep, as an
// operator with write access to the database could.
type truncateFunc func(t *testing.T, keep int64)

func memTruncate(mem *memory.Store) truncateFunc {
	return func(t *testing.T, keep int64) {
		mem.Tamper(func(rows *memory.TamperRows) { rows.Checkpoints = rows.Checkpoints[:keep] })
	}
}

func TestPublishedCheckpointsCatchTruncationAndForkOnMemory(t *testing.T) {
	t.Parallel()
	mem := memory.New(memory.Options{})
	testPublished(t, mem, memTruncate(mem))
}

func TestPublishedCheckpointsCatchTruncationAndForkOnPostgres(t *testing.T) {
	t.Parallel()
	store := newPostgresStore(t)
	testPublished(t, store, func(t *testing.T, keep int64) {
		_, err := store.Pool().Exec(context.Background(), "DELETE FROM "+pgx.Identifier{store.Schema(), "checkpoints"}.Sanitize()+" WHERE number > $1", keep)
		require.NoError(t, err)
	})
}

func TestPublishedCheckpointsCatchTruncationAndForkOnMongo(t *testing.T) {
	t.Parallel()
	store := mongotest.NewStore(t, chmongo.Options{})
	testPublished(t, store, func(t *testing.T, keep int64) {
		coll := mongotest.Client(t, mongotest.URL(t)).Database(store.Database()).Collection("checkpoints")
		_, err := coll.DeleteMany(context.Background(), bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: keep}}}})
		require.NoError(t, err)
	})
}

func testPublished(t *testing.T, store provider.Store, truncate truncateFunc) {
	s := newSigner(t, "k1")
	keys := keyringOf(t, s)
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)
	b := setupOn(t, store, publishing(s, dir))
	register(t, b.engine, "echo", quick)
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		runEchoes(t, b, id) // a checkpoint each, published as it is stored
	}
	notes, err := dir.All()
	require.NoError(t, err)
	require.Len(t, notes, 3)
	c, _, err := tlog.Open(notes[2], testOrigin, keys)
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Size)
	rep, err := b.engine.VerifyPublished(b.ctx, keys, testOrigin, notes...)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, uint64(3), rep.Stored)

	// Truncation: the newest checkpoint is deleted. The chain left is
	// whole, so the checkpoints alone see nothing.
	truncate(t, 2)
	crep, err := b.engine.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, crep.OK(), "checkpoint verification alone finds a truncation: %+v", crep)
	rep, err = b.engine.VerifyPublished(b.ctx, keys, testOrigin, notes...)
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Equal(t, uint64(2), rep.Stored)
	require.NoError(t, rep.Notes[0].Err)
	require.NoError(t, rep.Notes[1].Err)
	var trunc *chronicle.TruncatedError
	require.ErrorAs(t, rep.Notes[2].Err, &trunc)
	require.Equal(t, uint64(3), trunc.Published)
	require.ErrorIs(t, rep.Notes[2].Err, chronicle.ErrTruncated)

	// Fork: a node with the key appends another checkpoint 3. It is
	// a valid chain; the engine does not publish it over the published
	// one, and verification names the size.
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "p-4")
	crep, err = b.engine.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, crep.OK(), "%+v", crep)
	require.ErrorIs(t, b.engine.Publish(b.ctx), chronicle.ErrForked)
	again, err := dir.All()
	require.NoError(t, err)
	require.Equal(t, notes, again, "the published directory changed")
	rep, err = b.engine.VerifyPublished(b.ctx, keys, testOrigin, notes...)
	require.NoError(t, err)
	var fork *chronicle.ForkError
	require.ErrorAs(t, rep.Notes[2].Err, &fork)
	require.Equal(t, uint64(3), fork.Size)
	require.NoError(t, rep.Notes[1].Err)
}

// A key holder who rewrites a history and signs a whole new chain of
// checkpoints over it passes checkpoint verification; the published
// checkpoints do not agree.
func TestPublishedCheckpointsCatchAResignedRewrite(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	keys := keyringOf(t, s)
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)
	b := setup(t, publishing(s, dir))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "r-1", "r-2")
	runEchoes(t, b, "r-3")
	require.True(t, b.mem.RewriteHistory("r-1", func(ev []history.Event) []history.Event { return resealed(t, ev, 1) }))
	memTruncate(b.mem)(t, 0)
	forger := b.newEngine(t) // publishes nowhere
	_, err = forger.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	_, err = forger.SweepCheckpoint(b.ctx)
	require.NoError(t, err)
	crep, err := forger.VerifyCheckpoints(b.ctx, keys)
	require.NoError(t, err)
	require.True(t, crep.OK(), "%+v", crep)

	notes, err := dir.All()
	require.NoError(t, err)
	rep, err := forger.VerifyPublished(b.ctx, keys, "", notes...)
	require.NoError(t, err)
	require.False(t, rep.OK())
	var fork *chronicle.ForkError
	require.ErrorAs(t, rep.Notes[0].Err, &fork)
	require.Equal(t, uint64(1), fork.Size)
}

func TestPublishedNotesThatDoNotOpen(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)
	b := setup(t, publishing(s, dir))
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "n-1")
	note, err := dir.Latest(b.ctx)
	require.NoError(t, err)
	edited := append([]byte{}, note...)
	edited[len(testOrigin)+1] = '7' // the size line
	other := &chronicle.Keyring{}
	require.NoError(t, other.Add("k1", newSigner(t, "someone-else").Public()))
	rep, err := b.engine.VerifyPublished(b.ctx, keyringOf(t, s), testOrigin, edited)
	require.NoError(t, err)
	var bad *chronicle.PublishedNoteError
	require.ErrorAs(t, rep.Notes[0].Err, &bad)
	require.ErrorIs(t, bad, tlog.ErrNoteSignature)
	rep, err = b.engine.VerifyPublished(b.ctx, other, testOrigin, note)
	require.NoError(t, err)
	require.ErrorIs(t, rep.Notes[0].Err, tlog.ErrNoteSignature)
	_, err = b.engine.VerifyPublished(b.ctx, nil, testOrigin, note)
	require.Error(t, err)

	// The directory never replaces a file: another root at size 1 is a
	// fork, the same note again is kept.
	require.NoError(t, dir.Publish(b.ctx, note))
	tr := &tlog.Tree{}
	require.NoError(t, tr.Append(make([]byte, 32)))
	root, _ := tr.Root(1)
	ns, err := tlog.NoteSigner(testOrigin, s)
	require.NoError(t, err)
	forged, err := tlog.Sign(tlog.Checkpoint{Origin: testOrigin, Size: 1, Root: root}, ns)
	require.NoError(t, err)
	require.ErrorIs(t, dir.Publish(b.ctx, forged), chronicle.ErrForked)
	held, err := os.ReadFile(filepath.Join(dir.Dir(), "1.checkpoint"))
	require.NoError(t, err)
	require.Equal(t, note, held)
}

// A witness cosigns each checkpoint as the engine publishes it, from a
// restarted engine too, and refuses the fork of a key holder.
func TestWitnessPublisher(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	keys := keyringOf(t, s)
	cos, err := tlog.NewCosigner("witness.example/w1", newSigner(t, "witness"), nil)
	require.NoError(t, err)
	w, err := tlog.NewWitness(tlog.WitnessOptions{Cosigner: cos, Dir: t.TempDir(), Logs: map[string]*chronicle.Keyring{testOrigin: keys}})
	require.NoError(t, err)
	srv := httptest.NewServer(w)
	defer srv.Close()

	b := setup(t)
	var wp *chronicle.WitnessPublisher
	restart := func() {
		wp = chronicle.NewWitnessPublisher(srv.URL, cos.Verifier(), srv.Client())
		b.opts = publishing(s, wp)
		b.engine = b.newEngine(t)
		register(t, b.engine, "echo", quick)
	}
	restart()
	runEchoes(t, b, "w-1")
	runEchoes(t, b, "w-2")
	latest, err := wp.Latest(b.ctx)
	require.NoError(t, err)
	c, n, err := tlog.Open(latest, testOrigin, keys, cos.Verifier())
	require.NoError(t, err)
	require.Equal(t, uint64(2), c.Size)
	require.Len(t, n.Sigs, 2, "the log's signature and the witness's")

	// A restarted engine learns the witness's size (409) and proves
	// consistency from it.
	restart()
	runEchoes(t, b, "w-3")
	held, err := w.Latest(testOrigin)
	require.NoError(t, err)
	c, _, err = tlog.Open(held, testOrigin, keys, cos.Verifier())
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Size)

	// The newest checkpoint deleted, another 3 signed: refused.
	memTruncate(b.mem)(t, 2)
	restart()
	runEchoes(t, b, "w-4")
	require.ErrorIs(t, b.engine.Publish(b.ctx), tlog.ErrWitnessConflict)
	held2, err := w.Latest(testOrigin)
	require.NoError(t, err)
	require.Equal(t, held, held2)
}

// flaky fails its first n publishes.
type flaky struct {
	chronicle.Publisher
	n int
}

func (f *flaky) Publish(ctx context.Context, note []byte) error {
	if f.n > 0 {
		f.n--
		return errors.New("the share is offline")
	}
	return f.Publisher.Publish(ctx, note)
}

// A publish that fails is logged, the checkpoint stays stored, and the
// next checkpoint brings the publisher up to date with the newest.
func TestPublishFailureIsRetriedWithTheNextCheckpoint(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)
	b := setup(t, publishing(s, &flaky{Publisher: dir, n: 1}))
	register(t, b.engine, "echo", quick)
	c := runEchoes(t, b, "f-1")
	require.Equal(t, int64(1), c.Number, "the checkpoint is stored though publishing failed")
	_, err = dir.Latest(b.ctx)
	require.ErrorIs(t, err, chronicle.ErrNothingPublished)
	runEchoes(t, b, "f-2")
	notes, err := dir.All()
	require.NoError(t, err)
	require.Len(t, notes, 1)
	got, err := tlog.Parse(notes[0])
	require.NoError(t, err)
	require.Equal(t, uint64(2), got.Size)
	rep, err := b.engine.VerifyPublished(b.ctx, keyringOf(t, s), testOrigin, notes...)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
}

// Two engines on one store publish to one directory and one witness: a
// note of one that another's newer note overtook is no truncation.
func TestPublishFromTwoEngines(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "k1")
	keys := keyringOf(t, s)
	cos, err := tlog.NewCosigner("witness.example/w1", newSigner(t, "witness"), nil)
	require.NoError(t, err)
	w, err := tlog.NewWitness(tlog.WitnessOptions{Cosigner: cos, Dir: t.TempDir(), Logs: map[string]*chronicle.Keyring{testOrigin: keys}})
	require.NoError(t, err)
	srv := httptest.NewServer(w)
	defer srv.Close()
	dir, err := chronicle.NewDirPublisher(t.TempDir())
	require.NoError(t, err)

	wa := chronicle.NewWitnessPublisher(srv.URL, cos.Verifier(), srv.Client())
	b := setup(t, publishing(s, dir, wa))
	register(t, b.engine, "echo", quick)
	a := b.engine
	runEchoes(t, b, "t-1")
	stale, err := a.CheckpointNote(b.ctx) // size 1
	require.NoError(t, err)

	b.opts = publishing(s, dir, chronicle.NewWitnessPublisher(srv.URL, cos.Verifier(), srv.Client()))
	b.engine = b.newEngine(t)
	register(t, b.engine, "echo", quick)
	runEchoes(t, b, "t-2")
	runEchoes(t, b, "t-3")
	held, err := w.Latest(testOrigin)
	require.NoError(t, err)
	c, _, err := tlog.Open(held, testOrigin, keys, cos.Verifier())
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Size)

	// The first engine's publisher, behind the witness and the directory.
	require.NoError(t, wa.Publish(b.ctx, stale))
	require.NoError(t, a.Publish(b.ctx))
	notes, err := dir.All()
	require.NoError(t, err)
	require.Len(t, notes, 3)
	rep, err := a.VerifyPublished(b.ctx, keys, testOrigin, append(notes, held)...)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
}
