package main

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestUniqueIndexOnArrays checks whether a unique index on an array field
// refuses a document that shares one element with another, as MongoDB's
// multikey unique indexes do. FerretDB 1.x does not: the provider cannot
// keep an append's idempotency keys in an array of its history document
// and must give each key a document of its own (a unique _id). The test
// reports it rather than failing (CHRONICLE_STRICT_ATOMICITY=1 makes it
// fail).
func TestUniqueIndexOnArrays(t *testing.T) {
	db, ctx := connect(t)
	c := db.Collection("history")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "keys", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "i/1"}, {Key: "keys", Value: bson.A{"seq:i/1", "event/k1", "event/k2"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "i/4"}, {Key: "keys", Value: bson.A{"seq:i/4", "event/k2"}}})
	t.Logf("a second document sharing one array element: %v (duplicate key: %v)", err, mongo.IsDuplicateKeyError(err))
	if !mongo.IsDuplicateKeyError(err) {
		msg := "NOT ENFORCED: a unique index on an array field accepts a document sharing an element with another"
		if os.Getenv("CHRONICLE_STRICT_ATOMICITY") != "" {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "i/5"}, {Key: "keys", Value: bson.A{"seq:i/5", "event/k3"}}}); err != nil {
		t.Errorf("a document with new elements is refused: %v", err)
	}
	n, err := c.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d documents stored", n)
}

// TestConditionalDeleteUnderConcurrency: DeleteOne with a filter that names
// a token deletes for exactly one of several concurrent callers, so a lease
// document can be released or taken over (delete it by its token, then
// insert the next under the same unique _id) without two owners.
func TestConditionalDeleteUnderConcurrency(t *testing.T) {
	db, ctx := connect(t)
	c := db.Collection("locks")
	bad := 0
	for round := 0; round < 30; round++ {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: round}, {Key: "token", Value: "t"}}); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: round}, {Key: "token", Value: "t"}})
				if err == nil && res.DeletedCount == 1 {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("in %d of 30 rounds not exactly one of 8 concurrent conditional deletes won", bad)
	}
}
