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

// cache is a bounded LRU of instance states. A round takes its entry out and
// puts it back only when the round committed, so a failed round never
// leaves half-updated state behind.
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
	if c.max <= 0 || e == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.instanceID]; ok {
		c.order.Remove(el)
	}
	c.items[e.instanceID] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).instanceID)
	}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
