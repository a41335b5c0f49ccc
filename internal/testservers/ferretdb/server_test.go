package main

// These tests check, against a running server, the MongoDB behaviour that
// Chronicle's MongoDB provider relies on, and record what FerretDB 1.x does
// not have. Start the server first (make services); the tests skip when
// nothing listens on 127.0.0.1:27017, or on CHRONICLE_TEST_MONGO_URL.
//
//	cd internal/testservers/ferretdb && go test -v -count=1 .

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func connect(t *testing.T) (*mongo.Database, context.Context) {
	t.Helper()
	uri := os.Getenv("CHRONICLE_TEST_MONGO_URL")
	if uri == "" {
		uri = "mongodb://127.0.0.1:27017/"
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatalf("CHRONICLE_TEST_MONGO_URL: %v", err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Skipf("SKIPPED: nothing listens on %s (%v); run `make services` first", u.Host, err)
	}
	conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })

	// A database of its own per test, dropped afterwards: the server's data
	// directory outlives test runs.
	db := client.Database(fmt.Sprintf("chronicle_check_%d", time.Now().UnixNano()))
	t.Cleanup(func() { _ = db.Drop(context.Background()) })
	return db, ctx
}

func TestInsertReadUniqueIndex(t *testing.T) {
	db, ctx := connect(t)
	coll := db.Collection("items")

	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "key", Value: "k1"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID  string `bson:"_id"`
		Key string `bson:"key"`
		N   int    `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Key != "k1" || got.N != 1 {
		t.Fatalf("read back %+v", got)
	}

	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "key", Value: 1}},
		Options: options.Index().SetUnique(true),
	})
	if err != nil {
		t.Fatalf("unique index: %v", err)
	}
	t.Logf("unique index %q created", name)

	for _, doc := range []bson.D{
		{{Key: "_id", Value: "b"}, {Key: "key", Value: "k1"}}, // same key, unique index
		{{Key: "_id", Value: "a"}, {Key: "key", Value: "k2"}}, // same _id
	} {
		_, err = coll.InsertOne(ctx, doc)
		var we mongo.WriteException
		if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 11000 || !mongo.IsDuplicateKeyError(err) {
			t.Fatalf("duplicate insert %v: want a write error with code 11000, got %v", doc, err)
		}
		t.Logf("duplicate insert: code %d: %s", we.WriteErrors[0].Code, we.WriteErrors[0].Message)
	}
}

func TestHelloIsStandalone(t *testing.T) {
	db, ctx := connect(t)
	for _, cmd := range []string{"hello", "isMaster"} {
		var res bson.M
		if err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: cmd, Value: 1}}).Decode(&res); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		t.Logf("%s: %v", cmd, res)
		if _, ok := res["setName"]; ok {
			t.Errorf("%s reports setName %v; want a standalone", cmd, res["setName"])
		}
		if _, ok := res["msg"]; ok {
			t.Errorf("%s reports msg %v (mongos); want a standalone", cmd, res["msg"])
		}
	}
}

// FerretDB 1.x has no transactions: the provider must not depend on them.
func TestTransactionsRefused(t *testing.T) {
	db, ctx := connect(t)
	coll := db.Collection("tx")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, err := db.Client().StartSession()
	if err != nil {
		t.Logf("StartSession: %v", err)
		return
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return coll.InsertOne(sc, bson.D{{Key: "_id", Value: 1}})
	})
	if err == nil {
		t.Fatal("a transaction committed; FerretDB 1.x was expected to refuse it")
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		t.Logf("transaction refused: code %d (%s): %s", ce.Code, ce.Name, ce.Message)
	} else {
		t.Logf("transaction refused: %T: %v", err, err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("documents after the refused transaction: %d", n)
}

func TestChangeStreamsRefused(t *testing.T) {
	db, ctx := connect(t)
	coll := db.Collection("cs")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err == nil {
		cs.Close(ctx)
		t.Fatal("a change stream opened; FerretDB 1.x was expected to refuse it")
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		t.Logf("change stream refused: code %d (%s): %s", ce.Code, ce.Name, ce.Message)
	} else {
		t.Logf("change stream refused: %T: %v", err, err)
	}
}

// An upsert with a filter that is not only _id: it inserts when nothing
// matches, updates when the filter matches, and gives a duplicate-key error
// when the _id exists but the rest of the filter does not match.
func TestFindOneAndUpdateUpsert(t *testing.T) {
	db, ctx := connect(t)
	coll := db.Collection("fam")
	after := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	claim := func(v int) (bson.M, error) {
		var doc bson.M
		err := coll.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: "job"}, {Key: "v", Value: bson.D{{Key: "$lt", Value: v}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}}, after).Decode(&doc)
		return doc, err
	}

	doc, err := claim(5)
	if err != nil || doc["v"] != int32(5) {
		t.Fatalf("upsert into an empty collection: %v, %v", doc, err)
	}
	doc, err = claim(7)
	if err != nil || doc["v"] != int32(7) {
		t.Fatalf("conditional update 5 -> 7: %v, %v", doc, err)
	}
	_, err = claim(6) // v is 7: the filter does not match, the upsert collides on _id
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("upsert whose filter does not match an existing _id: want a duplicate-key error, got %v", err)
	}
	t.Logf("upsert over an existing _id whose filter does not match: %v", err)
}

// Single-document atomicity of conditional updates, which the provider's
// peek-lock mode needs: of several concurrent writes that only the unclaimed
// document lets through, exactly one may succeed. FerretDB 1.x runs
// findAndModify and update as a query followed by a write by _id, with no
// condition on the write, so the first two can fail: they report how often
// rather than failing (CHRONICLE_STRICT_ATOMICITY=1 makes them fail). An
// insert guarded by a unique index is the claim that stays atomic.
func TestAtomicClaims(t *testing.T) {
	db, ctx := connect(t)
	unclaimed := func(id string) bson.D { return bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}} }
	claimUpdate := func(w int) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: w}}}, {Key: "$inc", Value: bson.D{{Key: "claims", Value: 1}}}}
	}
	cases := []struct {
		name   string
		strict bool // must be atomic
		claim  func(coll *mongo.Collection, id string, w int) (bool, error)
	}{
		{"FindOneAndUpdate", false, func(coll *mongo.Collection, id string, w int) (bool, error) {
			err := coll.FindOneAndUpdate(ctx, unclaimed(id), claimUpdate(w)).Err()
			if errors.Is(err, mongo.ErrNoDocuments) {
				return false, nil
			}
			return err == nil, err
		}},
		{"UpdateOne", false, func(coll *mongo.Collection, id string, w int) (bool, error) {
			res, err := coll.UpdateOne(ctx, unclaimed(id), claimUpdate(w))
			if err != nil {
				return false, err
			}
			return res.ModifiedCount == 1, nil
		}},
		{"InsertUniqueLock", true, func(coll *mongo.Collection, id string, w int) (bool, error) {
			_, err := coll.Database().Collection(coll.Name()+"_locks").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: w}})
			if mongo.IsDuplicateKeyError(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, claimUpdate(w))
			return err == nil, err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			coll := db.Collection("claims_" + c.name)
			const rounds, workers = 50, 8
			bad := 0
			for r := 0; r < rounds; r++ {
				id := fmt.Sprintf("msg-%d", r)
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}, {Key: "claims", Value: 0}}); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				var mu sync.Mutex
				winners := 0
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						won, err := c.claim(coll, id, w)
						if err != nil {
							t.Errorf("claim: %v", err)
						}
						if won {
							mu.Lock()
							winners++
							mu.Unlock()
						}
					}(w)
				}
				wg.Wait()
				var doc struct {
					Claims int `bson:"claims"`
				}
				if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
					t.Fatal(err)
				}
				if winners != 1 || doc.Claims != 1 {
					bad++
					if bad <= 3 {
						t.Logf("round %d: %d of %d claims succeeded, claims counter %d", r, winners, workers, doc.Claims)
					}
				}
			}
			if bad == 0 {
				t.Logf("atomic in all %d rounds of %d concurrent claims", rounds, workers)
				return
			}
			msg := fmt.Sprintf("NOT ATOMIC: in %d of %d rounds more than one of %d concurrent claims of the same document succeeded", bad, rounds, workers)
			if c.strict || os.Getenv("CHRONICLE_STRICT_ATOMICITY") != "" {
				t.Fatal(msg)
			}
			t.Log(msg)
		})
	}
}
