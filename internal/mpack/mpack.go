// Package mpack writes and reads the subset of MessagePack that
// Chronicle's hand-written codecs use (history's attributes, a round's
// snapshot): exactly the bytes github.com/vmihailenco/msgpack/v5 writes
// for the same values with compact integers, so that stored data and
// hashes do not depend on which encoder wrote them. A [Reader] accepts
// only that layout; its callers fall back to the library decoder when it
// fails.
package mpack

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// Count returns how many of conds are true (the number of fields a map
// header announces).
func Count(conds ...bool) int {
	n := 0
	for _, c := range conds {
		if c {
			n++
		}
	}
	return n
}

// AppendMapLen appends a map header of n entries.
func AppendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// AppendArrayLen appends an array header of n elements.
func AppendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

// AppendStr appends a string.
func AppendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// AppendStrings appends a string slice as an array of strings.
func AppendStrings(b []byte, ss []string) []byte {
	b = AppendArrayLen(b, len(ss))
	for _, s := range ss {
		b = AppendStr(b, s)
	}
	return b
}

// AppendBin appends a byte slice as binary data.
func AppendBin(b []byte, p []byte) []byte {
	switch n := len(p); {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

// AppendInt appends an integer in its most compact form.
func AppendInt(b []byte, n int64) []byte {
	if n >= 0 {
		switch u := uint64(n); {
		case u <= math.MaxInt8:
			return append(b, byte(u))
		case u <= math.MaxUint8:
			return append(b, 0xcc, byte(u))
		case u <= math.MaxUint16:
			return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(u))
		case u <= math.MaxUint32:
			return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(u))
		default:
			return binary.BigEndian.AppendUint64(append(b, 0xcf), u)
		}
	}
	switch {
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// AppendTime writes the timestamp extension (type -1) in its 4-, 8- or
// 12-byte form.
func AppendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = binary.BigEndian.AppendUint32(append(b, 0xc7, 12, 0xff), uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}

// Reader reads what the Append functions write; any other byte makes it
// fail (OK false), and every later read returns zero values.
type Reader struct {
	// Buf is the input, Off the offset of the next byte to read.
	Buf []byte
	Off int
	// OK is false once a read found a byte it does not expect (set it
	// to true to start).
	OK bool
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if !r.OK || r.Off >= len(r.Buf) {
		r.OK = false
		return 0
	}
	c := r.Buf[r.Off]
	r.Off++
	return c
}

// Take reads n bytes without copying them.
func (r *Reader) Take(n int) []byte {
	if !r.OK || n < 0 || n > len(r.Buf)-r.Off {
		r.OK = false
		return nil
	}
	p := r.Buf[r.Off : r.Off+n]
	r.Off += n
	return p
}

// Uint reads a big-endian unsigned integer of size bytes (1, 2, 4 or 8).
func (r *Reader) Uint(size int) uint64 {
	p := r.Take(size)
	if !r.OK {
		return 0
	}
	switch size {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(p))
	case 4:
		return uint64(binary.BigEndian.Uint32(p))
	}
	return binary.BigEndian.Uint64(p)
}

// MapLen reads a map header and returns its number of entries.
func (r *Reader) MapLen() int {
	switch c := r.Byte(); {
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return int(r.Uint(2))
	}
	r.OK = false
	return 0
}

// ArrayLen reads an array header and returns its number of elements.
func (r *Reader) ArrayLen() int {
	switch c := r.Byte(); {
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(r.Uint(2))
	}
	r.OK = false
	return 0
}

// StrBytes reads a string's bytes without copying them.
func (r *Reader) StrBytes() []byte {
	var n int
	switch c := r.Byte(); {
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(r.Uint(1))
	case c == 0xda:
		n = int(r.Uint(2))
	case c == 0xdb:
		n = int(r.Uint(4))
	default:
		r.OK = false
	}
	return r.Take(n)
}

// Str reads a string.
func (r *Reader) Str() string { return string(r.StrBytes()) }

// Strings reads a non-empty string slice.
func (r *Reader) Strings() []string {
	n := r.ArrayLen()
	if n == 0 || n > len(r.Buf)-r.Off {
		r.OK = false
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.Str()
	}
	return ss
}

// Bin reads a non-empty byte slice into a copy of its own.
func (r *Reader) Bin() []byte {
	var n int
	switch r.Byte() {
	case 0xc4:
		n = int(r.Uint(1))
	case 0xc5:
		n = int(r.Uint(2))
	case 0xc6:
		n = int(r.Uint(4))
	default:
		r.OK = false
	}
	if n == 0 {
		r.OK = false
	}
	return slices.Clone(r.Take(n))
}

// Bool reads a boolean.
func (r *Reader) Bool() bool {
	switch r.Byte() {
	case 0xc3:
		return true
	case 0xc2:
		return false
	}
	r.OK = false
	return false
}

// Int reads an integer of any MessagePack integer form that fits an int64.
func (r *Reader) Int() int64 {
	c := r.Byte()
	switch {
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.Uint(1))
	case 0xcd:
		return int64(r.Uint(2))
	case 0xce:
		return int64(r.Uint(4))
	case 0xcf:
		u := r.Uint(8)
		if u > math.MaxInt64 {
			r.OK = false
		}
		return int64(u)
	case 0xd0:
		return int64(int8(r.Uint(1)))
	case 0xd1:
		return int64(int16(r.Uint(2)))
	case 0xd2:
		return int64(int32(r.Uint(4)))
	case 0xd3:
		return int64(r.Uint(8))
	}
	r.OK = false
	return 0
}

// Time reads the timestamp extension in the forms AppendTime writes.
func (r *Reader) Time() time.Time {
	switch r.Byte() {
	case 0xd6:
		if r.Byte() != 0xff {
			break
		}
		return time.Unix(int64(r.Uint(4)), 0).UTC()
	case 0xd7:
		if r.Byte() != 0xff {
			break
		}
		data := r.Uint(8)
		return time.Unix(int64(data&0x00000003ffffffff), int64(data>>34)).UTC()
	case 0xc7:
		if r.Byte() != 12 || r.Byte() != 0xff {
			break
		}
		nsec := r.Uint(4)
		return time.Unix(int64(r.Uint(8)), int64(nsec)).UTC()
	}
	r.OK = false
	return time.Time{}
}

// Key reads the next key of a map whose keys must be names, in order,
// and returns its index (-1, failing, for any other key).
func (r *Reader) Key(names []string, next *int) int {
	key := r.StrBytes()
	for i := *next; i < len(names); i++ {
		if names[i] == string(key) {
			*next = i + 1
			return i
		}
	}
	r.OK = false
	return -1
}

// Float64 reads a 64-bit float.
func (r *Reader) Float64() float64 {
	if r.Byte() != 0xcb {
		r.OK = false
		return 0
	}
	return math.Float64frombits(r.Uint(8))
}
