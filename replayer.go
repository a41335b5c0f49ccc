package chronicle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/chronicleflow/chronicle/history"
)

// ErrNoHistories is returned by a [ReplaySource] of files given a folder
// that holds no .jsonl file: a replay test that replays nothing would
// pass for the wrong reason (a mistyped path, say).
var ErrNoHistories = errors.New("chronicle: no histories to replay")

// ReplaySource yields the histories [Engine.ReplayHistories] replays:
// exported files ([HistoryDir], [HistoryFiles]) or the instances of a
// store ([StoreHistories]).
type ReplaySource interface {
	// Each calls fn with every history of the source, in a stable order,
	// and returns the first error of fn, or the error that kept the
	// source from going on (a folder that cannot be read, a store that
	// fails). A single history that cannot be read is passed to fn with
	// its Err set, so that the others are still replayed.
	Each(ctx context.Context, fn func(SourceHistory) error) error
}

// SourceHistory is one history of a [ReplaySource].
type SourceHistory struct {
	// Origin says where the history comes from: the path of its file,
	// or "store".
	Origin string
	// InstanceID is the instance whose history this is.
	InstanceID string
	// Events is the whole history, every execution, in order.
	Events []Event
	// Err says why the history could not be read (a corrupt line, an
	// empty file); Events is then nil.
	Err error
	// Skipped says why an instance has no history to replay (its start
	// was dead-lettered); Events is then nil.
	Skipped string
}

// ReplayResult is the replay of one history.
type ReplayResult struct {
	// Origin is the [SourceHistory.Origin] of the history.
	Origin string
	// Events counts the events of the history.
	Events int
	// Skipped says why the history was not replayed; the result is then
	// OK.
	Skipped string
	// ReplayReport is what replaying the history found: its instance,
	// workflow and executions, the first divergence
	// (ReplayReport.Divergence, naming the seq, what history holds and
	// what the code asked for) or the other failure that stopped it
	// (ReplayReport.Err: an unknown workflow, a file that does not read).
	*ReplayReport
}

// Problem returns nil for a history that replayed, or its divergence (a
// *[NondeterminismError]) or other failure, prefixed with its origin.
func (r *ReplayResult) Problem() error {
	switch {
	case r.Divergence != nil:
		return fmt.Errorf("%s: %w", r.Origin, r.Divergence)
	case r.Err != nil && r.InstanceID != "":
		return fmt.Errorf("%s: %s: %w", r.Origin, r.InstanceID, r.Err)
	case r.Err != nil:
		return fmt.Errorf("%s: %w", r.Origin, r.Err)
	}
	return nil
}

// ReplaySummary is what [Engine.ReplayHistories] found.
type ReplaySummary struct {
	// Results holds one result per history, in the source's order.
	Results []ReplayResult
}

// OK reports whether every history replayed without divergence or
// failure.
func (s *ReplaySummary) OK() bool { return s.Err() == nil }

