// Package jsonarg parses a JSON value a person typed (a task result on the
// command line or in the console) for the engine: whole numbers become
// int64 so that they decode into int fields, other numbers float64.
package jsonarg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Parse decodes s, which must hold exactly one JSON value. Its errors
// read as the end of a sentence about the value: "not JSON: …", "more
// than one JSON value", "number … is out of range".
func Parse(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return Numbers(v)
}

// Numbers replaces the json.Numbers in v, a value decoded with
// json.Decoder.UseNumber, by int64 for whole numbers and float64 for the
// others; a number that fits neither is an error.
func Numbers(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", v)
		}
		return f, nil
	case []any:
		for i := range v {
			n, err := Numbers(v[i])
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
	case map[string]any:
		for k := range v {
			n, err := Numbers(v[k])
			if err != nil {
				return nil, err
			}
			v[k] = n
		}
	}
	return v, nil
}
