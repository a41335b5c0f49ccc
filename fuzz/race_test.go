//go:build race

package fuzz_test

// raceEnabled tells that the race detector runs: it slows the machines
// several times, so the slowest tests run fewer checks.
const raceEnabled = true
