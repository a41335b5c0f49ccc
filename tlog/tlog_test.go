package tlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/tlog"
)

func hashOf(i int) []byte {
	s := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return s[:]
}

func treeOf(t *testing.T, n int) *tlog.Tree {
	t.Helper()
	tr := &tlog.Tree{}
	for i := 1; i <= n; i++ {
		require.NoError(t, tr.Append(hashOf(i)))
	}
	return tr
}

// refRoot is RFC 6962's MTH, written from the RFC.
func refRoot(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		s := sha256.Sum256(append([]byte{0}, leaves[0]...))
		return s[:]
	}
	k := 1
	for k<<1 < len(leaves) {
		k <<= 1
	}
	s := sha256.Sum256(append(append([]byte{1}, refRoot(leaves[:k])...), refRoot(leaves[k:])...))
	return s[:]
}

func TestTreeRootsAndProofs(t *testing.T) {
	t.Parallel()
	const n = 33
	tr := treeOf(t, n)
	var data [][]byte
	for size := uint64(0); size <= n; size++ {
		root, err := tr.Root(size)
		require.NoError(t, err)
		require.Equal(t, refRoot(data), root, "size %d", size)
		if size < n {
			data = append(data, hashOf(int(size)+1))
		}
	}
	for m := uint64(0); m <= n; m++ {
		for k := m; k <= n; k++ {
			p, err := tr.ConsistencyProof(m, k)
			require.NoError(t, err)
			r1, _ := tr.Root(m)
			r2, _ := tr.Root(k)
			require.NoError(t, tlog.VerifyConsistency(m, k, p, r1, r2), "%d→%d", m, k)
			if m > 0 && m < k {
				other := treeOf(t, int(k))
				other.Append(hashOf(999)) // a different leaf at the end: another history
				r2x, _ := other.Root(k + 1)
				require.ErrorIs(t, tlog.VerifyConsistency(m, k+1, p, r1, r2x), tlog.ErrBadProof)
			}
		}
		if m < n {
			p, err := tr.InclusionProof(m, n)
			require.NoError(t, err)
			root, _ := tr.Root(n)
			require.NoError(t, tlog.VerifyInclusion(hashOf(int(m)+1), m, n, p, root))
			require.ErrorIs(t, tlog.VerifyInclusion(hashOf(int(m)+2), m, n, p, root), tlog.ErrBadProof)
		}
	}
	_, err := tr.ConsistencyProof(3, n+1)
	require.Error(t, err)
	require.Error(t, tr.Append([]byte("short")))
}

func newKey(t *testing.T, id string) (history.Signer, *history.Keyring) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	s, err := history.NewEd25519Signer(id, priv)
	require.NoError(t, err)
	k := &history.Keyring{}
	require.NoError(t, k.Add(id, s.Public()))
	return s, k
}

const origin = "chronicle.example/claims-prod"

func signedNote(t *testing.T, s history.Signer, tr *tlog.Tree) []byte {
	t.Helper()
	ns, err := tlog.NoteSigner(origin, s)
	require.NoError(t, err)
	root, err := tr.Root(tr.Size())
	require.NoError(t, err)
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: tr.Size(), Root: root}, ns)
	require.NoError(t, err)
	return msg
}

func TestNoteRoundTripAndEditedBytes(t *testing.T) {
	t.Parallel()
	s, keys := newKey(t, "2026-11")
	tr := treeOf(t, 5)
	msg := signedNote(t, s, tr)
	lines := strings.Split(string(msg), "\n")
	require.Equal(t, origin, lines[0])
	require.Equal(t, "5", lines[1])
	require.Equal(t, "", lines[3])
	require.True(t, strings.HasPrefix(lines[4], "— "+origin+" "))

	c, n, err := tlog.Open(msg, origin, keys)
	require.NoError(t, err)
	root, _ := tr.Root(5)
	require.Equal(t, &tlog.Checkpoint{Origin: origin, Size: 5, Root: root}, c)
	require.Len(t, n.Sigs, 1)

	// Standard tooling reads it with the verifier key.
	pub, _ := keys.Key("2026-11")
	vkey, err := tlog.VerifierKey(origin, pub)
	require.NoError(t, err)
	v, err := note.NewVerifier(vkey)
	require.NoError(t, err)
	_, err = note.Open(msg, note.VerifierList(v))
	require.NoError(t, err)

	// Every edited byte fails.
	for i := range msg {
		edited := append([]byte{}, msg...)
		edited[i] ^= 0x01
		_, _, err := tlog.Open(edited, origin, keys)
		require.Error(t, err, "byte %d edited and the note still opened", i)
		require.True(t, errors.Is(err, tlog.ErrNoteSignature) || errors.Is(err, tlog.ErrMalformedNote), "%v", err)
	}
	// Another key, another origin.
	_, other := newKey(t, "2026-11")
	_, _, err = tlog.Open(msg, origin, other)
	require.ErrorIs(t, err, tlog.ErrNoteSignature)
	_, _, err = tlog.Open(msg, "chronicle.example/other", keys)
	require.ErrorIs(t, err, tlog.ErrNoteSignature)
	require.Error(t, tlog.ValidateOrigin("has space"))
	require.Error(t, tlog.ValidateOrigin("a+b"))
}

