package tlog

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of a tree hash and of a leaf's data (a
// checkpoint's Hash): SHA-256.
const HashSize = sha256.Size

// ErrBadProof: a consistency or inclusion proof does not lead to the
// roots it claims, or has the wrong shape; compared with errors.Is.
var ErrBadProof = errors.New("tlog: proof does not verify")

// hasher is RFC 6962's, with SHA-256.
var hasher = rfc6962.DefaultHasher

// LeafHash returns the RFC 6962 leaf hash of a checkpoint log leaf, whose
// data is a Chronicle checkpoint's Hash: SHA-256(0x00 ‖ hash).
func LeafHash(checkpointHash []byte) []byte { return hasher.HashLeaf(checkpointHash) }

// EmptyRoot is the root of the tree of no leaves: SHA-256 of nothing.
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// Tree is the checkpoint log of a store: the leaf hashes of its
// checkpoints, in Number order. It keeps every leaf hash in memory (32
// bytes a checkpoint) and computes roots and proofs from them. The zero
// value is the empty tree. A Tree is not safe for concurrent use.
type Tree struct {
	leaves [][]byte
	// all is the compact range of every leaf, for the newest root.
	all *compact.Range
}

var rangeFactory = compact.RangeFactory{Hash: hasher.HashChildren}

// Append adds the leaf of the next checkpoint, given its Hash. It
// returns an error when the hash is not HashSize bytes.
func (t *Tree) Append(checkpointHash []byte) error {
	if len(checkpointHash) != HashSize {
		return fmt.Errorf("tlog: a checkpoint hash has %d bytes, want %d", len(checkpointHash), HashSize)
	}
	h := LeafHash(checkpointHash)
	if t.all == nil {
		t.all = rangeFactory.NewEmptyRange(0)
		for _, l := range t.leaves {
			if err := t.all.Append(l, nil); err != nil {
				return err
			}
		}
	}
	if err := t.all.Append(h, nil); err != nil {
		return err
	}
	t.leaves = append(t.leaves, h)
	return nil
}

// Size returns the number of leaves: the Number of the newest checkpoint
// appended.
func (t *Tree) Size() uint64 { return uint64(len(t.leaves)) }

// Root returns the RFC 6962 root of the first size leaves.
func (t *Tree) Root(size uint64) ([]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("tlog: root of size %d asked of a tree of %d", size, t.Size())
	}
	if size == 0 {
		return EmptyRoot(), nil
	}
	if size == t.Size() {
		return t.all.GetRootHash(nil)
	}
	r := rangeFactory.NewEmptyRange(0)
	for _, h := range t.leaves[:size] {
		if err := r.Append(h, nil); err != nil {
			return nil, err
		}
	}
	return r.GetRootHash(nil)
}

// node returns the hash of a perfect subtree of the leaves.
func (t *Tree) node(id compact.NodeID) []byte {
	begin, end := id.Coverage()
	return subtree(t.leaves[begin:end])
}

func subtree(h [][]byte) []byte {
	if len(h) == 1 {
		return h[0]
	}
	k := len(h) / 2 // perfect subtrees only: len is a power of two
	return hasher.HashChildren(subtree(h[:k]), subtree(h[k:]))
}

// ConsistencyProof returns the RFC 6962 consistency proof from the tree
// of size1 leaves to that of size2 (size1 ≤ size2 ≤ Size). It hashes
// every leaf up to size2 at worst.
func (t *Tree) ConsistencyProof(size1, size2 uint64) ([][]byte, error) {
	if size2 > t.Size() || size1 > size2 {
		return nil, fmt.Errorf("tlog: consistency proof from %d to %d asked of a tree of %d", size1, size2, t.Size())
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

// InclusionProof returns the RFC 6962 inclusion proof of leaf index (the
// checkpoint numbered index+1) in the tree of size leaves.
func (t *Tree) InclusionProof(index, size uint64) ([][]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("tlog: inclusion proof in size %d asked of a tree of %d", size, t.Size())
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

func (t *Tree) rehash(nodes proof.Nodes) ([][]byte, error) {
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		hashes[i] = t.node(id)
	}
	return nodes.Rehash(hashes, hasher.HashChildren)
}

// VerifyConsistency checks that root2 (of size2 leaves) extends root1 (of
// size1) with an RFC 6962 consistency proof. It returns nil or an error
// wrapping ErrBadProof.
func VerifyConsistency(size1, size2 uint64, p [][]byte, root1, root2 []byte) error {
	if err := proof.VerifyConsistency(hasher, size1, size2, p, root1, root2); err != nil {
		return fmt.Errorf("%w: consistency from %d to %d: %v", ErrBadProof, size1, size2, err)
	}
	return nil
}

// VerifyInclusion checks that the checkpoint of Hash checkpointHash is
// leaf index of the tree of size leaves and root root. It returns nil or
// an error wrapping ErrBadProof.
func VerifyInclusion(checkpointHash []byte, index, size uint64, p [][]byte, root []byte) error {
	if err := proof.VerifyInclusion(hasher, index, size, LeafHash(checkpointHash), p, root); err != nil {
		return fmt.Errorf("%w: inclusion of leaf %d in size %d: %v", ErrBadProof, index, size, err)
	}
	return nil
}
