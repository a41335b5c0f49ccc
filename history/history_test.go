package history_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/query"
)

// sampleLog builds a sealed log with one event of every kind.
func sampleLog(t *testing.T) []history.Event {
	t.Helper()
	at := time.Date(2026, 11, 22, 9, 30, 0, 123456000, time.UTC)
	var events []history.Event
	for i, k := range history.Kinds() {
		a, err := history.DecodeAttributes(k, mustEncode(t, sampleAttributes(k)))
		require.NoError(t, err)
		payload, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		events = append(events, history.Event{
			Seq:           int64(i + 1),
			InstanceID:    "claim-42",
			ExecutionID:   "exec-1",
			Kind:          k,
			CorrelationID: history.SeqCorrelation(int64(i + 1)),
			At:            at.Add(time.Duration(i) * time.Second),
			Actor:         history.WorkerActor("node-a"),
			Payload:       payload,
		})
	}
	history.Seal(nil, events)
	return events
}

func sampleAttributes(k history.Kind) history.Attributes {
	switch k {
	case history.KindExecutionStarted:
		return &history.ExecutionStarted{Name: "approve", Input: []byte("in"), BusinessKey: "C-1", BusinessParts: map[string]string{"branch": "north"},
			SearchAttributes: map[string]query.Value{"amount": {Type: query.Float, Float: 12.5}, "customer": {Type: query.Keyword, Str: "c-7"}}}
	case history.KindActivityScheduled:
		return &history.ActivityScheduled{Name: "credit-check", Input: []byte{1, 2}, Retry: history.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second}}
	case history.KindTimerCreated:
		return &history.TimerCreated{FireAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Name: "deadline"}
	case history.KindTaskCreated:
		return &history.TaskCreated{TaskID: "t1", Name: "review", Roles: []string{"underwriter"}, Due: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
			Escalation: []history.EscalationStep{{At: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Action: "reassign to roles [supervisor]"}}}
	case history.KindEventRaised:
		return &history.EventRaised{Name: "documents", IdempotencyKey: "k1", Payload: []byte("p")}
	case history.KindActivityFailed:
		return &history.ActivityFailed{Failure: history.Failure{Message: "boom", NonRetryable: true}, Attempts: 3}
	case history.KindCustomStatusSet:
		return &history.CustomStatusSet{Status: []byte{0xa4, 'w', 'a', 'i', 't'}, Text: "wait"}
	case history.KindSearchAttributesUpserted:
		return &history.SearchAttributesUpserted{Attributes: sampleValues()}
	case history.KindExecutionRerun:
		return &history.ExecutionRerun{FromSeq: 4, NewExecutionID: "exec-2", Reason: "fixed the rate table", Ticket: "OPS-7", ActivitySeq: 3, ActivityInput: []byte{0xc3}}
	case history.KindTaskEscalated:
		return &history.TaskEscalated{TaskID: "t1", Step: 1, Reason: "overdue", Reassigned: true, Roles: []string{"supervisor"},
			Notify: "page", Completed: true, Result: []byte{0xc3}}
	}
	for _, kk := range history.Kinds() {
		if kk == k {
			a, _ := history.DecodeAttributes(k, []byte{0x80}) // empty map
			return a
		}
	}
	return nil
}

// sampleValues holds a value of every type, and an unset one.
func sampleValues() map[string]query.Value {
	return map[string]query.Value{
		"customer": {Type: query.Keyword, Str: "c-7"},
		"items":    {Type: query.Int, Int: -3},
		"amount":   {Type: query.Float, Float: 99.25},
		"vip":      {Type: query.Bool, Bool: true},
		"due":      {Type: query.Time, Time: time.Date(2026, 12, 24, 18, 0, 0, 123000, time.UTC)},
		"tags":     {Type: query.KeywordList, List: []string{"rush", "gift"}},
		"gone":     {},
	}
}

func mustEncode(t *testing.T, a history.Attributes) []byte {
	t.Helper()
	b, err := history.EncodeAttributes(a)
	require.NoError(t, err)
	return b
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range sampleLog(t) {
		got, err := history.UnmarshalEvent(history.MarshalEvent(&e))
		require.NoError(t, err)
		require.Equal(t, e, got)
		a, err := got.Attributes()
		require.NoError(t, err)
		require.Equal(t, e.Kind, a.EventKind())
	}
}

// sampleAttributesDecoded is what the sample attributes of k decode to.
func sampleAttributesDecoded(t *testing.T, k history.Kind) history.Attributes {
	a, err := history.DecodeAttributes(k, mustEncode(t, sampleAttributes(k)))
	require.NoError(t, err)
	return a
}

