//go:build !race

package main

// raceEnabled tells that the race detector runs.
const raceEnabled = false
