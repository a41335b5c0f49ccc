package fuzz_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Every decoder of stored bytes must return an error wrapping
// history.ErrCorrupt (or ErrTooLarge) on bad input, never panic, and
// decode what it accepts to a value that encodes and decodes to itself.

func sampleEvent() history.Event {
	payload, _ := history.EncodeAttributes(&history.ActivityScheduled{Name: "credit-check", Input: []byte(`{"amount":1200}`), Retry: history.RetryPolicy{MaxAttempts: 3}})
	e := history.Event{Seq: 3, InstanceID: "claim-1", ExecutionID: "exec-1", Kind: history.KindActivityScheduled,
		At: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC), Actor: "worker:n1", Payload: payload}
	history.Seal([]byte("0123456789abcdef0123456789abcdef"), []history.Event{e})
	e.PrevHash = []byte("0123456789abcdef0123456789abcdef")
	e.Hash = history.ComputeHash(&e)
	return e
}

func corrupt(err error) bool {
	return errors.Is(err, history.ErrCorrupt) || errors.Is(err, history.ErrTooLarge)
}

func FuzzUnmarshalEvent(f *testing.F) {
	e := sampleEvent()
	f.Add(history.MarshalEvent(&e))
	f.Add([]byte{0x9b})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := history.UnmarshalEvent(data)
		if err != nil {
			require.True(t, corrupt(err), "error does not wrap ErrCorrupt: %v", err)
			return
		}
		again, err := history.UnmarshalEvent(history.MarshalEvent(&e))
		require.NoError(t, err)
		require.Equal(t, e, again)
	})
}

func FuzzDecodeAttributes(f *testing.F) {
	kinds := history.Kinds()
	for i, k := range kinds {
		a, _ := history.DecodeAttributes(k, []byte{0x80})
		b, _ := history.EncodeAttributes(a)
		f.Add(uint8(i), b)
	}
	e := sampleEvent()
	f.Add(uint8(8), e.Payload)
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		k := kinds[int(kind)%len(kinds)]
		a, err := history.DecodeAttributes(k, data)
		if err != nil {
			require.True(t, corrupt(err), "error does not wrap ErrCorrupt: %v", err)
			return
		}
		b, err := history.EncodeAttributes(a)
		require.NoError(t, err)
		again, err := history.DecodeAttributes(k, b)
		require.NoError(t, err)
		b2, err := history.EncodeAttributes(again)
		require.NoError(t, err)
		require.Equal(t, b, b2, "encoding is stable after one round trip")
	})
}

func FuzzUnmarshalMessage(f *testing.F) {
	m, _ := provider.NewMessage("m1", "claim-1", "exec-1", "k1", &history.EventRaised{Name: "docs", IdempotencyKey: "k1"})
	m.VisibleAt = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b, _ := provider.MarshalMessage(&m)
	f.Add(b)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := provider.UnmarshalMessage(data)
		if err != nil {
			require.True(t, corrupt(err), "error does not wrap ErrCorrupt: %v", err)
			return
		}
		// Validation must not panic either, whatever the fields hold.
		if err := m.Validate(); err != nil {
			require.ErrorIs(t, err, provider.ErrInvalidMessage)
		}
		b, err := provider.MarshalMessage(&m)
		require.NoError(t, err)
		again, err := provider.UnmarshalMessage(b)
		require.NoError(t, err)
		b2, err := provider.MarshalMessage(&again)
		require.NoError(t, err)
		require.Equal(t, b, b2, "encoding is stable after one round trip")
	})
}

func FuzzUnmarshalActivityTask(f *testing.F) {
	task := provider.ActivityTask{ID: "t1", InstanceID: "claim-1", ExecutionID: "exec-1", ScheduledSeq: 3, Name: "credit-check",
		Input: []byte("in"), Attempt: 2, Retry: round.DefaultRetryPolicy, Timeout: time.Minute}
	b, _ := provider.MarshalActivityTask(&task)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := provider.UnmarshalActivityTask(data)
		if err != nil {
			require.True(t, corrupt(err), "error does not wrap ErrCorrupt: %v", err)
			return
		}
		b, err := provider.MarshalActivityTask(&task)
		require.NoError(t, err)
		again, err := provider.UnmarshalActivityTask(b)
		require.NoError(t, err)
		b2, err := provider.MarshalActivityTask(&again)
		require.NoError(t, err)
		require.Equal(t, b, b2, "encoding is stable after one round trip")
	})
}

func FuzzUnmarshalSnapshot(f *testing.F) {
	e := sampleEvent()
	start, _ := history.EncodeAttributes(&history.ExecutionStarted{Name: "approve"})
	events := []history.Event{{Seq: 1, InstanceID: "claim-1", ExecutionID: "exec-1", CorrelationID: "exec-1", Kind: history.KindExecutionStarted, Payload: start, At: e.At}}
	e.Seq, e.PrevHash = 2, nil
	events = append(events, e)
	history.Seal(nil, events)
	snap, err := round.Fold("claim-1", events)
	require.NoError(f, err)
	b, _ := round.MarshalSnapshot(snap)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := round.UnmarshalSnapshot(data)
		if err != nil {
			require.True(t, corrupt(err), "error does not wrap ErrCorrupt: %v", err)
			return
		}
		// A decoded snapshot must be usable without panics.
		_ = s.Record()
		_ = s.Clone()
		s.Classify(&provider.Message{ID: "m", InstanceID: "claim-1", Kind: history.KindActivityCompleted, CorrelationID: "2"})
	})
}
