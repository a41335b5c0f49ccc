package chronicle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/query"
)

// orderDecls are the search attributes the tests of this file declare.
var orderDecls = map[string]query.Type{
	"customer": query.Keyword, "amount": query.Float, "items": query.Int,
	"vip": query.Bool, "due": query.Time, "tags": query.KeywordList, "stage": query.Keyword,
}

func searchSetup(t *testing.T) *bundle {
	t.Helper()
	return setup(t, chronicle.Options{SearchAttributes: orderDecls})
}

// startedAttributes returns the search attributes of the execution
// started at events[i].
func startedAttributes(t *testing.T, e history.Event) history.SearchAttributeMap {
	t.Helper()
	require.Equal(t, history.KindExecutionStarted, e.Kind)
	a, err := e.Attributes()
	require.NoError(t, err)
	return a.(*history.ExecutionStarted).SearchAttributes
}

// TestStartSearchAttributes: the attributes a start gives are recorded in
// ExecutionStarted, typed by their declarations, and shown by Describe as
// Go values, while the start is queued and once it ran.
func TestStartSearchAttributes(t *testing.T) {
	t.Parallel()
	b := searchSetup(t)
	register(t, b.engine, "order", func(ctx *chronicle.Context, _ string) (string, error) {
		_, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return "", err
	})
	due := time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.FixedZone("CET", 3600))
	attrs := map[string]any{
		"customer": "c-7", "amount": 12, "items": int32(3), "vip": true, "due": due,
		"tags": []string{"rush", "gift"}, "stage": nil,
	}
	_, err := b.engine.Start(b.ctx, "order", "x", &chronicle.StartOptions{InstanceID: "o-1", SearchAttributes: attrs})
	require.NoError(t, err)
	want := map[string]any{
		"customer": "c-7", "amount": float64(12), "items": int64(3), "vip": true,
		"due": due.UTC().Truncate(time.Microsecond), "tags": []string{"rush", "gift"},
	}
	pending := b.describe(t, "o-1")
	require.Equal(t, chronicle.StatusPending, pending.Status)
	require.Equal(t, want, pending.SearchAttributes)

	b.drain(t)
	inst := b.describe(t, "o-1")
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	require.Equal(t, want, inst.SearchAttributes)
	got := startedAttributes(t, b.history(t, "o-1")[0])
	require.Len(t, got, 6, "an unset attribute is not recorded at the start")
	require.Equal(t, query.Value{Type: query.Float, Float: 12}, got["amount"])
}

// TestStartRefusesBadSearchAttributes: an undeclared attribute, a value of
// another type or too many attributes are refused before anything is
// written, by Start, StartMany and a Client.
func TestStartRefusesBadSearchAttributes(t *testing.T) {
	t.Parallel()
	b := searchSetup(t)
	register(t, b.engine, "order", func(*chronicle.Context, string) (string, error) { return "", nil })
	client, err := chronicle.NewClient(b.store, chronicle.ClientOptions{Clock: b.clock, SearchAttributes: orderDecls})
	require.NoError(t, err)
	many := map[string]any{}
	for i := range chronicle.MaxSearchAttributes + 1 {
		many[fmt.Sprintf("a%d", i)] = "x"
	}
	manyDecls := map[string]query.Type{}
	for k := range many {
		manyDecls[k] = query.Keyword
	}
	big := setup(t, chronicle.Options{SearchAttributes: manyDecls})
	register(t, big.engine, "order", func(*chronicle.Context, string) (string, error) { return "", nil })

	for name, c := range map[string]struct {
		starter chronicle.Client
		attrs   map[string]any
		says    string
	}{
		"undeclared":      {b.engine, map[string]any{"colour": "red"}, `"colour" is not declared`},
		"wrong type":      {b.engine, map[string]any{"amount": "12"}, `"amount"`},
		"float for int":   {b.engine, map[string]any{"items": 1.5}, `"items"`},
		"bad keyword":     {b.engine, map[string]any{"customer": "a\x00b"}, `"customer"`},
		"client":          {client, map[string]any{"vip": "yes"}, `"vip"`},
		"too many":        {big.engine, many, "at most 64"},
		"list for string": {b.engine, map[string]any{"customer": []string{"a"}}, `"customer"`},
	} {
		_, err := c.starter.Start(b.ctx, "order", "x", &chronicle.StartOptions{InstanceID: "bad-" + strings.ReplaceAll(name, " ", "-"), SearchAttributes: c.attrs})
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, name)
		require.ErrorContains(t, err, c.says, name)
		_, err = c.starter.Describe(b.ctx, "bad-"+strings.ReplaceAll(name, " ", "-"))
		require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "%s: nothing was written", name)
	}
	_, err = b.engine.StartMany(b.ctx, []chronicle.StartRequest{
		{Workflow: "order", Input: "x", Options: &chronicle.StartOptions{InstanceID: "m-1"}},
		{Workflow: "order", Input: "x", Options: &chronicle.StartOptions{InstanceID: "m-2", SearchAttributes: map[string]any{"amount": true}}},
	})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = b.engine.Describe(b.ctx, "m-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "StartMany started nothing")
}

