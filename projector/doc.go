// Package projector folds an instance's history into the projections a
// product shows its users: human tasks and their audit trail, and custom
// projections registered by the product. Folds are pure: the same events
// give the same records, with no I/O, so projections can always be rebuilt
// and tests check that what a store holds equals a fresh fold.
//
// The runtime snapshot and the instance record are folded by
// [round.Snapshot]; [Projector.Project] is the round runner's projection
// step for the rest, and [FoldAt] folds everything as of any Seq.
package projector