// TestSearchAttributesRoundTrip checks that values of every type come
// back from an event payload as they went in, times in UTC, and that an
// unset value stays unset.
func TestSearchAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	in := &history.SearchAttributesUpserted{Attributes: sampleValues()}
	a, err := history.DecodeAttributes(history.KindSearchAttributesUpserted, mustEncode(t, in))
	require.NoError(t, err)
	require.Equal(t, in, a)
	require.Equal(t, time.UTC, a.(*history.SearchAttributesUpserted).Attributes["due"].Time.Location())
	// Equal maps encode to equal bytes, whatever Go's map order.
	first := mustEncode(t, in)
	for range 50 {
		require.Equal(t, first, mustEncode(t, &history.SearchAttributesUpserted{Attributes: sampleValues()}))
	}

	start := sampleAttributes(history.KindExecutionStarted).(*history.ExecutionStarted)
	start.SearchAttributes["due"] = sampleValues()["due"]
	a, err = history.DecodeAttributes(history.KindExecutionStarted, mustEncode(t, start))
	require.NoError(t, err)
	require.Equal(t, start, a)
	require.Equal(t, time.UTC, a.(*history.ExecutionStarted).SearchAttributes["due"].Time.Location())

	// Without attributes, the start and the custom status encode as
	// before they had the field: stored histories keep their hashes.
	old := &history.ExecutionStarted{Name: "approve", Input: []byte("in")}
	b := mustEncode(t, old)
	require.NotContains(t, string(b), "search_attributes")
	require.NotContains(t, string(mustEncode(t, &history.CustomStatusSet{Status: []byte{1}})), "text")
}

func TestAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	in := &history.TimerCreated{FireAt: time.Date(2026, 12, 1, 8, 0, 0, 5, time.UTC), Name: "deadline"}
	a, err := history.DecodeAttributes(history.KindTimerCreated, mustEncode(t, in))
	require.NoError(t, err)
	require.Equal(t, in, a)
	require.Equal(t, time.UTC, a.(*history.TimerCreated).FireAt.Location())

	_, err = history.DecodeAttributes("NoSuchKind", []byte{0x80})
	require.ErrorIs(t, err, history.ErrCorrupt)
	_, err = history.EncodeAttributes(nil)
	require.ErrorIs(t, err, history.ErrInvalid)
	_, err = history.EncodeAttributes((*history.TimerFired)(nil))
	require.ErrorIs(t, err, history.ErrInvalid)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	log := sampleLog(t)
	require.NoError(t, history.Verify(log))
	require.NoError(t, history.Verify(nil))

	t.Run("EveryFlippedByteIsDetected", func(t *testing.T) {
		t.Parallel()
		// Flip each bit position's byte of each stored event in turn; the
		// stored bytes either fail to decode or fail verification at the
		// flipped event.
		for i := range log {
			stored := history.MarshalEvent(&log[i])
			for off := range stored {
				corrupt := bytes.Clone(stored)
				corrupt[off] ^= 0x01
				decoded, err := history.UnmarshalEvent(corrupt)
				if err != nil {
					require.ErrorIs(t, err, history.ErrCorrupt)
					continue
				}
				tampered := append([]history.Event(nil), log...)
				tampered[i] = decoded
				err = history.Verify(tampered)
				var chainErr *history.ChainError
				require.ErrorAs(t, err, &chainErr, "event %d byte %d flipped but verified", i+1, off)
				require.LessOrEqual(t, chainErr.Seq, log[i].Seq+1, "event %d byte %d", i+1, off)
				require.GreaterOrEqual(t, chainErr.Seq, log[i].Seq)
			}
		}
	})

	t.Run("MissingEvent", func(t *testing.T) {
		t.Parallel()
		gap := append(append([]history.Event(nil), log[:3]...), log[4:]...)
		var chainErr *history.ChainError
		require.ErrorAs(t, history.Verify(gap), &chainErr)
		require.Equal(t, int64(4), chainErr.Seq)
	})

	t.Run("RewrittenAndResealedTailBreaksAtFirstChange", func(t *testing.T) {
		t.Parallel()
		forged := append([]history.Event(nil), log...)
		forged[5].Actor = "user:mallory"
		history.Seal(forged[4].Hash, forged[5:])
		require.NoError(t, history.Verify(forged), "a resealed log is self-consistent")
		// ...but its hashes differ from the originals from the change on,
		// which is what a stored tombstone or an earlier export pins down.
		require.NotEqual(t, log[len(log)-1].Hash, forged[len(forged)-1].Hash)
		require.Equal(t, log[4].Hash, forged[4].Hash)
	})

	t.Run("Tail", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, history.VerifyFrom(log[9].Seq, log[9].Hash, log[10:]))
		var chainErr *history.ChainError
		require.ErrorAs(t, history.VerifyFrom(log[8].Seq, log[8].Hash, log[10:]), &chainErr)
		require.Equal(t, int64(10), chainErr.Seq)
	})
}

