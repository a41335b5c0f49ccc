package fuzz_test

import (
	"context"
	"sync"

	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// pause stalls a round at a crash point (or, when op is set, in that step
// of a memory store before its write done+1; see midStep) until resumed is
// closed.
type pause struct {
	at      round.CrashPoint
	op      memory.Op
	done    int
	paused  chan struct{}
	resumed chan struct{}
}

// points is a node's crash hook: it kills the next round that passes
// crashAt, or stalls it at pause.at, once each.
type points struct {
	mu      sync.Mutex
	crashAt round.CrashPoint
	pause   *pause
	// paused is the instance of the round that pause stalled.
	paused string
}

func (n *points) hook(_ context.Context, p round.CrashPoint, id string) error {
	n.mu.Lock()
	crash := n.crashAt == p
	if crash {
		n.crashAt = ""
	}
	pz := n.pause
	if pz != nil && pz.at == p {
		n.pause, n.paused = nil, id
	} else {
		pz = nil
	}
	n.mu.Unlock()
	if pz != nil {
		close(pz.paused)
		<-pz.resumed
	}
	if crash {
		return errKill
	}
	return nil
}
