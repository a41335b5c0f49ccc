package chronicle_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// personal is a payload that carries personal data.
type personal struct {
	Name    string
	Address string
}

// fileKeys returns a file key provider in a new directory, with a new KEK
// (and the paths of both).
func fileKeys(t *testing.T) (*chronicle.FileKeyProvider, string, string) {
	t.Helper()
	dir := t.TempDir()
	kek := filepath.Join(dir, "kek-1")
	require.NoError(t, chronicle.GenerateKEK(kek, "kek-1"))
	keys, err := chronicle.NewFileKeyProvider(filepath.Join(dir, "keys"), kek)
	require.NoError(t, err)
	return keys, filepath.Join(dir, "keys"), kek
}

// registerProfile registers a workflow that passes personal data through
// every kind of payload: its input, an activity's input and result, a
// child's input and result, a custom status, a signal and its result.
func registerProfile(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	activity(t, e, "greet", func(_ context.Context, p personal) (string, error) { return "dear " + p.Name, nil })
	register(t, e, "profile-child", func(ctx *chronicle.Context, p personal) (string, error) {
		return "child saw " + p.Address, nil
	})
	register(t, e, "profile", func(ctx *chronicle.Context, p personal) (personal, error) {
		greeting, err := chronicle.CallActivity[string](ctx, "greet", p, nil)
		if err != nil {
			return personal{}, err
		}
		if _, err := chronicle.CallSubWorkflow[string](ctx, "profile-child", p, &chronicle.SubWorkflowOptions{InstanceID: ctx.InstanceID() + "-child"}); err != nil {
			return personal{}, err
		}
		if err := ctx.SetCustomStatus(map[string]string{"greeting": greeting}); err != nil {
			return personal{}, err
		}
		task := ctx.CreateTask("review", p, &chronicle.TaskOptions{TaskID: "review-" + ctx.InstanceID(), Roles: []string{"clerk"}})
		if _, err := chronicle.WaitTask[string](ctx, task); err != nil {
			return personal{}, err
		}
		moved, err := chronicle.WaitEvent[string](ctx, "moved", nil)
		if err != nil {
			return personal{}, err
		}
		if err := ctx.SetCustomStatus("moved to " + moved); err != nil {
			return personal{}, err
		}
		return personal{Name: p.Name, Address: moved}, nil
	})
}

var clerk = chronicle.User{ID: "clerk-1", Roles: []string{"clerk"}}

// review completes the review task of a profile with a result that
// repeats the address.
func review(t *testing.T, b *bundle, id, address string) {
	t.Helper()
	require.NoError(t, b.engine.CompleteTask(b.ctx, "review-"+id, "reviewed "+address, clerk))
}

