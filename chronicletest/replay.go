package chronicletest

import (
	"context"

	"github.com/chronicleflow/chronicle"
)

// Replay replays every exported history under dir (the .jsonl files that
// `chronicle history export`, chronicle.ArchiveJSONL and `chronicle purge
// --archive` write) against the workflows registered on e, and fails t
// with one error per history that diverges from the code or does not
// replay, naming its file, instance, seq, what history holds and what the
// code asked for. A dir without histories fails t too, so that a mistyped
// path does not pass. It returns the summary for further checks.
//
// e needs only the workflows registered (activities are not run) and
// need not run. Call it from a test of the package that registers the
// workflows, over histories exported from production, so that `go test`
// before a deploy finds the instances the new code would dead-letter;
// docs/testing.md shows how.
func Replay(t T, e *chronicle.Engine, dir string) *chronicle.ReplaySummary {
	t.Helper()
	sum, err := e.ReplayHistories(context.Background(), chronicle.HistoryDir(dir))
	if err != nil {
		t.Fatalf("replay %s: %v", dir, err)
		return nil
	}
	for i := range sum.Results {
		if err := sum.Results[i].Problem(); err != nil {
			t.Errorf("%v", err)
		}
	}
	ok, skipped, diverged, failed := sum.Counts()
	t.Logf("replayed %d histories of %s: %d ok, %d diverged, %d failed, %d skipped", len(sum.Results), dir, ok, diverged, failed, skipped)
	return sum
}
