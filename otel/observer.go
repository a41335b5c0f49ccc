package chronicleotel

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/round"
)

// scope names the tracer and the meter.
const scope = "github.com/chronicleflow/chronicle/otel"

// Attribute keys.
const (
	keyInstance     = attribute.Key("chronicle.instance_id")
	keyExecution    = attribute.Key("chronicle.execution_id")
	keyStatus       = attribute.Key("chronicle.status")
	keyRoundOutcome = attribute.Key("chronicle.round.outcome")
	keyAppended     = attribute.Key("chronicle.round.appended")
	keyProcessed    = attribute.Key("chronicle.round.processed")
	keyDuplicates   = attribute.Key("chronicle.round.duplicates")
	keyStale        = attribute.Key("chronicle.round.stale")
	keyDeadLettered = attribute.Key("chronicle.round.dead_lettered")
	keyActivity     = attribute.Key("chronicle.activity.name")
	keyTask         = attribute.Key("chronicle.activity.task_id")
	keyAttempt      = attribute.Key("chronicle.activity.attempt")
	keyOutcome      = attribute.Key("chronicle.activity.outcome")
	keyRetryAt      = attribute.Key("chronicle.activity.retry_at")
	keyLetterKind   = attribute.Key("chronicle.dead_letter.kind")
	keyQueue        = attribute.Key("chronicle.queue")
)

// deadLettered is the outcome of an activity attempt whose task was
// dead-lettered.
const deadLettered = string(round.OutcomeDeadLettered)

