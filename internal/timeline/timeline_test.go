package timeline_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/query"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test ./internal/timeline/ -update")
	require.Equal(t, string(want), string(got), "output differs from %s; if the change is intended, run go test ./internal/timeline/ -update", path)
}

// encode encodes a user payload the way the default msgpack codec does.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := history.Encode(v)
	require.NoError(t, err)
	return b
}

// eventCase is one row of a timeline: the attributes of an event and what
// the round would have stored around them.
type eventCase struct {
	attrs       history.Attributes
	correlation string
	actor       string
}

// build turns cases into a sealed history of instance APP-1001, one event
// per second from t0.
func build(t *testing.T, cases []eventCase) []history.Event {
	t.Helper()
	events := make([]history.Event, len(cases))
	for i, c := range cases {
		payload, err := history.EncodeAttributes(c.attrs)
		require.NoError(t, err)
		actor := c.actor
		if actor == "" {
			actor = "worker:node-1"
		}
		events[i] = history.Event{
			Seq: int64(i + 1), InstanceID: "APP-1001", ExecutionID: "exec-1", Kind: c.attrs.EventKind(),
			CorrelationID: c.correlation, At: t0.Add(time.Duration(i) * time.Second), Actor: actor, Payload: payload,
		}
	}
	history.Seal(nil, events)
	return events
}

type application struct {
	ID        string
	Applicant string
	Amount    int
}

type decision struct {
	Approved bool
	Reason   string
}

