package history

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"

	"github.com/chronicleflow/chronicle/internal/mpack"
	"github.com/chronicleflow/chronicle/query"
)

// AppendMsgpack appends the encoding [SearchAttributeMap.EncodeMsgpack]
// writes, by hand: a map of the entries in name order, each value a map
// of its non-empty fields as the reflective encoder writes a
// query.Value. The hand-written codecs of events and snapshots use it.
func (m SearchAttributeMap) AppendMsgpack(b []byte) []byte {
	if m == nil {
		return append(b, 0xc0)
	}
	b = mpack.AppendMapLen(b, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = appendValue(mpack.AppendStr(b, k), m[k])
	}
	return b
}

func appendValue(b []byte, v query.Value) []byte {
	b = mpack.AppendMapLen(b, 1+mpack.Count(v.Str != "", v.Int != 0, v.Float != 0, v.Bool, !v.Time.IsZero(), len(v.List) > 0))
	b = mpack.AppendInt(mpack.AppendStr(b, "t"), int64(v.Type))
	if v.Str != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "s"), v.Str)
	}
	if v.Int != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "i"), v.Int)
	}
	if v.Float != 0 {
		b = binary.BigEndian.AppendUint64(append(mpack.AppendStr(b, "f"), 0xcb), math.Float64bits(v.Float))
	}
	if v.Bool {
		b = append(mpack.AppendStr(b, "b"), 0xc3)
	}
	if !v.Time.IsZero() {
		b = mpack.AppendTime(mpack.AppendStr(b, "tm"), v.Time)
	}
	if len(v.List) > 0 {
		b = mpack.AppendStrings(mpack.AppendStr(b, "l"), v.List)
	}
	return b
}

// ReadSearchAttributeMap reads a non-empty map that AppendMsgpack wrote
// at the start of data and returns it with the number of bytes it took;
// ok is false for anything else (an empty or nil map, a duplicate name,
// another layout), which the caller leaves to the reflective decoder.
// Times come back in UTC.
func ReadSearchAttributeMap(data []byte) (m SearchAttributeMap, n int, ok bool) {
	r := mpack.Reader{Buf: data, OK: true}
	m = readAttributeMap(&r)
	if !r.OK {
		return nil, 0, false
	}
	return m, r.Off, true
}

func readAttributeMap(r *mpack.Reader) SearchAttributeMap {
	n := r.MapLen()
	if n == 0 || n > len(r.Buf)-r.Off {
		r.OK = false
		return nil
	}
	m := make(SearchAttributeMap, n)
	for ; n > 0 && r.OK; n-- {
		k := r.Str()
		if _, dup := m[k]; dup {
			r.OK = false
			return nil
		}
		m[k] = readValue(r)
	}
	return m
}

var valueFields = []string{"t", "s", "i", "f", "b", "tm", "l"}

func readValue(r *mpack.Reader) query.Value {
	var v query.Value
	next := 0
	for n := r.MapLen(); n > 0 && r.OK; n-- {
		switch r.Key(valueFields, &next) {
		case 0:
			t := r.Int()
			if t < 0 || t > math.MaxUint8 {
				r.OK = false
			}
			v.Type = query.Type(t)
		case 1:
			v.Str = r.Str()
		case 2:
			v.Int = r.Int()
		case 3:
			v.Float = r.Float64()
		case 4:
			v.Bool = r.Bool()
		case 5:
			v.Time = r.Time()
		case 6:
			v.List = r.Strings()
		}
	}
	if next == 0 {
		r.OK = false // the type is always written
	}
	return v
}
