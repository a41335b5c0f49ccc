//go:build !unix

package bench

import "time"

// cpuTime returns 0: the system does not tell the process's CPU time here.
func cpuTime() time.Duration { return 0 }
