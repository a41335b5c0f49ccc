package sealed_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/sealed"
)

func TestSealOpen(t *testing.T) {
	aead, err := sealed.NewAEAD(bytes.Repeat([]byte{7}, sealed.KeySize))
	require.NoError(t, err)
	b, err := sealed.Seal(aead, "C-1", "inst-1", "key-1", []byte("hello"))
	require.NoError(t, err)
	require.True(t, sealed.Is(b))
	require.False(t, bytes.Contains(b, []byte("hello")))
	h, err := sealed.Parse(b)
	require.NoError(t, err)
	require.Equal(t, "C-1", h.Subject)
	require.Equal(t, "inst-1", h.InstanceID)
	require.Equal(t, "key-1", h.KeyID)
	pt, err := sealed.Open(aead, b)
	require.NoError(t, err)
	require.Equal(t, "hello", string(pt))

	// An empty plaintext seals too, and a wrong key does not open.
	empty, err := sealed.Seal(aead, "C-1", "inst-1", "key-1", nil)
	require.NoError(t, err)
	h, err = sealed.Parse(empty)
	require.NoError(t, err)
	pt, err = sealed.Open(aead, empty)
	require.NoError(t, err)
	require.Empty(t, pt)
	other, err := sealed.NewAEAD(bytes.Repeat([]byte{8}, sealed.KeySize))
	require.NoError(t, err)
	_, err = sealed.Open(other, empty)
	require.Error(t, err)

	_, err = sealed.NewAEAD([]byte("short"))
	require.Error(t, err)
	require.False(t, sealed.Is([]byte{0xc1, 'C'}))
}

func BenchmarkSeal(b *testing.B) {
	aead, _ := sealed.NewAEAD(bytes.Repeat([]byte{7}, sealed.KeySize))
	payload := bytes.Repeat([]byte{'x'}, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sealed.Seal(aead, "customer-0815", "0195f0c2-7d8e-7a1b-9c3d-4e5f6a7b8c9d", "0123456789abcdef", payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	aead, _ := sealed.NewAEAD(bytes.Repeat([]byte{7}, sealed.KeySize))
	s, _ := sealed.Seal(aead, "customer-0815", "0195f0c2-7d8e-7a1b-9c3d-4e5f6a7b8c9d", "0123456789abcdef", bytes.Repeat([]byte{'x'}, 64))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sealed.Open(aead, s); err != nil {
			b.Fatal(err)
		}
	}
}
