// Package fuzz holds Chronicle's randomized tests: native Go fuzz targets
// for every decoder of stored bytes (run them with `make fuzz`), and the
// pgregory.net/rapid state-machine tests that drive random workflows —
// with activities, timers, signals, sub-workflows and human tasks that
// users claim, assign, release, reassign and complete, racing each
// other — through the round runner and the projector on the memory
// provider, in both modes, and on PostgreSQL, while injecting crashes at
// every crash point, duplicate and delayed deliveries, lease expiry with
// zombie workers and commit-then-report-failure faults — in peek-lock
// mode also crashes and zombie rounds between two record writes of a
// step (docs/providers.md, "Peek-lock mode: one record at a time") — and
// check the invariants of docs/architecture.md after every step, every
// projection equal to the fold of history included (in peek-lock mode a
// projection record may be ahead of the snapshot, each a fold at its own
// seq).
//
// Both state machines stand on one rig (rig_test.go): the store as the
// nodes see it, the clock, two nodes, planned faults and mid-step crashes,
// zombie claims, paused rounds, purges and the shared checks. The rounds
// machine (rounds_rapid_test.go) runs scripted turns without the replayer;
// the workflows machine (workflows_rapid_test.go) runs real workflow code.
//
// TestRapidCheckpointAdversary (checkpoints_rapid_test.go) runs workflows
// with signed checkpoints, purges and reused ids, then lets an adversary
// with full write access to the store and no key edit, delete and insert
// rows of every table, and checks that checkpoint verification reports
// the attack or that it changed nothing a signature covered.
//
// regression_test.go and workflows_regression_test.go hold plain
// reproductions of the bugs the rapid tests found, so they stay fixed.
package fuzz
