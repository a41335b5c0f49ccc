package chronicleotel_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/leakcheck"
	chronicleotel "github.com/chronicleflow/chronicle/otel"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// rig is an engine on a memory store, driven with RunOnce and a manual
// clock, whose observer records into in-memory exporters.
type rig struct {
	ctx    context.Context
	mem    *memory.Store
	clock  *round.ManualClock
	engine *chronicle.Engine
	obs    *chronicleotel.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{
		ctx: context.Background(), mem: memory.New(memory.Options{}), clock: round.NewManualClock(t0),
		spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(),
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		require.NoError(t, tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	})
	var err error
	r.obs, err = chronicleotel.NewObserver(chronicleotel.Options{TracerProvider: tp, MeterProvider: mp})
	require.NoError(t, err)
	r.engine, err = chronicle.New(r.mem, chronicle.Options{
		NodeID: "test", Clock: r.clock, Observer: r.obs, Logger: slog.New(slog.DiscardHandler),
		RetryJitter: func() float64 { return 0 },
	})
	require.NoError(t, err)
	t.Cleanup(r.engine.Close)
	return r
}

// drain runs rounds and activity attempts until nothing is due.
func (r *rig) drain(t *testing.T) {
	t.Helper()
	for range 1000 {
		worked, err := r.engine.RunOnce(r.ctx)
		require.NoError(t, err)
		if !worked {
			return
		}
	}
	t.Fatal("work left after 1000 steps")
}

func (r *rig) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(r.ctx, &rm))
	return rm
}

// spansOf returns the ended spans of an instance, in the order they ended.
func (r *rig) spansOf(id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if attr(s, "chronicle.instance_id") == id {
			out = append(out, s)
		}
	}
	return out
}

// attr returns a span's attribute as a string ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// find returns the metric of that name.
func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

// points maps each data point's attributes, written as "k=v,k=v", to its
// value: a sum's or a gauge's value, a histogram's count.
func points(t *testing.T, m metricdata.Metrics) map[string]float64 {
	t.Helper()
	key := func(set attribute.Set) string { return set.Encoded(attribute.DefaultEncoder()) }
	out := map[string]float64{}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		require.True(t, d.IsMonotonic, m.Name)
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = float64(p.Count)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = p.Value
		}
	default:
		t.Fatalf("metric %s has data of type %T", m.Name, m.Data)
	}
	return out
}

