package memory

import (
	"container/heap"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// readyAt is when the instance can next be dequeued or leased: its
// earliest message's VisibleAt, or the end of a live lease or of a hold
// if later.
func (in *instance) readyAt() time.Time {
	var at time.Time
	for i, m := range in.msgs {
		if i == 0 || m.m.VisibleAt.Before(at) {
			at = m.m.VisibleAt
		}
	}
	if in.lease != nil && in.lease.until.After(at) {
		at = in.lease.until
	}
	if in.holdUntil.After(at) {
		at = in.holdUntil
	}
	return at
}

// orderAt is the instance's place in the dequeue order: the earliest
// OrderAt of its messages, each taken from when it can be delivered (its
// VisibleAt, or later while the instance is held or leased).
func (in *instance) orderAt() time.Time {
	floor := in.holdUntil
	if in.lease != nil && in.lease.until.After(floor) {
		floor = in.lease.until
	}
	var at time.Time
	for i, m := range in.msgs {
		v := m.m.VisibleAt
		if floor.After(v) {
			v = floor
		}
		if o := provider.OrderAt(v, m.m.Priority); i == 0 || o.Before(at) {
			at = o
		}
	}
	return at
}

func (in *instance) firstSeq() int64 {
	if len(in.msgs) == 0 {
		return 0
	}
	return in.msgs[0].seq
}

// instanceHeap orders instances with queued messages by readyAt, then by
// their oldest message. It compares readyKey, the readyAt that reindex
// computed when it last placed the instance: every change of what
// readyAt reads (messages, lease, hold) is followed by a reindex, which
// the heap needs anyway, and a comparison no longer scans messages.
type instanceHeap []*instance

func (h instanceHeap) Len() int { return len(h) }
func (h instanceHeap) Less(i, j int) bool {
	a, b := h[i].readyKey, h[j].readyKey
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].firstSeq() < h[j].firstSeq()
}
func (h instanceHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *instanceHeap) Push(x any) {
	in := x.(*instance)
	in.heapIndex = len(*h)
	*h = append(*h, in)
}
func (h *instanceHeap) Pop() any {
	old := *h
	in := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	in.heapIndex = -1
	return in
}

// orderHeap orders the instances of Store.ready by orderKey, then by
// their oldest message: the dequeue order among those that are ready.
type orderHeap []*instance

func (h orderHeap) Len() int { return len(h) }
func (h orderHeap) Less(i, j int) bool {
	a, b := h[i].orderKey, h[j].orderKey
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].firstSeq() < h[j].firstSeq()
}
func (h orderHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].orderIndex, h[j].orderIndex = i, j
}
func (h *orderHeap) Push(x any) {
	in := x.(*instance)
	in.orderIndex = len(*h)
	*h = append(*h, in)
}
func (h *orderHeap) Pop() any {
	old := *h
	in := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	in.orderIndex = -1
	return in
}

// reindex puts the instance where it belongs in the ready heaps: present
// when it has messages, no transaction holds it, it is not parked and no
// purge has begun.
func (s *Store) reindex(in *instance) {
	want := len(in.msgs) > 0 && in.lockedBy == nil && in.purging == nil && !provider.IsParked(in.holdUntil)
	if want {
		in.readyKey = in.readyAt()
		if s.ordered {
			in.orderKey = in.orderAt()
		}
	}
	switch {
	case want && in.heapIndex < 0:
		heap.Push(&s.ready, in)
		if s.ordered {
			heap.Push(&s.order, in)
		}
	case want:
		heap.Fix(&s.ready, in.heapIndex)
		if s.ordered {
			heap.Fix(&s.order, in.orderIndex)
		}
	case in.heapIndex >= 0:
		s.unready(in)
	}
}

// unready takes the instance out of the ready heaps; callers hold s.mu.
func (s *Store) unready(in *instance) {
	if in.heapIndex >= 0 {
		heap.Remove(&s.ready, in.heapIndex)
		if s.ordered {
			heap.Remove(&s.order, in.orderIndex)
		}
	}
}

// orderByPriority starts keeping Store.order, the first time a message
// with a priority is queued: until then the dequeue order is the ready
// heap's (with priority 0 everywhere the two orders are one), and the
// store does not pay for a second heap. Callers hold s.mu.
func (s *Store) orderByPriority() {
	if s.ordered {
		return
	}
	s.ordered = true
	s.order = make(orderHeap, len(s.ready))
	for i, in := range s.ready {
		in.orderKey, in.orderIndex = in.orderAt(), i
		s.order[i] = in
	}
	heap.Init(&s.order)
}

// next returns the first instance in dequeue order that is ready at now,
// or nil.
func (s *Store) next(now time.Time) *instance {
	if len(s.ready) == 0 || s.ready[0].readyKey.After(now) {
		return nil
	}
	if !s.ordered {
		return s.ready[0]
	}
	i := firstInHeap(len(s.order), s.order.Less, func(i int) bool { return !s.order[i].readyKey.After(now) })
	if i < 0 {
		return nil
	}
	return s.order[i]
}

// firstInHeap visits the elements of a binary heap of n elements ordered
// by less in ascending order and returns the index of the first for which
// ok is true, or -1. It visits only the elements ahead of that one and
// their children.
func firstInHeap(n int, less func(i, j int) bool, ok func(i int) bool) int {
	if n == 0 {
		return -1
	}
	if ok(0) {
		return 0
	}
	frontier := &indexHeap{less: less}
	heap.Push(frontier, 0)
	for frontier.Len() > 0 {
		i := heap.Pop(frontier).(int)
		if i != 0 && ok(i) {
			return i
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < n {
				heap.Push(frontier, c)
			}
		}
	}
	return -1
}

// indexHeap is the frontier of firstInHeap.
type indexHeap struct {
	idx  []int
	less func(i, j int) bool
}

func (h *indexHeap) Len() int           { return len(h.idx) }
func (h *indexHeap) Less(i, j int) bool { return h.less(h.idx[i], h.idx[j]) }
func (h *indexHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *indexHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *indexHeap) Pop() any {
	n := len(h.idx) - 1
	x := h.idx[n]
	h.idx = h.idx[:n]
	return x
}

// taskHeap orders the tasks of one queue by OrderAt of claimableAt and
// priority, then enqueue order.
type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	a, b := h[i].orderAt(), h[j].orderAt()
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.heapIndex = len(*h)
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.heapIndex = -1
	return t
}

func (h *taskHeap) push(t *task)   { heap.Push(h, t) }
func (h *taskHeap) fix(t *task)    { heap.Fix(h, t.heapIndex) }
func (h *taskHeap) remove(t *task) { heap.Remove(h, t.heapIndex) }
