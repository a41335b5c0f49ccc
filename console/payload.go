package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
)

// maxShown bounds the text of one rendered payload; the rest is cut.
const maxShown = 64 << 10

// payload renders a user payload for people: decoded with the engine's
// codec and indented as JSON; "" when there is none, and a description of
// its bytes when it does not decode. The template escapes the result.
func (c *console) payload(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return pretty(c.decoded(b))
}

// decoded returns a payload decoded into a value that encodes as JSON, or
// a description of bytes that do not decode.
func (c *console) decoded(b []byte) (v any) {
	defer func() {
		if recover() != nil {
			v = timeline.Undecodable(b)
		}
	}()
	if err := c.engine.Decode(b, &v); err != nil {
		if _, sealed := chronicle.SealedSubject(b); sealed {
			return chronicle.ErasedText(err)
		}
		return timeline.Undecodable(b)
	}
	if _, err := json.Marshal(v); err != nil {
		return timeline.Undecodable(b)
	}
	return v
}

// pretty renders v as indented JSON (v must encode), cut at maxShown.
func pretty(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // html/template escapes what it shows
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimRight(buf.String(), "\n")
	if len(s) > maxShown {
		s = strings.ToValidUTF8(s[:maxShown], "") + "\n… (cut: " + plural(len(s), "byte") + " in all)"
	}
	return s
}

// attributes renders an event's attributes as indented JSON with their
// user payloads decoded; attributes that do not decode are described.
func (c *console) attributes(kind history.Kind, payload []byte) string {
	a, err := history.DecodeAttributes(kind, payload)
	if err != nil {
		return "undecodable attributes " + timeline.Undecodable(payload) + ": " + err.Error()
	}
	return pretty(c.plain(reflect.ValueOf(a)))
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

// plain turns attributes into maps, lists and scalars for JSON: fields by
// their json names (empty ones with omitempty left out), durations as
// text, times in UTC and byte fields (user payloads) decoded with the
// engine's codec.
func (c *console) plain(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return c.plain(v.Elem())
	case reflect.Struct:
		if v.Type() == timeType {
			return when(v.Interface().(time.Time))
		}
		m := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if strings.Contains(opts, "omitempty") && v.Field(i).IsZero() {
				continue
			}
			m[name] = c.plain(v.Field(i))
		}
		return m
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Len() == 0 {
				return nil
			}
			return c.decoded(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = c.plain(v.Index(i))
		}
		return out
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = c.plain(it.Value())
		}
		return m
	case reflect.Int64:
		if v.Type() == durationType {
			return time.Duration(v.Int()).String()
		}
	}
	if !v.CanInterface() {
		return nil
	}
	return v.Interface()
}
