package round

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
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

// TestCacheGivesUpIdleEntriesFirst: an instance that ended, or whose start
// waits for a concurrency slot, does not push a running instance's state
// out of a full cache; a running instance's does, least recently used
// first.
func TestCacheGivesUpIdleEntriesFirst(t *testing.T) {
	running := func(id string) (*cacheEntry, *closer) {
		c := &closer{}
		return &cacheEntry{instanceID: id, snap: &Snapshot{InstanceID: id, ExecutionID: "e-" + id, Status: provider.StatusRunning}, turnState: c}, c
	}
	ended := func(id string) (*cacheEntry, *closer) {
		e, c := running(id)
		e.snap.Ended, e.snap.Status = true, provider.StatusCompleted
		return e, c
	}
	c := newCache(3)
	r1, c1 := running("r-1")
	r2, c2 := running("r-2")
	c.put(r1)
	c.put(r2)
	d1, cd1 := ended("d-1")
	c.put(d1)
	require.Equal(t, 3, c.len())

	// A full cache: the ended instance goes, not the least recently used
	// running one.
	r3, c3 := running("r-3")
	c.put(r3)
	require.Equal(t, 1, cd1.closed, "the ended instance's entry is evicted")
	require.Zero(t, c1.closed+c2.closed+c3.closed)

	// Ends and waiting starts come and go without evicting a running
	// instance.
	for i := range 5 {
		d, cd := ended(fmt.Sprintf("d-%d", i+2))
		c.put(d)
		require.Equal(t, 1, cd.closed, "an ended instance is not kept in a cache full of running ones")
		w := &cacheEntry{instanceID: fmt.Sprintf("w-%d", i), snap: &Snapshot{InstanceID: fmt.Sprintf("w-%d", i)}}
		c.put(w)
		require.Nil(t, c.take(w.instanceID), "a waiting start is not kept in a cache full of running ones")
	}
	require.Zero(t, c1.closed+c2.closed+c3.closed)

	// An instance that continued as new is running: it stays.
	e2 := c.take("r-2")
	e2.snap.Ended = true // continued as new: the status stays running
	c.put(e2)
	r4, c4 := running("r-4")
	c.put(r4)
	require.Equal(t, 1, c1.closed, "the least recently used running instance goes")
	require.Zero(t, c2.closed+c3.closed+c4.closed)
	require.NotNil(t, c.take("r-2"))
}
