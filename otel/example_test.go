package chronicleotel_test

import (
	"context"
	"fmt"
	"log/slog"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chronicleflow/chronicle"
	chronicleotel "github.com/chronicleflow/chronicle/otel"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An engine whose rounds and activity attempts become spans and metrics.
// Here they are recorded in memory; a real program gives the providers
// its exporters.
func Example() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

	obs, err := chronicleotel.NewObserver(chronicleotel.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{
		NodeID: "example", Observer: obs, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	reg, err := obs.ObserveQueues(chronicleotel.EngineQueues(engine))
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	_ = chronicle.RegisterActivity(engine, "score", func(ctx context.Context, who string) (int, error) {
		return 700 + len(who), nil
	})
	_ = chronicle.RegisterWorkflow(engine, "approve", func(ctx *chronicle.Context, who string) (bool, error) {
		score, err := chronicle.CallActivity[int](ctx, "score", who, nil)
		return score > 700, err
	})
	_, _ = engine.Start(ctx, "approve", "Ada", &chronicle.StartOptions{InstanceID: "application-42"})
	for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
	}

	inst, _ := engine.Describe(ctx, "application-42")
	trace := chronicleotel.ExecutionSpanContext(inst.ID, inst.ExecutionID).TraceID()
	for _, s := range spans.Ended() {
		status, outcome := "", ""
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "chronicle.status":
				status = kv.Value.AsString()
			case "chronicle.activity.outcome":
				outcome = kv.Value.AsString()
			}
		}
		fmt.Println(s.Name(), status+outcome, "in the execution's trace:", s.SpanContext().TraceID() == trace)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			total := int64(0)
			for _, p := range sum.DataPoints {
				total += p.Value
			}
			fmt.Println(m.Name, total)
		}
	}
	// Output:
	// chronicle.round running in the execution's trace: true
	// chronicle.activity completed in the execution's trace: true
	// chronicle.round completed in the execution's trace: true
	// chronicle.rounds 2
	// chronicle.activity.attempts 1
}
