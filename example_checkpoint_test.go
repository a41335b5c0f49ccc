package chronicle_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// The engine signs checkpoints of the histories it writes; an auditor with
// the public key finds a history that was rewritten in the database, even
// with every hash recomputed.
func ExampleEngine_VerifyCheckpoints() {
	ctx := context.Background()
	seed := make([]byte, ed25519.SeedSize) // use crypto/rand or a KMS
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(seed))
	if err != nil {
		panic(err)
	}
	store := memory.New(memory.Options{})
	engine, err := chronicle.New(store, chronicle.Options{
		NodeID:      "example",
		Checkpoints: &chronicle.CheckpointOptions{Signer: signer},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "hello", func(_ *chronicle.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	if _, err := engine.Start(ctx, "hello", "Ada", &chronicle.StartOptions{InstanceID: "greeting-1"}); err != nil {
		panic(err)
	}
	for worked := true; worked; {
		if worked, err = engine.RunOnce(ctx); err != nil {
			panic(err)
		}
	}
	cp, err := engine.Checkpoint(ctx) // Run does this on its own
	if err != nil {
		panic(err)
	}
	fmt.Printf("checkpoint %d covers %d instance, signed by %s\n", cp.Number, cp.Size, cp.KeyID)

	// Someone with write access to the database rewrites the history.
	store.RewriteHistory("greeting-1", func(events []history.Event) []history.Event {
		events[0].Actor = "user:mallory"
		return events
	})
	fmt.Println("plain chain verification:", engine.Verify(ctx, "greeting-1"))

	keys := &chronicle.Keyring{}
	if err := keys.Add(signer.KeyID(), signer.Public()); err != nil {
		panic(err)
	}
	rep, err := engine.VerifyCheckpoints(ctx, keys)
	if err != nil {
		panic(err)
	}
	var forged *chronicle.CheckpointMismatchError
	if errors.As(rep.Instances[0].Err, &forged) {
		fmt.Printf("checkpoint verification: %s differs at seq %d\n", forged.InstanceID, forged.Seq)
	}
	// Output:
	// checkpoint 1 covers 1 instance, signed by 2026-11
	// plain chain verification: <nil>
	// checkpoint verification: greeting-1 differs at seq 3
}
