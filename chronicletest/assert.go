package chronicletest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

// EnvUpdateGolden is the environment variable that makes
// [Env.AssertGolden] write the golden files instead of comparing with
// them: CHRONICLE_UPDATE_GOLDEN=1 go test ./...
const EnvUpdateGolden = "CHRONICLE_UPDATE_GOLDEN"

// Describe returns the instance as the client API shows it
// ([chronicle.Engine.Describe]).
func (e *Env) Describe(instanceID string) *chronicle.Instance {
	e.t.Helper()
	inst, err := e.engine.Describe(e.ctx, instanceID)
	if err != nil {
		e.t.Fatalf("chronicletest: %v", err)
	}
	return inst
}

// Err returns the error of an ended instance: nil when it completed, a
// *chronicle.WorkflowError when it failed or was terminated. It fails the
// test when the instance has not ended.
func (e *Env) Err(instanceID string) error {
	e.t.Helper()
	inst := e.Describe(instanceID)
	if !inst.Status.Terminal() {
		e.t.Fatalf("chronicletest: %s is %s at %s; it has not ended", instanceID, inst.Status, e.Elapsed())
	}
	return inst.Result(nil)
}

// Result returns the result of a completed instance as a T. It fails the
// test when the instance has not completed, naming its status and failure.
func Result[T any](env *Env, instanceID string) T {
	env.t.Helper()
	var out T
	inst := env.Describe(instanceID)
	if inst.Status != chronicle.StatusCompleted {
		env.t.Fatalf("chronicletest: %s is %s, not completed%s", instanceID, inst.Status, failure(inst))
	}
	if err := inst.Result(&out); err != nil {
		env.t.Fatalf("chronicletest: result of %s as %s: %v", instanceID, typeName[T](), err)
	}
	return out
}

// CustomStatus returns the custom status of an instance as a T; ok is
// false when the workflow set none.
func CustomStatus[T any](env *Env, instanceID string) (status T, ok bool) {
	env.t.Helper()
	ok, err := env.Describe(instanceID).CustomStatus(&status)
	if err != nil {
		env.t.Fatalf("chronicletest: custom status of %s as %s: %v", instanceID, typeName[T](), err)
	}
	return status, ok
}

// Projection returns the state of the custom projection name for an
// instance ([chronicle.Projection]).
func Projection[S any](env *Env, name, instanceID string) S {
	env.t.Helper()
	s, _, err := chronicle.Projection[S](env.ctx, env.engine, name, instanceID)
	if err != nil {
		env.t.Fatalf("chronicletest: %v", err)
	}
	return s
}

// History returns the whole history of an instance.
func (e *Env) History(instanceID string) []chronicle.Event {
	e.t.Helper()
	events, err := e.engine.History(e.ctx, instanceID)
	if err != nil {
		e.t.Fatalf("chronicletest: %v", err)
	}
	return events
}

// Kinds returns the kinds of an instance's events in order, leaving out
// TurnStarted, which every round records (see [Env.Timeline] for the whole
// history).
func (e *Env) Kinds(instanceID string) []history.Kind {
	e.t.Helper()
	var kinds []history.Kind
	for _, ev := range e.History(instanceID) {
		if ev.Kind != history.KindTurnStarted {
			kinds = append(kinds, ev.Kind)
		}
	}
	return kinds
}

// Timeline renders an instance's history as a table, one event a line:
// seq, time (UTC), kind, actor and what the event says (names, inputs,
// results, attempts, reasons). Its text is the same on every run of a
// test, which makes it a golden file ([Env.AssertGolden]).
func (e *Env) Timeline(instanceID string) string {
	e.t.Helper()
	var b strings.Builder
	var decode func([]byte) string
	if _, ok := e.engine.Options().Codec.(chronicle.JSONCodec); ok {
		decode = timeline.DecodeJSON
	}
	if err := timeline.Write(&b, e.History(instanceID), timeline.Options{Decode: decode}); err != nil {
		e.t.Fatalf("chronicletest: timeline of %s: %v", instanceID, err)
	}
	return b.String()
}

// ExportHistory writes an instance's history to w as JSON Lines, the
// format of `chronicle history export`, for replay tests.
func (e *Env) ExportHistory(instanceID string, w io.Writer) {
	e.t.Helper()
	if err := history.WriteJSONL(w, e.History(instanceID)); err != nil {
		e.t.Fatalf("chronicletest: export %s: %v", instanceID, err)
	}
}