// storedBytes returns every byte the store holds of an instance: its
// events' payloads as stored and its record's output and custom status.
func storedBytes(t *testing.T, b *bundle, id string) []byte {
	t.Helper()
	events, err := b.store.LoadHistory(b.ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
	require.NoError(t, err)
	var all []byte
	for _, e := range events {
		all = append(all, e.Payload...)
	}
	rec, err := b.store.GetInstance(b.ctx, id)
	require.NoError(t, err)
	all = append(all, rec.Output...)
	all = append(all, rec.CustomStatusText...)
	return append(all, rec.CustomStatus...)
}

func TestSubjectPayloadsAreSealedAndErasable(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	s := newSigner(t, "k1")
	b := setup(t, chronicle.Options{Keys: keys, Checkpoints: &chronicle.CheckpointOptions{Signer: s}})
	registerProfile(t, b.engine)
	alice := personal{Name: "Alice Example", Address: "1 Old Road"}
	_, err := b.engine.Start(b.ctx, "profile", alice, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-0815"})
	require.NoError(t, err)
	_, err = b.engine.Start(b.ctx, "profile", personal{Name: "Bob Plain", Address: "2 Open Street"}, &chronicle.StartOptions{InstanceID: "p-2"})
	require.NoError(t, err)
	b.drain(t)
	review(t, b, "p-1", "1 Old Road")
	review(t, b, "p-2", "2 Open Street")
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "p-1", "moved", "9 New Lane", nil))
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "p-2", "moved", "3 Open Street", nil))
	b.drain(t)

	// In the store, the subject's payloads are ciphertext; the others
	// are as they always were.
	for _, id := range []string{"p-1", "p-1-child"} {
		raw := storedBytes(t, b, id)
		for _, secret := range []string{"Alice", "Old Road", "New Lane", "dear"} {
			require.False(t, bytes.Contains(raw, []byte(secret)), "%s stores %q in plaintext", id, secret)
		}
	}
	raw := storedBytes(t, b, "p-2")
	for _, plain := range []string{"Bob Plain", "Open Street", "dear Bob", "moved to 3 Open Street"} {
		require.True(t, bytes.Contains(raw, []byte(plain)), "p-2 should store %q in plaintext", plain)
	}
	events := b.history(t, "p-1")
	start, err := events[0].Attributes()
	require.NoError(t, err)
	require.Equal(t, "C-0815", start.(*history.ExecutionStarted).Subject, "the subject is plaintext metadata")
	subject, ok := chronicle.SealedSubject(start.(*history.ExecutionStarted).Input)
	require.True(t, ok)
	require.Equal(t, "C-0815", subject)
	child := b.describe(t, "p-1-child")
	require.Equal(t, "C-0815", child.SearchAttributes[chronicle.SubjectAttribute], "a child inherits the subject")

	// Before erasure everything reads.
	inst := b.describe(t, "p-1")
	require.Equal(t, chronicle.StatusCompleted, inst.Status)
	var got personal
	require.NoError(t, inst.Result(&got))
	require.Equal(t, personal{Name: "Alice Example", Address: "9 New Lane"}, got)
	var status string
	_, err = inst.CustomStatus(&status)
	require.NoError(t, err)
	require.Equal(t, "moved to 9 New Lane", status)
	require.Empty(t, inst.CustomStatusText, "a subject's custom status is not searchable text")
	var in personal
	require.NoError(t, b.engine.Decode(start.(*history.ExecutionStarted).Input, &in))
	require.Equal(t, alice, in)
	require.Nil(t, b.engine.ReplayHistory(events).Err)
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)

	rep, err := b.engine.Erase(b.ctx, "C-0815", chronicle.EraseOptions{Reason: "GDPR art. 17 request", Actor: "dpo", Ticket: "DSR-7"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"p-1", "p-1-child"}, rep.Instances)
	require.Empty(t, rep.Terminated)
	b.drain(t)

	// After it, no read path gives the subject's data back, and none
	// panics.
	var erased *chronicle.ErasedError
	inst = b.describe(t, "p-1")
	require.ErrorAs(t, inst.Result(&got), &erased)
	require.Equal(t, "C-0815", erased.Subject)
	_, err = inst.CustomStatus(&status)
	require.ErrorAs(t, err, &erased)
	require.ErrorAs(t, b.engine.Decode(start.(*history.ExecutionStarted).Input, &in), &erased)
	require.ErrorAs(t, b.describe(t, "p-1-child").Result(new(string)), &erased)
	events = b.history(t, "p-1") // the chain still verifies
	require.ErrorAs(t, b.engine.ReplayHistory(events).Err, &erased)
	var export bytes.Buffer
	require.NoError(t, history.WriteJSONL(&export, events))
	require.NotContains(t, export.String(), "Alice")
	// The others are untouched.
	var bob personal
	require.NoError(t, b.describe(t, "p-2").Result(&bob))
	require.Equal(t, "3 Open Street", bob.Address)

	// The erasure is on record, and hash chain and checkpoints verify.
	record := b.describe(t, rep.RecordID)
	require.Equal(t, chronicle.StatusCompleted, record.Status)
	require.Equal(t, "C-0815", record.BusinessKey)
	recEvents := b.history(t, rep.RecordID)
	require.Equal(t, "user:dpo", recEvents[0].Actor)
	var recorded chronicle.ErasureRecord
	recStart, err := recEvents[0].Attributes()
	require.NoError(t, err)
	require.NoError(t, b.engine.Decode(recStart.(*history.ExecutionStarted).Input, &recorded))
	require.Equal(t, "GDPR art. 17 request", recorded.Reason)
	require.Equal(t, "DSR-7", recorded.Ticket)
	require.ElementsMatch(t, []string{"p-1", "p-1-child"}, recorded.Instances)
	results, err := b.engine.VerifyAll(b.ctx)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err, r.InstanceID)
	}
	_, err = b.engine.Checkpoint(b.ctx)
	require.NoError(t, err)
	cps, err := b.engine.VerifyCheckpoints(b.ctx, keyringOf(t, s))
	require.NoError(t, err)
	require.True(t, cps.OK(), "%+v", cps)

	// The subject gets no new key; Erase again is harmless.
	_, err = b.engine.Start(b.ctx, "profile", alice, &chronicle.StartOptions{Subject: "C-0815"})
	require.ErrorAs(t, err, &erased)
	_, err = b.engine.Erase(b.ctx, "C-0815", chronicle.EraseOptions{Reason: "again", Actor: "dpo"})
	require.NoError(t, err)
}

