//go:build unix

package procstat

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// CPUTime is this process's user and system CPU time so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PeakRSSKB is a finished child's peak resident memory in KiB (its
// ru_maxrss, what /usr/bin/time reports), or 0 when unknown.
func PeakRSSKB(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" { // bytes there, KiB elsewhere
		return ru.Maxrss / 1024
	}
	return ru.Maxrss
}
