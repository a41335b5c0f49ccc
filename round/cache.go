package round

import (
	"container/list"
	"sync"
)

// cacheEntry is what a runner keeps of an instance between rounds.
type cacheEntry struct {
	instanceID string
	snap       *Snapshot
	turnState  any
	projState  any
}

// close releases what the entry's states hold (an executor's goroutines).
func (e *cacheEntry) close() {
	if e == nil {
		return
	}
	for _, s := range []any{e.turnState, e.projState} {
		if c, ok := s.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// idle reports whether the entry's instance runs no execution: its last one
// ended for good, or it has not started (a start waiting for a concurrency
// slot). Such an instance seldom has another round, and a waiting start's
// state is rebuilt from nothing, so the cache gives these entries up before
// those of running instances.
func (e *cacheEntry) idle() bool {
	s := e.snap
	return s == nil || !s.Started() || (s.Ended && s.Status.Terminal())
}

// cache is a bounded LRU of instance states. A round takes its entry out and
// puts it back only when the round committed, so a failed round never
// leaves half-updated state behind.
//
// Entries of running instances are kept in preference to idle ones (see
// [cacheEntry.idle]): an idle entry goes to the back of the order, where
// eviction starts. Otherwise an instance's end would push out the state of
// a running instance, whose next round would then replay its history;
// this matters most when a concurrency limit keeps about as many instances
// running as the cache holds, and every end makes room for a woken start.
type cache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

func newCache(max int) *cache {
	return &cache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *cache) take(id string) *cacheEntry {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[id]
	if !ok {
		return nil
	}
	c.order.Remove(el)
	delete(c.items, id)
	return el.Value.(*cacheEntry)
}

func (c *cache) put(e *cacheEntry) {
	if e == nil {
		return
	}
	if c.max <= 0 {
		e.close()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.instanceID]; ok {
		// Two rounds of one instance can overlap in the runner: the
		// second starts cold once the first has committed, before the
		// first puts its entry back. The entry put last stays; the
		// other is closed, or its executor's goroutines would outlive it.
		c.order.Remove(el)
		if old := el.Value.(*cacheEntry); old != e {
			old.close()
		}
	}
	if e.idle() {
		c.items[e.instanceID] = c.order.PushBack(e)
	} else {
		c.items[e.instanceID] = c.order.PushFront(e)
	}
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		old := last.Value.(*cacheEntry)
		delete(c.items, old.instanceID)
		old.close()
	}
}

// clear drops and closes every entry.
func (c *cache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, el := range c.items {
		el.Value.(*cacheEntry).close()
	}
	c.items = map[string]*list.Element{}
	c.order.Init()
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
