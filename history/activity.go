package history

import "time"

// ActivityScheduled records that workflow code called an activity.
type ActivityScheduled struct {
	Name  string      `msgpack:"name" json:"name"`
	Input []byte      `msgpack:"input,omitempty" json:"input,omitempty"`
	Retry RetryPolicy `msgpack:"retry" json:"retry"`
	// Queue routes the task to workers serving that queue.
	Queue string `msgpack:"queue,omitempty" json:"queue,omitempty"`
	// Timeout bounds one attempt (start to close); zero means the engine's
	// default.
	Timeout time.Duration `msgpack:"timeout,omitempty" json:"timeout,omitempty"`
	// Priority orders the task among claimable tasks.
	Priority int `msgpack:"priority,omitempty" json:"priority,omitempty"`
	// Concurrency, when set, bounds the running tasks of its key.
	Concurrency *Concurrency `msgpack:"concurrency,omitempty" json:"concurrency,omitempty"`
}

// ActivityCompleted records an activity's result.
type ActivityCompleted struct {
	Result   []byte `msgpack:"result,omitempty" json:"result,omitempty"`
	Attempts int    `msgpack:"attempts" json:"attempts"`
}

// ActivityFailed records that an activity failed for good: attempts were
// exhausted or the error was not retryable.
type ActivityFailed struct {
	Failure  Failure `msgpack:"failure" json:"failure"`
	Attempts int     `msgpack:"attempts" json:"attempts"`
}

// EventKind implements [Attributes].
func (*ActivityScheduled) EventKind() Kind { return KindActivityScheduled }

// EventKind implements [Attributes].
func (*ActivityCompleted) EventKind() Kind { return KindActivityCompleted }

// EventKind implements [Attributes].
func (*ActivityFailed) EventKind() Kind { return KindActivityFailed }
