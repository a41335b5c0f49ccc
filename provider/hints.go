package provider

import "sync"

// Hints keeps the channels a [Notifier] hands out: one per queue, closed
// by Wake and replaced by the next Channel call. A provider embeds one and
// wakes it when it enqueues work or releases an instance. The zero value
// is ready; it is safe for concurrent use.
type Hints struct {
	mu    sync.Mutex
	chans map[Queue]chan struct{}
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

// Wake closes the channel of q handed out last, if any.
func (h *Hints) Wake(q Queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.chans[q]; ok {
		close(ch)
		delete(h.chans, q)
	}
}

// WakeAll closes the channels of every queue.
func (h *Hints) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q, ch := range h.chans {
		close(ch)
		delete(h.chans, q)
	}
}