// TestWorkflowRun runs four instances: one whose activity fails once and
// then succeeds, one whose activity is not registered (its task is
// dead-lettered), one of a workflow that is not registered (its start is
// dead-lettered) and one whose first round panics and is retried.
func TestWorkflowRun(t *testing.T) {
	r := newRig(t)
	var scoreCalls, fragileRuns atomic.Int32
	require.NoError(t, chronicle.RegisterActivity(r.engine, "score", func(context.Context, string) (int, error) {
		if scoreCalls.Add(1) == 1 {
			return 0, errors.New("bureau unavailable")
		}
		return 710, nil
	}))
	require.NoError(t, chronicle.RegisterWorkflow(r.engine, "approve", func(ctx *chronicle.Context, who string) (int, error) {
		return chronicle.CallActivity[int](ctx, "score", who, nil)
	}))
	require.NoError(t, chronicle.RegisterWorkflow(r.engine, "notify", func(ctx *chronicle.Context, who string) (string, error) {
		return chronicle.CallActivity[string](ctx, "send-letter", who, nil)
	}))
	require.NoError(t, chronicle.RegisterWorkflow(r.engine, "fragile", func(ctx *chronicle.Context, who string) (string, error) {
		if fragileRuns.Add(1) == 1 {
			panic("first run crashes")
		}
		return "ok", nil
	}))
	// A client that knows a workflow the worker does not.
	client, err := chronicle.New(r.mem, chronicle.Options{NodeID: "client", Clock: r.clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	require.NoError(t, chronicle.RegisterWorkflow(client, "missing", func(*chronicle.Context, string) (string, error) { return "", nil }))

	reg, err := r.obs.ObserveQueues(func(ctx context.Context) ([]chronicleotel.QueueReading, error) {
		readings, err := chronicleotel.EngineQueues(r.engine)(ctx)
		if err != nil {
			return nil, err
		}
		// The memory store can count its queues.
		readings[0].Depth, readings[0].Counted = int64(len(r.mem.QueuedMessages())), true
		readings[1].Depth, readings[1].Counted = int64(len(r.mem.QueuedActivities())), true
		return readings, nil
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, reg.Unregister()) }()

	for _, s := range []struct {
		engine       *chronicle.Engine
		workflow, id string
	}{
		{r.engine, "approve", "loan-1"}, {r.engine, "notify", "loan-2"}, {client, "missing", "loan-3"}, {r.engine, "fragile", "loan-4"},
	} {
		_, err := s.engine.Start(r.ctx, s.workflow, "ada", &chronicle.StartOptions{InstanceID: s.id})
		require.NoError(t, err)
	}
	r.clock.Advance(3 * time.Second)

	// The queue gauges before any round: four starts, due for 3s.
	rm := r.collect(t)
	require.Equal(t, map[string]float64{"chronicle.queue=orchestration": 4, "chronicle.queue=activity": 0},
		points(t, find(t, rm, "chronicle.queue.depth")))
	require.Equal(t, map[string]float64{"chronicle.queue=orchestration": 3, "chronicle.queue=activity": 0},
		points(t, find(t, rm, "chronicle.queue.oldest_age")))

	before := time.Now()
	r.drain(t)
	r.clock.Advance(2 * time.Second) // the score retry (0.5s) and the panicked round's redelivery (2s) are due
	r.drain(t)
	after := time.Now()

	letters, err := r.engine.ListDeadLetters(r.ctx, chronicle.DeadLetterFilter{InstanceID: "loan-3"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	execs := map[string]string{"loan-3": letters[0].Message.ExecutionID} // the dead-lettered start's
	for _, id := range []string{"loan-1", "loan-2", "loan-4"} {
		inst, err := r.engine.Describe(r.ctx, id)
		require.NoError(t, err)
		execs[id] = inst.ExecutionID
	}

	// Every span belongs to its execution's trace, under its remote root,
	// and lies within the run.
	traces := map[string]bool{}
	for id, exec := range execs {
		root := chronicleotel.ExecutionSpanContext(id, exec)
		require.True(t, root.IsValid())
		traces[root.TraceID().String()] = true
		spans := r.spansOf(id)
		require.NotEmpty(t, spans, id)
		for _, s := range spans {
			require.Equal(t, exec, attr(s, "chronicle.execution_id"), "%s %s", id, s.Name())
			require.Equal(t, root.TraceID(), s.SpanContext().TraceID(), "%s %s", id, s.Name())
			require.Equal(t, root.SpanID(), s.Parent().SpanID(), "%s %s", id, s.Name())
			require.True(t, s.Parent().IsRemote())
			require.False(t, s.StartTime().Before(before), "%s starts in the run", s.Name())
			require.False(t, s.EndTime().Before(s.StartTime()))
			require.False(t, s.EndTime().After(after), "%s ends in the run", s.Name())
		}
	}
	require.Len(t, traces, 4, "one trace per execution")
	require.Len(t, r.spans.Ended(), 9)

	// loan-1: two rounds around two attempts, the first retried.
	s := r.spansOf("loan-1")
	require.Equal(t, []string{"chronicle.round", "chronicle.activity", "chronicle.activity", "chronicle.round"},
		[]string{s[0].Name(), s[1].Name(), s[2].Name(), s[3].Name()})
	require.Equal(t, "running", attr(s[0], "chronicle.status"))
	require.Equal(t, "1", attr(s[0], "chronicle.round.processed"))
	require.NotEqual(t, "0", attr(s[0], "chronicle.round.appended"))
	require.Equal(t, codes.Unset, s[0].Status().Code)
	require.Equal(t, "completed", attr(s[3], "chronicle.status"))
	require.Equal(t, "committed", attr(s[3], "chronicle.round.outcome"))
	retry, done := s[1], s[2]
	for i, a := range []sdktrace.ReadOnlySpan{retry, done} {
		require.Equal(t, "score", attr(a, "chronicle.activity.name"))
		require.Equal(t, []string{"1", "2"}[i], attr(a, "chronicle.activity.attempt"))
	}
	require.Equal(t, attr(retry, "chronicle.activity.task_id"), attr(done, "chronicle.activity.task_id"))
	require.NotEmpty(t, attr(retry, "chronicle.activity.task_id"))
	require.Equal(t, "retry", attr(retry, "chronicle.activity.outcome"))
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "bureau unavailable"}, retry.Status())
	require.Len(t, retry.Events(), 1)
	require.Equal(t, "exception", retry.Events()[0].Name)
	retryAt, err := time.Parse(time.RFC3339Nano, attr(retry, "chronicle.activity.retry_at"))
	require.NoError(t, err)
	require.Equal(t, t0.Add(3*time.Second+500*time.Millisecond), retryAt, "half of the 1s backoff without jitter")
	require.Equal(t, "completed", attr(done, "chronicle.activity.outcome"))
	require.Equal(t, codes.Unset, done.Status().Code)
	require.Empty(t, attr(done, "chronicle.activity.retry_at"))

	// loan-2: its activity task is dead-lettered.
	s = r.spansOf("loan-2")
	require.Len(t, s, 2)
	require.Equal(t, "chronicle.activity", s[1].Name())
	require.Equal(t, "dead-lettered", attr(s[1], "chronicle.activity.outcome"))
	require.Equal(t, codes.Error, s[1].Status().Code)

	// loan-3: its start is dead-lettered by its round.
	s = r.spansOf("loan-3")
	require.Len(t, s, 1)
	require.Equal(t, "chronicle.round", s[0].Name())
	require.Equal(t, "1", attr(s[0], "chronicle.round.dead_lettered"))
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "messages dead-lettered: 1"}, s[0].Status())

	// loan-4: a failed round, then one that completes.
	s = r.spansOf("loan-4")
	require.Len(t, s, 2)
	require.Equal(t, "failed", attr(s[0], "chronicle.round.outcome"))
	require.Equal(t, codes.Error, s[0].Status().Code)
	require.Contains(t, s[0].Status().Description, "first run crashes")
	require.Equal(t, "committed", attr(s[1], "chronicle.round.outcome"))
	require.Equal(t, "completed", attr(s[1], "chronicle.status"))

	// The metrics add up the same run.
	rm = r.collect(t)
	require.Equal(t, map[string]float64{
		"chronicle.round.outcome=committed,chronicle.status=running":   2, // loan-1, loan-2
		"chronicle.round.outcome=committed,chronicle.status=completed": 2, // loan-1, loan-4
		"chronicle.round.outcome=committed":                            1, // loan-3's dead-lettered start
		"chronicle.round.outcome=failed":                               1, // loan-4's panic
	}, points(t, find(t, rm, "chronicle.rounds")))
	require.Equal(t, map[string]float64{"chronicle.round.outcome=committed": 5, "chronicle.round.outcome=failed": 1},
		points(t, find(t, rm, "chronicle.round.duration")))
	attempts := map[string]float64{
		"chronicle.activity.name=score,chronicle.activity.outcome=retry":               1,
		"chronicle.activity.name=score,chronicle.activity.outcome=completed":           1,
		"chronicle.activity.name=send-letter,chronicle.activity.outcome=dead-lettered": 1,
	}
	require.Equal(t, attempts, points(t, find(t, rm, "chronicle.activity.attempts")))
	require.Equal(t, attempts, points(t, find(t, rm, "chronicle.activity.duration")))
	require.Equal(t, map[string]float64{"chronicle.activity.name=score,chronicle.activity.outcome=retry": 1},
		points(t, find(t, rm, "chronicle.activity.failures")))
	require.Equal(t, map[string]float64{"chronicle.dead_letter.kind=message": 1, "chronicle.dead_letter.kind=activity": 1},
		points(t, find(t, rm, "chronicle.dead_letters")))
	require.Equal(t, "s", find(t, rm, "chronicle.round.duration").Unit)
	require.Equal(t, map[string]float64{"chronicle.queue=orchestration": 0, "chronicle.queue=activity": 0},
		points(t, find(t, rm, "chronicle.queue.depth")), "nothing left queued")
	require.Equal(t, map[string]float64{"chronicle.queue=orchestration": 0, "chronicle.queue=activity": 0},
		points(t, find(t, rm, "chronicle.queue.oldest_age")))
}