// TestSearchAttributeDeclarations: New and NewClient refuse invalid
// declarations.
func TestSearchAttributeDeclarations(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	for _, decls := range []map[string]query.Type{
		{"1abc": query.Keyword},
		{"status": query.Keyword}, // a built-in field
		{"Workflow": query.Keyword},
		{"amount": query.Invalid},
		{"amount": query.Type(99)},
		{"has space": query.Int},
	} {
		_, err := chronicle.New(store, chronicle.Options{SearchAttributes: decls})
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "%v", decls)
		_, err = chronicle.NewClient(store, chronicle.ClientOptions{SearchAttributes: decls})
		require.ErrorIs(t, err, chronicle.ErrInvalidArgument, "%v", decls)
	}
	e, err := chronicle.New(store, chronicle.Options{SearchAttributes: orderDecls})
	require.NoError(t, err)
	e.Close()
}

// orderWorkflow sets attributes, a custom status, unsets an attribute,
// refuses a bad upsert, and continues as new once, to check what the next
// execution starts with.
func orderWorkflow(ctx *chronicle.Context, round int) (string, error) {
	if round == 0 {
		if err := ctx.UpsertSearchAttributes(map[string]any{"amount": 99.5, "stage": "paid", "tags": []string{"a"}}); err != nil {
			return "", err
		}
		bad := ctx.UpsertSearchAttributes(map[string]any{"amount": "lots", "stage": "never"})
		if !errors.Is(bad, chronicle.ErrInvalidArgument) {
			return "", fmt.Errorf("a bad upsert gave %v", bad)
		}
		if err := ctx.UpsertSearchAttributes(map[string]any{"nope": 1}); !errors.Is(err, chronicle.ErrInvalidArgument) {
			return "", fmt.Errorf("an undeclared upsert gave %v", err)
		}
		if err := ctx.SetCustomStatus("waiting for stock"); err != nil {
			return "", err
		}
		if _, err := chronicle.WaitEvent[string](ctx, "stock", nil); err != nil {
			return "", err
		}
		if err := ctx.UpsertSearchAttributes(map[string]any{"customer": nil, "tags": nil, "items": 4}); err != nil {
			return "", err
		}
		return "", ctx.ContinueAsNew(1)
	}
	if err := ctx.SetCustomStatus(map[string]int{"round": round}); err != nil {
		return "", err
	}
	_, err := chronicle.WaitEvent[string](ctx, "done", nil)
	return "done", err
}

// searchModes runs test in both modes of the memory store, with the
// engine's cache and without it (every round loads its instance cold,
// from the stored snapshot).
func searchModes(t *testing.T, test func(t *testing.T, b *bundle)) {
	for _, mode := range []provider.Mode{provider.ModeTransactional, provider.ModePeekLock} {
		for _, cache := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/cache%d", mode, cache), func(t *testing.T) {
				t.Parallel()
				test(t, setupOn(t, memory.New(memory.Options{Mode: mode}), chronicle.Options{SearchAttributes: orderDecls, CacheSize: cache}))
			})
		}
	}
}

// TestUpsertSearchAttributes: workflow code's upserts are recorded in
// history (a bad one records nothing), shown by Describe with the custom
// status text, carried by continue-as-new, and replay deterministically.
func TestUpsertSearchAttributes(t *testing.T) {
	t.Parallel()
	searchModes(t, testUpsertSearchAttributes)
}