// allKinds is a history holding every kind at least once, with the
// variants each kind's detail distinguishes.
func allKinds(t *testing.T) []eventCase {
	app := encode(t, application{ID: "APP-1001", Applicant: "Ada Lovelace", Amount: 240000})
	retry := history.RetryPolicy{MaxAttempts: 3, InitialInterval: 100 * time.Millisecond}
	return []eventCase{
		{attrs: &history.ExecutionStarted{Name: "loan-approval", Version: "1", Input: app, BusinessKey: "APP-1001"}, correlation: "exec-1", actor: "user:ines"},
		{attrs: &history.TurnStarted{}},
		{attrs: &history.ActivityScheduled{Name: "credit-check", Input: encode(t, "APP-1001"), Retry: retry}},
		{attrs: &history.ActivityCompleted{Result: encode(t, 742), Attempts: 2}, correlation: "3"},
		{attrs: &history.ActivityScheduled{Name: "notify", Queue: "mail", Timeout: 30 * time.Second}},
		{attrs: &history.ActivityCompleted{Attempts: 1}, correlation: "5"},
		{attrs: &history.ActivityScheduled{Name: "reserve-funds", Input: encode(t, 240000)}},
		{attrs: &history.ActivityFailed{Failure: history.Failure{Message: "treasury closed", Type: "ClosedError", NonRetryable: true}, Attempts: 1}, correlation: "7"},
		{attrs: &history.TimerCreated{FireAt: t0.Add(14 * 24 * time.Hour), Name: "document deadline"}},
		{attrs: &history.TimerCreated{FireAt: t0.Add(time.Hour)}},
		{attrs: &history.TimerFired{FireAt: t0.Add(time.Hour)}, correlation: "10"},
		{attrs: &history.TimerCancelled{}, correlation: "9"},
		{attrs: &history.EventRaised{Name: "documents-uploaded", Payload: encode(t, []string{"payslip.pdf", "id-card.png"}), IdempotencyKey: "upload-7781", Sender: "portal"}, correlation: "upload-7781", actor: "user:ada"},
		{attrs: &history.SubWorkflowScheduled{Name: "property-valuation", Version: "2", InstanceID: "APP-1001/14", ExecutionID: "exec-c", Input: encode(t, "12 Analytical Row")}},
		{attrs: &history.SubWorkflowCompleted{Output: encode(t, map[string]any{"Value": 400000, "Appraiser": "Hopper & Co"})}, correlation: "14"},
		{attrs: &history.SubWorkflowScheduled{Name: "fraud-screen", InstanceID: "APP-1001/16", ExecutionID: "exec-d"}},
		{attrs: &history.SubWorkflowFailed{Failure: history.Failure{Message: "terminated: duplicate application"}}, correlation: "16"},
		{attrs: &history.SignalSent{InstanceID: "BATCH-7", Name: "application-decided", Payload: encode(t, "APP-1001"), IdempotencyKey: "sig-18"}},
		{attrs: &history.SignalDelivered{ExecutionID: "exec-p"}, correlation: "18"},
		{attrs: &history.SignalSent{InstanceID: "APP-0999", Name: "superseded"}},
		{attrs: &history.SignalFailed{Failure: history.Failure{Message: "instance APP-0999 not found", Type: "SignalTargetNotFound", NonRetryable: true}}, correlation: "20"},
		{attrs: &history.EventRaised{Name: "co-applicant-ready", IdempotencyKey: "sig-7", Sender: "APP-1002",
			Source: &history.SignalSource{InstanceID: "APP-1002", ExecutionID: "exec-e", Seq: 7}}, correlation: "sig-7", actor: "workflow:APP-1002"},
		{attrs: &history.TaskCreated{TaskID: "task-1", Name: "underwriter-review", Roles: []string{"underwriter", "risk"}, Due: t0.Add(48 * time.Hour), Payload: encode(t, map[string]any{"score": 742})}},
		{attrs: &history.TaskAssigned{TaskID: "task-1", Assignee: "grace", Claimed: true}, correlation: "claim-1", actor: "user:grace"},
		{attrs: &history.TaskReleased{TaskID: "task-1", Previous: "grace"}, correlation: "release-1", actor: "user:grace"},
		{attrs: &history.TaskAssigned{TaskID: "task-1", Assignee: "alan"}, correlation: "assign-1", actor: "user:supervisor"},
		{attrs: &history.TaskReassigned{TaskID: "task-1", From: "alan", To: "edsger"}, correlation: "reassign-1", actor: "user:supervisor"},
		{attrs: &history.TaskCompleted{TaskID: "task-1", Result: encode(t, decision{Approved: true, Reason: "low risk"})}, correlation: "complete-1", actor: "user:edsger"},
		{attrs: &history.TaskCreated{TaskID: "task-2", Name: "sign-offer", Assignee: "ada"}},
		{attrs: &history.TaskCancelled{TaskID: "task-2", Reason: "offer withdrawn"}, correlation: "cancel:task-2"},
		{attrs: &history.MarkerRecorded{Marker: history.MarkerSideEffect, Value: encode(t, "rate-3.9")}},
		{attrs: &history.MarkerRecorded{Marker: history.MarkerVersion, Name: "new-scoring", Version: 2}},
		{attrs: &history.MarkerRecorded{Marker: "audit", Name: "checkpoint"}},
		{attrs: &history.CustomStatusSet{Status: encode(t, "waiting for documents")}},
		{attrs: &history.CustomStatusSet{}},
		{attrs: &history.CompensationStarted{Steps: 2, Reason: "application rejected"}},
		{attrs: &history.CompensationCompleted{}},
		{attrs: &history.CompensationStarted{Steps: 1}},
		{attrs: &history.CompensationCompleted{Failures: []string{"release-funds: treasury offline"}}},
		{attrs: &history.ExecutionSuspended{Reason: "fraud review", Ticket: "FRAUD-12"}, correlation: "s1", actor: "user:auditor-7"},
		{attrs: &history.ExecutionResumed{}, correlation: "r1", actor: "user:auditor-7"},
		{attrs: &history.ExecutionResumed{Reason: "cleared", Ticket: "FRAUD-13"}, correlation: "r2", actor: "user:auditor-7"},
		{attrs: &history.ContinuedAsNew{NewExecutionID: "exec-2", Input: encode(t, 1), Version: "2"}, correlation: "exec-2", actor: "system"},
		{attrs: &history.ExecutionStarted{Name: "loan-approval", Input: encode(t, 1), ContinuedFrom: "exec-1",
			Parent: &history.ParentRef{InstanceID: "BATCH-7", ExecutionID: "exec-p", ScheduledSeq: 4}}, correlation: "exec-2", actor: "system"},
		{attrs: &history.ExecutionCompleted{Output: encode(t, decision{Approved: true, Reason: strings.Repeat("all criteria met; ", 5)})}, correlation: "exec-2"},
		{attrs: &history.ExecutionCompleted{}, correlation: "exec-2"},
		{attrs: &history.ExecutionFailed{Failure: history.Failure{Message: "chronicle: activity credit-check failed after 3 attempt(s):\ncredit bureau timeout", Type: "ActivityError"}}, correlation: "exec-2"},
		{attrs: &history.ExecutionTerminated{Reason: "withdrawn by applicant", Ticket: "CS-4411"}, correlation: "exec-2", actor: "user:ines"},
		{attrs: &history.ExecutionTerminated{}, correlation: "exec-2"},
		{attrs: &history.ExecutionStarted{Name: "loan-approval", ContinuedFrom: "exec-2",
			SearchAttributes: history.SearchAttributeMap{"amount": {Type: query.Int, Int: 240000}, "branch": {Type: query.Keyword, Str: "north"}}}, correlation: "exec-3", actor: "system"},
		{attrs: &history.SearchAttributesUpserted{Attributes: history.SearchAttributeMap{
			"branch": {}, "risk": {Type: query.Float, Float: 0.25}, "tags": {Type: query.KeywordList, List: []string{"vip", "rush"}},
			"due": {Type: query.Time, Time: t0.Add(72 * time.Hour)}, "reviewed": {Type: query.Bool, Bool: true},
		}}},
		{attrs: &history.SearchAttributesUpserted{}},
		{attrs: &history.TaskCreated{TaskID: "task-3", Name: "final-approval", Assignee: "grace", Roles: []string{"underwriter"}, Due: t0.Add(96 * time.Hour),
			Escalation: []history.EscalationStep{
				{At: t0.Add(96 * time.Hour), Action: "reassign to roles [risk]; notify by activity page-risk"},
				{At: t0.Add(120 * time.Hour), Action: "complete with the default result"},
			}}},
		{attrs: &history.TaskEscalated{TaskID: "task-3", Reason: "not completed by 2026-11-26T09:00:00Z", Reassigned: true, Roles: []string{"risk"}, Notify: "page-risk"},
			correlation: "escalate:task-3", actor: history.ActorEscalation},
		{attrs: &history.TaskEscalated{TaskID: "task-3", Step: 1, Reason: "auto-approved", Completed: true, Result: encode(t, decision{Approved: true, Reason: "auto"})},
			correlation: "escalate:task-3", actor: history.ActorEscalation},
		{attrs: &history.ExecutionRerun{FromSeq: 9, NewExecutionID: "exec-4", Reason: "rate table fixed", Ticket: "OPS-7"}, correlation: "rr1", actor: "user:ana"},
		{attrs: &history.ExecutionRerun{FromSeq: 7, NewExecutionID: "exec-5", Reason: "bureau fixed", ActivitySeq: 5, ActivityInput: encode(t, 2)}, correlation: "rr2", actor: "user:ana"},
		{attrs: &history.HoldPlaced{HoldID: "hold-1", Reason: "coverage dispute", Ticket: "LIT-7"}, correlation: "hold:hold-1", actor: "user:counsel"},
		{attrs: &history.HoldReleased{HoldID: "hold-1", Reason: "dispute settled"}, correlation: "release:hold-1", actor: "user:counsel"},
		{attrs: &history.ExecutionStarted{Name: "loan-approval", Input: app,
			RerunOf: &history.RerunRef{ExecutionID: "exec-3", FromSeq: 7, Reason: "bureau fixed", Ticket: "OPS-8", ActivitySeq: 5}}, correlation: "exec-5", actor: "user:ana"},
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()

	t.Run("EveryKind", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		require.NoError(t, timeline.Write(&buf, build(t, allKinds(t)), timeline.Options{}))
		golden(t, "kinds.golden", buf.Bytes())
	})

	t.Run("CoversEveryKind", func(t *testing.T) {
		t.Parallel()
		seen := map[history.Kind]bool{}
		for _, c := range allKinds(t) {
			seen[c.attrs.EventKind()] = true
		}
		for _, k := range history.Kinds() {
			require.True(t, seen[k], "the golden history has no %s event: add one to allKinds", k)
		}
	})

	t.Run("PrefixAndNoHeader", func(t *testing.T) {
		t.Parallel()
		events := build(t, allKinds(t)[:4])
		var buf bytes.Buffer
		require.NoError(t, timeline.Write(&buf, events, timeline.Options{Prefix: "> ", NoHeader: true}))
		want := "" +
			"> 1  2026-11-22 09:00:00  ExecutionStarted   user:ines      loan-approval v1, key APP-1001, input {Amount: 240000, Applicant: \"Ada Lovelace\", ID: \"APP-1001\"}\n" +
			"> 2  2026-11-22 09:00:01  TurnStarted        worker:node-1\n" +
			"> 3  2026-11-22 09:00:02  ActivityScheduled  worker:node-1  credit-check, up to 3 attempts, input \"APP-1001\"\n" +
			"> 4  2026-11-22 09:00:03  ActivityCompleted  worker:node-1  → #3 attempt 2: 742\n"
		require.Equal(t, want, buf.String())
	})

	t.Run("EmptyHistoryWritesHeader", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		require.NoError(t, timeline.Write(&buf, nil, timeline.Options{}))
		require.Equal(t, "SEQ  TIME (UTC)  KIND  ACTOR  DETAIL\n", buf.String())
	})

	t.Run("ReportsWriterError", func(t *testing.T) {
		t.Parallel()
		err := timeline.Write(failingWriter{}, build(t, allKinds(t)[:1]), timeline.Options{})
		require.ErrorIs(t, err, errWrite)
	})

	t.Run("ZeroTimeAndControlCharacters", func(t *testing.T) {
		t.Parallel()
		events := build(t, []eventCase{{attrs: &history.TurnStarted{}, actor: "user:a\tb\nc"}})
		events[0].At = time.Time{}
		var buf bytes.Buffer
		require.NoError(t, timeline.Write(&buf, events, timeline.Options{NoHeader: true}))
		require.Equal(t, "1  -  TurnStarted  user:a b c\n", buf.String())
	})
}

