//go:build !race

package chronicle_test

// raceEnabled tells that the race detector runs.
const raceEnabled = false
