package timeline_test

import (
	"os"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

func ExampleWrite() {
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	event := func(seq int64, actor, correlation string, a history.Attributes) history.Event {
		payload, _ := history.EncodeAttributes(a)
		return history.Event{Seq: seq, InstanceID: "APP-1001", Kind: a.EventKind(), CorrelationID: correlation,
			At: at, Actor: actor, Payload: payload}
	}
	input, _ := history.Encode("APP-1001")
	score, _ := history.Encode(742)
	events := []history.Event{
		event(1, "user:ines", "exec-1", &history.ExecutionStarted{Name: "loan-approval", Version: "1", BusinessKey: "APP-1001"}),
		event(2, "worker:demo", "", &history.TurnStarted{}),
		event(3, "worker:demo", "", &history.ActivityScheduled{Name: "credit-check", Input: input, Retry: history.RetryPolicy{MaxAttempts: 3}}),
		event(4, "worker:demo", "3", &history.ActivityCompleted{Result: score, Attempts: 2}),
	}
	_ = timeline.Write(os.Stdout, events, timeline.Options{})
	// Output:
	// SEQ  TIME (UTC)           KIND               ACTOR        DETAIL
	// 1    2026-11-22 09:00:00  ExecutionStarted   user:ines    loan-approval v1, key APP-1001
	// 2    2026-11-22 09:00:00  TurnStarted        worker:demo
	// 3    2026-11-22 09:00:00  ActivityScheduled  worker:demo  credit-check, up to 3 attempts, input "APP-1001"
	// 4    2026-11-22 09:00:00  ActivityCompleted  worker:demo  → #3 attempt 2: 742
}
