package timeline

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// PayloadWidth is roughly how many characters a rendered payload keeps.
const PayloadWidth = 60

const (
	// renderBudget stops rendering a decoded value once this much text is
	// written; the detail keeps far less anyway.
	renderBudget = 4 * PayloadWidth
	// maxDepth bounds how deep nested values are rendered.
	maxDepth = 8
)

// DecodeMsgpack renders a payload written by the msgpack codec: maps (and
// structs) as {key: value} with sorted keys, arrays as [a, b], strings
// quoted, times in UTC. Bytes that do not decode into an any — corrupt
// bytes, but also maps whose keys are not strings — are described by their
// length and first bytes in hex (see [Undecodable]). It never panics.
func DecodeMsgpack(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var v any
	if err := history.Decode(b, &v); err != nil {
		return Undecodable(b)
	}
	return renderValue(v)
}

// DecodeJSON renders a payload written by the JSON codec, compacted.
// Bytes that are not JSON are described as by [DecodeMsgpack].
func DecodeJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return Undecodable(b)
	}
	return buf.String()
}

// Undecodable describes bytes that could not be decoded: their length and
// their first bytes in hex: "<5 bytes: c1ffee0102>".
func Undecodable(b []byte) string {
	const show = 8
	if len(b) == 0 {
		return "<0 bytes>"
	}
	if len(b) == 1 {
		return "<1 byte: " + hex.EncodeToString(b) + ">"
	}
	if len(b) <= show {
		return fmt.Sprintf("<%d bytes: %s>", len(b), hex.EncodeToString(b))
	}
	return fmt.Sprintf("<%d bytes: %s…>", len(b), hex.EncodeToString(b[:show]))
}

// renderValue renders a value decoded into any, within renderBudget.
func renderValue(v any) string {
	r := renderer{}
	r.value(v, 0)
	return r.b.String()
}

type renderer struct {
	b strings.Builder
}

func (r *renderer) full() bool { return r.b.Len() >= renderBudget }

func (r *renderer) value(v any, depth int) {
	if r.full() {
		return
	}
	if depth > maxDepth {
		r.b.WriteString("…")
		return
	}
	switch v := v.(type) {
	case nil:
		r.b.WriteString("nil")
	case string:
		r.b.WriteString(strconv.Quote(Shorten(v, renderBudget)))
	case []byte:
		fmt.Fprintf(&r.b, "<%d bytes>", len(v))
	case bool:
		r.b.WriteString(strconv.FormatBool(v))
	case float32:
		r.b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
	case float64:
		r.b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		fmt.Fprint(&r.b, v)
	case time.Time:
		r.b.WriteString(v.UTC().Format(TimeFormat))
	case []any:
		r.b.WriteByte('[')
		for i, e := range v {
			if r.full() {
				break
			}
			if i > 0 {
				r.b.WriteString(", ")
			}
			r.value(e, depth+1)
		}
		r.b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.b.WriteByte('{')
		for i, k := range keys {
			if r.full() {
				break
			}
			if i > 0 {
				r.b.WriteString(", ")
			}
			r.b.WriteString(Shorten(k, PayloadWidth))
			r.b.WriteString(": ")
			r.value(v[k], depth+1)
		}
		r.b.WriteByte('}')
	default:
		r.b.WriteString(Shorten(fmt.Sprint(v), PayloadWidth))
	}
}