func TestEraseTerminatesRunningInstances(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	b := setup(t, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice"}, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-1"})
	require.NoError(t, err)
	b.drain(t) // waits for "moved"
	rep, err := b.engine.Erase(b.ctx, "C-1", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.NoError(t, err)
	require.Equal(t, []string{"p-1"}, rep.Terminated)
	b.drain(t)
	inst := b.describe(t, "p-1")
	require.Equal(t, chronicle.StatusTerminated, inst.Status)
	require.Contains(t, inst.Failure.Message, "data subject erased")
	// A signal sent now cannot be sealed: the instance has ended anyway.
	require.Error(t, b.engine.RaiseEvent(b.ctx, "p-1", "moved", "x", nil))
	b.history(t, "p-1")
}

func TestSubjectKeysSurviveKEKRotation(t *testing.T) {
	t.Parallel()
	keys, dir, kek1 := fileKeys(t)
	b := setup(t, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice"}, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-1"})
	require.NoError(t, err)
	b.drain(t)
	review(t, b, "p-1", "1 Lane")
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "p-1", "moved", "2 Lane", nil))
	b.drain(t)
	before := storedBytes(t, b, "p-1")

	kek2 := filepath.Join(t.TempDir(), "kek-2")
	require.NoError(t, chronicle.GenerateKEK(kek2, "kek-2"))
	rotating, err := chronicle.NewFileKeyProvider(dir, kek2, kek1)
	require.NoError(t, err)
	n, err := rotating.Rotate(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = rotating.Rotate(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second rotation has nothing to re-wrap")
	require.NoError(t, os.Remove(kek1))

	// An engine holding only the new KEK reads everything; history was
	// not touched.
	rotated, err := chronicle.NewFileKeyProvider(dir, kek2)
	require.NoError(t, err)
	b.opts.Keys = rotated
	e := b.newEngine(t)
	inst, err := e.Describe(b.ctx, "p-1")
	require.NoError(t, err)
	var got personal
	require.NoError(t, inst.Result(&got))
	require.Equal(t, personal{Name: "Alice", Address: "2 Lane"}, got)
	require.Equal(t, before, storedBytes(t, b, "p-1"))
	// The old KEK alone no longer opens the rotated keys.
	_, err = os.Stat(kek1)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestTamperedCiphertextIsASealError(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	b := setup(t, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice"}, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-1"})
	require.NoError(t, err)
	b.drain(t)
	start, err := b.history(t, "p-1")[0].Attributes()
	require.NoError(t, err)
	sealedInput := start.(*history.ExecutionStarted).Input
	// Past the three bytes that mark an envelope (a change there makes
	// it no envelope, which the codec refuses), every changed byte is
	// a *SealError: header, nonce, ciphertext and tag.
	for i := 3; i < len(sealedInput); i++ {
		changed := bytes.Clone(sealedInput)
		changed[i] ^= 0x40
		var p personal
		var sealErr *chronicle.SealError
		require.ErrorAs(t, b.engine.Decode(changed, &p), &sealErr, "byte %d", i)
	}
	var p personal
	require.Error(t, b.engine.Decode(sealedInput[:len(sealedInput)-1], &p))
	require.NoError(t, b.engine.Decode(sealedInput, &p))
	require.Equal(t, "Alice", p.Name)
}

// registerNameProjection registers a projection whose state is the
// profile's name, read from the start's input.
func registerNameProjection(t *testing.T, e *chronicle.Engine) {
	t.Helper()
	require.NoError(t, chronicle.RegisterProjection(e, "names", 1, func(name string, ev *chronicle.Event) (string, error) {
		if ev.Kind != history.KindExecutionStarted {
			return name, nil
		}
		a, err := ev.Attributes()
		if err != nil {
			return name, err
		}
		var p personal
		if err := e.Decode(a.(*history.ExecutionStarted).Input, &p); err != nil {
			return name, err
		}
		return p.Name, nil
	}, chronicle.ForWorkflows("profile")))
}

func TestSubjectPayloadsAreCiphertextInPostgres(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	store := newPostgresStore(t)
	b := setupOn(t, store, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	registerNameProjection(t, b.engine)
	_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice Example", Address: "1 Old Road"}, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-0815"})
	require.NoError(t, err)
	_, err = b.engine.Start(b.ctx, "profile", personal{Name: "Bob Plain", Address: "2 Open Street"}, &chronicle.StartOptions{InstanceID: "p-2"})
	require.NoError(t, err)
	b.drain(t)
	review(t, b, "p-1", "1 Old Road")
	review(t, b, "p-2", "2 Open Street")
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "p-1", "moved", "9 New Lane", nil))
	require.NoError(t, b.engine.RaiseEvent(b.ctx, "p-2", "moved", "3 Open Street", nil))
	b.drain(t)

	// Every row of every table, as PostgreSQL prints it (bytea in hex).
	dump := func() string {
		rows, err := store.Pool().Query(b.ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, store.Schema())
		require.NoError(t, err)
		var tables []string
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			tables = append(tables, name)
		}
		require.NoError(t, rows.Err())
		var all strings.Builder
		for _, table := range tables {
			rows, err := store.Pool().Query(b.ctx, `SELECT t::text FROM `+pgx.Identifier{store.Schema(), table}.Sanitize()+` t`)
			require.NoError(t, err)
			for rows.Next() {
				var row string
				require.NoError(t, rows.Scan(&row))
				all.WriteString(row + "\n")
			}
			require.NoError(t, rows.Err())
		}
		return all.String()
	}
	raw := dump()
	for _, secret := range []string{"Alice", "Old Road", "New Lane"} {
		require.NotContains(t, raw, secret)
		require.NotContains(t, raw, hex.EncodeToString([]byte(secret)))
	}
	require.Contains(t, raw, hex.EncodeToString([]byte("Bob Plain")), "an instance without a subject is stored as before")

	name, _, err := chronicle.Projection[string](b.ctx, b.engine, "names", "p-1")
	require.NoError(t, err)
	require.Equal(t, "Alice Example", name)
	var got personal
	require.NoError(t, b.describe(t, "p-1").Result(&got))
	require.Equal(t, "9 New Lane", got.Address)

	_, err = b.engine.Erase(b.ctx, "C-0815", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.NoError(t, err)
	b.drain(t)
	var erased *chronicle.ErasedError
	require.ErrorAs(t, b.describe(t, "p-1").Result(&got), &erased)
	_, _, err = chronicle.Projection[string](b.ctx, b.engine, "names", "p-1")
	require.ErrorAs(t, err, &erased)
	require.NoError(t, b.engine.Verify(b.ctx, "p-1"))
	require.NoError(t, b.describe(t, "p-2").Result(&got))
	require.Equal(t, "3 Open Street", got.Address)
}

