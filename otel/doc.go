// Package chronicleotel turns what a Chronicle engine tells its
// [chronicle.Observer] into OpenTelemetry traces and metrics. It is a module
// of its own, github.com/chronicleflow/chronicle/otel, so that Chronicle
// itself does not depend on OpenTelemetry; its name does not clash with
// go.opentelemetry.io/otel.
//
// Plug an [Observer] into chronicle.Options.Observer, and call
// [Observer.ObserveQueues] once the engine exists:
//
//	obs, err := chronicleotel.NewObserver(chronicleotel.Options{})
//	engine, err := chronicle.New(store, chronicle.Options{Observer: obs})
//	reg, err := obs.ObserveQueues(chronicleotel.EngineQueues(engine))
//
// # Traces
//
// Every round is a span named "chronicle.round" and every activity attempt
// a span named "chronicle.activity", recorded when the engine reports it:
// the span starts at the report's time less its duration and ends at the
// report's time. All the spans of one execution of an instance share one
// trace, whose id is derived from the instance and execution ids (see
// [ExecutionSpanContext]): they are children of a remote span of that
// trace that is never recorded itself, so a trace view shows them under a
// missing root. A round that failed before it knew its execution has a
// trace of its own.
//
// Round spans carry the attributes chronicle.instance_id,
// chronicle.execution_id, chronicle.status (the instance's status after
// the round) and chronicle.round.appended, .processed, .duplicates,
// .stale and .dead_lettered (counts). Activity spans carry
// chronicle.instance_id, chronicle.execution_id, chronicle.activity.name,
// chronicle.activity.task_id, chronicle.activity.attempt,
// chronicle.activity.outcome and, for a retry, chronicle.activity.retry_at.
// A span has the error status when its round failed, when it dead-lettered
// messages, and when its attempt failed or was dead-lettered; the error is
// recorded as an exception event.
//
// # Metrics
//
//	chronicle.rounds              counter    {round}   chronicle.round.outcome, chronicle.status
//	chronicle.round.duration      histogram  s         chronicle.round.outcome
//	chronicle.activity.attempts   counter    {attempt} chronicle.activity.name, chronicle.activity.outcome
//	chronicle.activity.failures   counter    {attempt} chronicle.activity.name, chronicle.activity.outcome
//	chronicle.activity.duration   histogram  s         chronicle.activity.name, chronicle.activity.outcome
//	chronicle.dead_letters        counter    {letter}  chronicle.dead_letter.kind
//	chronicle.queue.depth         gauge      {item}    chronicle.queue
//	chronicle.queue.oldest_age    gauge      s         chronicle.queue
//
// chronicle.round.outcome is "committed" or "failed" (the round will be
// retried); chronicle.activity.failures counts the attempts that ended
// with an error (outcomes retry, failed and lease-lost);
// chronicle.dead_letter.kind is "message" (dead-lettered by a round) or
// "activity" (an activity task). Metrics carry no instance or execution
// ids, whose number is unbounded. The queue gauges are read at each
// collection through [Observer.ObserveQueues]; an engine's
// [chronicle.Engine.QueueStats] gives the oldest ages but no depth, which
// the store contract cannot count (see [EngineQueues]).
package chronicleotel
