package chronicle_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// New workflow code is replayed against histories exported from
// production before it is deployed. The change below (a fraud check
// before the charge) would dead-letter the recorded order; guarded with
// Version, it replays.
func ExampleEngine_ReplayHistories() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "histories")
	defer os.RemoveAll(dir)

	// Record a history with the old code, as `chronicle history export`
	// would write it.
	old, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "old"})
	defer old.Close()
	_ = chronicle.RegisterWorkflow(old, "order", orderV1)
	_ = chronicle.RegisterActivity(old, "charge", func(context.Context, int) (string, error) { return "RCPT-1", nil })
	_, _ = old.Start(ctx, "order", 100, &chronicle.StartOptions{InstanceID: "ORD-1"})
	for worked := true; worked; {
		worked, _ = old.RunOnce(ctx)
	}
	events, _ := old.History(ctx, "ORD-1")
	var buf bytes.Buffer
	_ = history.WriteJSONL(&buf, events)
	_ = os.WriteFile(filepath.Join(dir, "ORD-1.jsonl"), buf.Bytes(), 0o600)

	for _, code := range []func(*chronicle.Context, int) (string, error){orderFraudCheck, orderFraudCheckVersioned} {
		// The new code: an engine that never runs, with the workflows
		// registered as the new release registers them.
		e, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
		_ = chronicle.RegisterWorkflow(e, "order", code)
		sum, err := e.ReplayHistories(ctx, chronicle.HistoryDir(dir))
		if err != nil {
			panic(err)
		}
		r := sum.Results[0]
		if r.Divergence != nil {
			fmt.Printf("%s at seq %d: history holds %s, code asked for %s\n", r.InstanceID, r.Divergence.Seq, r.Divergence.History, r.Divergence.Code)
		} else {
			fmt.Printf("%s replays: %v\n", r.InstanceID, sum.OK())
		}
		e.Close()
	}
	// Output:
	// ORD-1 at seq 3: history holds ActivityScheduled "charge", code asked for ActivityScheduled "fraud-check"
	// ORD-1 replays: true
}
