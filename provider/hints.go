package provider

import "sync"

// Hints keeps the channels a [Notifier] hands out: one per queue, closed
// by Wake and replaced by the next Channel call, and one per queue and
// partition for a [PartitionNotifier]. A provider embeds one and wakes it
// when it enqueues work or releases an instance. The zero value is ready;
// it is safe for concurrent use.
type Hints struct {
	mu    sync.Mutex
	chans map[Queue]chan struct{}
	// parts are the channels of partitions handed out, by queue; a store
	// whose workers never ask for one (a store of one partition) keeps
	// none.
	parts map[Queue]map[int]chan struct{}
}

// Channel returns the channel that the next Wake of q closes.
func (h *Hints) Channel(q Queue) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.chans[q]
	if !ok {
		if h.chans == nil {
			h.chans = map[Queue]chan struct{}{}
		}
		ch = make(chan struct{})
		h.chans[q] = ch
	}
	return ch
}

// PartitionChannel returns the channel that the next wake-up of partition
// p of q closes: a WakePartitions naming p, a Wake of q or a WakeAll.
func (h *Hints) PartitionChannel(q Queue, p int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.parts[q]
	if m == nil {
		if h.parts == nil {
			h.parts = map[Queue]map[int]chan struct{}{}
		}
		m = map[int]chan struct{}{}
		h.parts[q] = m
	}
	ch, ok := m[p]
	if !ok {
		ch = make(chan struct{})
		m[p] = ch
	}
	return ch
}

// Wake closes the channel of q handed out last, if any, and those of
// every partition of q: the work may be in any of them.
func (h *Hints) Wake(q Queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeQueue(q)
	for p, ch := range h.parts[q] {
		close(ch)
		delete(h.parts[q], p)
	}
}

// WakePartitions closes the channel of q and those of q's partitions ps:
// work arrived in those partitions.
func (h *Hints) WakePartitions(q Queue, ps ...int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeQueue(q)
	m := h.parts[q]
	if len(m) == 0 {
		return
	}
	for _, p := range ps {
		if ch, ok := m[p]; ok {
			close(ch)
			delete(m, p)
		}
	}
}

// closeQueue closes the channel of q; callers hold h.mu.
func (h *Hints) closeQueue(q Queue) {
	if ch, ok := h.chans[q]; ok {
		close(ch)
		delete(h.chans, q)
	}
}

// WakeAll closes the channels of every queue and partition.
func (h *Hints) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q, ch := range h.chans {
		close(ch)
		delete(h.chans, q)
	}
	for q, m := range h.parts {
		for _, ch := range m {
			close(ch)
		}
		delete(h.parts, q)
	}
}
