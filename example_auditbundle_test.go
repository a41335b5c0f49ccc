package chronicle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An audit bundle carries instances' histories with the proofs of their
// signed checkpoints; an auditor checks it offline with the public keys
// alone.
func ExampleVerifyAuditBundle() {
	ctx := context.Background()
	seed := make([]byte, ed25519.SeedSize) // use crypto/rand or a KMS
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(seed))
	if err != nil {
		panic(err)
	}
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{
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
	if _, err := engine.Checkpoint(ctx); err != nil { // Run does this on its own
		panic(err)
	}

	var bundle bytes.Buffer // a file, handed to the auditor
	if err := engine.WriteAuditBundle(ctx, &bundle, chronicle.AuditBundleOptions{InstanceIDs: []string{"greeting-1"}}); err != nil {
		panic(err)
	}

	// The auditor's side: the bundle and the public key, no store.
	keys := &chronicle.Keyring{}
	if err := keys.Add(signer.KeyID(), signer.Public()); err != nil {
		panic(err)
	}
	rep, err := chronicle.VerifyAuditBundle(&bundle, keys)
	if err != nil {
		panic(err)
	}
	for _, in := range rep.Instances {
		fmt.Printf("%s: %s %s, seq 1-%d covered by checkpoint %d\n", in.InstanceID, in.Workflow, in.Status, in.CoveredSeq, in.Checkpoint)
	}
	// Output:
	// greeting-1: hello completed, seq 1-3 covered by checkpoint 1
}
