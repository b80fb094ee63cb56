package procstat

import (
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// CPUTime is this process's user and system CPU time so far.
func CPUTime() time.Duration {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	return ticks(kernel) + ticks(user)
}

// ticks reads a Filetime that holds a duration, in 100 ns units.
func ticks(f windows.Filetime) time.Duration {
	return time.Duration(uint64(f.HighDateTime)<<32|uint64(f.LowDateTime)) * 100
}

// PeakRSSKB is 0: Windows reports no peak memory for a finished child.
func PeakRSSKB(*os.ProcessState) int64 { return 0 }