func TestUnmarshalEventRejectsGarbage(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	valid := history.MarshalEvent(&sampleLog(t)[0])
	for i := 0; i < 5000; i++ {
		var b []byte
		switch i % 3 {
		case 0: // random bytes
			b = make([]byte, rng.IntN(300))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
		case 1: // truncated valid event
			b = valid[:rng.IntN(len(valid))]
		default: // valid event with random bytes overwritten
			b = bytes.Clone(valid)
			for n := rng.IntN(4) + 1; n > 0; n-- {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
		}
		require.NotPanics(t, func() {
			if _, err := history.UnmarshalEvent(b); err != nil && !errors.Is(err, history.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			for _, k := range history.Kinds() {
				if _, err := history.DecodeAttributes(k, b); err != nil {
					require.ErrorIs(t, err, history.ErrCorrupt)
				}
			}
		})
	}
	_, err := history.UnmarshalEvent(nil)
	require.ErrorIs(t, err, history.ErrCorrupt)
	_, err = history.UnmarshalEvent(append(bytes.Clone(valid), 0))
	require.ErrorIs(t, err, history.ErrCorrupt)
	// A length prefix claiming far more than the input is rejected without
	// allocating it.
	huge := []byte{0x9b, 0xd3, 0, 0, 0, 0, 0, 0, 0, 1, 0xd3, 0, 0, 0, 0, 0, 0, 0, 1, 0xdb, 0x7f, 0xff, 0xff, 0xff}
	_, err = history.UnmarshalEvent(huge)
	require.ErrorIs(t, err, history.ErrCorrupt)
}

func TestKeys(t *testing.T) {
	t.Parallel()
	e := history.Event{ExecutionID: "x", Kind: history.KindActivityCompleted, CorrelationID: "7"}
	k, ok := e.Key()
	require.True(t, ok)
	failed := history.Event{ExecutionID: "x", Kind: history.KindActivityFailed, CorrelationID: "7"}
	k2, _ := failed.Key()
	require.Equal(t, k, k2, "completed and failed exclude each other")
	_, ok = (&history.Event{Kind: history.KindActivityScheduled}).Key()
	require.False(t, ok)
	for _, kind := range history.Kinds() {
		require.True(t, kind.Valid())
	}
	require.True(t, history.KindContinuedAsNew.Terminal())
	require.False(t, history.KindExecutionSuspended.Terminal())
	seq, err := history.ParseSeqCorrelation(history.SeqCorrelation(12))
	require.NoError(t, err)
	require.Equal(t, int64(12), seq)
	_, err = history.ParseSeqCorrelation("x")
	require.ErrorIs(t, err, history.ErrInvalid)
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	require.NoError(t, history.ValidateID("instance id", "claim-2026/0042"))
	require.NoError(t, history.ValidateID("instance id", history.NewID()))
	for _, bad := range []string{"", strings.Repeat("a", 201), "a\nb", " lead", "trail ", string([]byte{0xff})} {
		err := history.ValidateID("instance id", bad)
		require.ErrorIs(t, err, history.ErrInvalid, "%q", bad)
		require.Contains(t, err.Error(), "instance id")
	}
	a := history.DeterministicID("i", 3, "child")
	require.Equal(t, a, history.DeterministicID("i", 3, "child"))
	require.NotEqual(t, a, history.DeterministicID("i", 4, "child"))
}

func TestJSONLRoundTrip(t *testing.T) {
	t.Parallel()
	log := sampleLog(t)
	var buf bytes.Buffer
	require.NoError(t, history.WriteJSONL(&buf, log))
	require.Contains(t, buf.String(), `"kind":"TimerCreated"`)
	require.Contains(t, buf.String(), `"fire_at"`, "attributes are readable")
	got, err := history.ReadJSONL(&buf)
	require.NoError(t, err)
	require.Equal(t, log, got)
	require.NoError(t, history.Verify(got))
	for i := range got {
		a, err := got[i].Attributes()
		require.NoError(t, err)
		require.Equal(t, sampleAttributesDecoded(t, got[i].Kind), a)
	}

	_, err = history.ReadJSONL(strings.NewReader("{\"seq\":1}\nnot json\n"))
	require.ErrorIs(t, err, history.ErrCorrupt)
	require.Contains(t, err.Error(), "line 2")
}

// Not parallel: it measures the allocation of the test goroutine.
func TestDecodeBoundsAllocationByInput(t *testing.T) {
	// Each input claims gigabytes (or absurd nesting) in a few bytes.
	for _, in := range [][]byte{
		{0xc6, 0xc6, 0xc6, 0xc6, 0xc6},              // bin32 of 3.3 GB
		[]byte("\x91\xc6\xc6\xc6\xc6\xc6\xc6\xc6Ƒ"), // same, in an array
		{0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},         // str32
		{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},        // array32 of 4G elements
		{0xdf, 0x7f, 0xff, 0xff, 0xff, 0x01, 0x01},  // map32
		{0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},        // ext32
		bytes.Repeat([]byte{0x91}, 10000),           // 10,000 nested arrays
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var v any
		err := history.Decode(in, &v)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, history.ErrCorrupt, "% x", in[:min(len(in), 8)])
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "decoding % x allocated too much", in[:min(len(in), 8)])
		_, err = history.DecodeAttributes(history.KindSubWorkflowCompleted, in)
		require.ErrorIs(t, err, history.ErrCorrupt)
	}
	var ok struct{ A []int }
	require.NoError(t, history.Decode([]byte{0x81, 0xa1, 'A', 0x92, 0x01, 0x02}, &ok))
	require.Equal(t, []int{1, 2}, ok.A)
}
