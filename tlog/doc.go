// Package tlog is Chronicle's checkpoint log in the formats of the
// transparency-log ecosystem: an RFC 6962 Merkle tree whose leaf i is the
// Hash of Chronicle checkpoint Number i+1, serialised as a C2SP
// tlog-checkpoint signed note, and the C2SP tlog-witness protocol with
// Ed25519 tlog-cosignature/v1 cosignatures, client and server side.
//
// It rests on golang.org/x/mod/sumdb/note (signed notes, as the Go
// checksum database uses), github.com/transparency-dev/merkle (RFC 6962
// inclusion and consistency proofs) and
// github.com/transparency-dev/formats/log (the checkpoint body), so that
// what Chronicle publishes is read by standard tooling.
//
// The package chronicle publishes these notes through its Publisher
// interface and checks a store against them; see docs/audit.md,
// "Publishing checkpoints".
package tlog