func testUpsertSearchAttributes(t *testing.T, b *bundle) {
	register(t, b.engine, "order", orderWorkflow)
	_, err := b.engine.Start(b.ctx, "order", 0, &chronicle.StartOptions{InstanceID: "o-1", SearchAttributes: map[string]any{"customer": "c-1", "vip": false}})
	require.NoError(t, err)
	b.drain(t)

	inst := b.describe(t, "o-1")
	require.Equal(t, chronicle.StatusRunning, inst.Status, "%+v", inst.Failure)
	require.Equal(t, map[string]any{"customer": "c-1", "vip": false, "amount": 99.5, "stage": "paid", "tags": []string{"a"}}, inst.SearchAttributes)
	require.Equal(t, "waiting for stock", inst.CustomStatusText)
	events := b.history(t, "o-1")
	require.Equal(t, 1, count(events, history.KindSearchAttributesUpserted), "the refused upserts record nothing")

	require.NoError(t, b.engine.RaiseEvent(b.ctx, "o-1", "stock", "in", nil))
	b.drain(t)
	inst = b.describe(t, "o-1")
	require.Equal(t, chronicle.StatusRunning, inst.Status)
	want := map[string]any{"vip": false, "amount": 99.5, "stage": "paid", "items": int64(4)}
	require.Equal(t, want, inst.SearchAttributes, "unset attributes are gone, and continue-as-new kept the rest")
	require.Empty(t, inst.CustomStatusText, "a status that is not a string has no text")
	var status map[string]int
	ok, err := inst.CustomStatus(&status)
	require.NoError(t, err)
	require.True(t, ok)

	events = b.history(t, "o-1")
	var starts []history.Event
	for _, e := range events {
		if e.Kind == history.KindExecutionStarted {
			starts = append(starts, e)
		}
	}
	require.Len(t, starts, 2)
	carried := startedAttributes(t, starts[1])
	require.Equal(t, history.SearchAttributeMap{
		"vip": {Type: query.Bool}, "amount": {Type: query.Float, Float: 99.5},
		"stage": {Type: query.Keyword, Str: "paid"}, "items": {Type: query.Int, Int: 4},
	}, carried)

	// The stored history replays, from the store and cold on a new engine.
	report := b.engine.ReplayHistory(events)
	require.NoError(t, report.Err)
	require.Nil(t, report.Divergence)
	other := b.newEngine(t)
	register(t, other, "order", orderWorkflow)
	sum, err := other.ReplayHistories(b.ctx, chronicle.StoreHistories(b.engine, "o-1"))
	require.NoError(t, err)
	require.NoError(t, sum.Err())

	// The stored projections are those a fold of history gives.
	diffs, err := b.engine.CheckProjections(b.ctx, "o-1")
	require.NoError(t, err)
	require.Empty(t, diffs)

	require.NoError(t, b.engine.RaiseEvent(b.ctx, "o-1", "done", "", nil))
	b.drain(t)
	require.Equal(t, "done", result[string](t, b, "o-1"))
}

// TestUpsertNondeterminism: code that no longer upserts where history
// recorded an upsert diverges, like one that no longer sets a custom
// status.
func TestUpsertNondeterminism(t *testing.T) {
	t.Parallel()
	b := searchSetup(t)
	register(t, b.engine, "order", orderWorkflow)
	_, err := b.engine.Start(b.ctx, "order", 0, &chronicle.StartOptions{InstanceID: "o-1"})
	require.NoError(t, err)
	b.drain(t)
	events := b.history(t, "o-1")

	changed := b.newEngine(t)
	register(t, changed, "order", func(ctx *chronicle.Context, _ int) (string, error) {
		if err := ctx.SetCustomStatus("waiting for stock"); err != nil {
			return "", err
		}
		_, err := chronicle.WaitEvent[string](ctx, "stock", nil)
		return "", err
	})
	report := changed.ReplayHistory(events)
	require.NotNil(t, report.Divergence)
	require.Equal(t, "SearchAttributesUpserted", report.Divergence.History)
	require.Equal(t, "CustomStatusSet", report.Divergence.Code)
}