var errWrite = os.ErrClosed

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestCorruptHistory renders events whose bytes are damaged: the timeline
// describes them instead of failing or panicking.
func TestCorruptHistory(t *testing.T) {
	t.Parallel()
	garbage := []byte{0xc1, 0xff, 0xee, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06}
	var events []history.Event
	add := func(k history.Kind, payload []byte) {
		events = append(events, history.Event{Seq: int64(len(events) + 1), InstanceID: "APP-1002", Kind: k,
			CorrelationID: "3", At: t0, Actor: "worker:node-1", Payload: payload})
	}
	// Attributes that are MessagePack, but not of the kind's attributes.
	notAttributes := encode(t, "not attributes")
	for _, k := range history.Kinds() {
		add(k, notAttributes)
	}
	// Attributes that are not MessagePack at all.
	add(history.KindActivityCompleted, garbage)
	// A bin32 header claiming 4 GiB of content that is not there.
	add(history.KindActivityCompleted, []byte{0x81, 0xa6, 'r', 'e', 's', 'u', 'l', 't', 0xc6, 0xff, 0xff, 0xff, 0xff})
	// An array claiming more elements than there are bytes.
	add(history.KindCompensationCompleted, []byte{0x81, 0xa8, 'f', 'a', 'i', 'l', 'u', 'r', 'e', 's', 0xdd, 0x00, 0x10, 0x00, 0x00, 0xa0})
	// Cut short.
	add(history.KindTaskAssigned, []byte{0x82, 0xa7, 't', 'a', 's', 'k', '_', 'i', 'd'})
	// Attributes that decode but carry user payloads that do not.
	for _, a := range []history.Attributes{
		&history.ExecutionStarted{Name: "loan-approval", Input: garbage},
		&history.ExecutionCompleted{Output: []byte{0xc1}},
		&history.ContinuedAsNew{NewExecutionID: "exec-2", Input: garbage},
		&history.ActivityScheduled{Name: "credit-check", Input: []byte{0x92, 0x01}}, // array of 2, one element
		&history.ActivityCompleted{Result: []byte{0x01, 0x02}, Attempts: 1},         // trailing byte
		&history.EventRaised{Name: "documents-uploaded", Payload: garbage, IdempotencyKey: "k\n1"},
		&history.SubWorkflowScheduled{Name: "valuation", InstanceID: "APP-1002/9", Input: garbage},
		&history.SubWorkflowCompleted{Output: garbage},
		&history.TaskCreated{TaskID: "t", Name: "review", Payload: garbage},
		&history.TaskCompleted{TaskID: "t", Result: garbage},
		&history.MarkerRecorded{Marker: history.MarkerSideEffect, Value: garbage},
		&history.CustomStatusSet{Status: []byte{0xd9, 0x05, 'a'}},                                                                 // string cut short
		&history.EventRaised{Name: "documents-uploaded", IdempotencyKey: "k", Payload: []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}}, // 4 GiB string claimed
	} {
		payload, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		add(a.EventKind(), payload)
	}
	add("NoSuchKind", garbage)
	add(history.KindTurnStarted, nil)
	// A completion whose correlation is not a sequence number.
	payload, err := history.EncodeAttributes(&history.TimerCancelled{})
	require.NoError(t, err)
	add(history.KindTimerCancelled, payload)
	events[len(events)-1].CorrelationID = "not-a-seq"

	var buf bytes.Buffer
	require.NoError(t, timeline.Write(&buf, events, timeline.Options{}))
	golden(t, "corrupt.golden", buf.Bytes())
}

