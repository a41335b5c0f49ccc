package postgres

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/query"
)

// TestAttrsEncodingRoundTrips encodes attribute maps by hand and decodes
// them with encoding/json: every keyword (each control character, quotes,
// backslashes, any rune) and every float (shortest form, extremes) comes
// back exactly. Random strings use a seed printed on failure.
func TestAttrsEncodingRoundTrips(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	var ctl strings.Builder
	for c := rune(1); c < 0x20; c++ {
		ctl.WriteRune(c)
	}
	strs := []string{"", ctl.String(), `"\/`, "é日本\u2028\u2029\U0010FFFF\x7f", "<&>"}
	for range 200 {
		var sb strings.Builder
		for range rng.IntN(20) {
			r := rune(rng.IntN(0x11000))
			if r == 0 || !utf8.ValidRune(r) {
				r = 'x'
			}
			sb.WriteRune(r)
		}
		strs = append(strs, sb.String())
	}
	floats := []float64{0, math.Copysign(0, -1), 0.1, 1e21, 1e-7, -1e300, math.MaxFloat64, math.SmallestNonzeroFloat64, 123.45}
	for range 200 {
		floats = append(floats, math.Float64frombits(rng.Uint64()))
	}
	for i, s := range strs {
		f := floats[i%len(floats)]
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 1
		}
		in := map[string]query.Value{
			"k": {Type: query.Keyword, Str: s}, "l": {Type: query.KeywordList, List: []string{s, "a"}},
			"f": {Type: query.Float, Float: f},
		}
		data, err := encodeAttrs(in)
		require.NoError(t, err, "seed %d", seed)
		require.True(t, json.Valid(data), "seed %d: %q", seed, data)
		out, err := decodeAttrs(data)
		require.NoError(t, err, "seed %d", seed)
		require.Equal(t, s, out["k"].Str, "seed %d", seed)
		require.Equal(t, []string{s, "a"}, out["l"].List, "seed %d", seed)
		require.Equal(t, math.Float64bits(f), math.Float64bits(out["f"].Float), "seed %d: %v", seed, f)
	}
	_, err := encodeAttrs(map[string]query.Value{"f": {Type: query.Float, Float: math.NaN()}})
	require.Error(t, err)
	_, err = encodeAttrs(map[string]query.Value{"k": {Type: query.Keyword, Str: "\xff"}})
	require.Error(t, err)
}
