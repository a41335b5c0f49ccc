package provider

import "testing"

func TestHints(t *testing.T) {
	var h Hints
	orch, act := h.Channel(QueueOrchestration), h.Channel(QueueActivity)
	if h.Channel(QueueOrchestration) != orch {
		t.Fatal("a second Channel call before a wake-up returned another channel")
	}
	h.Wake(QueueOrchestration)
	select {
	case <-orch:
	default:
		t.Fatal("Wake did not close the queue's channel")
	}
	select {
	case <-act:
		t.Fatal("Wake closed another queue's channel")
	default:
	}
	if h.Channel(QueueOrchestration) == orch {
		t.Fatal("the channel after a wake-up is the closed one")
	}
	h.Wake(QueueOrchestration) // a channel handed out again is closed again
	h.WakeAll()
	select {
	case <-act:
	default:
		t.Fatal("WakeAll did not close every channel")
	}
}

func TestHintsPartitions(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	var h Hints
	q := QueueOrchestration
	all, p0, p1 := h.Channel(q), h.PartitionChannel(q, 0), h.PartitionChannel(q, 1)
	if h.PartitionChannel(q, 1) != p1 {
		t.Fatal("a second PartitionChannel call before a wake-up returned another channel")
	}
	act := h.PartitionChannel(QueueActivity, 1)
	h.WakePartitions(q, 1)
	if !closed(all) || !closed(p1) {
		t.Fatal("WakePartitions did not close the queue's channel and the partition's")
	}
	if closed(p0) || closed(act) {
		t.Fatal("WakePartitions closed another partition's or another queue's channel")
	}
	p1 = h.PartitionChannel(q, 1)
	h.Wake(q)
	if !closed(p0) || !closed(p1) {
		t.Fatal("Wake did not close the channels of every partition of the queue")
	}
	if closed(act) {
		t.Fatal("Wake closed a partition channel of another queue")
	}
	h.WakeAll()
	if !closed(act) {
		t.Fatal("WakeAll did not close every partition channel")
	}
	h.WakePartitions(q, 3) // no channel handed out: nothing to close
}
