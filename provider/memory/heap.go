package memory

import (
	"container/heap"
	"time"
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

// reindex puts the instance where it belongs in the ready heap: present
// when it has messages, no transaction holds it and no purge has begun.
func (s *Store) reindex(in *instance) {
	want := len(in.msgs) > 0 && in.lockedBy == nil && in.purging == nil
	if want {
		in.readyKey = in.readyAt()
	}
	switch {
	case want && in.heapIndex < 0:
		heap.Push(&s.ready, in)
	case want:
		heap.Fix(&s.ready, in.heapIndex)
	case in.heapIndex >= 0:
		heap.Remove(&s.ready, in.heapIndex)
	}
}

// taskHeap orders the tasks of one queue by claimableAt, then enqueue order.
type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	a, b := h[i].claimableAt(), h[j].claimableAt()
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
