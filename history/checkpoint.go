package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/compact"
	merkleproof "github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Errors of checkpoint verification, compared with errors.Is.
var (
	// ErrMalformedCheckpoint: a checkpoint's fields do not fit together
	// (unsorted or repeated leaves, a root or hash that is not what its
	// content gives, a proof of the wrong shape).
	ErrMalformedCheckpoint = errors.New("history: malformed checkpoint")
	// ErrUnknownKey: a checkpoint names a key id the keyring does not hold.
	ErrUnknownKey = errors.New("history: unknown checkpoint key")
	// ErrBadSignature: a checkpoint's signature does not verify with the
	// public key of its key id.
	ErrBadSignature = errors.New("history: bad checkpoint signature")
)

// CheckpointLeaf is the head of one instance's history as a checkpoint
// commits to it: the last event's Seq and Hash. Since each event's hash
// covers its predecessor's, a leaf commits to the whole history up to Seq.
//
// A leaf with Purged set is a signed tombstone: the history ending at Seq
// and Hash is the final head of an incarnation of the instance id, which
// a purge may delete after this checkpoint. Only such a leaf explains
// covered history that is gone; an unsigned tombstone row never does.
type CheckpointLeaf struct {
	InstanceID string `json:"instance_id"`
	Seq        int64  `json:"seq"`
	Hash       []byte `json:"hash"`
	Purged     bool   `json:"purged,omitempty"`
}

// Checkpoint is a signed commitment to the heads of the instances that
// changed since the previous checkpoint (a Merkle root over Leaves) and to
// the previous checkpoint's Hash, so that checkpoints form a chain of
// their own. See docs/audit.md for what it proves.
type Checkpoint struct {
	// Number counts checkpoints from 1, without gaps.
	Number int64 `json:"number"`
	// PrevHash is the Hash of checkpoint Number-1 (nil for the first).
	PrevHash []byte    `json:"prev_hash,omitempty"`
	At       time.Time `json:"at"`
	// KeyID names the key that signed it.
	KeyID string `json:"key_id"`
	// Root is the Merkle tree hash of the leaves (see [MerkleRoot]).
	Root []byte `json:"root"`
	// Size is the number of leaves.
	Size int `json:"size"`
	// Leaves are the heads, sorted by instance id and unique. A stored
	// checkpoint has them all; one in an export may carry none (the
	// exported instance's leaf travels with its [InclusionProof]).
	Leaves []CheckpointLeaf `json:"leaves,omitempty"`
	// Hash is SHA-256 of [Checkpoint.SignedBytes]; Signature is the
	// signer's signature of the same bytes.
	Hash      []byte `json:"hash"`
	Signature []byte `json:"signature"`
}

// checkpointDomain starts the signed bytes of a checkpoint, so that a
// signature of one can never be taken for a signature of anything else.
const checkpointDomain = "chronicle checkpoint v1\x00"

// SignedBytes returns the canonical encoding of the checkpoint that its
// Hash and Signature cover: the domain string, then Number, PrevHash, At
// (Unix nanoseconds), KeyID, Root and Size, integers big-endian and byte
// strings length-prefixed. The leaves enter through Root.
func (c *Checkpoint) SignedBytes() []byte {
	b := make([]byte, 0, 128+len(c.KeyID))
	b = append(b, checkpointDomain...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Number))
	b = appendBytes(b, c.PrevHash)
	b = binary.BigEndian.AppendUint64(b, uint64(c.At.UnixNano()))
	b = appendBytes(b, []byte(c.KeyID))
	b = appendBytes(b, c.Root)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Size))
	return b
}

