package chronicle_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
)

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registerLoan(t, b.engine)
	runLoan(t, b, nil)
	audit := childIDs(t, b, "loan-1")
	require.Len(t, audit, 1)
	register(t, b.engine, "echo", echo)
	b.start(t, "echo", "other", "x")
	b.drain(t)
	require.NoError(t, b.engine.Verify(b.ctx, "loan-1"))

	// Someone edits the amount in a stored activity result.
	require.True(t, b.mem.TamperEvent("loan-1", 4, func(e *history.Event) { e.Payload[len(e.Payload)-1] ^= 0x01 }))
	var chainErr *history.ChainError
	require.ErrorAs(t, b.engine.Verify(b.ctx, "loan-1"), &chainErr)
	require.Equal(t, int64(4), chainErr.Seq)

	results, err := b.engine.VerifyAll(b.ctx)
	require.NoError(t, err)
	broken := map[string]error{}
	for _, r := range results {
		broken[r.InstanceID] = r.Err
	}
	require.Len(t, broken, 3, "loan, its audit child and echo")
	require.Error(t, broken["loan-1"])
	require.NoError(t, broken["other"])
	require.Contains(t, broken, audit[0])
	require.NoError(t, broken[audit[0]])
}

func TestPurgeArchivesAndLeavesVerifiableTombstone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registerLoan(t, b.engine)
	register(t, b.engine, "echo", echo)
	runLoan(t, b, nil)
	audit := childIDs(t, b, "loan-1")
	require.Len(t, audit, 1)
	b.start(t, "echo", "running", "x")
	b.drain(t)
	dir := t.TempDir()

	rep, err := b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"loan-1", "running", "ghost"}, By: "records-officer", Archive: chronicle.ArchiveJSONL(dir)})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1)
	require.Equal(t, map[string]string{"running": "instance is running", "ghost": "not found"}, rep.Skipped)
	ts := rep.Purged[0]
	require.Equal(t, "loan-1", ts.InstanceID)
	require.Equal(t, "user:records-officer", ts.PurgedBy)

	_, err = b.engine.History(b.ctx, "loan-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
	_, err = b.engine.Describe(b.ctx, "running")
	require.NoError(t, err, "running instances are never touched")

	// The archive proves itself against the tombstone.
	got, err := b.engine.GetTombstone(b.ctx, "loan-1")
	require.NoError(t, err)
	require.Equal(t, ts, *got)
	f, err := os.Open(chronicle.ArchivePath(dir, "loan-1"))
	require.NoError(t, err)
	archived, err := history.ReadJSONL(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	require.Len(t, archived, int(ts.LastSeq))
	require.NoError(t, chronicle.VerifyArchive(archived, got))
	archived[len(archived)-1].Actor = "user:mallory"
	history.Seal(archived[len(archived)-2].Hash, archived[len(archived)-1:])
	require.ErrorIs(t, chronicle.VerifyArchive(archived, got), chronicle.ErrTombstoneMismatch, "a resealed forgery does not end at the tombstone's hash")

	// Purge by age takes the child, which ended before the cut-off.
	b.clock.Advance(24 * time.Hour)
	rep, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{CompletedBefore: b.clock.Now().Add(-time.Hour), By: "records-officer"})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1)
	require.Equal(t, audit[0], rep.Purged[0].InstanceID)

	_, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"running"}})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "the operator is required")
	failing := func(context.Context, string, []history.Event) error { return errors.New("disk full") }
	require.NoError(t, b.engine.Terminate(b.ctx, "running", "closing", nil))
	b.drain(t)
	rep, err = b.engine.Purge(b.ctx, chronicle.PurgeOptions{InstanceIDs: []string{"running"}, By: "ops", Archive: failing})
	require.NoError(t, err)
	require.Empty(t, rep.Purged)
	require.Contains(t, rep.Skipped["running"], "archive failed: disk full")
	_, err = b.engine.History(b.ctx, "running")
	require.NoError(t, err, "nothing is purged without its archive")
}

type loanTotals struct {
	Activities int
	Signals    []string
	LastStatus string
}

func foldTotals(s loanTotals, e *chronicle.Event) (loanTotals, error) {
	switch e.Kind {
	case history.KindActivityCompleted:
		s.Activities++
	case history.KindEventRaised:
		a, err := e.Attributes()
		if err != nil {
			return s, err
		}
		s.Signals = append(s.Signals, a.(*history.EventRaised).Name)
	case history.KindExecutionCompleted:
		s.LastStatus = "completed"
	}
	return s, nil
}

func TestCustomProjectionsRebuildAndTimeTravel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registerLoan(t, b.engine)
	require.NoError(t, chronicle.RegisterProjection(b.engine, "totals", 1, foldTotals))
	require.ErrorIs(t, chronicle.RegisterProjection(b.engine, "totals", 1, foldTotals), chronicle.ErrInvalidArgument)
	events := runLoan(t, b, nil)

	totals, seq, err := chronicle.Projection[loanTotals](b.ctx, b.engine, "totals", "loan-1")
	require.NoError(t, err)
	require.Equal(t, loanTotals{Activities: 2, Signals: []string{"documents"}, LastStatus: "completed"}, totals)
	require.Equal(t, int64(len(events)), seq)

	// Time travel: the projections as of the signal's arrival.
	var signalSeq int64
	for _, e := range events {
		if e.Kind == history.KindEventRaised {
			signalSeq = e.Seq
		}
	}
	view, err := b.engine.ProjectionsAt(b.ctx, "loan-1", signalSeq)
	require.NoError(t, err)
	require.Equal(t, chronicle.StatusRunning, view.Instance.Status)
	require.Equal(t, loanTotals{Activities: 1, Signals: []string{"documents"}}, view.Custom["totals"])
	require.Equal(t, signalSeq, view.Snapshot.LastSeq)

	// A new version of the fold: the engine restarts with it, the stored
	// record is stale until a rebuild.
	b.engine = b.newEngine(t)
	registerLoan(t, b.engine)
	require.NoError(t, chronicle.RegisterProjection(b.engine, "totals", 2, func(s loanTotals, e *chronicle.Event) (loanTotals, error) {
		s, err := foldTotals(s, e)
		if e.Kind == history.KindTimerFired {
			s.LastStatus = "timer fired"
		}
		return s, err
	}))
	diffs, err := b.engine.CheckProjections(b.ctx, "loan-1")
	require.NoError(t, err)
	require.Len(t, diffs, 1)
	require.Contains(t, diffs[0], "projection totals: stored version 1")
	require.NoError(t, b.engine.RebuildProjections(b.ctx, "loan-1"))
	diffs, err = b.engine.CheckProjections(b.ctx, "loan-1")
	require.NoError(t, err)
	require.Empty(t, diffs)
	totals, _, err = chronicle.Projection[loanTotals](b.ctx, b.engine, "totals", "loan-1")
	require.NoError(t, err)
	require.Equal(t, "completed", totals.LastStatus)

	// Instances are listed from their projections.
	list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Workflow: "loan"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "loan-1", list[0].ID)
	list, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Status: chronicle.StatusCompleted})
	require.NoError(t, err)
	require.Len(t, list, 2, "the loan and its audit child")
}