// TestHugeLengthClaims checks that a few bytes claiming gigabytes of
// content are described without allocating them (history.Decode checks
// declared lengths against the data before decoding). It does not run in parallel, so that the allocation
// it measures is its own.
func TestHugeLengthClaims(t *testing.T) {
	claims := [][]byte{
		{0xc6, 0xff, 0xff, 0xff, 0xff},                   // bin32
		{0xdb, 0xff, 0xff, 0xff, 0xff},                   // str32
		{0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},             // ext32
		{0xdd, 0xff, 0xff, 0xff, 0xff},                   // array32
		{0xdf, 0xff, 0xff, 0xff, 0xff},                   // map32
		{0x91, 0xc6, 0xc6, 0xc6, 0xc6, 0xc6, 0xc6, 0xc6}, // found by FuzzDetail
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, b := range claims {
		require.Equal(t, timeline.Undecodable(b), timeline.DecodeMsgpack(b))
		for _, k := range history.Kinds() {
			e := history.Event{Seq: 1, Kind: k, Payload: b}
			require.True(t, strings.HasPrefix(timeline.Detail(&e, nil), "undecodable attributes "+timeline.Undecodable(b)))
		}
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated to render %d tiny payloads", len(claims))
}

func TestDetail(t *testing.T) {
	t.Parallel()

	event := func(t *testing.T, a history.Attributes, correlation string) *history.Event {
		t.Helper()
		return &build(t, []eventCase{{attrs: a, correlation: correlation}})[0]
	}

	t.Run("NilEvent", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, timeline.Detail(nil, nil))
	})

	t.Run("CustomDecode", func(t *testing.T) {
		t.Parallel()
		e := event(t, &history.ActivityCompleted{Result: []byte(`{"score": 742}`), Attempts: 1}, "3")
		require.Equal(t, `→ #3 attempt 1: {"score":742}`, timeline.Detail(e, timeline.DecodeJSON))
	})

	t.Run("PanickingDecodeIsContained", func(t *testing.T) {
		t.Parallel()
		e := event(t, &history.EventRaised{Name: "documents-uploaded", Payload: []byte{1, 2, 3}, IdempotencyKey: "k"}, "k")
		got := timeline.Detail(e, func([]byte) string { panic("decoder bug") })
		require.Equal(t, "documents-uploaded, key k, payload <3 bytes: 010203>", got)
	})

	t.Run("LongPayloadIsShortened", func(t *testing.T) {
		t.Parallel()
		e := event(t, &history.ExecutionCompleted{Output: encode(t, strings.Repeat("x", 500))}, "exec-1")
		got := timeline.Detail(e, nil)
		require.True(t, strings.HasSuffix(got, "…"), got)
		require.Equal(t, len("result ")+timeline.PayloadWidth, len([]rune(got)))
	})

	t.Run("DecoderOutputIsOneLine", func(t *testing.T) {
		t.Parallel()
		e := event(t, &history.CustomStatusSet{Status: []byte("x")}, "")
		require.Equal(t, "status a b", timeline.Detail(e, func([]byte) string { return "a\nb" }))
	})
}

