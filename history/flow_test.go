package history

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Priority and concurrency fields are left to the reflective codec, and
// the hand-written decoder hands them over instead of dropping them.
func TestFlowFieldsRoundTrip(t *testing.T) {
	for _, a := range []Attributes{
		&ExecutionStarted{Name: "order", Priority: 7, Concurrency: &Concurrency{Key: "customer-1", Limit: 2}},
		&ExecutionStarted{Name: "order", Priority: -3},
		&ActivityScheduled{Name: "charge", Priority: 2, Concurrency: &Concurrency{Key: "psp", Limit: 5}},
		&ActivityScheduled{Name: "charge", Concurrency: &Concurrency{Key: "psp", Limit: 1}},
	} {
		b, err := EncodeAttributes(a)
		require.NoError(t, err)
		got, err := DecodeAttributes(a.EventKind(), b)
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
}
