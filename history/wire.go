package history

import (
	"encoding/binary"
	"fmt"
)

// The canonical event layout is written by hand with a small subset of
// MessagePack (arrays, int64, str, bin) so that the bytes under the hash
// never depend on a library's choices.

func appendInt(b []byte, v int64) []byte {
	b = append(b, 0xd3)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func appendStr(b []byte, s string) []byte {
	b = appendLen(b, len(s), 0xd9, 0xda, 0xdb)
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	b = appendLen(b, len(p), 0xc4, 0xc5, 0xc6)
	return append(b, p...)
}

func appendLen(b []byte, n int, c8, c16, c32 byte) []byte {
	switch {
	case n <= 0xff:
		return append(b, c8, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, c32), uint32(n))
	}
}

// reader decodes the canonical layout. The first error sticks; later calls
// return zero values, so callers check err once at the end.
type reader struct {
	buf []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf)-r.off {
		r.fail("need %d bytes at offset %d, have %d", n, r.off, len(r.buf)-r.off)
		return nil
	}
	p := r.buf[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) byte() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *reader) arrayLen() int {
	c := r.byte()
	if r.err == nil && c&0xf0 != 0x90 {
		r.fail("expected array, found 0x%02x", c)
		return 0
	}
	return int(c & 0x0f)
}

func (r *reader) int() int64 {
	if c := r.byte(); r.err == nil && c != 0xd3 {
		r.fail("expected int64, found 0x%02x", c)
	}
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (r *reader) length(c8, c16, c32 byte, what string) int {
	c := r.byte()
	if r.err != nil {
		return 0
	}
	switch c {
	case c8:
		return int(r.byte())
	case c16:
		p := r.take(2)
		if p == nil {
			return 0
		}
		return int(binary.BigEndian.Uint16(p))
	case c32:
		p := r.take(4)
		if p == nil {
			return 0
		}
		return int(binary.BigEndian.Uint32(p))
	}
	r.fail("expected %s, found 0x%02x", what, c)
	return 0
}

func (r *reader) str() string {
	return string(r.take(r.length(0xd9, 0xda, 0xdb, "str")))
}

func (r *reader) bin() []byte {
	p := r.take(r.length(0xc4, 0xc5, 0xc6, "bin"))
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}
