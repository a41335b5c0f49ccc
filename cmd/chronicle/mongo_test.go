package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/mongo/mongotest"
)

// TestMongoCommands runs the tool against a MongoDB store on the FerretDB
// test server: migrate a fresh database, seed it with the demo data (the
// loan and claim workflows), list instances, show and verify history,
// list tasks and dead letters, then tamper with a stored event and see
// verify fail.
func TestMongoCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, db, cli := mongoCLI(t)

	code, _, stderr := cli("instances", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "run chronicle migrate")
	code, stdout, _ := cli("migrate")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, fmt.Sprintf("database %s is at version %d", db, mongo.LatestSchemaVersion()))
	code, _, _ = cli("migrate")
	require.Equal(t, 0, code, "migrating twice is harmless")

	store, err := mongo.New(ctx, mongo.Options{Client: client, Database: db})
	require.NoError(t, err)
	defer store.Close()
	demo, err := demodata.Seed(ctx, store)
	require.NoError(t, err)
	demo.Close()

	code, stdout, _ = cli("--json", "instances", "list")
	require.Equal(t, 0, code)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list, 8)
	code, stdout, stderr = cli("history", "show", "CLM-1001")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ExecutionStarted")
	code, stdout, _ = cli("history", "verify", "--all")
	require.Equal(t, 0, code, stdout)
	code, stdout, stderr = cli("--json", "tasks", "list")
	require.Equal(t, 0, code, stderr)
	var tasks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &tasks))
	require.NotEmpty(t, tasks, "the demo data has open human tasks")
	code, stdout, stderr = cli("--json", "dlq", "list")
	require.Equal(t, 0, code, stderr)
	var letters []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &letters))
	require.NotEmpty(t, letters, "the demo data has a dead letter")

	// Flip one byte of event 5 of CLM-1001 in its history document.
	hist := client.Database(db).Collection("history")
	var doc struct {
		ID     string   `bson:"_id"`
		First  int64    `bson:"f"`
		Events [][]byte `bson:"ev"`
	}
	require.NoError(t, hist.FindOne(ctx, bson.D{{Key: "i", Value: "CLM-1001"}, {Key: "f", Value: bson.D{{Key: "$lte", Value: 5}}}, {Key: "l", Value: bson.D{{Key: "$gte", Value: 5}}}}).Decode(&doc))
	ev := doc.Events[5-doc.First]
	ev[len(ev)-40] ^= 1
	res, err := hist.UpdateOne(ctx, bson.D{{Key: "_id", Value: doc.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "ev", Value: doc.Events}}}})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.ModifiedCount)
	code, stdout, _ = cli("history", "verify", "CLM-1001")
	require.Equal(t, 1, code)
	require.Contains(t, stdout, "BROKEN at seq 5")
	code, _, _ = cli("history", "verify", "--all")
	require.Equal(t, 1, code)
}

// TestMongoMigratePartitions: migrate --partitions creates a MongoDB
// database of that many partitions, and a second migrate with another
// count fails with the count recorded.
func TestMongoMigratePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, db, cli := mongoCLI(t)
	code, _, stderr := cli("migrate", "--partitions", "16")
	require.Equal(t, 0, code, stderr)
	store, err := mongo.New(ctx, mongo.Options{Client: client, Database: db})
	require.NoError(t, err)
	defer store.Close()
	require.Equal(t, 16, store.Partitions())
	code, _, stderr = cli("migrate", "--partitions", "8")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "created with 16 partitions, opened with 8")
	code, _, stderr = cli("migrate")
	require.Equal(t, 0, code, stderr)
}

// mongoCLI returns a client of the FerretDB test server, a new database
// on it (dropped when the test ends) and a function that runs the tool on
// that database, returning its exit code, stdout and stderr.
func mongoCLI(t *testing.T) (*mongodrv.Client, string, func(args ...string) (int, string, string)) {
	url, db := mongotest.URL(t), mongotest.Database()
	client := mongotest.Client(t, url)
	t.Cleanup(func() { _ = client.Database(db).Drop(context.Background()) })
	return client, db, func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", url, "--schema", db}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
}
