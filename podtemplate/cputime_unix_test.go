//go:build unix

package podtemplate

import (
	"syscall"
	"time"
)

// processCPUTime is the user and system CPU time of the test process, all
// threads (the garbage collector's included).
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
