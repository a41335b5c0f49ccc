package history

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Bounds of a [ResultType]: how deep it nests (deeper parts, and a
// recursive type where it recurs, are described as any) and the longest
// array it describes.
const (
	MaxResultTypeDepth = 16
	MaxResultTypeArray = 1 << 16
)

var (
	timeType     = reflect.TypeFor[time.Time]()
	decoderTypes = []reflect.Type{
		reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
		reflect.TypeFor[msgpack.CustomDecoder](), reflect.TypeFor[msgpack.Unmarshaler](),
	}
)

// DescribeResultType describes t, the type a workflow decodes a task's
// result into. Parts that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler, msgpack decoders), interfaces, and kinds
// neither codec decodes are described as any: a result is not checked
// there.
func DescribeResultType(t reflect.Type) *ResultType {
	return of(t, map[reflect.Type]bool{}, 0)
}

func of(t reflect.Type, seen map[reflect.Type]bool, depth int) *ResultType {
	rt := &ResultType{Kind: "any", Name: t.String()}
	if t == timeType {
		rt.Kind = "time"
		return rt
	}
	if depth > MaxResultTypeDepth || seen[t] || decodesItself(t) {
		return rt
	}
	switch k := t.Kind(); k {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		rt.Kind = k.String()
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !decodesItself(t.Elem()) {
			rt.Kind = "bytes"
			return rt
		}
		rt.Kind, rt.Elem = "slice", of(t.Elem(), seen, depth+1)
	case reflect.Array:
		if t.Len() > MaxResultTypeArray {
			return rt
		}
		rt.Kind, rt.Len, rt.Elem = "array", t.Len(), of(t.Elem(), seen, depth+1)
	case reflect.Map:
		key := of(t.Key(), seen, depth+1)
		if !IsMapKeyKind(key.Kind) {
			return rt
		}
		rt.Kind, rt.Key, rt.Elem = "map", key, of(t.Elem(), seen, depth+1)
	case reflect.Pointer:
		rt.Kind, rt.Elem = "pointer", of(t.Elem(), seen, depth+1)
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		rt.Kind = "struct"
		for i := range t.NumField() {
			f := t.Field(i)
			embedded := f.Anonymous && (f.Type.Kind() == reflect.Struct ||
				f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct)
			if !f.IsExported() && !embedded {
				continue
			}
			rt.Fields = append(rt.Fields, ResultField{Name: f.Name, Tag: tags(f.Tag), Embedded: embedded,
				Type: *of(f.Type, seen, depth+1)})
		}
	}
	return rt
}

// decodesItself reports whether t or *t has a decoding method of its own.
func decodesItself(t reflect.Type) bool {
	for _, d := range decoderTypes {
		if t.Implements(d) || t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(d) {
			return true
		}
	}
	return false
}

// IsMapKeyKind reports whether a map whose key is of this kind can be
// described: strings and integers, the keys JSON objects have.
func IsMapKeyKind(kind string) bool {
	switch kind {
	case "string", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return true
	}
	return false
}

// tags keeps the json and msgpack parts of a field's tag.
func tags(tag reflect.StructTag) string {
	var parts []string
	for _, key := range []string{"json", "msgpack"} {
		if v, ok := tag.Lookup(key); ok {
			parts = append(parts, key+":"+strconv.Quote(v))
		}
	}
	return strings.Join(parts, " ")
}