// TestEraseTerminatesOnAColdNode: the node that runs the termination has
// nothing cached, so its round replays a history whose payloads no longer
// open, and folds a projection that decodes them.
func TestEraseTerminatesOnAColdNode(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	b := setup(t, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	registerNameProjection(t, b.engine)
	_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice"}, &chronicle.StartOptions{InstanceID: "p-1", Subject: "C-1"})
	require.NoError(t, err)
	b.drain(t)
	_, err = b.engine.Erase(b.ctx, "C-1", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.NoError(t, err)
	cold := b.newEngine(t)
	registerProfile(t, cold)
	registerNameProjection(t, cold)
	drain(t, cold)
	inst, err := cold.Describe(b.ctx, "p-1")
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusTerminated, inst.Status)
	dead, err := cold.ListDeadLetters(b.ctx, chronicle.DeadLetterFilter{InstanceID: "p-1"})
	require.NoError(t, err)
	require.Empty(t, dead)
}

// A legal hold on any instance of a subject refuses its erasure before
// anything is done; released, the subject is erased.
func TestEraseRefusedWhileHeld(t *testing.T) {
	t.Parallel()
	keys, _, _ := fileKeys(t)
	b := setup(t, chronicle.Options{Keys: keys})
	registerProfile(t, b.engine)
	for _, id := range []string{"p-1", "p-2"} {
		_, err := b.engine.Start(b.ctx, "profile", personal{Name: "Alice"}, &chronicle.StartOptions{InstanceID: id, Subject: "C-1"})
		require.NoError(t, err)
	}
	b.drain(t)
	_, err := b.engine.Hold(b.ctx, "p-2", chronicle.HoldOptions{Reason: "litigation 2026-17", Actor: "counsel"})
	require.NoError(t, err)
	b.drain(t)

	_, err = b.engine.Erase(b.ctx, "C-1", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.ErrorIs(t, err, chronicle.ErrHeld)
	var held *chronicle.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, "p-2", held.Holds[0].InstanceID)
	b.drain(t)
	for _, id := range []string{"p-1", "p-2"} {
		require.Equal(t, chronicle.StatusRunning, b.describe(t, id).Status, "nothing is terminated")
		start, err := b.history(t, id)[0].Attributes()
		require.NoError(t, err)
		var in personal
		require.NoError(t, b.engine.Decode(start.(*history.ExecutionStarted).Input, &in), "the key is kept")
		require.Equal(t, "Alice", in.Name)
	}

	require.NoError(t, b.engine.ReleaseHold(b.ctx, "p-2", chronicle.HoldOptions{Reason: "case closed", Actor: "counsel"}))
	b.drain(t)
	rep, err := b.engine.Erase(b.ctx, "C-1", chronicle.EraseOptions{Reason: "request", Actor: "dpo"})
	require.NoError(t, err)
	require.Subset(t, rep.Instances, []string{"p-1", "p-2"})
}
