//go:build cgo

package oracle

import (
	"bytes"
	"strings"

	"github.com/godror/godror"
)

// This is the one file that imports the driver: it registers "godror"
// with database/sql and builds the values that need its types. A build
// without cgo gets driver_nocgo.go instead, so programs that use other
// providers build without cgo or Oracle Instant Client.

// cgoBuild reports whether the driver is compiled in.
const cgoBuild = true

// largeBlob binds bytes too long for a RAW bind (which SQL caps at 2,000
// bytes) as a temporary BLOB, which every SQL context accepts.
func largeBlob(b []byte) any { return godror.Lob{Reader: bytes.NewReader(b)} }

// largeText binds a string too long for a VARCHAR2 bind as a temporary
// CLOB.
func largeText(s string) any { return godror.Lob{Reader: strings.NewReader(s), IsClob: true} }
