package round

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// closer counts the Close calls of a cached state.
type closer struct{ closed int }

func (c *closer) Close() { c.closed++ }

func TestCachePutClosesTheEntryItReplaces(t *testing.T) {
	c := newCache(10)
	first, second := &closer{}, &closer{}
	c.put(&cacheEntry{instanceID: "i-1", turnState: first})
	c.put(&cacheEntry{instanceID: "i-1", turnState: second})
	require.Equal(t, 1, first.closed, "the replaced entry is closed")
	require.Equal(t, 0, second.closed)
	require.Equal(t, 1, c.len())

	// Putting the cached entry itself again keeps it open.
	e := c.take("i-1")
	c.put(e)
	c.put(e)
	require.Equal(t, 0, second.closed)
	c.clear()
	require.Equal(t, 1, second.closed)
}
