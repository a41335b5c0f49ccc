//go:build !cgo

package oracle

// Without cgo the driver (github.com/godror/godror, a cgo package) is not
// compiled in: the package builds, its pure-Go parts (options, SQL,
// migrations, error translation) work and are tested, and New returns
// ErrNeedsCgo.

// cgoBuild reports whether the driver is compiled in.
const cgoBuild = false

// largeBlob is never called in a build without the driver: New fails first.
func largeBlob(b []byte) any { return b }

// largeText is never called in a build without the driver.
func largeText(s string) any { return s }
