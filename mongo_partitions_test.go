package chronicle_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider"
	chmongo "github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// TestMongoEndToEndPartitions16 runs them on stores of 16 partitions
// over the FerretDB test server.
func TestMongoEndToEndPartitions16(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, func(t *testing.T) provider.Store {
		s := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
		if s.Partitions() != 16 {
			t.Fatalf("store has %d partitions, want 16", s.Partitions())
		}
		return s
	})
}

// TestMongoEnginesSplitPartitions runs two engines on one MongoDB store
// of 16 partitions (peek-lock rounds on the FerretDB test server): they
// split the partitions by their leases and run every workflow, looking in
// their own partitions, and when one stops the other takes its partitions.
func TestMongoEnginesSplitPartitions(t *testing.T) {
	t.Parallel()
	store := mongotest.NewStore(t, chmongo.Options{Partitions: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newEngine := func(node string) *chronicle.Engine {
		e, err := chronicle.New(store, chronicle.Options{NodeID: node, SafetyPoll: time.Second, PartitionLease: 300 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, chronicle.RegisterActivity(e, "double", func(_ context.Context, n int) (int, error) { return 2 * n, nil }))
		require.NoError(t, chronicle.RegisterWorkflow(e, "twice", func(ctx *chronicle.Context, n int) (int, error) {
			a, err := chronicle.CallActivity[int](ctx, "double", n, nil)
			if err != nil {
				return 0, err
			}
			return chronicle.CallActivity[int](ctx, "double", a, nil)
		}))
		return e
	}
	a, b := newEngine("node-a"), newEngine("node-b")
	runA, stopA := context.WithCancel(ctx)
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(runA) }()
	go func() { doneB <- b.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-doneB)
	}()
	require.Eventually(t, func() bool {
		pa, pb := a.Partitions(), b.Partitions()
		all := append(slices.Clone(pa), pb...)
		slices.Sort(all)
		return len(pa) == 8 && len(pb) == 8 && slices.Equal(all, provider.AllPartitions(16))
	}, time.Minute, 10*time.Millisecond, "the engines split the 16 partitions 8 and 8")

	ids := make([]string, 20)
	for i := range ids {
		id, err := a.Start(ctx, "twice", i, &chronicle.StartOptions{InstanceID: fmt.Sprintf("twice-%d", i)})
		require.NoError(t, err)
		ids[i] = id
	}
	for i, id := range ids {
		inst, err := b.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, inst.Status, id)
		var got int
		require.NoError(t, inst.Result(&got))
		require.Equal(t, 4*i, got)
	}
	stopA()
	require.NoError(t, <-doneA)
	require.Eventually(t, func() bool {
		return slices.Equal(b.Partitions(), provider.AllPartitions(16))
	}, time.Minute, 10*time.Millisecond, "the engine left takes every partition")
}
