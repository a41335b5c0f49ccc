package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/query"
)

// The keys of a stored attribute value: each value is a JSON object with
// one of them, naming its type (see migration 0006).
const (
	tagKeyword = "k"
	tagInt     = "i"
	tagFloat   = "f"
	tagBool    = "b"
	tagTime    = "t"
	tagList    = "l"
)

// typeTag returns the key under which values of type t are stored, "" for
// no type.
func typeTag(t query.Type) string {
	switch t {
	case query.Keyword:
		return tagKeyword
	case query.Int:
		return tagInt
	case query.Float:
		return tagFloat
	case query.Bool:
		return tagBool
	case query.Time:
		return tagTime
	case query.KeywordList:
		return tagList
	}
	return ""
}

// appendAttrValue appends the stored form of v, {"<tag>": <value>}, to b.
func appendAttrValue(b []byte, v query.Value) ([]byte, error) {
	tag := typeTag(v.Type)
	if tag == "" {
		return nil, fmt.Errorf("attribute value of unknown type %d", v.Type)
	}
	b = append(b, `{"`...)
	b = append(b, tag...)
	b = append(b, `":`...)
	var err error
	switch v.Type {
	case query.Keyword:
		if b, err = appendJSONString(b, v.Str); err != nil {
			return nil, err
		}
	case query.Int:
		b = strconv.AppendInt(b, v.Int, 10)
	case query.Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return nil, errors.New("float is not finite")
		}
		// The shortest decimal that reads back as the same float64, in a
		// form JSON takes ("1e+21", "5e-324").
		b = strconv.AppendFloat(b, v.Float, 'g', -1, 64)
	case query.Bool:
		b = strconv.AppendBool(b, v.Bool)
	case query.Time:
		b = strconv.AppendInt(b, v.Time.UnixMicro(), 10)
	case query.KeywordList:
		b = append(b, '[')
		for i, s := range v.List {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, s); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, the rest as it is (keywords are valid UTF-8,
// which query.Of checks).
func appendJSONString(b []byte, s string) ([]byte, error) {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	if !utf8.ValidString(s) {
		return nil, errors.New("keyword is not valid UTF-8")
	}
	return append(b, '"'), nil
}

// encodeAttrs returns the stored form of a record's attributes, nil (SQL
// NULL) when none is set. Names are written in sorted order, so a record
// whose attributes did not change encodes to the same bytes.
func encodeAttrs(attrs map[string]query.Value) ([]byte, error) {
	names := make([]string, 0, len(attrs))
	for name, v := range attrs {
		if !unset(v) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	b := make([]byte, 0, 32*len(names))
	b = append(b, '{')
	var err error
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendJSONString(b, name); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendAttrValue(b, attrs[name]); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
	}
	return append(b, '}'), nil
}

// unset reports whether v is no value: the zero Value, or an empty list.
func unset(v query.Value) bool {
	return v.Type == query.Invalid || (v.Type == query.KeywordList && len(v.List) == 0)
}

// storedValue is the stored form of one attribute value.
type storedValue struct {
	K *string  `json:"k"`
	I *int64   `json:"i"`
	F *float64 `json:"f"`
	B *bool    `json:"b"`
	T *int64   `json:"t"`
	L []string `json:"l"`
}

// value returns the query.Value of a stored value.
func (s *storedValue) value() (query.Value, error) {
	switch {
	case s.K != nil:
		return query.Value{Type: query.Keyword, Str: *s.K}, nil
	case s.I != nil:
		return query.Value{Type: query.Int, Int: *s.I}, nil
	case s.F != nil:
		return query.Value{Type: query.Float, Float: *s.F}, nil
	case s.B != nil:
		return query.Value{Type: query.Bool, Bool: *s.B}, nil
	case s.T != nil:
		return query.Value{Type: query.Time, Time: time.UnixMicro(*s.T).UTC()}, nil
	case s.L != nil:
		return query.Value{Type: query.KeywordList, List: s.L}, nil
	}
	return query.Value{}, errors.New("no value of a known type")
}

// decodeAttrs reads the stored form of a record's attributes; nil when
// data is empty (NULL).
func decodeAttrs(data []byte) (map[string]query.Value, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var stored map[string]storedValue
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	if len(stored) == 0 {
		return nil, nil
	}
	out := make(map[string]query.Value, len(stored))
	for name, s := range stored {
		v, err := s.value()
		if err != nil {
			return nil, fmt.Errorf("decode attribute %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
