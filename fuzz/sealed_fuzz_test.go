package fuzz_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/sealed"
)

// FuzzSealedPayload: any bytes parse or fail with ErrMalformed, and what
// parses opens or fails; nothing panics, and nothing but a sealed
// payload opens.
func FuzzSealedPayload(f *testing.F) {
	aead, err := sealed.NewAEAD(bytes.Repeat([]byte{7}, sealed.KeySize))
	require.NoError(f, err)
	good, err := sealed.Seal(aead, "C-1", "inst-1", "key-1", []byte("hello"))
	require.NoError(f, err)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{0xc1, 'C', 'S', 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0xc1, 'C', 'S', 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := sealed.Parse(b); err != nil {
			require.ErrorIs(t, err, sealed.ErrMalformed)
			_, err = sealed.Open(aead, b)
			require.ErrorIs(t, err, sealed.ErrMalformed)
			return
		}
		pt, err := sealed.Open(aead, b)
		if err == nil && !bytes.Equal(b, good) {
			// Only a sealed payload authenticates: the fuzzer cannot
			// forge a tag.
			require.Equal(t, "hello", string(pt), "forged payload opened: %x", b)
		}
	})
}
