package round

import (
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// effectOrder puts a dequeued batch in the order its messages took effect
// and returns the part of it the round may apply; the rest stays queued
// for a later round. msgs are one instance's visible messages in enqueue
// order, as every store returns them, at most limit.
//
// A message takes effect when it arrives (EnqueuedAt: starts, signals,
// activity and child results, task actions, control requests) or, when it
// was delayed, when it comes due (VisibleAt: timers, a delivery delay).
// Enqueue order alone would let a timer's message, queued when its wait
// began, beat a signal that arrived long before the timer was due whenever
// both wait for one late round (workers down, a backlog, an instance held
// after failed rounds). An arrival is never taken as earlier than a
// message queued before it (the latest EnqueuedAt so far): the times come
// from the clocks of the nodes that queued the messages, and skew between
// them must not reorder arrivals among themselves, nor move a signal ahead
// of the start it follows. So only a delayed message moves: behind the
// messages that arrived before it was due. Ties keep enqueue order.
//
// A full batch may have left messages queued behind it, each of which took
// effect no earlier than the latest arrival of the batch. The round applies
// what took effect by then, which none of those can precede, and leaves
// the delayed messages due later for a round that sees them all. When
// every message of a full batch is due later than that (a batch of timers
// only), it applies the earliest, so that the instance moves on; a message
// queued behind such a batch may then be applied after a message that
// took effect after it.
func effectOrder(msgs []provider.Message, limit int) []provider.Message {
	if len(msgs) < limit && inEffectOrder(msgs) {
		// Nothing moves and nothing is left for later: the batch as it
		// came, without a copy (the common case, a single message).
		return msgs
	}
	type keyed struct {
		at time.Time
		m  provider.Message
	}
	keys := make([]keyed, len(msgs))
	var arrived time.Time
	for i, m := range msgs {
		if m.EnqueuedAt.After(arrived) {
			arrived = m.EnqueuedAt
		}
		at := arrived
		if m.VisibleAt.After(at) {
			at = m.VisibleAt
		}
		keys[i] = keyed{at: at, m: m}
	}
	slices.SortStableFunc(keys, func(a, b keyed) int { return a.at.Compare(b.at) })
	n := len(keys)
	if len(msgs) >= limit && n > 0 {
		until := arrived
		if keys[0].at.After(until) {
			until = keys[0].at
		}
		n = 0
		for n < len(keys) && !keys[n].at.After(until) {
			n++
		}
	}
	out := make([]provider.Message, n)
	for i := range out {
		out[i] = keys[i].m
	}
	return out
}

// inEffectOrder reports whether msgs already are in the order they took
// effect (see effectOrder).
func inEffectOrder(msgs []provider.Message) bool {
	var arrived, last time.Time
	for i := range msgs {
		m := &msgs[i]
		if m.EnqueuedAt.After(arrived) {
			arrived = m.EnqueuedAt
		}
		at := arrived
		if m.VisibleAt.After(at) {
			at = m.VisibleAt
		}
		if i > 0 && at.Before(last) {
			return false
		}
		last = at
	}
	return true
}
