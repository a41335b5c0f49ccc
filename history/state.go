package history

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
func (*CompensationStarted) EventKind() Kind { return KindCompensationStarted }

// EventKind implements [Attributes].
func (*CompensationCompleted) EventKind() Kind { return KindCompensationCompleted }
