package history

import (
	"bytes"
	"crypto/sha256"
	"fmt"
)

// HashSize is the length of [Event.Hash].
const HashSize = sha256.Size

// ComputeHash returns SHA-256(PrevHash ‖ canonical(e without Hash)).
func ComputeHash(e *Event) []byte {
	// One buffer on the stack holds PrevHash and the canonical bytes of
	// an ordinary event; only a large payload needs the heap.
	var buf [512]byte
	b := append(buf[:0], e.PrevHash...)
	b = appendCanonical(b, e, 10)
	sum := sha256.Sum256(b)
	return append(make([]byte, 0, HashSize), sum[:]...)
}

// Seal chains events onto a log whose last event has hash prev (nil for an
// empty log): it sets each event's PrevHash and Hash in order. Seq and every
// other field must already be final.
func Seal(prev []byte, events []Event) {
	for i := range events {
		events[i].PrevHash = prev
		events[i].Hash = ComputeHash(&events[i])
		prev = events[i].Hash
	}
}

// ChainError reports the first event of a log whose chain does not hold.
type ChainError struct {
	// Seq is the broken event's sequence number (or the expected one when an
	// event is missing).
	Seq int64
	// InstanceID names the log.
	InstanceID string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ChainError) Error() string {
	return fmt.Sprintf("history: chain of %q broken at seq %d: %s", e.InstanceID, e.Seq, e.Reason)
}

// Verify checks a whole log from Seq 1: contiguous sequence numbers, one
// instance, each PrevHash equal to the previous Hash and each Hash equal to
// the recomputed one. It returns nil or a *ChainError naming the first
// broken Seq.
func Verify(events []Event) error {
	return VerifyFrom(0, nil, events)
}

// VerifyFrom checks a tail of a log that follows the event with sequence
// number prevSeq and hash prevHash (0 and nil for the start of the log).
func VerifyFrom(prevSeq int64, prevHash []byte, events []Event) error {
	for i := range events {
		e := &events[i]
		want := prevSeq + int64(i) + 1
		fail := func(reason string, args ...any) error {
			return &ChainError{Seq: want, InstanceID: e.InstanceID, Reason: fmt.Sprintf(reason, args...)}
		}
		switch {
		case e.Seq != want:
			return fail("found seq %d", e.Seq)
		case i > 0 && e.InstanceID != events[0].InstanceID:
			return fail("event belongs to instance %q", e.InstanceID)
		case !bytes.Equal(e.PrevHash, prevHash):
			return fail("previous hash does not match")
		case !bytes.Equal(e.Hash, ComputeHash(e)):
			return fail("hash does not match content")
		}
		prevHash = e.Hash
	}
	return nil
}
