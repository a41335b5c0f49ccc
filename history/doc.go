// Package history defines Chronicle's append-only, hash-chained event log.
//
// Every workflow instance owns one log. Its events are numbered by [Event.Seq],
// contiguous from 1 and never rewritten. Each event carries a typed payload
// (one struct per [Kind], see [Attributes]), the clock reading of the round
// that wrote it, the actor that caused it and the chain fields
// [Event.PrevHash] and [Event.Hash]:
//
//	Hash = SHA-256(PrevHash ‖ canonical(event without Hash))
//
// [Verify] walks a log and reports the first event whose chain does not hold,
// so a single flipped byte anywhere in stored history is detected.
//
// # Idempotency
//
// Completion-like events (an activity result, a fired timer, a raised event,
// a task action, the start and end of an execution) have an idempotency
// [Key]: at most one event per key exists in a log. Providers enforce the key
// with a unique index and the round runner filters duplicates before it
// appends.
//
// # Encoding
//
// Events and payloads are encoded with MessagePack. [MarshalEvent] produces
// the canonical bytes that the hash covers; [UnmarshalEvent] and
// [DecodeAttributes] never panic on bad input, bound what they allocate and
// return an error wrapping [ErrCorrupt].
//
// This package is a leaf: it imports only the standard library, msgpack and
// uuid, so every other package of Chronicle may depend on it.
package history