func appendBytes(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Seal sorts the leaves, sets Size, Root, KeyID, Hash and Signature of a
// checkpoint whose Number, PrevHash, At and Leaves are final, signing it
// with s. At is cut to whole microseconds, which every store keeps. It returns an error wrapping ErrMalformedCheckpoint when two
// leaves name one instance.
func (c *Checkpoint) Seal(s Signer) error {
	slices.SortFunc(c.Leaves, func(a, b CheckpointLeaf) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	for i := 1; i < len(c.Leaves); i++ {
		if c.Leaves[i].InstanceID == c.Leaves[i-1].InstanceID {
			return fmt.Errorf("%w: instance %q has two leaves", ErrMalformedCheckpoint, c.Leaves[i].InstanceID)
		}
	}
	c.At = c.At.UTC().Truncate(time.Microsecond) // what databases keep
	c.Size, c.Root, c.KeyID = len(c.Leaves), MerkleRoot(c.Leaves), s.KeyID()
	msg := c.SignedBytes()
	sum := sha256.Sum256(msg)
	c.Hash = sum[:]
	sig, err := s.Sign(msg)
	if err != nil {
		return fmt.Errorf("history: sign checkpoint %d with key %s: %w", c.Number, c.KeyID, err)
	}
	c.Signature = sig
	return nil
}

// Verify checks a stored checkpoint on its own: it carries all its leaves
// (exactly Size of them: a checkpoint whose leaves are missing proves
// nothing and fails), sorted, unique and giving Root; its Hash is that of
// its signed bytes and its Signature verifies with the key of KeyID in
// keys. Errors wrap ErrMalformedCheckpoint, ErrUnknownKey or
// ErrBadSignature. The chain (Number and PrevHash against the previous
// checkpoint) is the caller's. A checkpoint as an export carries it,
// without leaves, is checked by [CheckpointProof.Verify].
func (c *Checkpoint) Verify(keys *Keyring) error {
	if err := keys.check(); err != nil {
		return err
	}
	if err := c.VerifyShape(); err != nil {
		return err
	}
	return keys.verify(c.KeyID, c.SignedBytes(), c.Signature, c.Number)
}

// VerifyShape checks what [Checkpoint.Verify] checks except the
// signature: every leaf present, sorted, unique and giving Root, and Hash
// the hash of the signed bytes. It needs no key; alone it proves nothing
// against someone who can write the store, only that the checkpoint was
// not damaged.
func (c *Checkpoint) VerifyShape() error {
	if err := c.verifyHeader(); err != nil {
		return err
	}
	if len(c.Leaves) != c.Size {
		return fmt.Errorf("%w: checkpoint %d has %d leaves, says %d", ErrMalformedCheckpoint, c.Number, len(c.Leaves), c.Size)
	}
	for i := 1; i < len(c.Leaves); i++ {
		if c.Leaves[i].InstanceID <= c.Leaves[i-1].InstanceID {
			return fmt.Errorf("%w: checkpoint %d: leaves not sorted and unique", ErrMalformedCheckpoint, c.Number)
		}
	}
	if !bytes.Equal(MerkleRoot(c.Leaves), c.Root) {
		return fmt.Errorf("%w: checkpoint %d: leaves do not give its root", ErrMalformedCheckpoint, c.Number)
	}
	return nil
}

// verifyHeader checks the fields of a checkpoint without its leaves.
func (c *Checkpoint) verifyHeader() error {
	if c.Number < 1 || len(c.Root) != HashSize || c.Size < 0 {
		return fmt.Errorf("%w: checkpoint %d: bad number, root or size", ErrMalformedCheckpoint, c.Number)
	}
	if sum := sha256.Sum256(c.SignedBytes()); !bytes.Equal(sum[:], c.Hash) {
		return fmt.Errorf("%w: checkpoint %d: hash does not match content", ErrMalformedCheckpoint, c.Number)
	}
	return nil
}

// Leaf returns the checkpoint's leaf of an instance; ok is false when the
// checkpoint does not carry one.
func (c *Checkpoint) Leaf(instanceID string) (leaf CheckpointLeaf, index int, ok bool) {
	i, ok := slices.BinarySearchFunc(c.Leaves, instanceID, func(l CheckpointLeaf, id string) int { return strings.Compare(l.InstanceID, id) })
	if !ok {
		return CheckpointLeaf{}, 0, false
	}
	return c.Leaves[i], i, true
}

// Merkle tree over checkpoint leaves, domain-separated as in RFC 6962:
// leaf hash SHA-256(0x00 ‖ leaf), node hash SHA-256(0x01 ‖ left ‖ right),
// the empty tree SHA-256 of nothing.

// LeafHash returns the Merkle leaf hash of a checkpoint leaf: SHA-256 of
// 0x00, the length-prefixed instance id, Seq (8 bytes big-endian) and the
// length-prefixed head hash, followed for a tombstone leaf (Purged) by
// the 7 bytes "\x00purged". Every field before it is length-prefixed, so
// no head leaf hashes the bytes of a tombstone leaf.
func LeafHash(l CheckpointLeaf) []byte {
	b := make([]byte, 0, 1+4+len(l.InstanceID)+8+4+len(l.Hash)+len(purgedMark))
	b = append(b, 0x00)
	b = appendBytes(b, []byte(l.InstanceID))
	b = binary.BigEndian.AppendUint64(b, uint64(l.Seq))
	b = appendBytes(b, l.Hash)
	if l.Purged {
		b = append(b, purgedMark...)
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// purgedMark ends the hashed bytes of a tombstone leaf.
const purgedMark = "\x00purged"

// MerkleRoot returns the Merkle tree hash of leaves, in their order: RFC
// 6962's tree (github.com/transparency-dev/merkle) over [LeafHash]es.
func MerkleRoot(leaves []CheckpointLeaf) []byte {
	if len(leaves) == 0 {
		return rfc6962.DefaultHasher.EmptyRoot()
	}
	r := merkleRanges.NewEmptyRange(0)
	for i := range leaves {
		_ = r.Append(LeafHash(leaves[i]), nil) // a range from 0 accepts every append
	}
	root, _ := r.GetRootHash(nil) // not empty
	return root
}

var merkleRanges = compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// subtreeHash returns the hash of a perfect subtree of leaf hashes h.
func subtreeHash(h [][]byte) []byte {
	if len(h) == 1 {
		return h[0]
	}
	k := len(h) / 2
	return rfc6962.DefaultHasher.HashChildren(subtreeHash(h[:k]), subtreeHash(h[k:]))
}

// InclusionProof proves that a leaf is the Index-th of a tree of Size
// leaves: the audit path of RFC 6962, bottom up.
type InclusionProof struct {
	Index int      `json:"index"`
	Size  int      `json:"size"`
	Path  [][]byte `json:"path"`
}

// Proof returns the inclusion proof of the checkpoint's leaf of an
// instance; ok is false when the checkpoint has no leaf for it.
func (c *Checkpoint) Proof(instanceID string) (leaf CheckpointLeaf, proof *InclusionProof, ok bool) {
	leaf, i, ok := c.Leaf(instanceID)
	if !ok {
		return leaf, nil, false
	}
	hashes := make([][]byte, len(c.Leaves))
	for j := range c.Leaves {
		hashes[j] = LeafHash(c.Leaves[j])
	}
	nodes, err := merkleproof.Inclusion(uint64(i), uint64(len(hashes)))
	if err != nil {
		return leaf, nil, false // i < len: never
	}
	path := make([][]byte, len(nodes.IDs))
	for j, id := range nodes.IDs {
		begin, end := id.Coverage()
		path[j] = subtreeHash(hashes[begin:end])
	}
	if path, err = nodes.Rehash(path, rfc6962.DefaultHasher.HashChildren); err != nil {
		return leaf, nil, false // as many hashes as nodes: never
	}
	return leaf, &InclusionProof{Index: i, Size: len(hashes), Path: path}, true
}

// VerifyInclusion checks that leaf is in the tree of root with proof (the
// algorithm of RFC 9162, 2.1.3.2, by github.com/transparency-dev/merkle). It returns nil or an error wrapping
// ErrMalformedCheckpoint.
func VerifyInclusion(root []byte, leaf CheckpointLeaf, p *InclusionProof) error {
	if p == nil || p.Index < 0 || p.Index >= p.Size {
		return fmt.Errorf("%w: inclusion proof of %s out of range", ErrMalformedCheckpoint, leaf.InstanceID)
	}
	if err := merkleproof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.Index), uint64(p.Size), LeafHash(leaf), p.Path, root); err != nil {
		return fmt.Errorf("%w: inclusion proof of %s does not lead to the root: %v", ErrMalformedCheckpoint, leaf.InstanceID, err)
	}
	return nil
}