func TestDecodeMsgpack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"Nil", nil, "nil"},
		{"String", "payslip.pdf", `"payslip.pdf"`},
		{"Int", -42, "-42"},
		{"Float", 3.25, "3.25"},
		{"Bool", true, "true"},
		{"Bytes", []byte{1, 2, 3}, "<3 bytes>"},
		{"Time", time.Date(2026, 11, 22, 10, 30, 0, 0, time.FixedZone("CET", 3600)), "2026-11-22 09:30:00"},
		{"Slice", []any{"a", 1, []int{2}}, `["a", 1, [2]]`},
		{"StructAsSortedMap", decision{Approved: true, Reason: "ok"}, `{Approved: true, Reason: "ok"}`},
		// history.Decode decodes maps into map[string]any only.
		{"IntKeysAreDescribed", map[int]string{1: "a"}, "<4 bytes: 8101a161>"},
		{"Deep", deep(20), "[[[[[[[[[…]]]]]]]]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, timeline.DecodeMsgpack(encode(t, tt.value)))
		})
	}

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, timeline.DecodeMsgpack(nil))
	})

	t.Run("Undecodable", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "<1 byte: c1>", timeline.DecodeMsgpack([]byte{0xc1}))
		require.Equal(t, "<9 bytes: c100000000000000…>", timeline.DecodeMsgpack(append([]byte{0xc1}, make([]byte, 8)...)))
	})

	t.Run("HugeValueIsBounded", func(t *testing.T) {
		t.Parallel()
		big := make([]int, 100000)
		require.Less(t, len(timeline.DecodeMsgpack(encode(t, big))), 1000)
	})
}

