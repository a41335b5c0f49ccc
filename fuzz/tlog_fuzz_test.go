package fuzz_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/tlog"
)

// The parsers and verifiers of published checkpoints: a verifier that
// accepts a falsified note or proof is the worst bug Chronicle can have.
// Each must reject bad input with its typed error, never panic, and
// accept only what was signed or proved.

const fuzzOrigin = "chronicle.example/fuzz"

func fuzzTree(n int) *tlog.Tree {
	tr := &tlog.Tree{}
	for i := 1; i <= n; i++ {
		s := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		_ = tr.Append(s[:])
	}
	return tr
}

func fuzzKey(t testing.TB) (history.Signer, *history.Keyring) {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "fuzz")
	s, err := history.NewEd25519Signer("fuzz", ed25519.NewKeyFromSeed(seed))
	require.NoError(t, err)
	k := &history.Keyring{}
	require.NoError(t, k.Add("fuzz", s.Public()))
	return s, k
}

// FuzzCheckpointNote: only the note the key signed opens, and what opens
// is what was signed.
func FuzzCheckpointNote(f *testing.F) {
	s, keys := fuzzKey(f)
	ns, err := tlog.NoteSigner(fuzzOrigin, s)
	require.NoError(f, err)
	tr := fuzzTree(7)
	root, _ := tr.Root(7)
	signed, err := tlog.Sign(tlog.Checkpoint{Origin: fuzzOrigin, Size: 7, Root: root}, ns)
	require.NoError(f, err)
	f.Add(signed)
	f.Add(bytes.Replace(signed, []byte("\n7\n"), []byte("\n8\n"), 1))
	f.Add(bytes.Replace(signed, []byte("\n7\n"), []byte("\n07\n"), 1))
	f.Add(append(bytes.Clone(signed), "— other.example/w1 AAAAAAAA\n"...))
	f.Add([]byte(fuzzOrigin + "\n7\n\n\n— x y\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := tlog.Parse(data); err == nil {
			require.NoError(t, tlog.ValidateOrigin(c.Origin))
			require.Len(t, c.Root, tlog.HashSize)
		} else {
			require.ErrorIs(t, err, tlog.ErrMalformedNote)
		}
		c, n, err := tlog.Open(data, fuzzOrigin, keys)
		if err != nil {
			require.True(t, errors.Is(err, tlog.ErrMalformedNote) || errors.Is(err, tlog.ErrNoteSignature), "untyped error: %v", err)
			return
		}
		require.Equal(t, uint64(7), c.Size, "a note the key did not sign opened: %q", data)
		require.Equal(t, root, c.Root)
		require.Equal(t, fuzzOrigin, c.Origin)
		require.NotEmpty(t, n.Sigs)
	})
}

// FuzzConsistencyProof: a consistency proof between two sizes verifies
// only as the tree gives it; any edit is refused.
func FuzzConsistencyProof(f *testing.F) {
	f.Add(uint16(3), uint16(7), uint16(0), uint8(1), uint8(0))
	f.Add(uint16(4), uint16(8), uint16(1), uint8(0), uint8(1))
	f.Add(uint16(0), uint16(5), uint16(0), uint8(0), uint8(0))
	f.Add(uint16(5), uint16(5), uint16(0), uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, size1, size2, at uint16, xor, mode uint8) {
		n1, n2 := uint64(size1%300), uint64(size2%300)
		if n1 > n2 {
			n1, n2 = n2, n1
		}
		tr := fuzzTree(int(n2) + 1)
		p, err := tr.ConsistencyProof(n1, n2)
		require.NoError(t, err)
		r1, _ := tr.Root(n1)
		r2, _ := tr.Root(n2)
		require.NoError(t, tlog.VerifyConsistency(n1, n2, p, r1, r2))
		edited := make([][]byte, len(p))
		for i := range p {
			edited[i] = bytes.Clone(p[i])
		}
		switch mode % 4 {
		case 0: // flip a byte of a hash
			if len(edited) == 0 || xor == 0 {
				return
			}
			edited[int(at)%len(edited)][int(at)%tlog.HashSize] ^= xor
		case 1: // drop a hash
			if len(edited) == 0 {
				return
			}
			i := int(at) % len(edited)
			edited = append(edited[:i], edited[i+1:]...)
		case 2: // add one
			edited = append(edited, bytes.Repeat([]byte{xor}, tlog.HashSize))
		case 3: // the next size's root instead
			r3, _ := tr.Root(n2 + 1)
			err := tlog.VerifyConsistency(n1, n2, p, r1, r3)
			if n1 == 0 && n2 > 0 {
				require.NoError(t, err, "nothing is proved from the empty tree")
			} else {
				require.ErrorIs(t, err, tlog.ErrBadProof, "%d→%d accepted another root", n1, n2)
			}
			return
		}
		err = tlog.VerifyConsistency(n1, n2, edited, r1, r2)
		require.ErrorIs(t, err, tlog.ErrBadProof, "an edited proof %d→%d verified", n1, n2)
	})
}

// FuzzInclusionProof: an inclusion proof of a checkpoint verifies only
// for its leaf, index and size.
func FuzzInclusionProof(f *testing.F) {
	f.Add(uint16(3), uint16(7), uint16(0), uint8(1))
	f.Add(uint16(0), uint16(1), uint16(0), uint8(0))
	f.Fuzz(func(t *testing.T, index, size, at uint16, xor uint8) {
		n := uint64(size%300) + 1
		i := uint64(index) % n
		tr := fuzzTree(int(n))
		p, err := tr.InclusionProof(i, n)
		require.NoError(t, err)
		root, _ := tr.Root(n)
		leaf := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i+1))
		require.NoError(t, tlog.VerifyInclusion(leaf[:], i, n, p, root))
		if xor != 0 && len(p) > 0 {
			p[int(at)%len(p)][int(at)%tlog.HashSize] ^= xor
			require.ErrorIs(t, tlog.VerifyInclusion(leaf[:], i, n, p, root), tlog.ErrBadProof)
			return
		}
		if n > 1 {
			other := (i + 1 + uint64(at)%(n-1)) % n
			require.ErrorIs(t, tlog.VerifyInclusion(leaf[:], other, n, p, root), tlog.ErrBadProof)
		}
	})
}

// FuzzWitnessRequest: the add-checkpoint body parser refuses what is not
// of the protocol's form with ErrBadRequest, and what it accepts formats
// back to the same bytes.
func FuzzWitnessRequest(f *testing.F) {
	f.Add(tlog.FormatAddCheckpoint(3, [][]byte{bytes.Repeat([]byte{1}, 32)}, []byte("o\n1\nAAAA\n\n— o x\n")))
	f.Add([]byte("old 0\n\n"))
	f.Add([]byte("old 01\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		old, proof, msg, err := tlog.ParseAddCheckpoint(body)
		if err != nil {
			require.ErrorIs(t, err, tlog.ErrBadRequest)
			return
		}
		require.Equal(t, body, tlog.FormatAddCheckpoint(old, proof, msg))
	})
}
