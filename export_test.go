package chronicle

// PendingWrites returns how many client calls wait for a combined write.
func PendingWrites(e *Engine) int {
	e.combine.mu.Lock()
	defer e.combine.mu.Unlock()
	return len(e.combine.pending)
}
