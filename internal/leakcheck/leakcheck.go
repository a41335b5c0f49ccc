// Package leakcheck fails a test binary that leaves Chronicle goroutines
// running: workflow coroutines, engine workers, store listeners.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// watched are function name prefixes of goroutines that must be gone when
// the tests are done.
var watched = []string{
	"github.com/chronicleflow/chronicle.",
	"github.com/chronicleflow/chronicle/replay.",
	"github.com/chronicleflow/chronicle/round.",
	"github.com/chronicleflow/chronicle/provider/",
}

// Main runs the tests and then checks for leaked goroutines; use it as
// `func TestMain(m *testing.M) { leakcheck.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := Find(5 * time.Second); leaks != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines left running after the tests:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// Find returns the stacks of watched goroutines still running after
// waiting up to wait for them to end, or "".
func Find(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		leaks := leaked()
		if leaks == "" || time.Now().After(deadline) {
			return leaks
		}
		// Goroutines that are ending need a moment to be scheduled.
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}

func leaked() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "leakcheck.leaked") || strings.Contains(g, "testing.(*M).Run") {
			continue
		}
		for _, w := range watched {
			if strings.Contains(g, w) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}
