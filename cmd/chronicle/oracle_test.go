package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOracleStoreWithoutAClient: with no Oracle client library (or in a
// build without cgo) an oracle:// store is refused with the driver's
// reason, and the tool exits 1 instead of crashing.
func TestOracleStoreWithoutAClient(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--store", "oracle://chronicle:secret@127.0.0.1:1/NOSUCH", "instances", "list"}, &stdout, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Regexp(t, `chronicle: oracle: .*(DPI-1047|ORA-|needs a cgo build)`, stderr.String())
	require.Empty(t, stdout.String())
}
