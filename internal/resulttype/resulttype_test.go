package resulttype

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
)

type approval struct {
	Approved bool
	Amount   int
	Note     string `json:"comment" msgpack:"note"`
	Base
	Lines []line
	When  time.Time
	Extra map[string]any
	//lint:ignore U1000 an unexported field, which the description leaves out
	private int
}

// Base is embedded: its fields are promoted.
type Base struct{ Ref string }

type line struct {
	SKU string `json:"sku" msgpack:"sku"`
	Qty int8
}

// codecs encode a value and decode it into out, as the workflow side
// does with each codec.
var codecs = map[string]func(v, out any) error{
	"msgpack": func(v, out any) error {
		b, err := history.Encode(v)
		if err != nil {
			return err
		}
		return history.Decode(b, out)
	},
	"json": func(v, out any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, out)
	},
}

func TestDecodeMatchesTheWorkflowsType(t *testing.T) {
	t.Parallel()
	rt := history.DescribeResultType(reflect.TypeFor[approval]())
	var names []string
	for _, f := range rt.Fields {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"Approved", "Amount", "Note", "Base", "Lines", "When", "Extra"}, names)
	// The description survives the history's encoding.
	b, err := history.Encode(rt)
	require.NoError(t, err)
	var stored history.ResultType
	require.NoError(t, history.Decode(b, &stored))
	require.Equal(t, rt, &stored)

	v, err := Decode(&stored, []byte(`{"APPROVED": true, "amount": 3900, "Comment": "ok", "ref": "R-1",
		"lines": [{"SKU": "a", "qty": 2}], "when": "2026-11-22T09:00:00Z", "extra": {"n": 3, "x": 1.5}}`))
	require.NoError(t, err)
	for name, roundTrip := range codecs {
		var got approval
		require.NoError(t, roundTrip(v, &got), name)
		// What each codec does to times and to numbers in an any.
		got.When = got.When.UTC()
		require.EqualValues(t, 3, got.Extra["n"], name)
		got.Extra["n"] = int64(3)
		require.Equal(t, approval{Approved: true, Amount: 3900, Note: "ok", Base: Base{Ref: "R-1"},
			Lines: []line{{SKU: "a", Qty: 2}}, When: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
			Extra: map[string]any{"n": int64(3), "x": 1.5}}, got, name)
	}

	for input, want := range map[string]string{
		`{"aproved": true}`:         `unknown field "aproved"`,
		`{"approved": "yes"}`:       `cannot unmarshal string into field Approved of type bool`,
		`{"lines": [{"qty": 300}]}`: `cannot unmarshal number 300 into field Lines.Qty of type int8`,
		`{"approved": true} {}`:     `more than one JSON value`,
		`[true]`:                    `cannot unmarshal array into Go value of type struct`,
	} {
		_, err := Decode(rt, []byte(input))
		require.ErrorContains(t, err, want, input)
	}
}

func TestTypeRefusesBadDescriptions(t *testing.T) {
	t.Parallel()
	for _, rt := range []*history.ResultType{
		{Kind: "complex128"},
		{Kind: "slice"},
		{Kind: "map", Key: &history.ResultType{Kind: "bool"}, Elem: &history.ResultType{Kind: "int"}},
		{Kind: "struct", Fields: []history.ResultField{{Name: "A", Type: history.ResultType{Kind: "int"}}, {Name: "A", Type: history.ResultType{Kind: "int"}}}},
		{Kind: "struct", Fields: []history.ResultField{{Name: "not a name", Type: history.ResultType{Kind: "int"}}}},
		{Kind: "array", Len: -1, Elem: &history.ResultType{Kind: "int"}},
	} {
		_, err := Type(rt)
		require.Error(t, err, "%+v", rt)
	}
}

// TestRecursiveTypes describes a recursive type with any where it
// recurs: from there on the value is passed as it was typed, unchecked.
func TestRecursiveTypes(t *testing.T) {
	t.Parallel()
	type node struct {
		Name     string
		Children []node
	}
	rt := history.DescribeResultType(reflect.TypeFor[node]())
	require.Equal(t, "any", rt.Fields[1].Type.Elem.Kind)
	v, err := Decode(rt, []byte(`{"name": "a", "children": [{"Name": "b", "Children": []}]}`))
	require.NoError(t, err)
	var got node
	require.NoError(t, codecs["msgpack"](v, &got))
	require.Equal(t, node{Name: "a", Children: []node{{Name: "b", Children: []node{}}}}, got)
}

func TestExample(t *testing.T) {
	t.Parallel()
	type decision struct {
		Approved bool
		Note     string `json:"note"`
		Lines    []line
	}
	got, err := Example(history.DescribeResultType(reflect.TypeFor[decision]()))
	require.NoError(t, err)
	require.Equal(t, `{"Approved":false,"note":"","Lines":null}`, got)
	_, err = Example(&history.ResultType{Kind: "complex128"})
	require.Error(t, err)
}
