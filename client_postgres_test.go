package chronicle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// A client process with its own connection pool and no workflow code
// starts, signals and waits for an order that a running worker process
// fulfils, on PostgreSQL.
func TestPostgresClientAndWorker(t *testing.T) {
	t.Parallel()
	workerStore := pgtest.NewStore(t, postgres.Options{})
	ctx, cancelRun := context.WithTimeout(context.Background(), time.Minute)
	defer cancelRun()

	worker, err := chronicle.New(workerStore, chronicle.Options{NodeID: "worker", SafetyPoll: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, shopOrders.Register(worker, shopFulfil))
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	defer func() {
		cancelRun()
		require.NoError(t, <-done)
	}()

	clientStore, err := postgres.New(ctx, postgres.Options{URL: pgtest.URL(t), Schema: workerStore.Schema()})
	require.NoError(t, err)
	defer clientStore.Close()
	client, err := chronicle.NewClient(clientStore, chronicle.ClientOptions{})
	require.NoError(t, err)

	run, err := shopOrders.Start(ctx, client, shopOrder{ID: "PG-1", Items: 12}, &chronicle.StartOptions{InstanceID: "PG-1"})
	require.NoError(t, err)
	var task *chronicle.TaskInfo
	require.Eventually(t, func() bool {
		task, err = client.GetTask(ctx, "approve-PG-1")
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the worker opens the approval task")
	p, err := shopApproval.Payload(ctx, client, task.TaskID)
	require.NoError(t, err)
	require.Equal(t, 12, p.Items)
	boss := chronicle.User{ID: "boss", Roles: []string{"manager"}}
	require.NoError(t, shopApproval.Complete(ctx, client, task.TaskID, shopDecision{Approved: true, By: "boss"}, boss))
	require.NoError(t, shopCancel.Raise(ctx, client, run.ID, shopReason{}, &chronicle.RaiseOptions{IdempotencyKey: "ship"}))
	got, err := run.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, shopReceipt{OrderID: "PG-1", Total: 60}, got)
}