func deep(n int) any {
	var v any = 1
	for i := 0; i < n; i++ {
		v = []any{v}
	}
	return v
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"a":[1,2]}`, timeline.DecodeJSON([]byte("{ \"a\": [1, 2] }\n")))
	require.Equal(t, "<2 bytes: 7b7b>", timeline.DecodeJSON([]byte("{{")))
	require.Empty(t, timeline.DecodeJSON(nil))
}

// FuzzDetail feeds arbitrary payloads to every kind: Detail must return a
// single line and never panic.
func FuzzDetail(f *testing.F) {
	f.Add(uint8(0), []byte{0xc1})
	f.Add(uint8(3), []byte{0x81, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 'x'})
	f.Add(uint8(9), []byte{0x82, 0xa6, 'r', 'e', 's', 'u', 'l', 't', 0xc4, 0x01, 0xc1, 0xa8, 'a', 't', 't', 'e', 'm', 'p', 't', 's', 0x02})
	kinds := history.Kinds()
	f.Fuzz(func(t *testing.T, k uint8, payload []byte) {
		e := history.Event{Seq: 1, Kind: kinds[int(k)%len(kinds)], CorrelationID: "1", Payload: payload}
		got := timeline.Detail(&e, nil)
		require.NotContains(t, got, "\n")
	})
}

// FuzzDecodeMsgpack feeds arbitrary bytes to the default payload renderer:
// it must return a bounded, single-line rendering and never panic.
func FuzzDecodeMsgpack(f *testing.F) {
	f.Add([]byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'b', 0x92, 0xc0, 0xc3})
	f.Add([]byte{0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xd6, 0xff, 0x00, 0x00, 0x00, 0x01}) // a timestamp
	f.Fuzz(func(t *testing.T, b []byte) {
		got := timeline.DecodeMsgpack(b)
		require.LessOrEqual(t, len(got), 4096)
		require.Equal(t, got == "", len(b) == 0)
	})
}