// TestSearchAttributesExportImport: a history holding the new kind
// exports to JSON Lines, reads back byte for byte with its chain intact,
// shows typed values in its attributes, and replays from the file.
func TestSearchAttributesExportImport(t *testing.T) {
	t.Parallel()
	b := searchSetup(t)
	register(t, b.engine, "order", orderWorkflow)
	_, err := b.engine.Start(b.ctx, "order", 0, &chronicle.StartOptions{InstanceID: "o-1", SearchAttributes: map[string]any{"due": t0}})
	require.NoError(t, err)
	b.drain(t)
	events := b.history(t, "o-1")

	var buf bytes.Buffer
	require.NoError(t, history.WriteJSONL(&buf, events))
	require.Contains(t, buf.String(), `"kind":"SearchAttributesUpserted"`)
	require.Contains(t, buf.String(), `"amount":{"type":"float","value":99.5}`)
	require.Contains(t, buf.String(), `"search_attributes":{"due":{"type":"time","value":"2026-11-22T09:00:00Z"}}`)
	require.Contains(t, buf.String(), `"text":"waiting for stock"`)
	back, err := history.ReadJSONL(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.Equal(t, events, back)
	require.NoError(t, history.Verify(back))

	path := filepath.Join(t.TempDir(), "o-1.jsonl")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	sum, err := b.engine.ReplayHistories(b.ctx, chronicle.HistoryFiles(path))
	require.NoError(t, err)
	require.NoError(t, sum.Err())
}

// itemsState is a projection that counts the activities an order ran and
// keeps the last stage its workflow reached.
type itemsState struct {
	Items int
	Stage string
}

func foldItems(s itemsState, e *chronicle.Event) (itemsState, error) {
	if e.Kind == history.KindActivityCompleted {
		s.Items++
	}
	if e.Kind == history.KindSearchAttributesUpserted {
		s.Stage = "upserted"
	}
	return s, nil
}

// projectionSetup registers an "order" workflow that runs n activities,
// an "other" workflow, and a projection limited to orders that derives
// the items attribute.
func projectionSetup(t *testing.T, attrs func(itemsState) map[string]any) *bundle {
	t.Helper()
	return projectionSetupOn(t, searchSetup(t), attrs)
}

func projectionSetupOn(t *testing.T, b *bundle, attrs func(itemsState) map[string]any) *bundle {
	t.Helper()
	activity(t, b.engine, "pick", func(_ context.Context, in int) (int, error) { return in, nil })
	register(t, b.engine, "order", func(ctx *chronicle.Context, n int) (int, error) {
		for i := range n {
			if _, err := chronicle.CallActivity[int](ctx, "pick", i, nil); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	register(t, b.engine, "other", func(ctx *chronicle.Context, n int) (int, error) {
		_, err := chronicle.CallActivity[int](ctx, "pick", n, nil)
		return n, err
	})
	require.NoError(t, chronicle.RegisterProjection(b.engine, "items", 1, foldItems,
		chronicle.ForWorkflows("order"), chronicle.ProjectionAttributes(attrs)))
	return b
}

// TestProjectionForWorkflowsAndAttributes: a projection limited to one
// workflow is folded and stored for its instances only; the attributes
// it derives are in the instance record over the workflow's own; a check
// finds the stored projections equal to a fold of history, and a
// rebuild reproduces them.
func TestProjectionForWorkflowsAndAttributes(t *testing.T) {
	t.Parallel()
	searchModes(t, func(t *testing.T, b *bundle) {
		testProjectionForWorkflowsAndAttributes(t, projectionSetupOn(t, b, func(s itemsState) map[string]any {
			return map[string]any{"items": s.Items, "customer": nil}
		}))
	})
}

func testProjectionForWorkflowsAndAttributes(t *testing.T, b *bundle) {
	_, err := b.engine.Start(b.ctx, "order", 3, &chronicle.StartOptions{InstanceID: "o-1", SearchAttributes: map[string]any{"items": 100, "customer": "c-1"}})
	require.NoError(t, err)
	b.start(t, "other", "x-1", 1)
	b.drain(t)

	s, seq, err := chronicle.Projection[itemsState](b.ctx, b.engine, "items", "o-1")
	require.NoError(t, err)
	require.Equal(t, 3, s.Items)
	require.Positive(t, seq)
	_, _, err = chronicle.Projection[itemsState](b.ctx, b.engine, "items", "x-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "the projection is not stored for other workflows")

	inst := b.describe(t, "o-1")
	require.Equal(t, map[string]any{"items": int64(3), "customer": "c-1"}, inst.SearchAttributes,
		"the projection's value wins, and a nil value leaves the workflow's")
	require.Empty(t, b.describe(t, "x-1").SearchAttributes)

	for _, id := range []string{"o-1", "x-1"} {
		diffs, err := b.engine.CheckProjections(b.ctx, id)
		require.NoError(t, err)
		require.Empty(t, diffs, id)
		require.NoError(t, b.engine.RebuildProjections(b.ctx, id))
		diffs, err = b.engine.CheckProjections(b.ctx, id)
		require.NoError(t, err)
		require.Empty(t, diffs, id)
	}
	require.Equal(t, inst.SearchAttributes, b.describe(t, "o-1").SearchAttributes, "a rebuild derives the attributes again")
	_, _, err = chronicle.Projection[itemsState](b.ctx, b.engine, "items", "x-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound, "a rebuild does not store it either")

	// A check notices derived attributes that differ from the fold.
	rec, err := b.store.GetInstance(b.ctx, "o-1")
	require.NoError(t, err)
	rec.Attributes["items"] = query.Value{Type: query.Int, Int: 7}
	view, err := b.engine.ProjectionsAt(b.ctx, "o-1", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"Attributes"}, view.Instance.Diff(rec))
	require.Equal(t, query.Value{Type: query.Int, Int: 3}, view.Instance.Attributes["items"])
}

// TestProjectionAttributesOfWrongType: a derived attribute that is not of
// its declared type fails the round like a failing fold: nothing of it is
// stored, and the instance's messages are dead-lettered in the end.
func TestProjectionAttributesOfWrongType(t *testing.T) {
	t.Parallel()
	b := projectionSetup(t, func(s itemsState) map[string]any { return map[string]any{"items": "many"} })
	b.start(t, "order", "o-1", 1)
	for range 5 {
		b.advance(t, time.Minute)
	}
	inst := b.describe(t, "o-1")
	require.Equal(t, chronicle.StatusPending, inst.Status, "the first round never stored a record")
	require.Contains(t, inst.Incident, `"items"`)
	_, _, err := chronicle.Projection[itemsState](b.ctx, b.engine, "items", "o-1")
	require.ErrorIs(t, err, chronicle.ErrInstanceNotFound)
}

// TestSearchQueries: ListInstances with Where, CountInstances by status
// and by an attribute, and ListProjections answer from the store.
func TestSearchQueries(t *testing.T) {
	t.Parallel()
	b := projectionSetup(t, func(s itemsState) map[string]any { return map[string]any{"items": s.Items} })
	register(t, b.engine, "wait", func(ctx *chronicle.Context, _ int) (int, error) {
		_, err := chronicle.WaitEvent[string](ctx, "go", nil)
		return 0, err
	})
	for i, c := range []struct {
		workflow string
		items    int
		customer string
	}{{"order", 1, "ann"}, {"order", 2, "bob"}, {"order", 3, "ann"}, {"wait", 0, "ann"}, {"other", 0, ""}} {
		attrs := map[string]any{"amount": float64(10 * i)}
		if c.customer != "" {
			attrs["customer"] = c.customer
		}
		_, err := b.engine.Start(b.ctx, c.workflow, c.items, &chronicle.StartOptions{InstanceID: fmt.Sprintf("i-%d", i), SearchAttributes: attrs})
		require.NoError(t, err)
	}
	b.drain(t)

	ids := func(insts []*chronicle.Instance) []string {
		var out []string
		for _, in := range insts {
			out = append(out, in.ID)
		}
		return out
	}
	list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Where: "customer = 'ann' AND status = 'completed'"})
	require.NoError(t, err)
	require.Equal(t, []string{"i-0", "i-2"}, ids(list))
	list, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Where: "items >= 2 OR amount > 35", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"i-1", "i-2"}, ids(list))
	list, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Workflow: "order", Where: "NOT customer = 'ann'"})
	require.NoError(t, err)
	require.Equal(t, []string{"i-1"}, ids(list))

	counts, err := b.engine.CountInstances(b.ctx, chronicle.CountFilter{By: "status"})
	require.NoError(t, err)
	require.Equal(t, []chronicle.Count{{Value: "completed", Count: 4}, {Value: "running", Count: 1}}, counts)
	counts, err = b.engine.CountInstances(b.ctx, chronicle.CountFilter{Where: "workflow != 'other'", By: "customer"})
	require.NoError(t, err)
	require.Equal(t, []chronicle.Count{{Value: "ann", Count: 3}, {Value: "bob", Count: 1}}, counts)
	counts, err = b.engine.CountInstances(b.ctx, chronicle.CountFilter{})
	require.NoError(t, err)
	require.Equal(t, []chronicle.Count{{Value: nil, Count: 5}}, counts)

	items, err := chronicle.ListProjections[itemsState](b.ctx, b.engine, "items", chronicle.ProjectionFilter{Where: "customer = 'ann'"})
	require.NoError(t, err)
	require.Len(t, items, 2, "only orders have the projection")
	require.Equal(t, "i-0", items[0].InstanceID)
	require.Equal(t, 1, items[0].State.Items)
	require.Equal(t, 3, items[1].State.Items)

	// Refused before the store: a text that does not parse, an unknown
	// attribute, a count by a keyword list.
	_, err = b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Where: "customer = "})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = b.engine.CountInstances(b.ctx, chronicle.CountFilter{Where: "colour = 'red'"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = b.engine.CountInstances(b.ctx, chronicle.CountFilter{By: "tags"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
	_, err = chronicle.ListProjections[itemsState](b.ctx, b.engine, "items", chronicle.ProjectionFilter{Where: "amount > 'x'"})
	require.ErrorIs(t, err, chronicle.ErrInvalidArgument)
}

// TestUpsertLimit: an upsert that would give an instance more than
// MaxSearchAttributes is refused and records nothing; unsetting makes
// room again.
func TestUpsertLimit(t *testing.T) {
	t.Parallel()
	decls := map[string]query.Type{}
	for i := range chronicle.MaxSearchAttributes + 1 {
		decls[fmt.Sprintf("a%02d", i)] = query.Int
	}
	b := setup(t, chronicle.Options{SearchAttributes: decls})
	register(t, b.engine, "fill", func(ctx *chronicle.Context, _ int) (string, error) {
		first := map[string]any{}
		for i := range chronicle.MaxSearchAttributes {
			first[fmt.Sprintf("a%02d", i)] = i
		}
		if err := ctx.UpsertSearchAttributes(first); err != nil {
			return "", err
		}
		over := ctx.UpsertSearchAttributes(map[string]any{"a64": 64})
		if !errors.Is(over, chronicle.ErrInvalidArgument) {
			return "", fmt.Errorf("the 65th attribute gave %v", over)
		}
		// Unsetting one and setting another in one upsert keeps 64.
		return "", ctx.UpsertSearchAttributes(map[string]any{"a00": nil, "a64": 64})
	})
	b.start(t, "fill", "f-1", 0)
	b.drain(t)
	require.Equal(t, "", result[string](t, b, "f-1"))
	require.Equal(t, 2, count(b.history(t, "f-1"), history.KindSearchAttributesUpserted))
	attrs := b.describe(t, "f-1").SearchAttributes
	require.Len(t, attrs, chronicle.MaxSearchAttributes)
	require.NotContains(t, attrs, "a00")
	require.Equal(t, int64(64), attrs["a64"])
}

// TestWhereOnDeadStarts: an instance whose start was dead-lettered before
// its first round is listed as pending when the filter matches what its
// start gave, and not otherwise.
func TestWhereOnDeadStarts(t *testing.T) {
	t.Parallel()
	b := searchSetup(t)
	register(t, b.engine, "crash", func(*chronicle.Context, int) (int, error) { panic("boom") })
	_, err := b.engine.Start(b.ctx, "crash", 0, &chronicle.StartOptions{InstanceID: "d-1", SearchAttributes: map[string]any{"customer": "ann"}})
	require.NoError(t, err)
	for range 5 {
		b.advance(t, time.Minute)
	}
	inst := b.describe(t, "d-1")
	require.Equal(t, chronicle.StatusPending, inst.Status)
	require.NotEmpty(t, inst.Incident)
	require.Equal(t, map[string]any{"customer": "ann"}, inst.SearchAttributes)

	for where, want := range map[string][]string{
		"customer = 'ann'":              {"d-1"},
		"customer = 'bob'":              nil,
		"workflow = 'crash'":            {"d-1"},
		"status = 'running'":            nil,
		"customer = 'ann' AND amount>1": nil,
	} {
		list, err := b.engine.ListInstances(b.ctx, chronicle.InstanceFilter{Where: where})
		require.NoError(t, err, where)
		var ids []string
		for _, in := range list {
			ids = append(ids, in.ID)
		}
		require.Equal(t, want, ids, where)
	}
}
