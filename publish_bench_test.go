package chronicle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// BenchmarkPublishDir is the work publishing adds to each checkpoint with
// a DirPublisher: reading the new checkpoint, the log's root, signing the
// note, reading the directory's newest note and writing the new one. The
// directory grows by one file an iteration.
func BenchmarkPublishDir(b *testing.B) {
	ctx := context.Background()
	signer, err := chronicle.NewEd25519Signer("k1", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		b.Fatal(err)
	}
	dir, err := chronicle.NewDirPublisher(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New(memory.Options{})
	e, err := chronicle.New(store, chronicle.Options{NodeID: "bench", Checkpoints: &chronicle.CheckpointOptions{
		Signer: signer, Origin: "chronicle.example/bench", Publishers: []chronicle.Publisher{dir}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var prev []byte
	leaf := []history.CheckpointLeaf{{InstanceID: "i", Seq: 1, Hash: bytes.Repeat([]byte{1}, history.HashSize)}}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		c := &chronicle.Checkpoint{Number: int64(i), PrevHash: prev, At: time.Unix(int64(i), 0), Leaves: leaf}
		if err := c.Seal(signer); err != nil {
			b.Fatal(err)
		}
		if err := store.AppendCheckpoint(ctx, c); err != nil {
			b.Fatal(err)
		}
		prev = c.Hash
		b.StartTimer()
		if err := e.Publish(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
