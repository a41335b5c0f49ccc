package history

import (
	"maps"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/chronicleflow/chronicle/query"
)

// Marker kinds of [MarkerRecorded].
const (
	MarkerSideEffect = "side-effect"
	MarkerVersion    = "version"
)

// MarkerRecorded records a value workflow code must see again on replay: the
// result of a side effect, or the version chosen at a patch point.
type MarkerRecorded struct {
	// Marker is [MarkerSideEffect] or [MarkerVersion].
	Marker string `msgpack:"marker" json:"marker"`
	// Name identifies the side effect or patch point.
	Name string `msgpack:"name,omitempty" json:"name,omitempty"`
	// Value is the encoded side-effect result.
	Value []byte `msgpack:"value,omitempty" json:"value,omitempty"`
	// Version is the version chosen at a patch point.
	Version int `msgpack:"version,omitempty" json:"version,omitempty"`
}

// CustomStatusSet records the workflow's custom status, shown on the
// instance.
type CustomStatusSet struct {
	Status []byte `msgpack:"status,omitempty" json:"status,omitempty"`
	// Text is the status when it was set as a string: the form queries
	// compare (the custom_status field). Empty for other statuses.
	Text string `msgpack:"text,omitempty" json:"text,omitempty"`
}

// SearchAttributesUpserted records search attributes workflow code set:
// each named attribute takes its value, and a zero Value unsets it. The
// others keep theirs.
type SearchAttributesUpserted struct {
	Attributes SearchAttributeMap `msgpack:"attributes" json:"attributes"`
}

// SearchAttributeMap holds search attribute values by name. It encodes
// its entries in the order of their names, so that equal maps encode to
// equal bytes (the reflective encoder writes other maps in Go's random
// map order).
type SearchAttributeMap map[string]query.Value

// EncodeMsgpack implements msgpack.CustomEncoder: a map of the entries in
// name order.
func (m SearchAttributeMap) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.Encode(m[k]); err != nil {
			return err
		}
	}
	return nil
}

// CompensationStarted records that a saga began running its compensations.
type CompensationStarted struct {
	Steps  int    `msgpack:"steps" json:"steps"`
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// CompensationCompleted records the end of a saga's compensations.
type CompensationCompleted struct {
	// Failures lists the compensations that failed, if any.
	Failures []string `msgpack:"failures,omitempty" json:"failures,omitempty"`
}

// EventKind implements [Attributes].
func (*MarkerRecorded) EventKind() Kind { return KindMarkerRecorded }

// EventKind implements [Attributes].
func (*CustomStatusSet) EventKind() Kind { return KindCustomStatusSet }

// EventKind implements [Attributes].
func (*SearchAttributesUpserted) EventKind() Kind { return KindSearchAttributesUpserted }

func (a *SearchAttributesUpserted) normalizeUTC() { normalizeValues(a.Attributes) }

// normalizeValues puts the times of values, which decode in the local
// zone, in UTC.
func normalizeValues(m SearchAttributeMap) {
	for k, v := range m {
		if !v.Time.IsZero() && v.Time.Location() != time.UTC {
			v.Time = v.Time.UTC()
			m[k] = v
		}
	}
}

// EventKind implements [Attributes].
func (*CompensationStarted) EventKind() Kind { return KindCompensationStarted }

// EventKind implements [Attributes].
func (*CompensationCompleted) EventKind() Kind { return KindCompensationCompleted }
