package jsonarg

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	v, err := Parse(`{"n": 3, "x": 1.5, "l": [2, "a"]}`)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"n": int64(3), "x": 1.5, "l": []any{int64(2), "a"}}, v)

	_, err = Parse(`{"n":`)
	require.EqualError(t, err, "not JSON: unexpected EOF")
	_, err = Parse(`1 2`)
	require.EqualError(t, err, "more than one JSON value")
	_, err = Parse(`[1e400]`)
	require.EqualError(t, err, "number 1e400 is out of range")
}