// durationBuckets are the bounds, in seconds, of the duration histograms:
// from a millisecond round to a five-minute activity.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Options configure an [Observer]. The zero value uses the global
// providers.
type Options struct {
	// TracerProvider makes the tracer of the spans. Default:
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of the metrics. Default:
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// Observer records rounds and activity attempts as spans and metrics. It
// implements [chronicle.Observer]; its methods may be called from any
// number of goroutines. It does not block unless the providers do: give
// the tracer provider a batching span processor.
type Observer struct {
	tracer trace.Tracer
	meter  metric.Meter

	rounds        metric.Int64Counter
	roundDuration metric.Float64Histogram
	attempts      metric.Int64Counter
	failures      metric.Int64Counter
	attemptTime   metric.Float64Histogram
	deadLetters   metric.Int64Counter
	depth         metric.Int64ObservableGauge
	oldestAge     metric.Float64ObservableGauge
}

var _ chronicle.Observer = (*Observer)(nil)

// NewObserver returns an observer that records through the providers of
// o. It fails when the meter refuses an instrument.
func NewObserver(o Options) (*Observer, error) {
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	m := o.MeterProvider.Meter(scope)
	obs := &Observer{tracer: o.TracerProvider.Tracer(scope), meter: m}
	errs := make([]error, 8)
	obs.rounds, errs[0] = m.Int64Counter("chronicle.rounds", metric.WithUnit("{round}"),
		metric.WithDescription("Rounds run, by outcome and the instance's status after the round."))
	obs.roundDuration, errs[1] = m.Float64Histogram("chronicle.round.duration", metric.WithUnit("s"),
		metric.WithDescription("How long rounds took."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	obs.attempts, errs[2] = m.Int64Counter("chronicle.activity.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Activity attempts, by activity and outcome."))
	obs.failures, errs[3] = m.Int64Counter("chronicle.activity.failures", metric.WithUnit("{attempt}"),
		metric.WithDescription("Activity attempts that ended with an error, by activity and outcome."))
	obs.attemptTime, errs[4] = m.Float64Histogram("chronicle.activity.duration", metric.WithUnit("s"),
		metric.WithDescription("How long activity attempts took."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	obs.deadLetters, errs[5] = m.Int64Counter("chronicle.dead_letters", metric.WithUnit("{letter}"),
		metric.WithDescription("Messages and activity tasks moved to the dead-letter store."))
	obs.depth, errs[6] = m.Int64ObservableGauge("chronicle.queue.depth", metric.WithUnit("{item}"),
		metric.WithDescription("Messages or activity tasks queued, due or not."))
	obs.oldestAge, errs[7] = m.Float64ObservableGauge("chronicle.queue.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("How long the work that has waited longest for a worker has been due."))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("chronicleotel: %w", err)
	}
	return obs, nil
}

// ExecutionSpanContext returns the span context the spans of one
// execution of an instance are children of: its trace id is the first 16
// bytes, and its span id the next 8, of the SHA-256 of "chronicle", the
// instance id and the execution id, each followed by a zero byte. It is
// remote and sampled, so a ParentBased sampler keeps every span of the
// execution unless told otherwise for sampled remote parents (a
// TraceIDRatioBased sampler there keeps or drops executions whole). Use it
// to find an execution's trace, or to parent spans of your own in it. It
// is invalid when executionID is empty.
func ExecutionSpanContext(instanceID, executionID string) trace.SpanContext {
	if executionID == "" {
		return trace.SpanContext{}
	}
	h := sha256.New()
	for _, s := range []string{"chronicle", instanceID, executionID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// parent returns the context the spans of an execution start from.
func parent(instanceID, executionID string) context.Context {
	sc := ExecutionSpanContext(instanceID, executionID)
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// Round records a round: a span, the round counters and, when it moved
// messages to the dead-letter store, the dead letters.
func (o *Observer) Round(s chronicle.RoundStats) {
	end := time.Now()
	outcome := "committed"
	if s.Err != nil {
		outcome = "failed"
	}
	attrs := []attribute.KeyValue{keyInstance.String(s.InstanceID)}
	if s.ExecutionID != "" {
		attrs = append(attrs, keyExecution.String(s.ExecutionID))
	}
	if s.Status != "" {
		attrs = append(attrs, keyStatus.String(string(s.Status)))
	}
	attrs = append(attrs, keyRoundOutcome.String(outcome),
		keyAppended.Int(s.Appended), keyProcessed.Int(s.Processed), keyDuplicates.Int(s.Duplicates),
		keyStale.Int(s.Stale), keyDeadLettered.Int(s.DeadLettered))
	_, span := o.tracer.Start(parent(s.InstanceID, s.ExecutionID), "chronicle.round",
		trace.WithTimestamp(end.Add(-s.Duration)), trace.WithAttributes(attrs...))
	switch {
	case s.Err != nil:
		span.RecordError(s.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, s.Err.Error())
	case s.DeadLettered > 0:
		span.SetStatus(codes.Error, fmt.Sprintf("messages dead-lettered: %d", s.DeadLettered))
	}
	span.End(trace.WithTimestamp(end))

	ctx := context.Background()
	set := []attribute.KeyValue{keyRoundOutcome.String(outcome)}
	o.roundDuration.Record(ctx, s.Duration.Seconds(), metric.WithAttributes(set...))
	if s.Status != "" {
		set = append(set, keyStatus.String(string(s.Status)))
	}
	o.rounds.Add(ctx, 1, metric.WithAttributes(set...))
	if s.DeadLettered > 0 {
		o.deadLetters.Add(ctx, int64(s.DeadLettered), metric.WithAttributes(keyLetterKind.String("message")))
	}
}

// Activity records an activity attempt: a span, the attempt counters and,
// when its task was dead-lettered, a dead letter.
func (o *Observer) Activity(s chronicle.ActivityStats) {
	end := time.Now()
	attrs := []attribute.KeyValue{keyInstance.String(s.InstanceID)}
	if s.ExecutionID != "" {
		attrs = append(attrs, keyExecution.String(s.ExecutionID))
	}
	attrs = append(attrs, keyActivity.String(s.Name), keyTask.String(s.TaskID), keyAttempt.Int(s.Attempt), keyOutcome.String(s.Outcome))
	if !s.RetryAt.IsZero() {
		attrs = append(attrs, keyRetryAt.String(s.RetryAt.UTC().Format(time.RFC3339Nano)))
	}
	_, span := o.tracer.Start(parent(s.InstanceID, s.ExecutionID), "chronicle.activity",
		trace.WithTimestamp(end.Add(-s.Duration)), trace.WithAttributes(attrs...))
	switch {
	case s.Err != nil:
		span.RecordError(s.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, s.Err.Error())
	case s.Outcome == deadLettered:
		span.SetStatus(codes.Error, "activity task dead-lettered")
	}
	span.End(trace.WithTimestamp(end))

	ctx := context.Background()
	set := metric.WithAttributes(keyActivity.String(s.Name), keyOutcome.String(s.Outcome))
	o.attempts.Add(ctx, 1, set)
	o.attemptTime.Record(ctx, s.Duration.Seconds(), set)
	if s.Err != nil {
		o.failures.Add(ctx, 1, set)
	}
	if s.Outcome == deadLettered {
		o.deadLetters.Add(ctx, 1, metric.WithAttributes(keyLetterKind.String("activity")))
	}
}