// Err returns nil when every history replayed, and otherwise an error
// that joins the [ReplayResult.Problem] of each one that did not: each
// divergence is a *[NondeterminismError] (errors.As finds the first).
func (s *ReplaySummary) Err() error {
	var errs []error
	for i := range s.Results {
		if err := s.Results[i].Problem(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Counts returns how many histories replayed, were skipped, diverged and
// failed otherwise.
func (s *ReplaySummary) Counts() (ok, skipped, diverged, failed int) {
	for i := range s.Results {
		r := &s.Results[i]
		switch {
		case r.Skipped != "":
			skipped++
		case r.Divergence != nil:
			diverged++
		case r.Err != nil:
			failed++
		default:
			ok++
		}
	}
	return ok, skipped, diverged, failed
}

// WriteText writes the summary for people, one line per history and a
// total, as `chronicle replay` prints it.
func (s *ReplaySummary) WriteText(w io.Writer) error {
	var b strings.Builder
	for i := range s.Results {
		r := &s.Results[i]
		switch {
		case r.Skipped != "":
			fmt.Fprintf(&b, "skipped  %s %s: %s\n", r.Origin, r.InstanceID, r.Skipped)
		case r.Divergence != nil:
			fmt.Fprintf(&b, "DIVERGED %s %s (%s): at seq %d history holds %s, code asked for %s\n",
				r.Origin, r.InstanceID, r.Workflow, r.Divergence.Seq, r.Divergence.History, r.Divergence.Code)
		case r.Err != nil:
			fmt.Fprintf(&b, "FAILED   %s: %v\n", strings.TrimSpace(r.Origin+" "+r.InstanceID), r.Err)
		default:
			fmt.Fprintf(&b, "ok       %s %s (%s): %d events, %d execution(s)\n", r.Origin, r.InstanceID, r.Workflow, r.Events, r.Executions)
		}
	}
	ok, skipped, diverged, failed := s.Counts()
	fmt.Fprintf(&b, "%d histories: %d ok, %d diverged, %d failed, %d skipped\n", len(s.Results), ok, diverged, failed, skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

// ReplayHistories replays every history of src against the workflows
// registered on the engine, as [Engine.ReplayHistory] does one, and
// reports each: the first divergence of a history names its instance, the
// seq, what history holds and what the code asked for. A history that a
// change guarded with [Context.Version] keeps compatible replays. It runs
// nothing new and writes nothing; the engine need not run.
//
// Run it in a test over histories exported from production (`chronicle
// history export`) before deploying new workflow code: a divergence there
// is an instance the new code would dead-letter. The error is the
// source's (a folder that cannot be read, a store that fails, ctx ended);
// what the replays found is in the summary ([ReplaySummary.Err]).
func (e *Engine) ReplayHistories(ctx context.Context, src ReplaySource) (*ReplaySummary, error) {
	sum := &ReplaySummary{}
	err := src.Each(ctx, func(h SourceHistory) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		res := ReplayResult{Origin: h.Origin, Events: len(h.Events), Skipped: h.Skipped}
		switch {
		case h.Skipped != "":
			res.ReplayReport = &ReplayReport{InstanceID: h.InstanceID}
		case h.Err != nil:
			res.ReplayReport = &ReplayReport{InstanceID: h.InstanceID, Err: h.Err}
		default:
			res.ReplayReport = e.ReplayHistory(h.Events)
		}
		sum.Results = append(sum.Results, res)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// HistoryDir returns the source of every exported history in dir and the
// folders under it: the .jsonl files that `chronicle history export`,
// [ArchiveJSONL] and `chronicle purge --archive` write, in lexical order.
// A dir without any is an error wrapping [ErrNoHistories].
func HistoryDir(dir string) ReplaySource { return fileSource{paths: []string{dir}} }

// HistoryFiles returns the source of the exported histories in paths,
// each a .jsonl file or a folder as in [HistoryDir]. A file holding the
// events of several instances yields one history per instance; checkpoint
// lines are skipped. Hash chains are not checked here (`chronicle history
// verify --archive` does that).
func HistoryFiles(paths ...string) ReplaySource { return fileSource{paths: paths} }

type fileSource struct{ paths []string }

// Each implements ReplaySource.
func (s fileSource) Each(ctx context.Context, fn func(SourceHistory) error) error {
	if len(s.paths) == 0 {
		return fmt.Errorf("%w: no files given", ErrNoHistories)
	}
	for _, p := range s.paths {
		files, err := jsonlFiles(p)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := eachInFile(f, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonlFiles returns p when it is a file, and the .jsonl files under it
// when it is a folder.
func jsonlFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".jsonl") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no .jsonl file in %s", ErrNoHistories, p)
	}
	return files, nil
}

// eachInFile passes the histories of one file to fn, one per instance in
// the order the instances first appear.
func eachInFile(path string, fn func(SourceHistory) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fn(SourceHistory{Origin: path, Err: err})
	}
	events, err := history.ReadJSONL(f)
	f.Close()
	if err == nil && len(events) == 0 {
		err = fmt.Errorf("%w: %s holds no event", ErrNoHistories, path)
	}
	if err != nil {
		return fn(SourceHistory{Origin: path, Err: err})
	}
	var order []string
	byID := map[string][]Event{}
	for _, ev := range events {
		if _, ok := byID[ev.InstanceID]; !ok {
			order = append(order, ev.InstanceID)
		}
		byID[ev.InstanceID] = append(byID[ev.InstanceID], ev)
	}
	for _, id := range order {
		if err := fn(SourceHistory{Origin: path, InstanceID: id, Events: byID[id]}); err != nil {
			return err
		}
	}
	return nil
}

// StoreHistories returns the source of the histories in from's store: of
// the instances ids, or of every instance in id order when none is given
// (which needs a store that lists instances). An instance without history
// yet (its start queued or dead-lettered) is reported as skipped. Replaying
// with another engine than from checks one store's histories against
// another program's registrations.
func StoreHistories(from *Engine, ids ...string) ReplaySource {
	return storeSource{e: from, ids: ids}
}

type storeSource struct {
	e   *Engine
	ids []string
}

// Each implements ReplaySource.
func (s storeSource) Each(ctx context.Context, fn func(SourceHistory) error) error {
	one := func(id, skipped string) error {
		h := SourceHistory{Origin: "store", InstanceID: id, Skipped: skipped}
		if skipped != "" {
			return fn(h)
		}
		events, err := s.e.History(ctx, id)
		var broken *history.ChainError
		switch {
		case errors.Is(err, ErrInstanceNotFound) && len(s.ids) == 0:
			h.Skipped = "not found any more (purged meanwhile)"
		case errors.As(err, &broken), errors.Is(err, ErrInstanceNotFound):
			// A stored event that does not decode, an id given that has
			// no history: this history fails, the others are replayed.
			h.Err = err
		case err != nil:
			return err
		default:
			h.Events = events
		}
		return fn(h)
	}
	if len(s.ids) > 0 {
		for _, id := range s.ids {
			if err := one(id, ""); err != nil {
				return err
			}
		}
		return nil
	}
	after := ""
	for {
		page, err := s.e.ListInstances(ctx, InstanceFilter{AfterID: after, Limit: 500})
		if err != nil {
			return err
		}
		for _, in := range page {
			skipped := ""
			if in.Status == StatusPending {
				skipped = "no history yet, its start is queued"
				if in.Incident != "" {
					skipped = "no history yet, its start was dead-lettered"
				}
			}
			if err := one(in.ID, skipped); err != nil {
				return err
			}
		}
		if len(page) < 500 {
			return nil
		}
		after = page[len(page)-1].ID
	}
}