// AssertStatus checks the status of an instance. Like every Assert
// method, it reports a mismatch with t.Errorf, which lets the test go on,
// and returns whether the check passed.
func (e *Env) AssertStatus(instanceID string, want chronicle.Status) bool {
	e.t.Helper()
	inst := e.Describe(instanceID)
	if inst.Status != want {
		e.t.Errorf("chronicletest: %s is %s, want %s%s", instanceID, inst.Status, want, failure(inst))
		return false
	}
	return true
}

// AssertCustomStatus checks the custom status of an instance: it decodes
// the status into a value of want's type and compares the two with
// reflect.DeepEqual.
func (e *Env) AssertCustomStatus(instanceID string, want any) bool {
	e.t.Helper()
	got := reflect.New(reflect.TypeOf(want))
	ok, err := e.Describe(instanceID).CustomStatus(got.Interface())
	switch {
	case err != nil:
		e.t.Errorf("chronicletest: custom status of %s as %T: %v", instanceID, want, err)
		return false
	case !ok:
		e.t.Errorf("chronicletest: %s has no custom status, want %#v", instanceID, want)
		return false
	case !reflect.DeepEqual(got.Elem().Interface(), want):
		e.t.Errorf("chronicletest: custom status of %s is %#v, want %#v", instanceID, got.Elem().Interface(), want)
		return false
	}
	return true
}

// AssertHistory checks that an instance's history holds exactly these
// kinds of events in this order, TurnStarted left out (see [Env.Kinds]).
func (e *Env) AssertHistory(instanceID string, want ...history.Kind) bool {
	e.t.Helper()
	got := e.Kinds(instanceID)
	if !slices.Equal(got, want) {
		e.t.Errorf("chronicletest: history of %s:\n%s", instanceID, kindDiff(got, want))
		return false
	}
	return true
}

// AssertHistoryContains checks that an instance's history holds these
// kinds of events in this order, with any other events before, between
// and after them.
func (e *Env) AssertHistoryContains(instanceID string, want ...history.Kind) bool {
	e.t.Helper()
	got := e.Kinds(instanceID)
	i := 0
	for _, k := range got {
		if i < len(want) && k == want[i] {
			i++
		}
	}
	if i < len(want) {
		e.t.Errorf("chronicletest: history of %s has no %s after %v in order; its kinds are\n  %s",
			instanceID, want[i], want[:i], joinKinds(got))
		return false
	}
	return true
}

// AssertGolden compares an instance's [Env.Timeline] with the file at
// path and reports the first line that differs. With the environment
// variable CHRONICLE_UPDATE_GOLDEN set to a non-empty value it writes the
// file instead (creating its directory).
func (e *Env) AssertGolden(instanceID, path string) bool {
	e.t.Helper()
	got := e.Timeline(instanceID)
	if os.Getenv(EnvUpdateGolden) != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			e.t.Fatalf("chronicletest: %v", err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			e.t.Fatalf("chronicletest: %v", err)
		}
		return true
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		e.t.Errorf("chronicletest: golden file %s does not exist; run the test with %s=1 to write it", path, EnvUpdateGolden)
		return false
	}
	if err != nil {
		e.t.Fatalf("chronicletest: %v", err)
	}
	if bytes.Equal(want, []byte(got)) {
		return true
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
		line++
	}
	at := func(l []string) string {
		if line < len(l) {
			return l[line]
		}
		return "(end of file)"
	}
	e.t.Errorf("chronicletest: history of %s differs from %s at line %d:\n got: %s\nwant: %s\n(run with %s=1 to update; whole history:\n%s)",
		instanceID, path, line+1, at(gl), at(wl), EnvUpdateGolden, got)
	return false
}

// failure describes the failure of an instance for a message: empty when
// there is none.
func failure(inst *chronicle.Instance) string {
	switch {
	case inst.Failure != nil:
		return fmt.Sprintf(" (%s)", inst.Failure.Message)
	case inst.Incident != "":
		return fmt.Sprintf(" (incident: %s)", inst.Incident)
	case inst.LastError != "":
		return fmt.Sprintf(" (last error: %s)", inst.LastError)
	}
	return ""
}

func joinKinds(kinds []history.Kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, " ")
}

// kindDiff lists two sequences of kinds side by side, marking the rows
// that differ.
func kindDiff(got, want []history.Kind) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-3s %-24s %s\n", "#", "GOT", "WANT")
	for i := range max(len(got), len(want)) {
		g, w := "-", "-"
		if i < len(got) {
			g = string(got[i])
		}
		if i < len(want) {
			w = string(want[i])
		}
		mark := " "
		if g != w {
			mark = "≠"
		}
		fmt.Fprintf(&b, "%s %-3d %-24s %s\n", mark, i+1, g, w)
	}
	return b.String()
}
