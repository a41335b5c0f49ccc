// Package fuzz holds Chronicle's randomized tests: native Go fuzz targets
// for every decoder of stored bytes (run them with `make fuzz`), and the
// pgregory.net/rapid state-machine tests that drive random workflows
// through the round runner on the memory provider, in both modes, while
// injecting crashes at every crash point, duplicate and delayed deliveries,
// lease expiry with zombie workers and commit-then-report-failure faults,
// and check the invariants of DESIGN.md §9 after every step.
package fuzz
