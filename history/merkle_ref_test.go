package history_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// The Merkle trees of checkpoints moved onto transparency-dev/merkle; the
// roots and audit paths must be the bytes of the hand-written RFC 6962
// code they replaced (kept here as the reference), or stored checkpoints
// would no longer verify.

func refNode(l, r []byte) []byte {
	s := sha256.Sum256(append(append([]byte{0x01}, l...), r...))
	return s[:]
}

func refSplit(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

func refTree(h [][]byte) []byte {
	if len(h) == 1 {
		return h[0]
	}
	k := refSplit(len(h))
	return refNode(refTree(h[:k]), refTree(h[k:]))
}

func refPath(m int, h [][]byte) [][]byte {
	if len(h) <= 1 {
		return nil
	}
	k := refSplit(len(h))
	if m < k {
		return append(refPath(m, h[:k]), refTree(h[k:]))
	}
	return append(refPath(m-k, h[k:]), refTree(h[:k]))
}

func TestMerkleTreeIsTheHandWrittenOne(t *testing.T) {
	empty := sha256.Sum256(nil)
	if got := history.MerkleRoot(nil); !bytes.Equal(got, empty[:]) {
		t.Fatalf("empty root %x", got)
	}
	for n := 1; n <= 70; n++ {
		ls := leaves(n)
		hashes := make([][]byte, n)
		for i := range ls {
			hashes[i] = history.LeafHash(ls[i])
		}
		if got, want := history.MerkleRoot(ls), refTree(hashes); !bytes.Equal(got, want) {
			t.Fatalf("n=%d: root %x, the hand-written code gives %x", n, got, want)
		}
		c := &history.Checkpoint{Number: 1, At: time.Unix(0, 0), Leaves: ls}
		if err := c.Seal(testSigner(t, "k")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			_, p, ok := c.Proof(fmt.Sprintf("i-%03d", i))
			if !ok {
				t.Fatalf("n=%d: no leaf %d", n, i)
			}
			want := refPath(i, hashes)
			if len(p.Path) != len(want) {
				t.Fatalf("n=%d i=%d: path of %d, want %d", n, i, len(p.Path), len(want))
			}
			for j := range want {
				if !bytes.Equal(p.Path[j], want[j]) {
					t.Fatalf("n=%d i=%d: path[%d] differs", n, i, j)
				}
			}
		}
	}
}