func TestCosignatureFollowsTheSpec(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	ws, err := history.NewEd25519Signer("w1", priv)
	require.NoError(t, err)
	at := time.Unix(1_700_000_000, 0)
	c, err := tlog.NewCosigner("witness.example/w1", ws, func() time.Time { return at })
	require.NoError(t, err)
	text := "example.com/log\n3\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	msg, err := note.Sign(&note.Note{Text: text}, c)
	require.NoError(t, err)
	n, err := note.Open(msg, note.VerifierList(c.Verifier()))
	require.NoError(t, err)
	got, ok := tlog.CosignatureTime(n, c.Verifier())
	require.True(t, ok)
	require.Equal(t, at.UTC(), got)

	// The key id and the signed message, from C2SP tlog-cosignature.
	pub := priv.Public().(ed25519.PublicKey)
	id := sha256.Sum256(append([]byte("witness.example/w1\n\x04"), pub...))
	require.Equal(t, binary.BigEndian.Uint32(id[:4]), c.KeyHash())
	sig, err := c.Sign([]byte(text))
	require.NoError(t, err)
	require.Equal(t, uint64(1_700_000_000), binary.BigEndian.Uint64(sig))
	require.True(t, ed25519.Verify(pub, []byte("cosignature/v1\ntime 1700000000\n"+text), sig[8:]))

	vkey, err := tlog.CosignerKey("witness.example/w1", pub)
	require.NoError(t, err)
	require.Equal(t, vkey, c.Key())
	require.True(t, strings.HasPrefix(vkey, "witness.example/w1+"))
	// A plain Ed25519 verifier of the same key does not take it.
	plain, err := note.NewEd25519VerifierKey("witness.example/w1", pub)
	require.NoError(t, err)
	pv, err := note.NewVerifier(plain)
	require.NoError(t, err)
	_, err = note.Open(msg, note.VerifierList(pv))
	require.Error(t, err)
}

