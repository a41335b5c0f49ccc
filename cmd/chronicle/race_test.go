//go:build race

package main

// raceEnabled tells that the race detector runs: it slows the tests
// several times, so the slowest run fewer cases.
const raceEnabled = true
