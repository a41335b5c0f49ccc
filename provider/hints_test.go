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
