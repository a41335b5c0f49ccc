package history_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

func testSigner(t *testing.T, id string) *history.Ed25519Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, id)
	s, err := history.NewEd25519Signer(id, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func leaves(n int) []history.CheckpointLeaf {
	out := make([]history.CheckpointLeaf, n)
	for i := range out {
		out[i] = history.CheckpointLeaf{InstanceID: fmt.Sprintf("i-%03d", i), Seq: int64(i + 1), Hash: bytes.Repeat([]byte{byte(i)}, history.HashSize)}
	}
	return out
}

func TestInclusionProofsForEveryTreeSize(t *testing.T) {
	for n := 1; n <= 33; n++ {
		c := &history.Checkpoint{Number: 1, At: time.Unix(0, 0), Leaves: leaves(n)}
		if err := c.Seal(testSigner(t, "k")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			leaf, proof, ok := c.Proof(fmt.Sprintf("i-%03d", i))
			if !ok {
				t.Fatalf("n=%d: no leaf %d", n, i)
			}
			if err := history.VerifyInclusion(c.Root, leaf, proof); err != nil {
				t.Fatalf("n=%d i=%d: %v", n, i, err)
			}
			leaf.Seq++
			if err := history.VerifyInclusion(c.Root, leaf, proof); !errors.Is(err, history.ErrMalformedCheckpoint) {
				t.Fatalf("n=%d i=%d: a changed leaf verified: %v", n, i, err)
			}
		}
	}
}

func TestCheckpointSignature(t *testing.T) {
	s := testSigner(t, "k1")
	keys := &history.Keyring{}
	if err := keys.Add("k1", s.Public()); err != nil {
		t.Fatal(err)
	}
	c := &history.Checkpoint{Number: 2, PrevHash: bytes.Repeat([]byte{7}, 32), At: time.Now(), Leaves: leaves(3)}
	if err := c.Seal(s); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(keys); err != nil {
		t.Fatal(err)
	}
	forged := *c
	forged.Number = 3
	if err := forged.Verify(keys); !errors.Is(err, history.ErrMalformedCheckpoint) {
		t.Fatalf("a changed number verified: %v", err)
	}
	forged = *c
	forged.Signature = bytes.Clone(c.Signature)
	forged.Signature[0] ^= 1
	if err := forged.Verify(keys); !errors.Is(err, history.ErrBadSignature) {
		t.Fatalf("a changed signature verified: %v", err)
	}
	forged = *c
	forged.Leaves = leaves(3)
	forged.Leaves[1].Seq = 99
	if err := forged.Verify(keys); !errors.Is(err, history.ErrMalformedCheckpoint) {
		t.Fatalf("a changed leaf verified: %v", err)
	}
	if err := c.Verify(&history.Keyring{}); !errors.Is(err, history.ErrUnknownKey) {
		t.Fatalf("an empty keyring verified: %v", err)
	}
	dup := &history.Checkpoint{Number: 1, Leaves: append(leaves(2), leaves(1)...)}
	if err := dup.Seal(s); !errors.Is(err, history.ErrMalformedCheckpoint) {
		t.Fatalf("two leaves of one instance sealed: %v", err)
	}
}

func TestKeyringText(t *testing.T) {
	a, b := testSigner(t, "2026-01"), testSigner(t, "2026-02")
	text := "# Chronicle checkpoint keys\n\n" + history.KeyringLine("2026-01", a.Public().(ed25519.PublicKey)) + "\n" +
		history.KeyringLine("2026-02", b.Public().(ed25519.PublicKey)) + "\n"
	k, err := history.ParseKeyring(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.KeyIDs(); len(got) != 2 || got[0] != "2026-01" {
		t.Fatalf("key ids %v", got)
	}
	var out strings.Builder
	if _, err := k.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, out.String()) {
		t.Fatalf("written keyring %q is not the parsed one", out.String())
	}
	for _, bad := range []string{"k1", "k1 !!!", "k1 AAAA", "k1 a b"} {
		if _, err := history.ParseKeyring(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("%q parsed: %v", bad, err)
		}
	}
}

// A stored checkpoint whose leaf rows are gone proves nothing: it fails,
// rather than passing with the Merkle check skipped.
func TestCheckpointWithMissingLeavesFails(t *testing.T) {
	s := testSigner(t, "k1")
	keys := &history.Keyring{}
	if err := keys.Add("k1", s.Public()); err != nil {
		t.Fatal(err)
	}
	c := &history.Checkpoint{Number: 1, At: time.Now(), Leaves: leaves(3)}
	if err := c.Seal(s); err != nil {
		t.Fatal(err)
	}
	for _, kept := range [][]history.CheckpointLeaf{nil, c.Leaves[:2], c.Leaves[1:]} {
		stripped := *c
		stripped.Leaves = kept
		if err := stripped.Verify(keys); !errors.Is(err, history.ErrMalformedCheckpoint) {
			t.Fatalf("a checkpoint of 3 leaves verified with %d: %v", len(kept), err)
		}
	}
	// The export form (no leaves, one leaf with its proof) still verifies.
	p, ok := history.NewCheckpointProof(c, "i-001")
	if !ok {
		t.Fatal("no proof")
	}
	if err := p.Verify(keys); err != nil {
		t.Fatalf("proof: %v", err)
	}
}

// A tombstone leaf is a leaf of its own: it does not verify as the head
// leaf with the same seq and hash, nor the reverse.
func TestTombstoneLeafIsSigned(t *testing.T) {
	s := testSigner(t, "k1")
	keys := &history.Keyring{}
	if err := keys.Add("k1", s.Public()); err != nil {
		t.Fatal(err)
	}
	ls := leaves(3)
	ls[1].Purged = true
	c := &history.Checkpoint{Number: 1, At: time.Now(), Leaves: ls}
	if err := c.Seal(s); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(keys); err != nil {
		t.Fatal(err)
	}
	flipped := *c
	flipped.Leaves = leaves(3)
	if err := flipped.Verify(keys); !errors.Is(err, history.ErrMalformedCheckpoint) {
		t.Fatalf("a tombstone leaf verified as a head: %v", err)
	}
	p, _ := history.NewCheckpointProof(c, "i-001")
	if !p.Leaf.Purged {
		t.Fatal("the proof lost the tombstone flag")
	}
	p.Leaf.Purged = false
	if err := p.Verify(keys); !errors.Is(err, history.ErrMalformedCheckpoint) {
		t.Fatalf("a tombstone's proof verified as a head's: %v", err)
	}
	if bytes.Equal(history.LeafHash(ls[1]), history.LeafHash(leaves(3)[1])) {
		t.Fatal("tombstone and head leaves hash alike")
	}
}
