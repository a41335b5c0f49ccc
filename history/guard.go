package history

import (
	"encoding/binary"
	"fmt"
)

// maxDepth bounds the nesting of arrays and maps in decoded payloads; the
// decoder recurses once per level.
const maxDepth = 100

// checkMsgpack walks MessagePack data without decoding it and checks that
// every length it declares — of strings, binaries, extensions, arrays and
// maps — fits in the bytes that follow, that containers nest at most
// maxDepth deep, and that exactly one value fills the data. Decoders size
// their buffers by declared lengths, so without this walk a few damaged
// bytes claiming a 4 GiB string would make decoding allocate gigabytes.
// The walk is linear in len(b).
func checkMsgpack(b []byte) error {
	i := 0
	// stack holds, per open container, how many values it still holds.
	stack := make([]uint64, 1, 8)
	stack[0] = 1
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	skip := func(n uint64) bool {
		if n > uint64(len(b)-i) {
			return false
		}
		i += int(n)
		return true
	}
	length := func(size int) (uint64, bool) {
		if size > len(b)-i {
			return 0, false
		}
		var n uint64
		switch size {
		case 1:
			n = uint64(b[i])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += size
		return n, true
	}
	for len(stack) > 0 {
		if stack[len(stack)-1] == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		stack[len(stack)-1]--
		if i >= len(b) {
			return fail("truncated at byte %d", i)
		}
		c := b[i]
		i++
		ok, container := true, false
		var n uint64
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			// fixint, nil, false, true
		case c <= 0x8f: // fixmap
			n, container = 2*uint64(c&0x0f), true
		case c <= 0x9f: // fixarray
			n, container = uint64(c&0x0f), true
		case c <= 0xbf: // fixstr
			ok = skip(uint64(c & 0x1f))
		case c == 0xc4 || c == 0xd9: // bin8, str8
			n, ok = length(1)
			ok = ok && skip(n)
		case c == 0xc5 || c == 0xda: // bin16, str16
			n, ok = length(2)
			ok = ok && skip(n)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			n, ok = length(4)
			ok = ok && skip(n)
		case c == 0xc7, c == 0xc8, c == 0xc9: // ext8, ext16, ext32: length, type, data
			n, ok = length(1 << (c - 0xc7))
			ok = ok && skip(n+1)
		case c == 0xca: // float32
			ok = skip(4)
		case c == 0xcb: // float64
			ok = skip(8)
		case c >= 0xcc && c <= 0xcf: // uint8..uint64
			ok = skip(1 << (c - 0xcc))
		case c >= 0xd0 && c <= 0xd3: // int8..int64
			ok = skip(1 << (c - 0xd0))
		case c >= 0xd4 && c <= 0xd8: // fixext1..fixext16: type, data
			ok = skip(1 + 1<<(c-0xd4))
		case c == 0xdc: // array16
			n, ok = length(2)
			container = true
		case c == 0xdd: // array32
			n, ok = length(4)
			container = true
		case c == 0xde: // map16
			n, ok = length(2)
			n, container = 2*n, true
		case c == 0xdf: // map32
			n, ok = length(4)
			n, container = 2*n, true
		default: // 0xc1 is never used
			return fail("invalid code 0x%02x at byte %d", c, i-1)
		}
		if !ok {
			return fail("length at byte %d exceeds the data", i)
		}
		if container && n > 0 {
			// Every value still to read takes at least one byte.
			if n > uint64(len(b)-i) {
				return fail("container at byte %d claims %d values in %d bytes", i, n, len(b)-i)
			}
			if len(stack) >= maxDepth {
				return fail("nesting deeper than %d", maxDepth)
			}
			stack = append(stack, n)
		}
	}
	if i != len(b) {
		return fail("%d trailing bytes", len(b)-i)
	}
	return nil
}
