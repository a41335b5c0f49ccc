package chronicle_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// The engine publishes every checkpoint as a signed note of its checkpoint
// log to a directory the database administrator cannot write; deleting
// the newest checkpoints from the database is then evident.
func ExampleEngine_VerifyPublished() {
	ctx := context.Background()
	seed := make([]byte, ed25519.SeedSize) // use crypto/rand or a KMS
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(seed))
	if err != nil {
		panic(err)
	}
	published, err := os.MkdirTemp("", "published")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(published)
	dir, err := chronicle.NewDirPublisher(published) // a WORM bucket, an auditors' share
	if err != nil {
		panic(err)
	}
	store := memory.New(memory.Options{})
	engine, err := chronicle.New(store, chronicle.Options{
		NodeID: "example",
		Checkpoints: &chronicle.CheckpointOptions{
			Signer:     signer,
			Origin:     "chronicle.example/claims-prod",
			Publishers: []chronicle.Publisher{dir},
		},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "hello", func(_ *chronicle.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	for _, id := range []string{"greeting-1", "greeting-2"} {
		if _, err := engine.Start(ctx, "hello", "Ada", &chronicle.StartOptions{InstanceID: id}); err != nil {
			panic(err)
		}
		for worked := true; worked; {
			if worked, err = engine.RunOnce(ctx); err != nil {
				panic(err)
			}
		}
		if _, err := engine.Checkpoint(ctx); err != nil { // Run does this on its own, and publishes
			panic(err)
		}
	}
	latest, err := dir.Latest(ctx)
	if err != nil {
		panic(err)
	}
	lines := strings.Split(string(latest), "\n")
	fmt.Printf("published: origin %s, size %s, signed by %s\n", lines[0], lines[1], strings.Fields(lines[4])[1])

	// Someone with write access to the database deletes the newest
	// checkpoint: the chain left is whole, but shorter than published.
	store.DeleteCheckpoint(2)
	keys := &chronicle.Keyring{}
	if err := keys.Add(signer.KeyID(), signer.Public()); err != nil {
		panic(err)
	}
	notes, err := dir.All()
	if err != nil {
		panic(err)
	}
	rep, err := engine.VerifyPublished(ctx, keys, "chronicle.example/claims-prod", notes...)
	if err != nil {
		panic(err)
	}
	for _, n := range rep.Notes {
		var truncated *chronicle.TruncatedError
		switch {
		case errors.As(n.Err, &truncated):
			fmt.Printf("size %d: truncated, the store ends at %d\n", n.Size, truncated.Stored)
		case n.Err == nil:
			fmt.Printf("size %d: ok\n", n.Size)
		}
	}
	// Output:
	// published: origin chronicle.example/claims-prod, size 2, signed by chronicle.example/claims-prod
	// size 1: ok
	// size 2: truncated, the store ends at 1
}