func TestExecutionSpanContext(t *testing.T) {
	a := chronicleotel.ExecutionSpanContext("loan-1", "e1")
	require.True(t, a.IsValid())
	require.True(t, a.IsRemote())
	require.True(t, a.IsSampled())
	require.Equal(t, a, chronicleotel.ExecutionSpanContext("loan-1", "e1"), "derived, not drawn")
	require.NotEqual(t, a.TraceID(), chronicleotel.ExecutionSpanContext("loan-1", "e2").TraceID())
	require.NotEqual(t, a.TraceID(), chronicleotel.ExecutionSpanContext("loan-2", "e1").TraceID())
	require.NotEqual(t, chronicleotel.ExecutionSpanContext("a", "bc").TraceID(), chronicleotel.ExecutionSpanContext("ab", "c").TraceID(),
		"the ids are delimited")
	require.False(t, chronicleotel.ExecutionSpanContext("loan-1", "").IsValid())
}

// A round that failed before it knew its execution has a trace of its own.
func TestRoundWithoutExecution(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs, err := chronicleotel.NewObserver(chronicleotel.Options{TracerProvider: tp, MeterProvider: sdkmetric.NewMeterProvider()})
	require.NoError(t, err)
	obs.Round(chronicle.RoundStats{InstanceID: "i", Duration: time.Millisecond, Err: errors.New("store unreachable")})
	obs.Round(chronicle.RoundStats{InstanceID: "i", Duration: time.Millisecond, Err: errors.New("store unreachable")})
	spans := rec.Ended()
	require.Len(t, spans, 2)
	for _, s := range spans {
		require.False(t, s.Parent().IsValid(), "a root span")
		require.Empty(t, attr(s, "chronicle.execution_id"))
		require.Equal(t, time.Millisecond, s.EndTime().Sub(s.StartTime()))
	}
	require.NotEqual(t, spans[0].SpanContext().TraceID(), spans[1].SpanContext().TraceID())
}

// A queue reading that fails reports no gauges; the other metrics still
// collect.
func TestQueueReadFails(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := chronicleotel.NewObserver(chronicleotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	_, err = obs.ObserveQueues(func(context.Context) ([]chronicleotel.QueueReading, error) {
		return nil, errors.New("store unreachable")
	})
	require.NoError(t, err)
	obs.Activity(chronicle.ActivityStats{Name: "score", Outcome: "completed", Attempt: 1})
	var rm metricdata.ResourceMetrics
	err = reader.Collect(context.Background(), &rm)
	require.ErrorContains(t, err, "store unreachable")
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	require.Contains(t, names, "chronicle.activity.attempts")
	require.NotContains(t, names, "chronicle.queue.oldest_age")
}
