package chronicle_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An engine signs checkpoints with the key `chronicle keygen --id 2026-11
// --out 2026-11.key` made; auditors verify them with 2026-11.key.pub.
func ExampleReadSigningKey() {
	dir, _ := os.MkdirTemp("", "keys")
	defer os.RemoveAll(dir)
	// What keygen writes (with a random seed).
	seed := make([]byte, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	_ = os.WriteFile(filepath.Join(dir, "2026-11.key"), []byte("2026-11 "+base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "2026-11.key.pub"), []byte(history.KeyringLine("2026-11", pub)+"\n"), 0o644)

	signer, err := chronicle.ReadSigningKey(filepath.Join(dir, "2026-11.key"))
	if err != nil {
		panic(err)
	}
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{
		Checkpoints: &chronicle.CheckpointOptions{Signer: signer},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	keys, err := chronicle.ReadKeyring(filepath.Join(dir, "2026-11.key.pub"))
	if err != nil {
		panic(err)
	}
	fmt.Println("signing with", signer.KeyID(), "- keyring holds", keys.KeyIDs())
	// Output:
	// signing with 2026-11 - keyring holds [2026-11]
}
