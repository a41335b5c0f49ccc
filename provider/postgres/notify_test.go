package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider/postgres"
)

func TestNotifyPayload(t *testing.T) {
	for _, c := range []struct {
		self  string
		parts []int32
		want  string
	}{
		{"4711", nil, "4711"},
		{"", nil, ""},
		{"4711", []int32{3}, "4711:3"},
		{"", []int32{0, 9, 15}, ":0,9,15"},
	} {
		got := postgres.PartitionPayload(c.self, c.parts)
		require.Equal(t, c.want, got)
		sender, parts := postgres.ParsePayload(got)
		require.Equal(t, c.self, sender, got)
		require.Equal(t, c.parts, parts, got)
	}
	// A list that would pass PostgreSQL's limit names every partition.
	many := make([]int32, 3000)
	for i := range many {
		many[i] = int32(i)
	}
	require.Equal(t, "1", postgres.PartitionPayload("1", many))
	// A payload this version cannot read names every partition: the work
	// may be in any.
	for _, p := range []string{"1:", "1:x", "1:3,-2", "1:3,,4", "1:99999999999"} {
		sender, parts := postgres.ParsePayload(p)
		require.Equal(t, "1", sender, p)
		require.Nil(t, parts, p)
	}
}
