package fuzz_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// auditBundleSeed returns a small signed audit bundle, a completed and a
// purged instance, and its keyring.
func auditBundleSeed(f *testing.F) ([]byte, *chronicle.Keyring) {
	ctx := context.Background()
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		f.Fatal(err)
	}
	// A fixed clock and ids: the fuzzing workers, each a process of its
	// own, must build the very bundle the seed corpus holds.
	n := 0
	newID := func() string { n++; return fmt.Sprintf("id-%04d", n) }
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "fuzz", Checkpoints: &chronicle.CheckpointOptions{Signer: signer},
		Clock: round.NewManualClock(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)), NewID: newID})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(engine.Close)
	if err := chronicle.RegisterWorkflow(engine, "hello", func(_ *chronicle.Context, name string) (string, error) { return "hello " + name, nil }); err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := engine.Start(ctx, "hello", id, &chronicle.StartOptions{InstanceID: id}); err != nil {
			f.Fatal(err)
		}
	}
	for worked := true; worked; {
		if worked, err = engine.RunOnce(ctx); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := engine.Checkpoint(ctx); err != nil {
		f.Fatal(err)
	}
	if _, err := engine.Purge(ctx, chronicle.PurgeOptions{InstanceIDs: []string{"b"}, By: "fuzz"}); err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if err := engine.WriteAuditBundle(ctx, &b, chronicle.AuditBundleOptions{InstanceIDs: []string{"a", "b"}}); err != nil {
		f.Fatal(err)
	}
	keys := &chronicle.Keyring{}
	if err := keys.Add(signer.KeyID(), signer.Public()); err != nil {
		f.Fatal(err)
	}
	return b.Bytes(), keys
}

// FuzzVerifyAuditBundle: a verifier that accepts a falsified bundle is the
// worst bug an audit tool can have. Whatever the input, verification
// returns a report or an *AuditBundleError, never panics, and accepts
// only bundles made of the signed bundle's own lines: nothing the fuzzer
// changed, without the signing key, may verify.
func FuzzVerifyAuditBundle(f *testing.F) {
	seed, keys := auditBundleSeed(f)
	f.Add(seed)
	f.Add([]byte(chronicle.AuditBundleFormat + "\n"))
	f.Add([]byte{})
	lines := map[string]bool{}
	for _, l := range bytes.SplitAfter(seed, []byte("\n")) {
		lines[string(l)] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := chronicle.VerifyAuditBundle(bytes.NewReader(data), keys)
		if err != nil {
			if !errors.Is(err, chronicle.ErrAuditBundle) {
				t.Fatalf("error is not an *AuditBundleError: %v", err)
			}
			return
		}
		if len(rep.Instances) == 0 {
			t.Fatal("an empty bundle verified")
		}
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if len(l) > 0 && !lines[string(l)] {
				t.Fatalf("a bundle with a line the signed one does not have verified: %q", l)
			}
		}
	})
}