func TestWitnessCosignsOnlyWhatExtendsItsLatest(t *testing.T) {
	t.Parallel()
	s, keys := newKey(t, "k1")
	ws, _ := newKey(t, "w1")
	cos, err := tlog.NewCosigner("witness.example/w1", ws, nil)
	require.NoError(t, err)
	w, err := tlog.NewWitness(tlog.WitnessOptions{Cosigner: cos, Dir: t.TempDir(), Logs: map[string]*history.Keyring{origin: keys}})
	require.NoError(t, err)
	srv := httptest.NewServer(w)
	defer srv.Close()
	client := &tlog.WitnessClient{URL: srv.URL}
	ctx := context.Background()

	tr := treeOf(t, 4)
	cosig, err := client.AddCheckpoint(ctx, 0, nil, signedNote(t, s, tr))
	require.NoError(t, err)
	cosigned := append(signedNote(t, s, tr), cosig...)
	_, n, err := tlog.Open(cosigned, origin, keys, cos.Verifier())
	require.NoError(t, err)
	require.Len(t, n.Sigs, 2)

	// A stale old size: 409 with the witness's size.
	tr9 := treeOf(t, 9)
	_, err = client.AddCheckpoint(ctx, 0, nil, signedNote(t, s, tr9))
	var conflict *tlog.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, uint64(4), conflict.Size)
	p, err := tr9.ConsistencyProof(4, 9)
	require.NoError(t, err)
	_, err = client.AddCheckpoint(ctx, 4, p, signedNote(t, s, tr9))
	require.NoError(t, err)

	// A fork signed by the log's key: a different leaf 7. The proof from
	// 9 does not lead there: 422; and at size 9 another root: 409.
	fork := treeOf(t, 6)
	require.NoError(t, fork.Append(hashOf(700)))
	for i := 8; i <= 12; i++ {
		require.NoError(t, fork.Append(hashOf(i)))
	}
	good, err := treeOf(t, 12).ConsistencyProof(9, 12)
	require.NoError(t, err)
	_, err = client.AddCheckpoint(ctx, 9, good, signedNote(t, s, fork))
	require.ErrorIs(t, err, tlog.ErrBadProof)
	forkAt9 := treeOf(t, 6)
	require.NoError(t, forkAt9.Append(hashOf(700)))
	require.NoError(t, forkAt9.Append(hashOf(8)))
	require.NoError(t, forkAt9.Append(hashOf(9)))
	_, err = w.AddCheckpoint(9, nil, signedNote(t, s, forkAt9))
	require.ErrorAs(t, err, &conflict)
	require.True(t, conflict.Fork)

	// Not signed by the log's key: 403; unknown origin: 404.
	other, _ := newKey(t, "k1")
	_, err = client.AddCheckpoint(ctx, 9, good, signedNote(t, other, treeOf(t, 12)))
	require.ErrorIs(t, err, tlog.ErrNoteSignature)
	ns, err := tlog.NoteSigner("elsewhere.example/log", s)
	require.NoError(t, err)
	r12, _ := treeOf(t, 12).Root(12)
	unknown, err := tlog.Sign(tlog.Checkpoint{Origin: "elsewhere.example/log", Size: 12, Root: r12}, ns)
	require.NoError(t, err)
	_, err = client.AddCheckpoint(ctx, 9, good, unknown)
	require.ErrorIs(t, err, tlog.ErrUnknownLog)

	// The witness's latest is still 9, with its cosignature.
	latest, err := w.Latest(origin)
	require.NoError(t, err)
	c, n, err := tlog.Open(latest, origin, keys, cos.Verifier())
	require.NoError(t, err)
	require.Equal(t, uint64(9), c.Size)
	require.Len(t, n.Sigs, 2)
}

func TestParseAddCheckpoint(t *testing.T) {
	t.Parallel()
	body := tlog.FormatAddCheckpoint(7, [][]byte{hashOf(1), hashOf(2)}, []byte("note\n\n— x y\n"))
	old, p, msg, err := tlog.ParseAddCheckpoint(body)
	require.NoError(t, err)
	require.Equal(t, uint64(7), old)
	require.Equal(t, [][]byte{hashOf(1), hashOf(2)}, p)
	require.Equal(t, "note\n\n— x y\n", string(msg))
	for _, bad := range []string{"", "old 07\n\nx", "old -1\n\nx", "old 1\nnot-base64\n\nx", "old 1\nAAAA\n\nx", "old 1\n"} {
		_, _, _, err := tlog.ParseAddCheckpoint([]byte(bad))
		require.ErrorIs(t, err, tlog.ErrBadRequest, "%q", bad)
	}
}

// TestNoteSignatureInOtherBase64 writes a signature's last character with
// other unused low bits: the same signature bytes, another note, refused.
func TestNoteSignatureInOtherBase64(t *testing.T) {
	t.Parallel()
	s, keys := newKey(t, "2026-11")
	msg := string(signedNote(t, s, treeOf(t, 5)))
	lines := strings.Split(strings.TrimSuffix(msg, "\n"), "\n")
	last := lines[len(lines)-1]
	sig := last[strings.LastIndex(last, " ")+1:]
	want, err := base64.StdEncoding.DecodeString(sig)
	require.NoError(t, err)
	k := len(strings.TrimRight(sig, "="))
	require.Less(t, k, len(sig), "a signature of 68 bytes ends in padding")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var other string
	for _, c := range alphabet {
		alt := sig[:k-1] + string(c) + sig[k:]
		if got, err := base64.StdEncoding.DecodeString(alt); alt != sig && err == nil && bytes.Equal(got, want) {
			other = alt
			break
		}
	}
	require.NotEmpty(t, other, "another writing of the same bytes")
	edited := strings.Replace(msg, sig, other, 1)
	_, _, err = tlog.Open([]byte(edited), origin, keys)
	require.ErrorIs(t, err, tlog.ErrMalformedNote)
}
