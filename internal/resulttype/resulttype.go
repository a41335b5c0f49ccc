// Package resulttype turns a human task's result that a person typed as
// JSON into a value of the type the workflow decodes it into, described
// by the [history.ResultType] its TaskCreated records, for a client that
// does not have the type: the console and the command line.
//
// The JSON is decoded as encoding/json decodes it into the workflow's
// type — keys match field names or json tags without regard to case —
// and strictly: an unknown key, a value of the wrong kind or a number out
// of range is an error. The value it returns has the type's fields with
// their json and msgpack tags, so that either codec encodes it under the
// keys the workflow's decoder looks for.
package resulttype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/jsonarg"
)

// maxDepth bounds how deep a rebuilt type nests.
const maxDepth = history.MaxResultTypeDepth

// maxArray bounds the length of an array type rebuilt from a description.
const maxArray = history.MaxResultTypeArray

var (
	timeType  = reflect.TypeFor[time.Time]()
	anyType   = reflect.TypeFor[any]()
	bytesType = reflect.TypeFor[[]byte]()
	basic     = map[string]reflect.Type{
		"bool": reflect.TypeFor[bool](), "string": reflect.TypeFor[string](),
		"int": reflect.TypeFor[int](), "int8": reflect.TypeFor[int8](), "int16": reflect.TypeFor[int16](),
		"int32": reflect.TypeFor[int32](), "int64": reflect.TypeFor[int64](),
		"uint": reflect.TypeFor[uint](), "uint8": reflect.TypeFor[uint8](), "uint16": reflect.TypeFor[uint16](),
		"uint32": reflect.TypeFor[uint32](), "uint64": reflect.TypeFor[uint64](),
		"float32": reflect.TypeFor[float32](), "float64": reflect.TypeFor[float64](),
		"bytes": bytesType, "time": timeType, "any": anyType,
	}
)

// Type rebuilds a Go type from its description: a type with the same
// kinds, fields and tags, which both codecs encode as they would the
// original. A description no Go type has is an error.
func Type(rt *history.ResultType) (t reflect.Type, err error) {
	defer func() {
		// reflect.StructOf panics on fields it cannot make (a stored
		// description is input like any other).
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("result type %s: %v", rt.Name, r)
		}
	}()
	return build(rt, 0)
}

func build(rt *history.ResultType, depth int) (reflect.Type, error) {
	if rt == nil {
		return nil, errors.New("missing type")
	}
	if depth > maxDepth+1 {
		return nil, errors.New("type nests too deep")
	}
	if t, ok := basic[rt.Kind]; ok {
		return t, nil
	}
	switch rt.Kind {
	case "slice", "array", "pointer":
		elem, err := build(rt.Elem, depth+1)
		if err != nil {
			return nil, err
		}
		switch rt.Kind {
		case "slice":
			return reflect.SliceOf(elem), nil
		case "array":
			if rt.Len < 0 || rt.Len > maxArray {
				return nil, fmt.Errorf("array of %d elements", rt.Len)
			}
			return reflect.ArrayOf(rt.Len, elem), nil
		}
		return reflect.PointerTo(elem), nil
	case "map":
		if rt.Key == nil || !history.IsMapKeyKind(rt.Key.Kind) {
			return nil, errors.New("map key is not a string or an integer")
		}
		key, err := build(rt.Key, depth+1)
		if err != nil {
			return nil, err
		}
		elem, err := build(rt.Elem, depth+1)
		if err != nil {
			return nil, err
		}
		return reflect.MapOf(key, elem), nil
	case "struct":
		fields := make([]reflect.StructField, len(rt.Fields))
		for i := range rt.Fields {
			f := &rt.Fields[i]
			ft, err := build(&f.Type, depth+1)
			if err != nil {
				return nil, err
			}
			fields[i] = reflect.StructField{Name: exported(f.Name), Type: ft, Tag: reflect.StructTag(f.Tag), Anonymous: f.Embedded}
		}
		return reflect.StructOf(fields), nil
	}
	return nil, fmt.Errorf("unknown kind %q", rt.Kind)
}

// exported is name with an upper-case first letter: an embedded struct
// of an unexported type has a lower-case name, which reflect.StructOf
// does not take; the name of an embedded field is not one of its keys.
func exported(name string) string {
	r, n := utf8.DecodeRuneInString(name)
	return string(unicode.ToUpper(r)) + name[n:]
}

// Decode decodes data, one JSON value, into a new value of the type rt
// describes, as encoding/json would into the original type, refusing
// unknown keys. Numbers where the type holds any become int64 when
// whole, float64 otherwise (as in jsonarg.Parse).
func Decode(rt *history.ResultType, data []byte) (any, error) {
	t, err := Type(rt)
	if err != nil {
		return nil, err
	}
	v := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, readable(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	if err := numbers(v.Elem()); err != nil {
		return nil, err
	}
	return v.Elem().Interface(), nil
}

// readable rewrites encoding/json's errors about the rebuilt type, whose
// struct types have no name: "Go struct field .Approved" reads "field
// Approved".
func readable(err error) error {
	msg := strings.ReplaceAll(err.Error(), "Go struct field .", "field ")
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

// numbers replaces the json.Numbers that UseNumber left where v holds
// any.
func numbers(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		n, err := jsonarg.Numbers(v.Interface())
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(&n).Elem())
	case reflect.Pointer:
		if !v.IsNil() {
			return numbers(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if err := numbers(v.Field(i)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := numbers(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			if err := numbers(e); err != nil {
				return err
			}
			v.SetMapIndex(iter.Key(), e)
		}
	}
	return nil
}

// Example returns the zero value of the type rt describes as JSON, keys
// as encoding/json writes them: a template of a result to fill in.
func Example(rt *history.ResultType) (string, error) {
	t, err := Type(rt)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(reflect.Zero(t).Interface())
	if err != nil {
		return "", err
	}
	return string(b), nil
}
